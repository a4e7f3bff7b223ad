"""A hostile model: seeded random logits, and an adversary that always takes the least likely
allowed token, driving the REAL decoding loop, turn grammars and agent (see `tests/_hostile.py`).

Checked: every completed span parses and its arguments validate (jsonschema) against the tool's
schema, or take the typed retry path where the schema has keywords the grammar only
approximates; spans that cannot finish within `max_tokens` end in `TruncationError` carrying the
partial text; masked logits are never all -inf (nor NaN) without a typed error; the matcher
never returns an empty mask. The long run (`-m slow`) walks many more seeds.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import random
from collections import Counter
from typing import Annotated, Any, Literal

import jsonschema
import numpy as np
import pytest
import torch
from pydantic import BaseModel, Field

from sdk import Agent, tool
from sdk.decoding import generate as gen
from sdk.decoding.formats import HERMES
from sdk.decoding.turn_grammar import build_turn_grammar
from sdk.engine import CompiledGrammar, Matcher
from sdk.errors import AgentRunError, MatcherError, SDKError, ToolExecutionError, TruncationError
from sdk.grammar import compile_schema
from sdk.tools import as_tool
from tests import _schema_fuzz as fz
from tests._hostile import HostileModel, RawTool

SLOW_SEEDS = int(os.environ.get("SDK_FUZZ_SEEDS", "40"))

# ------------------------------------------------------------------ tools


class Person(BaseModel):
    name: str
    age: Annotated[int, Field(ge=0, le=130)]


@tool
def get_weather(city: str, unit: Literal["celsius", "fahrenheit"] = "celsius") -> str:
    """Weather in a city."""
    assert isinstance(city, str) and unit in ("celsius", "fahrenheit")
    return "sunny"


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    assert isinstance(a, int) and isinstance(b, int)
    return a + b


@tool
def book(
    guest: Person,
    day: dt.date,
    seats: Annotated[int, Field(ge=1, le=9)] = 1,
    tags: list[Annotated[str, Field(pattern=r"^[a-z]{1,8}$")]] | None = None,
) -> str:
    """Book a table."""
    assert isinstance(guest, Person) and 1 <= seats <= 9
    return "booked"


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name)[:40] or "f"


def dev_tools(limit: int) -> list[RawTool]:
    """Raw-schema tools from the dev set's BFCL function schemas (one tool per function)."""
    tools: list[RawTool] = []
    for path in fz.DEV_FILES:
        if not path.stem.startswith("BFCL_simple") or len(tools) >= limit:
            continue
        schema = fz.dev_schema(path)
        for fname, params in schema.get("properties", {}).items():
            if isinstance(params, dict) and params.get("type") == "object":
                tools.append(RawTool(_safe(fname), params))
    return tools[:limit]


PYDANTIC_TOOLS = [as_tool(t) for t in (get_weather, add, book)]


def _enforced(schema: dict[str, Any]) -> bool:
    """Does the grammar enforce every keyword (so jsonschema must accept every span)?"""
    return not compile_schema(schema, close_objects=True).validated


# ------------------------------------------------------------------ the span checker


class Spans:
    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.problems: list[str] = []

    def check(self, text: str, accepting: bool, tools: dict[str, Any]) -> None:
        self.counts["spans"] += 1
        if not accepting:
            self.counts["truncated"] += 1
            return
        calls = HERMES.parse(text)
        if not calls:
            self.problems.append(f"a completed 'required' turn without a call: {text[:200]!r}")
        for call in calls:
            self.counts["calls"] += 1
            tool = tools.get(call.name)
            if call.error is not None or tool is None:
                self.problems.append(f"unparsable or unoffered call {call!r}")
                continue
            schema = tool.json_schema
            try:
                jsonschema.validate(
                    call.arguments, schema, format_checker=jsonschema.FormatChecker()
                )
                self.counts["valid"] += 1
            except jsonschema.ValidationError as exc:
                if _enforced(schema):
                    self.problems.append(f"{call.name}: {exc.message} in {call.raw[:200]}")
                    self.counts["invalid"] += 1
                else:  # approximated keyword: the agent's typed retry path must catch it
                    self.counts["retry_path"] += 1
                    with pytest.raises(Exception) as info:
                        tool.validate_args(call.arguments)
                    assert type(info.value).__name__ == "ValidationError"


