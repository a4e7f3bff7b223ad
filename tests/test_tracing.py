"""OpenTelemetry spans, checked with the SDK's in-memory exporter."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)

from sdk import Agent, tool  # noqa: E402
from sdk.backends.test import TestModel, ToolCallScript  # noqa: E402
from sdk.tracing import disable_tracing, enable_tracing, tracing_enabled  # noqa: E402


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@pytest.fixture()
def exporter() -> Iterator[InMemorySpanExporter]:
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    enable_tracing(provider)
    yield spans
    disable_tracing()


def test_run_turn_and_tool_spans(exporter: InMemorySpanExporter, smollm2_tokenizer: Any) -> None:
    model = TestModel([ToolCallScript("add", {"a": 2, "b": 3}), "5"], tokenizer=smollm2_tokenizer)
    Agent(model, tools=[add], max_tokens=64).run_sync("2+3?")
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert set(spans) == {"invoke_agent", "chat TestModel", "execute_tool add"}
    run, tool_span = spans["invoke_agent"], spans["execute_tool add"]
    chats = [s for s in exporter.get_finished_spans() if s.name == "chat TestModel"]
    assert len(chats) == 2
    for chat in chats:
        assert chat.parent is not None and chat.parent.span_id == run.context.span_id
        assert chat.attributes["gen_ai.operation.name"] == "chat"
        assert chat.attributes["gen_ai.request.max_tokens"] == 64
        assert chat.attributes["gen_ai.usage.output_tokens"] > 0
        assert chat.attributes["sdk.forward_passes"] > 0
    assert chats[0].attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert tool_span.parent is not None and tool_span.parent.span_id == run.context.span_id
    assert tool_span.attributes["gen_ai.tool.name"] == "add"
    assert tool_span.attributes["gen_ai.tool.call.id"] == "call_1_0"
    total = sum(c.attributes["gen_ai.usage.output_tokens"] for c in chats)
    assert run.attributes["gen_ai.usage.output_tokens"] == total


def test_failures_are_recorded_and_off_means_no_spans(
    exporter: InMemorySpanExporter, smollm2_tokenizer: Any
) -> None:
    cut = Agent(
        TestModel(["12345"], tokenizer=smollm2_tokenizer), output_type=int, max_tokens=2, retries=0
    )
    with pytest.raises(Exception, match="max_tokens"):
        cut.run_sync("x")
    [run] = [s for s in exporter.get_finished_spans() if s.name == "invoke_agent"]
    assert not run.status.is_ok and run.events[0].name == "exception"
    disable_tracing()
    assert not tracing_enabled()
    exporter.clear()
    Agent(TestModel(["ok"], tokenizer=smollm2_tokenizer)).run_sync("x")
    assert exporter.get_finished_spans() == ()
