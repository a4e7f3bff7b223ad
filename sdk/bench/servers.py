"""`python -m sdk.bench servers`: is the grammar the remote backend sends enforced there as ours?

`OpenAIChatModel(constraint="gbnf" | "lark")` sends the turn grammar as text; the server hands
it to its own engine. This bench compiles that text with the very engine each server uses,
through the engine's Python API, and compares which texts it accepts with our matcher:

- `llama.cpp`: the GBNF export (llama-server's `grammar` field), by llama.cpp's grammar
  sampler (llama-cpp-python, a vocabulary-only load of the embedded SmolLM2), token by token:
  a text is accepted when every token passes the sampler and the end token may follow;
- `xgrammar`: the same GBNF as XGrammar's EBNF parser reads it (SGLang's `ebnf` field, vLLM's
  `structured_outputs.grammar` with the xgrammar backend), accepted as a string;
- `guidance`: the Lark text `constraint="lark"` sends (llguidance's dialect, `lark_for_guidance`) as
  llguidance reads it (vLLM's guidance backend), token by token;
- `xgrammar-tag`: the structural tag of `constraint="structural_tag"` (vLLM, SGLang), BFCL
  turn grammars only, by XGrammar's structural-tag API. It is looser than the turn grammar by
  design (the text around calls is free; the agent checks it after the turn): texts it accepts
  and we reject are counted as `looser`, apart from the disagreements nothing handles;
- `vllm-xgrammar`: `constraint="lark"` sent to vLLM with the xgrammar backend, which takes a
  grammar without a `::=` line for Lark, converts it to EBNF its own way
  (`convert_lark_to_ebnf`), then has XGrammar parse it: a refusal there is vLLM's HTTP 400,
  upon which the remote backend sends the turn's GBNF instead (counted as `switched_dialect`,
  then judged as XGrammar reads that GBNF);
- `xgrammar-json`, `guidance-json`: `constraint="json_schema"` (the default): a typed output's
  schema in `response_format` as the backend sends it (`sent_schema`), compiled by the
  server's engine from the JSON Schema itself (XGrammar's `Grammar.from_json_schema`, with
  `schema_engine="xgrammar"`; llguidance's `json_schema` grammar), MaskBench only, and
  compared with the grammar the agent
  enforces for that output locally (`close_objects`: an object that declares members takes no
  others). What the engine accepts and that grammar forbids, the agent's validation takes or
  refuses (`looser`); what it refuses and that grammar allows, the model cannot write (a
  disagreement);
- `vllm-auto`: the same with vLLM's `auto` backend, which falls back to guidance where XGrammar
  refuses the grammar (vLLM v1's `_validate_structured_output`): judged by the engine that
  would run it.

`gbnf` targets judge what the remote backend sends (`export_gbnf(..., loosen=True)`): a grammar
it had to loosen (a lookahead too big for GBNF) is counted as `loosened`, and the texts only
that one accepts as `looser`, like the structural tag's.

Grammars: BFCL turn grammars (`--bfcl DIR`, the layout of the BFCL v4 dev split: each
question's tools, `"required"` and `"auto"`, parallel calls where the category has them) and
MaskBench schemas (`--maskbench DIR`, compact JSON). Texts: each question's expected calls as
the format renders them, and mutations of them (unclosed, an unknown tool, compact spacing,
text before the call, plain text, nothing); each schema's valid and invalid instances.

Reported per target: grammars compiled and refused (refusals grouped by their first line),
texts compared and disagreements (a text one side accepts and the other rejects), with
examples; `--json` adds a BENCH_JSON line. A refusal is not a disagreement: the server answers
it with an error (HTTP 400), which the remote backend raises; a disagreement is a grammar the
server enforces differently from ours, which nothing reports.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import random
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TARGETS = (
    "llama.cpp",
    "xgrammar",
    "guidance",
    "xgrammar-tag",
    "vllm-xgrammar",
    "vllm-auto",
    "xgrammar-json",
    "guidance-json",
)


@dataclass
class Case:
    """One grammar (as our Lark) and the texts to judge with it."""

    source: str
    lark: str
    texts: list[str]
    tag: dict[str, Any] | None = None  # the turn's structural tag (turn grammars only)
    schema: dict[str, Any] | None = None  # a typed output's JSON Schema (MaskBench only)
    # The grammar the agent enforces for that typed output (`close_objects`), which the
    # `json_schema` targets are compared with; None where our compiler refuses it.
    closed_lark: str | None = None


@dataclass
class Tally:
    """One target's counts over every case."""

    grammars: int = 0
    compiled: int = 0
    refused: Counter[str] = field(default_factory=Counter)
    texts: int = 0
    disagreements: list[tuple[str, str, bool, bool]] = field(default_factory=list)
    looser: int = 0  # of the disagreements: accepted there, rejected here, by design
    loosened: int = 0  # grammars sent looser than ours, explicitly (`usage.loosened_turns`)
    switched: int = 0  # refused in one dialect, then sent in the other (`OpenAIChatModel`)
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "grammars": self.grammars,
            "compiled": self.compiled,
            "refused": dict(self.refused.most_common()),
            "texts": self.texts,
            "disagreements": len(self.disagreements),
            "looser": self.looser,
            "loosened": self.loosened,
            "switched_dialect": self.switched,
            # The looser target's extra acceptances are the agent's to check (its parse,
            # validation and retry); every other disagreement is unexplained.
            "unexplained_disagreements": len(self.disagreements) - self.looser,
            "examples": [
                {"case": c, "text": t[:200], "ours": o, "theirs": x}
                for c, t, o, x in self.disagreements[:5]
            ],
            "compile_s": round(self.seconds, 3),
        }


