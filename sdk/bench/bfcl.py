"""BFCL function calling, the project's call-quality bench: SDK modes vs unconstrained vs XGrammar.

    python -m sdk.bench bfcl [--n 50] [--categories multiple,parallel,irrelevance]
        [--modes required,auto,unconstrained,xgrammar] [--styles auto,compact,spaced]
        [--model smollm2|PATH.gguf|HF-DIR] [--jsonl OUT.jsonl] [--plot OUT.png] [--json]

The first N questions (from --offset) of each category of the BFCL v4 dev split in the folder
`--data DIR` names (or `$SDK_BFCL_DIR`; the project's copy is `../shared/bfcl-dev`):

- multiple: several functions offered, one correct call;
- parallel: one function offered, several calls of it expected in one turn (any order);
- irrelevance: no offered function fits; the right behaviour is to make NO call;
- missing: the "multiple" questions with their expected function taken away (several
  functions offered, none fits): NO call, as for irrelevance.

The offered functions become tools (BFCL's loose types mapped to JSON Schema: dict→object,
float→number, tuple→array, any→unconstrained) and the model answers ONE turn, greedy:

- required: `Agent(tool_choice="required")`: the turn must be a call, under the grammar;
- auto: `Agent(tool_choice="auto")`: the model may call (under the grammar) or write text;
- best: `Agent(tool_choice="required", decoding="best")`: the most likely valid call a
  best-first search finds (`sdk.decoding.best`), not the greedy one;
- exact: `Agent(tool_choice="required", decoding="exact")`: a call drawn from the model
  restricted to the grammar (`sdk.decoding.exact`; needs `--temperature` > 0, which the
  other modes then sample at too);
- unconstrained: the same prompt, plain generation, calls parsed out of the text afterwards;
- xgrammar: the same prompt, XGrammar's HF logits processor forcing the whole reply to be
  `<tool_call>` blocks around the same call-body JSON Schema, laid out with the style's
  separators (one forward pass per token, no fast-forward).

Parallel questions allow several calls (`parallel_tool_calls=True`; xgrammar: one or more
blocks separated by a newline), the other categories one. Each --styles entry is passed to
the agent as `call_style=` (auto: resolved for the model; compact `{"a":1}`; spaced
`{"a": 1}`; flexible: bounded free whitespace; a `:noheal` suffix, e.g. `compact:noheal`,
turns token healing off: that pair is the SDK's default before this bench). Unconstrained and xgrammar use the agent's
resolved format for the prompt; a style that changes neither their prompt nor (xgrammar)
the separators reuses the earlier style's run.

Reported per category × mode × style: parsed (the first call, for parallel every call,
decoded and its function offered), valid (its arguments validate against the schema),
correct (multiple: BFCL's AST match: same function, every argument value acceptable, omitted
only where allowed; parallel: "count" = the right number of calls, "all ok" = each expected
call matched by exactly one produced call, in any order; irrelevance: "no call"), called
(share of questions answered with at least one call: auto mode's calling rate), lost (calls
lost when max_tokens ran out inside a call / of those, turns ending in a whitespace run),
seconds and tokens per question, and noncanon (share of calls whose generated token ids
differ from the tokenizer's own encoding of the call's text; n/a when the agent does not
report the turn's ids). xgrammar with the flexible style allows any JSON whitespace.
The model runs on the backend an agent gives its name (a GGUF on llama.cpp where it is
installed; `SDK_LOCAL_BACKEND=transformers` for the other), on transformers when the xgrammar
mode is asked for (its logits processor needs a transformers model).
--auto-call-bias (a float, or "off" for the model's own pick, the behaviour before the call
decision existed) and --reasoning-tokens are passed to the agent.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, cast

from pydantic import BaseModel

from ._bfcl_report import format_tables, plot, summarize
from ._bfcl_score import Call, call_status, is_correct, match_calls

DATA_ENV = "SDK_BFCL_DIR"
QUESTIONS = "BFCL_v4_multiple.jsonl"
ANSWERS = "BFCL_v4_multiple.answers.jsonl"
CATEGORIES = ("multiple", "parallel", "irrelevance", "missing")
#: Categories whose right answer is no call.
NO_CALL = frozenset({"irrelevance", "missing"})
DEFAULT_CATEGORIES = ("multiple", "parallel", "irrelevance")
SDK_MODES = ("required", "auto", "best", "exact")
#: Modes that run the agent with another `tool_choice` and decoding: mode -> (choice, decoding).
_SDK_TURNS = {"best": ("required", "best"), "exact": ("required", "exact")}
MODES = (*SDK_MODES, "unconstrained", "xgrammar")
#: What runs without --modes: best and exact are asked for by name (exact needs --temperature).
DEFAULT_MODES = ("required", "auto", "unconstrained", "xgrammar")
STYLES = ("auto", "compact", "spaced", "flexible")

_TYPE_MAP = {"dict": "object", "float": "number", "tuple": "array"}


def bfcl_schema(schema: Any) -> Any:
    """BFCL parameter schema → JSON Schema (only `type` keywords change, never names)."""
    if isinstance(schema, list):
        return [bfcl_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "type":
            types = value if isinstance(value, list) else [value]
            if "any" in types:
                continue  # no constraint
            mapped = [_TYPE_MAP.get(t, t) for t in types]
            out["type"] = mapped if isinstance(value, list) else mapped[0]
        elif key == "optional":
            continue  # BFCL annotation; `required` already says it
        elif key in ("properties", "$defs", "definitions") and isinstance(value, dict):
            out[key] = {name: bfcl_schema(sub) for name, sub in value.items()}
        elif isinstance(value, dict | list):
            out[key] = bfcl_schema(value)
        else:
            out[key] = value
    return out


@dataclass(frozen=True)
class RawTool:
    """A tool defined by a raw JSON Schema (no Python function) under BFCL's own name (dots
    allowed, which `Tool.from_schema` refuses): enough for the agent's grammar, prompt and
    validation (`jsonschema`, as for schema tools). Calling it returns the arguments dict."""

    name: str
    description: str
    json_schema: dict[str, Any]
    is_async: bool = False
    takes_context: bool = False
    _args: Any = field(default=None, repr=False, compare=False)

    @classmethod
    def from_bfcl(cls, fn: Mapping[str, Any]) -> RawTool:
        from sdk.tools.schema_args import schema_args_model

        schema = bfcl_schema(fn.get("parameters") or {"type": "object", "properties": {}})
        args = schema_args_model(re.sub(r"\W", "_", fn["name"]), schema)
        return cls(fn["name"], fn.get("description", ""), schema, _args=args)

    def to_openai(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.json_schema,
            },
        }

    def validate_args(self, data: Any) -> BaseModel:
        from sdk.tools.schema_args import validate_schema_args

        return validate_schema_args(self._args, data)

    def call(self, args: Any, ctx: Any = None) -> Any:
        return args.model_dump() if isinstance(args, BaseModel) else args


# ------------------------------------------------------------------------------ data


@dataclass(frozen=True)
class Item:
    """One question: its prompt, offered tools and expected calls (none for irrelevance)."""

    category: str
    id: str
    prompt: str
    tools: dict[str, RawTool]
    truth: list[dict[str, Any]]


def data_dir(given: str | os.PathLike[str] | None = None) -> Path:
    """The BFCL data folder: `given` (a bench's `--data`), else `$SDK_BFCL_DIR`. The project
    names no machine's path: without either, a clear error."""
    where = given or os.environ.get(DATA_ENV)
    if not where:
        raise SystemExit(
            f"BFCL data: pass --data DIR (the BFCL v4 dev split, e.g. ../shared/bfcl-dev) or set "
            f"${DATA_ENV}"
        )
    path = Path(where)
    if not (path / QUESTIONS).is_file():
        raise SystemExit(f"BFCL data: {path} holds no {QUESTIONS}")
    return path


def _load(
    n: int, offset: int = 0, data: Path | None = None
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """The raw "multiple" (question, answer) pairs (also used by `sdk.bench.e2e`)."""
    base = data or data_dir()
    qs = [json.loads(line) for line in (base / QUESTIONS).open()][offset : offset + n]
    answers = {a["id"]: a for a in (json.loads(line) for line in (base / ANSWERS).open())}
    return [(q, answers[q["id"]]) for q in qs]


def load(category: str, n: int, offset: int = 0, data: Path | None = None) -> list[Item]:
    """The first `n` questions of `category` from `offset`, with their ground truth.

    "missing" is made from "multiple": each question with its expected function taken away,
    so several functions are offered and none fits. (Every BFCL "irrelevance" question offers
    exactly one function and every "multiple" question two to four: a decision that counted
    the offered tools would pass both without telling fitting tools from others.)"""
    source = "multiple" if category == "missing" else category
    base = (data or data_dir()) / f"BFCL_v4_{source}"
    with open(f"{base}.jsonl", encoding="utf-8") as f:
        qs = [json.loads(line) for line in f][offset : offset + n]
    answers: dict[str, Any] = {}
    if source != "irrelevance":
        with open(f"{base}.answers.jsonl", encoding="utf-8") as f:
            answers = {a["id"]: a["ground_truth"] for a in map(json.loads, f)}
    items = []
    for q in qs:
        tools = {t.name: t for t in (RawTool.from_bfcl(fn) for fn in q["function"])}
        truth = list(answers.get(q["id"], []))
        if category == "missing":
            for call in truth:
                for name in call:
                    tools.pop(name, None)
            truth = []
        items.append(Item(category, q["id"], q["question"][0][-1]["content"], tools, truth))
    return items


# ------------------------------------------------------------------------------ outcomes


@dataclass
class Outcome:
    """One (question, mode, style) run; `correct` is the category's headline criterion."""

    category: str = ""
    id: str = ""
    mode: str = ""
    style: str = ""
    parsed: bool = False
    valid: bool = False
    correct: bool = False
    called: bool = False
    n_calls: int = 0
    n_expected: int = 0
    count_ok: bool = False  # parallel: as many calls as expected
    all_correct: bool = False  # parallel: every expected call matched by exactly one call
    truncated: bool = False  # max_tokens ran out inside a call
    whitespace_run: bool = False  # ... and the text ends in a run of whitespace
    calls_lost: int = 0
    calls_checked: int | None = None  # calls whose ids were compared (None: ids unknown)
    calls_noncanonical: int | None = None
    seconds: float = 0.0
    tokens: int = 0
    forward_passes: int = 0
    # log p(the turn's tokens | prompt) under the model (`--logprobs`; required and best)
    logprob: float | None = None
    token_ids: list[int] | None = None  # the turn's tokens (`--logprobs`)
    error: str | None = None
    reused_from: str | None = None  # the style whose identical run this copies
    text: str = ""


# A turn cut off in a whitespace run: blank lines, or a long run of spaces (one indentation
# step of pretty-printed JSON is not a run).
_WS_RUN = re.compile(r"(?:\n[^\S\n]*\n\s*|\s{24,})\Z")


def score(out: Outcome, item: Item, calls: Sequence[Call]) -> Outcome:
    """Fill `out`'s call-quality fields from the turn's `calls` (truncation already set)."""
    out.n_calls, out.n_expected = len(calls), len(item.truth)
    out.called = bool(calls) or out.calls_lost > 0
    status = [call_status(c, item.tools) for c in calls]
    if item.category == "parallel":
        out.parsed = bool(calls) and all(p for p, _ in status)
        out.valid = out.parsed and all(v for _, v in status)
        out.count_ok = len(calls) == len(item.truth)
        out.all_correct = out.valid and match_calls(calls, item.truth)
        out.correct = out.all_correct
        return out
    if calls:
        out.parsed, out.valid = status[0]
    if item.category in NO_CALL:
        out.correct = not out.called
    else:
        name, args = calls[0] if calls else ("", None)
        out.correct = out.valid and bool(item.truth) and is_correct(name, args, item.truth[0])
    return out


def _mark_truncated(out: Outcome, text: str, lost: int) -> None:
    out.truncated = True
    out.calls_lost = lost
    out.whitespace_run = bool(_WS_RUN.search(text))


# ------------------------------------------------------------------------------ running


@dataclass(frozen=True)
class Options:
    """What every run shares (the CLI's pass-through options)."""

    max_tokens: int = 192
    auto_call_bias: float | str | None = None  # "off": no call decision (the model's own pick)
    reasoning_tokens: int | None = None
    logprobs: bool = False  # score each required/best turn's tokens under the model
    warm: bool = False  # run the shared prompt before each SDK turn (modes compare decoding)
    temperature: float = 0.0  # > 0: SDK modes sample (seed 0)

    def agent_kwargs(self) -> dict[str, Any]:
        extra: dict[str, Any] = {}
        if self.auto_call_bias == "off":
            extra["auto_call_bias"] = None
        elif self.auto_call_bias is not None:
            extra["auto_call_bias"] = self.auto_call_bias
        if self.reasoning_tokens is not None:
            extra["reasoning_tokens"] = self.reasoning_tokens
        if self.temperature > 0:
            extra["temperature"], extra["seed"] = self.temperature, 0
        return extra


def _separators(fmt: Any) -> tuple[str, str] | None:
    """The resolved format's body separators (None: flexible whitespace)."""
    seps = fmt.style.separators
    return None if seps is None else (str(seps[0]), str(seps[1]))


class Runner:
    """Runs questions on one local backend in every mode and style."""

    def __init__(self, backend: Any, options: Options, *, xgrammar: bool = False) -> None:
        from ._bfcl_peers import XgrammarDriver

        self.backend = backend
        self.options = options
        if not hasattr(backend, "complete_turn"):  # a server (`complete_turn`) has no index
            _ = backend.index  # built (or loaded) once, before any timing
        self.xgrammar = XgrammarDriver(backend) if xgrammar else None
        self.formats: dict[str, Any] = {}  # style -> the agent's resolved ToolCallFormat

    def _agent(self, item: Item, mode: str, style: str) -> Any:
        from sdk.agent import Agent

        base, heal = style_parts(style)
        tool_choice, decoding = _SDK_TURNS.get(mode, (mode, "masked"))
        return Agent(
            self.backend,
            tools=list(item.tools.values()),
            tool_choice=tool_choice,
            decoding=cast(Any, decoding),
            parallel_tool_calls=item.category == "parallel",
            max_tokens=self.options.max_tokens,
            call_style=cast(Any, base),  # a name checked by the CLI
            token_healing=heal,
            **self.options.agent_kwargs(),
        )

    def format_for(self, style: str, item: Item) -> Any:
        """The format an agent with `call_style=style` prompts with (resolved for the model)."""
        if style not in self.formats:
            self.formats[style] = self._agent(item, "none", style).resolved_format()
        return self.formats[style]

    def _alignment(self, out: Outcome, ids: Sequence[int] | None) -> None:
        from ._bfcl_peers import noncanonical_calls

        if ids is None:
            return
        tok = self.backend.tokenizer
        flags = noncanonical_calls(
            list(ids),
            self.backend.index.token_bytes,
            lambda text: tok.encode(text, add_special_tokens=False),
        )
        out.calls_checked, out.calls_noncanonical = len(flags), sum(flags)

    def run_sdk(self, item: Item, mode: str, style: str) -> Outcome:
        return self.sdk_turn(item, mode, style)[0]

    def sdk_turn(self, item: Item, mode: str, style: str) -> tuple[Outcome, Any]:
        """`run_sdk`'s outcome and the turn's `Usage` (None where the turn raised without
        one): `sdk.bench.backends` reads the prompt and cache counts from it."""
        from sdk.errors import SDKError, TruncationError, UnexpectedModelBehavior

        from ._bfcl_peers import OPENER

        out = Outcome(item.category, item.id, mode, style)
        calls: list[Call] = []
        usage: Any = None
        meta: Mapping[str, Any] = {}
        if self.options.warm and hasattr(self.backend, "begin_turn"):
            session = self.backend.begin_turn(self._request(item, style))
            session.prefill()
            session.close()
        start = time.perf_counter()
        try:
            result = self._agent(item, mode, style).plan_sync(item.prompt)
        except TruncationError as exc:  # max_tokens ran out inside a call: the turn is lost
            usage = exc.usage
            out.text, out.tokens = exc.partial_text, self.options.max_tokens
            _mark_truncated(out, exc.partial_text, max(1, exc.partial_text.count(OPENER)))
        except UnexpectedModelBehavior as exc:
            usage = exc.usage
            out.text, out.error = exc.raw_output or "", f"{type(exc).__name__}: {exc}"[:300]
        except SDKError as exc:  # a schema the grammar compiler rejects: counted as a miss
            out.error = f"{type(exc).__name__}: {exc}"[:300]
        else:
            usage = result.usage
            out.text = result.output
            out.tokens = result.usage.completion_tokens
            if result.usage.cut_calls:  # max_tokens cut a later call; the complete ones stand
                out.truncated, out.calls_lost = True, result.usage.cut_calls
            out.forward_passes = result.usage.forward_passes
            for c in result.tool_calls:
                try:
                    args = json.loads(c.raw)
                except ValueError:
                    args = None
                calls.append((c.name, args))
            meta = result.messages[-1].metadata if result.messages else {}
            self._alignment(out, meta.get("token_ids"))
        out.seconds = time.perf_counter() - start
        if self.options.logprobs and mode in ("required", "best"):
            out.token_ids = meta.get("token_ids")
            out.logprob = self._logprob(item, style, out.token_ids)
        return score(out, item, calls), usage

    def _logprob(self, item: Item, style: str, ids: Sequence[int] | None) -> float | None:
        """log p(ids | the required turn's prompt): greedy's and the search's outputs scored
        the same way, after the turn's timing."""
        from sdk.decoding.best import sequence_logprob

        if not ids or not hasattr(self.backend, "begin_turn"):
            return None
        session = self.backend.begin_turn(self._request(item, style))
        try:
            return sequence_logprob(session, list(ids))
        finally:
            session.close()

    def _request(self, item: Item, style: str) -> Any:
        """The prompt every mode shares: the question, all tools, the agent's format."""
        from sdk.decoding import TurnRequest
        from sdk.messages import Message

        return TurnRequest(
            messages=[Message.user(item.prompt)],
            tools=list(item.tools.values()),
            tool_choice="required",
            fmt=self.format_for(style, item),
        )

    def run_peer(self, item: Item, mode: str, style: str) -> Outcome:
        from sdk.decoding.turn_grammar import call_body_schema

        from ._bfcl_peers import CLOSER, OPENER, PeerTurn, run_unconstrained

        fmt = self.format_for(style, item)
        request = self._request(item, style)
        out = Outcome(item.category, item.id, mode, style)
        start = time.perf_counter()
        try:
            if mode == "xgrammar":
                if self.xgrammar is None:
                    raise RuntimeError("the Runner was built without xgrammar")
                compiled = self.xgrammar.compile(
                    call_body_schema(list(item.tools.values())),
                    _separators(fmt),
                    item.category == "parallel",
                )
                turn = self.xgrammar.run(self.backend, request, compiled, self.options.max_tokens)
            else:
                turn = run_unconstrained(self.backend, request, self.options.max_tokens)
        except Exception as exc:  # noqa: BLE001 - a schema a peer refuses etc.: a miss
            turn = PeerTurn("", finish="error", error=f"{type(exc).__name__}: {exc}"[:300])
        out.seconds = time.perf_counter() - start
        out.text, out.tokens, out.forward_passes = (
            turn.text,
            len(turn.token_ids),
            turn.forward_passes,
        )
        out.error = turn.error
        if turn.finish == "length" and turn.text.rfind(OPENER) > turn.text.rfind(CLOSER):
            _mark_truncated(out, turn.text, 1)
        if turn.token_ids:
            self._alignment(out, turn.token_ids)
        calls = [
            (c.name, c.arguments) if c.error is None else ("", None) for c in fmt.parse(turn.text)
        ]
        return score(out, item, calls)

    def _prompt_key(self, item: Item, style: str) -> Any:
        from sdk.backends.chat_template import render_prompt

        request = self._request(item, style)
        render = getattr(self.backend, "render", None)
        if callable(render):
            return tuple(render(request))
        return render_prompt(self.backend.tokenizer, request)

    def run_item(self, item: Item, modes: Sequence[str], styles: Sequence[str]) -> list[Outcome]:
        """Every (style, mode) of one question; unconstrained/xgrammar runs are shared by
        styles giving the same prompt (and, for xgrammar, the same separators)."""
        outs: list[Outcome] = []
        shared: dict[Any, Outcome] = {}
        for style in styles:
            for mode in modes:
                if mode in SDK_MODES:
                    outs.append(self.run_sdk(item, mode, style))
                    continue
                seps = _separators(self.format_for(style, item)) if mode == "xgrammar" else None
                key = (mode, self._prompt_key(item, style), seps)
                first = shared.get(key)
                if first is not None:
                    outs.append(replace(first, style=style, reused_from=first.style))
                    continue
                shared[key] = self.run_peer(item, mode, style)
                outs.append(shared[key])
        return outs


# ------------------------------------------------------------------------------ CLI


def _bias(text: str) -> float | str:
    return "off" if text == "off" else float(text)


def style_parts(style: str) -> tuple[str, bool]:
    """A --styles entry as (call style, token healing): `compact:noheal` turns healing off,
    which with the compact style is the SDK's behaviour before call styles existed."""
    base, _, flag = style.partition(":")
    return base, flag != "noheal"


def _split(
    value: str, allowed: Sequence[str], what: str, parser: argparse.ArgumentParser
) -> list[str]:
    items = [v.strip() for v in value.split(",") if v.strip()]
    ok = {*allowed, *(f"{a}:noheal" for a in allowed)} if what == "styles" else set(allowed)
    bad = [v for v in items if v not in ok]
    if bad or not items:
        parser.error(f"unknown {what} {bad}; choose from {list(allowed)}")
    return items


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m sdk.bench bfcl",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--data", help=f"the BFCL v4 dev split's folder (default ${DATA_ENV})")
    parser.add_argument("--n", type=int, default=50, help="questions per category (default 50)")
    parser.add_argument("--offset", type=int, default=0, help="skip this many questions first")
    parser.add_argument(
        "--categories",
        default=",".join(DEFAULT_CATEGORIES),
        help=f"comma-separated, of {', '.join(CATEGORIES)} (default {', '.join(DEFAULT_CATEGORIES)})",
    )
    parser.add_argument(
        "--modes",
        default=",".join(DEFAULT_MODES),
        help=f"comma-separated, of {', '.join(MODES)} (default {', '.join(DEFAULT_MODES)})",
    )
    parser.add_argument("--styles", default="auto", help="comma-separated call styles")
    parser.add_argument("--model", default="smollm2", help="smollm2, gemma3, .gguf or HF dir")
    parser.add_argument("--max-tokens", type=int, default=192)
    parser.add_argument(
        "--auto-call-bias",
        type=_bias,
        default=None,
        help="passed to Agent(auto_call_bias=...); 'off': no decision, the model's own pick",
    )
    parser.add_argument(
        "--reasoning-tokens", type=int, default=None, help="passed to Agent(reasoning_tokens=...)"
    )
    parser.add_argument(
        "--logprobs",
        action="store_true",
        help="score the required and best turns' tokens under the model (in --jsonl)",
    )
    parser.add_argument(
        "--temperature",
        type=float,
        default=0.0,
        help="SDK modes sample at this temperature (seed 0); the exact mode needs it > 0",
    )
    parser.add_argument(
        "--warm",
        action="store_true",
        help="run each question's prompt before each SDK turn: modes compare on decoding alone",
    )
    parser.add_argument("--jsonl", help="one line per (category, question, mode, style)")
    parser.add_argument("--plot", help="write a grouped bar chart PNG here (needs matplotlib)")
    parser.add_argument("--json", action="store_true", help="print a final BENCH_JSON line")
    args = parser.parse_args(argv)
    args.categories = _split(args.categories, CATEGORIES, "categories", parser)
    args.modes = _split(args.modes, MODES, "modes", parser)
    args.styles = _split(args.styles, STYLES, "styles", parser)
    return args


def _code(o: Outcome) -> str:
    if o.correct:
        return "C"
    if o.truncated:
        return "T"
    if o.error is not None:
        return "E"
    return "V" if o.valid else "P" if o.parsed else "-"


def _search_lines(outcomes: Sequence[Outcome]) -> list[str]:
    """Per category and style, the best and exact modes against required (the masked
    turn) on the same questions: correct questions, log-probabilities (`--logprobs`),
    seconds and forward passes."""
    pairs: dict[tuple[str, str, str], list[tuple[Outcome, Outcome]]] = {}
    greedy = {(o.category, o.id, o.style): o for o in outcomes if o.mode == "required"}
    for o in outcomes:
        g = greedy.get((o.category, o.id, o.style))
        if o.mode in _SDK_TURNS and g is not None:
            pairs.setdefault((o.mode, o.category, o.style), []).append((g, o))
    lines = []
    for (mode, category, style), ps in pairs.items():
        # the same tokens score the same (scoring twice can differ by llama.cpp's rounding)
        scored = [
            (g.logprob, g.logprob if b.token_ids == g.token_ids else b.logprob)
            for g, b in ps
            if None not in (g.logprob, b.logprob)
        ]
        lp = ""
        if scored:
            at_least = sum(bl >= gl - 1e-3 for gl, bl in scored)  # type: ignore[operator]
            higher = sum(bl > gl + 1e-3 for gl, bl in scored)  # type: ignore[operator]
            lp = f"; log p >= required's on {at_least}/{len(scored)} ({higher} higher)"
        g_s = statistics.fmean(g.seconds for g, _ in ps)
        b_s = statistics.fmean(b.seconds for _, b in ps)
        g_p = statistics.fmean(g.forward_passes for g, _ in ps)
        b_p = statistics.fmean(b.forward_passes for _, b in ps)
        lines.append(
            f"{mode} vs required, {category}/{style}, {len(ps)} questions: correct "
            f"{sum(b.correct for _, b in ps)} vs {sum(g.correct for g, _ in ps)}, changed calls "
            f"{sum(b.text != g.text for g, b in ps)} (tokens "
            f"{sum(b.token_ids != g.token_ids for g, b in ps)}){lp}; s/question {b_s:.2f} vs {g_s:.2f} "
            f"({b_s / g_s if g_s else 0:.2f}x), passes {b_p:.1f} vs {g_p:.1f}"
        )
    return lines


def _load_backend(model: str, xgrammar: bool) -> Any:
    """The model's backend, timed on stderr: a transformers model for XGrammar's logits
    processor, else the backend an agent gets for this name (`SDK_LOCAL_BACKEND` picks
    another)."""
    t0 = time.perf_counter()
    if xgrammar:
        from sdk.backends.transformers import TransformersModel

        backend: Any = TransformersModel.from_pretrained(model)
    else:
        from sdk.backends.local import coerce_model

        backend = coerce_model(model)
    print(
        f"model {model} loaded on {type(backend).__name__} in {time.perf_counter() - t0:.1f}s",
        file=sys.stderr,
    )
    return backend


def _run_all(
    args: argparse.Namespace, runner: Runner, modes: list[str], data: Path
) -> tuple[list[Outcome], Item | None]:
    """Every item of every category in every mode and style (progress on stderr, each outcome
    to `--jsonl` as it comes), and the first item (to resolve the styles on)."""
    outcomes: list[Outcome] = []
    first: Item | None = None
    log = open(args.jsonl, "w", encoding="utf-8") if args.jsonl else None  # noqa: SIM115
    try:
        for category in args.categories:
            items = load(category, args.n, args.offset, data)
            first = first or (items[0] if items else None)
            for i, item in enumerate(items):
                outs = runner.run_item(item, modes, args.styles)
                outcomes += outs
                if log is not None:
                    log.writelines(json.dumps(asdict(o), ensure_ascii=False) + "\n" for o in outs)
                    log.flush()
                line = " ".join(f"{o.mode}/{o.style}={_code(o)}" for o in outs)
                print(
                    f"[{category} {i + 1}/{len(items)}] {item.id}: {line}",
                    file=sys.stderr,
                    flush=True,
                )
    finally:
        if log is not None:
            log.close()
    return outcomes, first


def _resolved_styles(runner: Runner, styles: list[str], first: Item | None) -> dict[str, Any]:
    """The tool-call style each requested style resolved to, with its separators."""
    resolved: dict[str, Any] = {}
    if first is not None:
        for style in styles:
            st = runner.format_for(style, first).style
            resolved[style] = {
                "name": st.name,
                "separators": _separators(runner.format_for(style, first)),
            }
    return resolved


def _header(args: argparse.Namespace, backend: Any, resolved: dict[str, Any]) -> str:
    styles_text = ", ".join(
        f"{k}→{v['name']} {v['separators']!r}" if k != v["name"] else k for k, v in resolved.items()
    )
    return (
        f"BFCL {','.join(args.categories)}: n={args.n} per category from #{args.offset}, model "
        f"{args.model} on {type(backend).__name__}, "
        f"{f'T={args.temperature}' if args.temperature > 0 else 'greedy'}, "
        f"max_tokens={args.max_tokens}, "
        f"styles: {styles_text}"
        + (f", auto_call_bias={args.auto_call_bias}" if args.auto_call_bias is not None else "")
        + (
            f", reasoning_tokens={args.reasoning_tokens}"
            if args.reasoning_tokens is not None
            else ""
        )
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    data = data_dir(args.data)  # before the model loads: a missing folder fails at once
    modes: list[str] = args.modes
    xgr = "xgrammar" in modes
    backend = _load_backend(args.model, xgr)
    options = Options(
        args.max_tokens,
        args.auto_call_bias,
        args.reasoning_tokens,
        args.logprobs,
        args.warm,
        args.temperature,
    )
    try:
        runner = Runner(backend, options, xgrammar=xgr)
    except ImportError as exc:  # peers are optional
        print(f"bfcl: xgrammar unavailable, mode skipped: {exc}", file=sys.stderr)
        modes = [m for m in modes if m != "xgrammar"]
        runner = Runner(backend, options)
    outcomes, first = _run_all(args, runner, modes, data)
    resolved = _resolved_styles(runner, args.styles, first)
    report = summarize(outcomes)
    print(format_tables(report, _header(args, backend, resolved)), flush=True)
    for line in _search_lines(outcomes):
        print(line, flush=True)
    if args.plot and plot(
        args.plot, report, f"BFCL, {args.model}, greedy (python -m sdk.bench bfcl)"
    ):
        print(f"bfcl: plot written to {args.plot}", file=sys.stderr)
    if args.json:
        bench = {
            "bench": "bfcl",
            "model": args.model,
            "n": args.n,
            "offset": args.offset,
            "max_tokens": args.max_tokens,
            "auto_call_bias": args.auto_call_bias,
            "reasoning_tokens": args.reasoning_tokens,
            "styles": resolved,
            "categories": report,
        }
        print("BENCH_JSON " + json.dumps(bench, separators=(",", ":")), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