@pytest.fixture()
def checked_logits(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Wrap the loop's token choice: masked logits must keep a finite entry and no NaN."""
    seen: Counter[str] = Counter()
    real = gen._choose

    def choose(logits: torch.Tensor, cfg: Any, generator: Any) -> int:
        assert not bool(torch.isnan(logits).any()), "NaN logits"
        assert bool(torch.isfinite(logits).any()), "all logits masked without a typed error"
        seen["steps"] += 1
        return real(logits, cfg, generator)

    monkeypatch.setattr(gen, "_choose", choose)
    return seen


def run_spans(
    tokenizer: Any, index: Any, tools: list[Any], modes: list[str], seeds: range, max_tokens: int
) -> Spans:
    spans = Spans()
    by_name = {t.name: t for t in tools}
    turn = build_turn_grammar(tools, "required")
    assert turn.compiled is not None
    for mode in modes:
        for seed in seeds:
            model = HostileModel(tokenizer, index, mode, seed)
            matcher = Matcher(turn.compiled, index)
            try:
                out = gen.generate_turn(
                    model.begin_turn(None),  # type: ignore[arg-type]
                    matcher,
                    index,
                    tokenizer,
                    max_tokens=max_tokens,
                )
            except SDKError as exc:  # typed, but with full-vocabulary logits it cannot happen
                spans.problems.append(f"{mode}/{seed}: {type(exc).__name__}: {exc}")
                continue
            spans.check(out.text, out.accepting, by_name)
    return spans


def test_hostile_spans_pydantic_tools(
    smollm2_tokenizer: Any, smollm2_index: Any, checked_logits: Counter[str]
) -> None:
    spans = run_spans(
        smollm2_tokenizer,
        smollm2_index,
        PYDANTIC_TOOLS,
        ["random", "adversary"],
        range(3),
        max_tokens=160,
    )
    print("\npydantic tools:", dict(spans.counts), "logit checks:", checked_logits["steps"])
    assert not spans.problems, spans.problems[:5]
    assert spans.counts["valid"] > 0 and spans.counts["truncated"] > 0


def test_hostile_spans_dev_tools(
    smollm2_tokenizer: Any, smollm2_index: Any, checked_logits: Counter[str]
) -> None:
    tools = dev_tools(4)
    assert tools
    spans = run_spans(
        smollm2_tokenizer, smollm2_index, tools, ["random", "adversary"], range(3), max_tokens=160
    )
    print("\ndev tools:", dict(spans.counts), "logit checks:", checked_logits["steps"])
    assert not spans.problems, spans.problems[:5]
    assert spans.counts["valid"] > 0


# ------------------------------------------------------------------ the whole agent


@pytest.mark.parametrize("mode", ["random", "adversary", "stall"])
def test_hostile_agent_runs_end_typed(
    smollm2_tokenizer: Any, smollm2_index: Any, mode: str, checked_logits: Counter[str]
) -> None:
    raw = dev_tools(2)
    outcomes: Counter[str] = Counter()
    for seed in range(3):
        model = HostileModel(smollm2_tokenizer, smollm2_index, mode, seed)
        agent = Agent(
            model,
            tools=[*PYDANTIC_TOOLS, *raw],
            tool_choice=["required", "auto"],
            max_tokens=120,
            max_steps=3,
            retries=1,
            tool_errors="raise",  # a tool body that sees invalid arguments would surface here
        )
        try:
            result = agent.run_sync("go")
        except ToolExecutionError as exc:
            pytest.fail(f"a tool ran with arguments it rejects: {exc}")
        except TruncationError as exc:
            assert exc.partial_text and exc.raw_output == exc.partial_text
            assert exc.messages and exc.messages[-1].role in ("user", "tool")
            outcomes["TruncationError"] += 1
        except AgentRunError as exc:
            assert exc.messages, f"{type(exc).__name__} without a transcript"
            outcomes[type(exc).__name__] += 1
        else:
            assert isinstance(result.output, str)
            outcomes["finished"] += 1
            if mode == "stall":  # a cut call was dropped, the complete ones before it kept
                assert result.usage.cut_calls > 0 or result.finish_reason == "length"
            for call in result.tool_calls:
                assert call.args is not None or call.error is not None
    for t in raw:
        for args in t.calls:
            jsonschema.validate(args, t.json_schema)
    print(f"\nagent/{mode}:", dict(outcomes))
    if mode == "stall":  # every run ran out of budget: raised, or kept its complete calls
        assert outcomes["TruncationError"] + outcomes["finished"] == 3


class Booking(BaseModel):
    guest: Person
    nights: Annotated[int, Field(ge=1, le=30)]
    kind: Literal["single", "double"]


@pytest.mark.parametrize("mode", ["random", "adversary", "stall"])
def test_hostile_structured_output(
    smollm2_tokenizer: Any, smollm2_index: Any, mode: str, checked_logits: Counter[str]
) -> None:
    outcomes: Counter[str] = Counter()
    for seed in range(3):
        model = HostileModel(smollm2_tokenizer, smollm2_index, mode, seed)
        agent = Agent(model, output_type=Booking, max_tokens=120, max_steps=2, retries=1)
        try:
            result = agent.run_sync("book")
        except TruncationError as exc:
            assert exc.partial_text.startswith("{")
            outcomes["TruncationError"] += 1
        except AgentRunError as exc:
            assert exc.messages
            outcomes[type(exc).__name__] += 1
        else:
            assert isinstance(result.output, Booking)
            outcomes["finished"] += 1
    print(f"\noutput/{mode}:", dict(outcomes))
    if mode == "stall":  # every run ran out of budget: raised, or kept its complete calls
        assert outcomes["TruncationError"] + outcomes["finished"] == 3


# ------------------------------------------------------------------ the matcher alone


def adversarial_walk(
    grammar: CompiledGrammar, index: Any, rng: random.Random, steps: int
) -> tuple[bytes, str]:
    """Least-likely-allowed token every step (random base scores); checks every mask."""
    m = Matcher(grammar, index)
    eos = index.eos_ids
    tb = index.token_bytes
    base = np.array([rng.random() for _ in range(index.vocab_size)])
    out = bytearray()
    for _ in range(steps):
        try:
            mask = m.mask()
        except MatcherError:
            return bytes(out), "typed-dead-end"
        allowed = np.nonzero(mask)[0]
        assert allowed.size, "empty mask without a typed error"
        ends = [t for t in allowed.tolist() if t in eos]
        if ends:
            assert m.is_accepting()
        tid = int(allowed[np.argmin(base[allowed])])
        if tid in eos:
            return bytes(out), "complete"
        m.advance(tid)
        out += tb[tid]
        base = np.roll(base, 7919)  # a fresh preference order each step
    return bytes(out), "truncated"


def test_adversarial_walks_on_dev_schemas(smollm2_index: Any) -> None:
    stats: Counter[str] = Counter()
    for path in fz.DEV_FILES[::500]:
        schema = fz.dev_schema(path)
        try:
            grammar = CompiledGrammar.from_schema(schema)
        except SDKError:
            continue
        for seed in range(2):
            text, how = adversarial_walk(grammar, smollm2_index, random.Random(seed), 120)
            stats[how] += 1
            if how == "complete":
                value = json.loads(text.decode("utf-8"))
                if not grammar.validated:
                    jsonschema.validate(value, schema)
    print("\nadversarial walks:", dict(stats))
    assert stats["typed-dead-end"] == 0 and sum(stats.values()) > 0


# ------------------------------------------------------------------ long run


@pytest.mark.slow
def test_hostile_long_run(
    smollm2_tokenizer: Any, smollm2_index: Any, checked_logits: Counter[str]
) -> None:
    total = Spans()
    for tools in (PYDANTIC_TOOLS, dev_tools(20)):
        spans = run_spans(
            smollm2_tokenizer,
            smollm2_index,
            tools,
            ["random", "adversary", "uniform", "stall"],
            range(SLOW_SEEDS),
            max_tokens=200,
        )
        total.counts.update(spans.counts)
        total.problems += spans.problems
    print("\nhostile long run:", dict(total.counts), "logit checks:", checked_logits["steps"])
    assert not total.problems, total.problems[:5]
