"""End-to-end function calling on BFCL "multiple" questions: constrained vs unconstrained.

    python -m sdk.bench bfcl [--n 50] [--modes required,auto,unconstrained] [--model smollm2]

For each of the first N questions, the offered functions become tools (BFCL's loose types
mapped to JSON Schema: dict→object, float→number, tuple→array, any→unconstrained) and the
model answers ONE turn:

- required: `Agent(tool_choice="required")`: the turn must be a call, under the grammar;
- auto: `Agent(tool_choice="auto")`: the model may call (under the grammar) or write text;
- unconstrained: the same prompt, plain generation, calls parsed out of the text afterwards.

Reported per mode: parsed (a call was found, its JSON decoded and its function offered),
schema-valid (its arguments validate against the function's schema), correct (BFCL's
ground truth: same function, every argument value acceptable, omitted only where allowed),
and seconds per question.
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

DATA_DIR = Path(os.environ.get("SDK_BFCL_DIR", "/work/shared/bfcl-dev"))
QUESTIONS = "BFCL_v4_multiple.jsonl"
ANSWERS = "BFCL_v4_multiple.answers.jsonl"
MODES = ("required", "auto", "unconstrained")

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


class RawArgs(BaseModel):
    """Arguments of a raw-schema tool: the validated JSON object, kept as extra fields."""

    model_config = ConfigDict(extra="allow")


@dataclass(frozen=True)
class RawTool:
    """A tool defined by a raw JSON Schema (no Python function): enough for the agent's
    grammar, prompt and validation (`jsonschema`). Calling it returns the arguments dict."""

    name: str
    description: str
    json_schema: dict[str, Any]
    is_async: bool = False
    takes_context: bool = False
    _validator: Any = field(default=None, repr=False, compare=False)

    @classmethod
    def from_bfcl(cls, fn: Mapping[str, Any]) -> RawTool:
        import jsonschema

        schema = bfcl_schema(fn.get("parameters") or {"type": "object", "properties": {}})
        validator = jsonschema.Draft202012Validator(schema)
        return cls(fn["name"], fn.get("description", ""), schema, _validator=validator)

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
        if isinstance(data, str | bytes):
            data = json.loads(data)
        errors = sorted(self._validator.iter_errors(data), key=lambda e: list(e.path))
        if errors:
            raise ValidationError.from_exception_data(
                self.name,
                [
                    {
                        "type": "value_error",
                        "loc": tuple(e.path),
                        "input": e.instance,
                        "ctx": {"error": e.message},
                    }
                    for e in errors[:5]
                ],
            )
        if not isinstance(data, dict):
            raise ValidationError.from_exception_data(
                self.name,
                [{"type": "dict_type", "loc": (), "input": data}],
            )
        return RawArgs(**data)

    def call(self, args: Any, ctx: Any = None) -> Any:
        return args.model_dump() if isinstance(args, BaseModel) else args


# ------------------------------------------------------------------------------ scoring

_STRIP = re.compile(r"[ ,./\-_*^'\"]")


def _norm(value: Any) -> Any:
    if isinstance(value, str):
        return _STRIP.sub("", value).lower()
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, list | tuple):
        return [_norm(v) for v in value]
    if isinstance(value, dict):
        return {k: _norm(v) for k, v in value.items()}
    return value


def _one_ok(value: Any, accepted: Any) -> bool:
    if accepted == "":
        return False
    if isinstance(accepted, dict) and isinstance(value, dict):
        # Nested ground truth: each key maps to its own list of acceptable values.
        return _args_ok(value, accepted)
    return bool(_norm(accepted) == _norm(value))


def _value_ok(value: Any, acceptable: Sequence[Any]) -> bool:
    return any(_one_ok(value, a) for a in acceptable)


def _args_ok(args: Mapping[str, Any], expected: Mapping[str, Any]) -> bool:
    if any(k not in expected for k in args):
        return False
    for key, acceptable in expected.items():
        options = acceptable if isinstance(acceptable, list) else [acceptable]
        if key not in args:
            if "" not in options:
                return False
        elif not _value_ok(args[key], options):
            return False
    return True


def is_correct(name: str, args: Any, truth: Mapping[str, Any]) -> bool:
    """BFCL-style AST match of one call against one ground-truth call."""
    if name not in truth or not isinstance(args, dict):
        return False
    return _args_ok(args, truth[name])


# ------------------------------------------------------------------------------ running


@dataclass
class Outcome:
    parsed: bool = False
    valid: bool = False
    correct: bool = False
    seconds: float = 0.0
    tokens: int = 0
    forward_passes: int = 0
    text: str = ""


def _load(n: int, offset: int = 0) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    qs = [json.loads(line) for line in (DATA_DIR / QUESTIONS).open()][offset : offset + n]
    answers = {a["id"]: a for a in (json.loads(line) for line in (DATA_DIR / ANSWERS).open())}
    return [(q, answers[q["id"]]) for q in qs]


def _score(
    name: str, args: Any, tools: Mapping[str, RawTool], truth: Mapping[str, Any], out: Outcome
) -> None:
    tool = tools.get(name)
    out.parsed = tool is not None
    if tool is None:
        return
    try:
        tool.validate_args(args)
        out.valid = True
    except (ValidationError, ValueError):
        out.valid = False
    out.correct = out.valid and is_correct(name, args, truth)


def run_question(
    backend: Any, question: dict[str, Any], answer: dict[str, Any], mode: str, max_tokens: int
) -> Outcome:
    from sdk._agent_errors import UnexpectedModelBehavior
    from sdk.agent import Agent
    from sdk.decoding import HERMES, TurnRequest, generate_turn
    from sdk.errors import SDKError
    from sdk.messages import Message

    tools = {t.name: t for t in (RawTool.from_bfcl(f) for f in question["function"])}
    prompt = question["question"][0][-1]["content"]
    truth = answer["ground_truth"][0]
    out = Outcome()
    start = time.perf_counter()
    if mode == "unconstrained":
        request = TurnRequest(messages=[Message.user(prompt)], tools=list(tools.values()))
        turn = generate_turn(
            backend.begin_turn(request),
            None,
            backend.index,
            backend.tokenizer,
            max_tokens=max_tokens,
        )
        out.text, out.tokens = turn.text, turn.usage.completion_tokens
        out.forward_passes = turn.usage.forward_passes
        calls = [c for c in HERMES.parse(turn.text) if c.error is None]
        if calls:
            _score(calls[0].name, calls[0].arguments, tools, truth, out)
    else:
        try:
            agent = Agent(
                backend,
                tools=list(tools.values()),
                tool_choice=mode,
                parallel_tool_calls=False,
                max_tokens=max_tokens,
            )
            result = agent.plan_sync(prompt)
        except UnexpectedModelBehavior as exc:  # truncated inside the call
            out.text = exc.raw_output or ""
        except SDKError as exc:  # a schema the grammar compiler rejects: counted as a miss
            out.text = f"<{type(exc).__name__}: {exc}>"
        else:
            out.text = result.output
            out.tokens = result.usage.completion_tokens
            out.forward_passes = result.usage.forward_passes
            if result.tool_calls:
                first = result.tool_calls[0]
                _score(first.name, json.loads(first.raw), tools, truth, out)
    out.seconds = time.perf_counter() - start
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m sdk.bench bfcl",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--n", type=int, default=50, help="first N questions (default 50)")
    parser.add_argument("--offset", type=int, default=0, help="skip this many questions first")
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated modes")
    parser.add_argument("--model", default="smollm2", help="smollm2, gemma3, .gguf or HF dir")
    parser.add_argument("--max-tokens", type=int, default=192)
    parser.add_argument("--jsonl", help="write one line per (question, mode) here")
    args = parser.parse_args(argv)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    bad = [m for m in modes if m not in MODES]
    if bad:
        parser.error(f"unknown modes {bad}; choose from {list(MODES)}")

    from sdk.backends.transformers import TransformersModel

    t0 = time.perf_counter()
    backend = TransformersModel.from_pretrained(args.model)
    print(f"model {args.model} loaded in {time.perf_counter() - t0:.1f}s", file=sys.stderr)
    data = _load(args.n, args.offset)
    results: dict[str, list[Outcome]] = {m: [] for m in modes}
    log = open(args.jsonl, "w") if args.jsonl else None  # noqa: SIM115 - closed below
    try:
        for i, (q, a) in enumerate(data):
            for mode in modes:
                o = run_question(backend, q, a, mode, args.max_tokens)
                results[mode].append(o)
                if log is not None:
                    log.write(json.dumps({"id": q["id"], "mode": mode, **o.__dict__}) + "\n")
                    log.flush()
            line = " ".join(
                f"{m}={'C' if r[-1].correct else 'V' if r[-1].valid else 'P' if r[-1].parsed else '-'}"
                for m, r in results.items()
            )
            print(f"[{i + 1}/{len(data)}] {q['id']}: {line}", file=sys.stderr, flush=True)
    finally:
        if log is not None:
            log.close()
    print(
        f"\nBFCL multiple, {len(data)} questions from #{args.offset}, model {args.model}, greedy, "
        f"max_tokens={args.max_tokens}"
    )
    print(f"{'mode':<14}{'parsed':>8}{'valid':>8}{'correct':>9}{'s/question':>12}{'tokens':>8}")
    for mode, rs in results.items():
        n = max(len(rs), 1)
        print(
            f"{mode:<14}{sum(r.parsed for r in rs) / n:>8.0%}{sum(r.valid for r in rs) / n:>8.0%}"
            f"{sum(r.correct for r in rs) / n:>9.0%}"
            f"{statistics.fmean(r.seconds for r in rs) if rs else 0:>12.2f}"
            f"{statistics.fmean(r.tokens for r in rs) if rs else 0:>8.1f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