# ------------------------------------------------------------------------------ cases


def call_texts(calls: Sequence[tuple[str, dict[str, Any]]], parallel: bool) -> list[str]:
    """The calls as the Hermes format renders them, and mutations of them."""
    from sdk.decoding.formats import HERMES

    rendered = [HERMES.render_call(name, args) for name, args in calls]
    one = rendered[0]
    name = calls[0][0]
    compact = json.dumps({"name": name, "arguments": calls[0][1]}, separators=(",", ":"))
    texts = [
        one,
        one + "\n",
        "Let me check.\n" + one,
        one[:-3],
        one.replace(f'"{name}"', '"not_a_tool"', 1),
        f"<tool_call>\n{compact}\n</tool_call>",
        one.replace('"arguments": {', '"arguments": {"unexpected_key": 1, ', 1),
        "I cannot help with that.",
        "",
    ]
    if parallel and len(rendered) > 1:
        texts += ["\n".join(rendered), "".join(rendered), "\n".join(rendered[:1] * 2)]
    return texts


def _truth_calls(truth: Sequence[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """Each expected call with the first acceptable value of each argument ("" = omitted)."""
    calls = []
    for entry in truth:
        for name, args in entry.items():
            values = {k: v[0] for k, v in args.items() if v and v[0] != ""}
            calls.append((name, values))
    return calls


def bfcl_cases(folder: Path, n: int, categories: Sequence[str]) -> Iterator[Case]:
    from sdk.backends.openai import structural_tag_for
    from sdk.decoding import TurnRequest
    from sdk.decoding.formats import HERMES
    from sdk.decoding.turn_grammar import build_turn_grammar
    from sdk.messages import Message

    from .bfcl import load

    for category in categories:
        for item in load(category, n, 0, folder):
            calls = _truth_calls(item.truth)
            if not calls:
                continue
            parallel = category == "parallel"
            texts = call_texts(calls, parallel)
            for choice in ("required", "auto"):
                try:
                    turn = build_turn_grammar(
                        list(item.tools.values()), choice, None, parallel_tool_calls=parallel
                    )
                except Exception as exc:  # noqa: BLE001 - a tool our compiler refuses
                    print(f"servers: {item.id} {choice}: {exc}", file=sys.stderr)
                    continue
                if turn.lark is not None:
                    request = TurnRequest(
                        messages=(Message.user(item.prompt),),
                        tools=list(item.tools.values()),
                        tool_choice=choice,
                        fmt=HERMES,
                    )
                    tag = structural_tag_for(request, turn, parallel)
                    yield Case(f"{item.id}:{choice}", turn.lark, texts, tag)


def maskbench_cases(folder: Path, n: int, seed: int = 0) -> Iterator[Case]:
    from sdk.errors import SDKError
    from sdk.grammar import compile_schema

    files = sorted(folder.glob("*.json"))
    for path in random.Random(seed).sample(files, min(n, len(files))):
        case = json.loads(path.read_text(encoding="utf-8"))
        try:
            lark = compile_schema(case["schema"], whitespace="compact").lark
        except SDKError:
            continue  # refused by our compiler: nothing is sent
        texts = [
            json.dumps(t["data"], ensure_ascii=False, separators=(",", ":")) for t in case["tests"]
        ]
        try:
            closed = compile_schema(case["schema"], whitespace="compact", close_objects=True).lark
        except SDKError:
            closed = None
        yield Case(f"maskbench:{path.stem}", lark, texts, schema=case["schema"], closed_lark=closed)


# ------------------------------------------------------------------------------ judges


class Ours:
    """Our matcher over the grammar (the reference the others are compared with)."""

    def __init__(self, index: Any) -> None:
        self.index = index
        self.grammar: Any = None

    def compile(self, case: Case, closed: bool = False) -> None:
        from sdk.engine.grammar import CompiledGrammar

        lark = case.closed_lark if closed else case.lark
        if lark is None:
            raise ValueError("our compiler refuses this schema under close_objects")
        self.grammar = CompiledGrammar.from_lark(lark)

    def accepts(self, text: str) -> bool:
        from sdk.engine.matcher import Matcher
        from sdk.errors import MatcherError

        m = Matcher(self.grammar, self.index)
        try:
            m.advance_bytes(text.encode())
        except MatcherError:
            return False
        return m.is_accepting()


class LlamaCppJudge:
    """llama.cpp's GBNF sampler, fed the text's tokens one by one."""

    def __init__(self, tokenizer: Any, gguf: Path) -> None:
        from sdk.backends.llamacpp import _lib

        self.lib = lib = _lib()
        self.tokenizer = tokenizer
        params = lib.llama_model_default_params()
        params.vocab_only = True
        self.model = lib.llama_model_load_from_file(str(gguf).encode(), params)
        if not self.model:
            raise RuntimeError(f"llama.cpp could not load the vocabulary of {gguf}")
        self.vocab = lib.llama_model_get_vocab(self.model)
        self.eos = int(lib.llama_vocab_eos(self.vocab))
        self.sampler: Any = None
        self.loosened = False

    def compile(self, case: Case) -> None:
        from sdk.engine.gbnf import export_gbnf

        self.close_sampler()
        export = export_gbnf(case.lark, loosen=True)  # what `constraint="gbnf"` sends
        self.loosened = bool(export.loosened)
        gbnf = export.text
        self.sampler = self.lib.llama_sampler_init_grammar(self.vocab, gbnf.encode(), b"root")
        if not self.sampler:
            raise ValueError("llama.cpp's GBNF parser refused the grammar")

    def _allowed(self, token: int) -> bool:
        lib = self.lib
        data = (lib.llama_token_data * 1)()
        data[0].id, data[0].logit, data[0].p = token, 0.0, 0.0
        arr = lib.llama_token_data_array(data, 1, -1, False)
        lib.llama_sampler_apply(self.sampler, ctypes.byref(arr))
        return not math.isinf(data[0].logit)

    def accepts(self, text: str) -> bool:
        self.lib.llama_sampler_reset(self.sampler)
        for token in self.tokenizer(text, add_special_tokens=False)["input_ids"]:
            # A token the grammar rejects must never be accepted: llama.cpp throws there.
            if not self._allowed(token):
                return False
            self.lib.llama_sampler_accept(self.sampler, token)
        return self._allowed(self.eos)

    def close_sampler(self) -> None:
        if self.sampler:
            self.lib.llama_sampler_free(self.sampler)
        self.sampler = None

    def close(self) -> None:
        self.close_sampler()
        if self.model:
            self.lib.llama_model_free(self.model)
            self.model = None


def judges(targets: Sequence[str], tokenizer: Any, gguf: Path) -> dict[str, Any]:
    """The judges for `targets` whose engine is installed (the others are reported)."""
    made: dict[str, Any] = {}
    for target in targets:
        try:
            if target == "llama.cpp":
                made[target] = LlamaCppJudge(tokenizer, gguf)
            elif target == "xgrammar":
                from ._server_peers import XgrammarJudge

                made[target] = XgrammarJudge()
            elif target == "guidance":
                from ._server_peers import GuidanceJudge

                made[target] = GuidanceJudge(tokenizer)
            elif target == "xgrammar-tag":
                from ._server_peers import StructuralTagJudge

                made[target] = StructuralTagJudge()
            elif target in ("xgrammar-json", "guidance-json"):
                from ._server_peers import JsonSchemaJudge

                made[target] = JsonSchemaJudge(target.split("-")[0], tokenizer)
            elif target in ("vllm-xgrammar", "vllm-auto"):
                from ._server_peers import VllmLarkJudge

                made[target] = VllmLarkJudge(tokenizer, backend=target.split("-", 1)[1])
            else:
                raise SystemExit(f"servers: unknown target {target!r}; known: {TARGETS}")
        except ImportError as exc:
            print(f"servers: {target} skipped ({exc})", file=sys.stderr)
    return made


# ------------------------------------------------------------------------------ run


def compare(cases: Iterator[Case], ours: Ours, targets: dict[str, Any]) -> dict[str, Tally]:
    tallies = {name: Tally() for name in targets}
    for case in cases:
        try:
            ours.compile(case)
        except Exception as exc:  # noqa: BLE001 - what we cannot compile is never sent
            print(f"servers: {case.source}: ours refused: {exc}", file=sys.stderr)
            continue
        verdicts = [ours.accepts(t) for t in case.texts]
        closed: list[bool] | None = None  # ours under `close_objects`, where a judge needs it
        closed_refused = False
        for name, judge in targets.items():
            if not getattr(judge, "applies", lambda case: True)(case):
                continue  # e.g. a structural tag for a MaskBench schema
            mine_all = verdicts
            if getattr(judge, "reference", "exact") == "closed":
                if closed is None and not closed_refused:
                    try:
                        ours.compile(case, closed=True)
                    except Exception as exc:  # noqa: BLE001 - the agent would refuse the type
                        print(
                            f"servers: {case.source}: ours refused closed: {exc}", file=sys.stderr
                        )
                        closed_refused = True
                    else:
                        closed = [ours.accepts(t) for t in case.texts]
                if closed is None:
                    continue
                mine_all = closed
            tally = tallies[name]
            tally.grammars += 1
            t0 = time.perf_counter()
            try:
                judge.compile(case)
            except Exception as exc:  # noqa: BLE001 - a refusal is counted, not raised
                first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                tally.refused[first[:120]] += 1
                continue
            finally:
                tally.seconds += time.perf_counter() - t0
            tally.compiled += 1
            loose = getattr(judge, "looser", False) or getattr(judge, "loosened", False)
            tally.loosened += bool(getattr(judge, "loosened", False))
            tally.switched += bool(getattr(judge, "switched", False))
            for text, mine in zip(case.texts, mine_all, strict=True):
                theirs = judge.accepts(text)
                tally.texts += 1
                if theirs != mine:
                    tally.disagreements.append((case.source, text, mine, theirs))
                    tally.looser += theirs and loose
    return tallies


def format_table(tallies: dict[str, Tally], header: str) -> str:
    lines = [
        header,
        f"{'target':<13} {'grammars':>8} {'compiled':>8} {'loosened':>8} {'texts':>7} "
        f"{'disagree':>8} {'looser':>6}",
    ]
    for name, t in tallies.items():
        lines.append(
            f"{name:<13} {t.grammars:>8} {t.compiled:>8} {t.loosened:>8} {t.texts:>7} "
            f"{len(t.disagreements):>8} {t.looser:>6}"
        )
        if t.switched:
            lines.append(f"  refused, then taken in the other dialect x{t.switched}")
        for reason, count in t.refused.most_common(3):
            lines.append(f"  refused x{count}: {reason}")
        for case, text, mine, theirs in t.disagreements[:3]:
            lines.append(f"  {case}: ours {mine}, theirs {theirs}: {text[:100]!r}")
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m sdk.bench servers", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("--bfcl", default=None, help="the BFCL v4 dev split's folder")
    ap.add_argument("--n", type=int, default=50, help="questions per BFCL category")
    ap.add_argument("--categories", default="multiple,parallel")
    ap.add_argument("--maskbench", default=None, help="a folder of MaskBench JSON files")
    ap.add_argument("--n-schemas", type=int, default=100, help="MaskBench schemas (sampled)")
    ap.add_argument("--targets", default=",".join(TARGETS), help="comma-separated")
    ap.add_argument("--json", action="store_true", help="print a final BENCH_JSON line")
    args = ap.parse_args(argv)
    if not args.bfcl and not args.maskbench:
        ap.error("give --bfcl DIR and/or --maskbench DIR")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    from sdk.backends.embedded import load_tokenizer, smollm2_gguf_path
    from sdk.engine.tokenizer import TokenizerIndex

    tokenizer = load_tokenizer("smollm2")
    ours = Ours(TokenizerIndex.from_hf(tokenizer))
    targets = judges(args.targets.split(","), tokenizer, smollm2_gguf_path())
    report: dict[str, Any] = {}
    if args.bfcl:
        from .bfcl import data_dir

        cats = [c for c in args.categories.split(",") if c]
        tallies = compare(bfcl_cases(data_dir(args.bfcl), args.n, cats), ours, targets)
        print(format_table(tallies, f"BFCL {','.join(cats)} n={args.n}: turn grammars"))
        report["bfcl"] = {k: v.as_dict() for k, v in tallies.items()}
    if args.maskbench:
        cases = maskbench_cases(Path(args.maskbench), args.n_schemas)
        tallies = compare(cases, ours, targets)
        print(format_table(tallies, f"MaskBench {args.n_schemas} schemas (compact JSON)"))
        report["maskbench"] = {k: v.as_dict() for k, v in tallies.items()}
    for judge in targets.values():
        close = getattr(judge, "close", None)
        if close is not None:
            close()
    if args.json:
        print("BENCH_JSON " + json.dumps({"bench": "servers", **report}, separators=(",", ":")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
