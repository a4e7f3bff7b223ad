"""Streaming: the events of a run rebuild exactly what `run` returns."""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from sdk import Agent, ModelRetry, TruncationError, tool
from sdk._stream import TurnScanner
from sdk.backends.test import TestModel, ToolCallScript
from sdk.decoding.formats import HERMES
from sdk.events import (
    ArgsDelta,
    CallDropped,
    CallStarted,
    CallValidated,
    FinalResult,
    Retry,
    TextDelta,
    ToolResult,
)


@tool
def get_weather(city: str, days: int = 1) -> str:
    """Weather in a city."""
    return f"sunny in {city} for {days} days"


def _rebuild(events: list[Any], step: int) -> tuple[str, list[tuple[str, Any]]]:
    """A turn's text and calls, as a client would assemble them from the events."""
    text = "".join(e.text for e in events if isinstance(e, TextDelta) and e.step == step)
    names: dict[int, str] = {}
    args: dict[int, str] = defaultdict(str)
    for e in events:
        if isinstance(e, CallStarted) and e.step == step:
            names[e.index] = e.name
        elif isinstance(e, ArgsDelta) and e.step == step:
            args[e.index] += e.delta
        elif isinstance(e, CallDropped) and e.step == step:
            names.pop(e.index)
    return text, [(names[i], json.loads(args[i])) for i in sorted(names)]


# ------------------------------------------------------------------ chunk boundaries

_plain = st.text(st.sampled_from(list('ab <>/\n"{}')), max_size=12).filter(
    lambda t: "<tool_call>" not in t
)
_value = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.text(st.sampled_from(list('a"\\}{]<, ')), max_size=6),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("xyz"), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=150, deadline=None)
@given(
    parts=st.lists(
        st.tuples(_plain, st.dictionaries(st.sampled_from("abc"), _value, max_size=3)), max_size=3
    ),
    tail=_plain,
    data=st.data(),
)
def test_any_chunking_gives_the_same_events(parts: list[Any], tail: str, data: Any) -> None:
    text = "".join(t + HERMES.render_call("f", args) for t, args in parts) + tail

    def scan(chunks: list[str]) -> list[Any]:
        events: list[Any] = []
        scanner = TurnScanner(1, HERMES.opener, HERMES.closer, events.append)
        for chunk in chunks:
            scanner.feed(chunk)
        scanner.finish()
        return events

    cuts = sorted(set(data.draw(st.lists(st.integers(1, max(1, len(text) - 1)), max_size=20))))
    chunks = [text[i:j] for i, j in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    whole, pieces = _rebuild(scan([text]), 1), _rebuild(scan(chunks), 1)
    assert pieces == whole
    assert whole[1] == [("f", args) for _, args in parts]
    outside = "".join(t for t, _ in parts) + tail
    assert whole[0].replace(" ", "").replace("\n", "") == outside.replace(" ", "").replace("\n", "")


# ------------------------------------------------------------------ through the agent


def _script(tok: Any) -> TestModel:
    paris = ToolCallScript("get_weather", {"city": "Paris", "days": 2})
    return TestModel(
        [[paris, ToolCallScript("get_weather", {"city": "Rome"}), paris], "Sunny in both."],
        tokenizer=tok,
    )


def test_events_rebuild_the_run(smollm2_tokenizer: Any) -> None:
    agent = Agent(_script(smollm2_tokenizer), tools=[get_weather], tool_choice="required")
    events = list(agent.run_stream_sync("Weather in Paris and Rome?"))
    final = events[-1]
    assert isinstance(final, FinalResult)
    result = final.result
    expected = Agent(_script(smollm2_tokenizer), tools=[get_weather], tool_choice="required")
    plain = expected.run_sync("Weather in Paris and Rome?")
    assert [m.content for m in result.messages] == [m.content for m in plain.messages]
    # The repeated third call streamed, then was withdrawn; the two others ran.
    assert CallDropped(1, 2) in events
    text, calls = _rebuild(events, 1)
    assert text == "" and calls == [(c.name, json.loads(c.raw)) for c in result.tool_calls]
    validated = [e.call.id for e in events if isinstance(e, CallValidated)]
    results = [(e.call_id, e.content) for e in events if isinstance(e, ToolResult)]
    assert validated == ["call_1_0", "call_1_1"]
    assert results == [
        ("call_1_0", "sunny in Paris for 2 days"),
        ("call_1_1", "sunny in Rome for 1 days"),
    ]
    assert _rebuild(events, 2) == (result.output, [])
    # Each call is reported validated before its result, and after its last argument delta.
    order = [type(e).__name__ for e in events]
    assert order.index("CallValidated") > max(i for i, n in enumerate(order) if n == "ArgsDelta")
    assert order.index("ToolResult") > order.index("CallValidated")


def test_retries_stream_with_their_reason(smollm2_tokenizer: Any) -> None:
    @tool
    def positive(n: int) -> int:
        """Echo a positive number."""
        if n < 0:
            raise ModelRetry("n must be positive")
        return n

    script = [ToolCallScript("positive", {"n": -1}), ToolCallScript("positive", {"n": 2}), "2"]
    agent = Agent(TestModel(script, tokenizer=smollm2_tokenizer), tools=[positive])
    events = list(agent.run_stream_sync("x"))
    [retry] = [e for e in events if isinstance(e, Retry)]
    assert retry.error == "n must be positive" and retry.call is not None
    assert retry.call.raw == '{"n": -1}'


class City(BaseModel):
    name: str
    population: int


def test_typed_output_streams_its_json(smollm2_tokenizer: Any) -> None:
    reply = '{"name": "Oslo", "population": 700000}'
    agent = Agent(TestModel([reply], tokenizer=smollm2_tokenizer), output_type=City)
    events = list(agent.run_stream_sync("x"))
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == reply
    assert len([e for e in events if isinstance(e, TextDelta)]) > 3  # token by token
    assert events[-1].result.output == City(name="Oslo", population=700000)


def test_async_stream_and_errors(smollm2_tokenizer: Any) -> None:
    async def collect() -> list[Any]:
        agent = Agent(TestModel(["hello there"], tokenizer=smollm2_tokenizer))
        return [e async for e in agent.run_stream("hi")]

    events = asyncio.run(collect())
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "hello there"
    cut = Agent(
        TestModel(["12345"], tokenizer=smollm2_tokenizer), output_type=int, max_tokens=2, retries=0
    )
    with pytest.raises(TruncationError):
        list(cut.run_stream_sync("x"))
