"""Nothing lost on failure: every way a run can fail raises a typed `AgentRunError` carrying the
transcript so far (`.messages`) and the model's raw output (`.raw_output`), through the public
API with scripted models.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import pytest
from pydantic import AfterValidator, BaseModel, field_validator

from sdk import Agent, tool
from sdk.backends.test import TestModel, ToolCallScript
from sdk.decoding.formats import ParsedCall
from sdk.decoding.generate import TurnOutput
from sdk.errors import (
    AgentRunError,
    RetriesExhausted,
    StepLimitExceeded,
    ToolExecutionError,
    ToolNotOffered,
    TruncationError,
    UnexpectedModelBehavior,
)
from sdk.result import Usage


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    if a < 0:
        raise ValueError("negative")
    return a + b


class Out(BaseModel):
    n: int


class Positive(BaseModel):
    n: int

    @field_validator("n")
    @classmethod
    def at_least_two(cls, v: int) -> int:
        if v < 2:  # a rule the grammar cannot see: checked after parsing, then retried
            raise ValueError("n must be at least 2")
        return v


class _Remote:
    """Whole turns from outside the grammar (like a server backend)."""

    def __init__(self, text: str, calls: list[ParsedCall] | None) -> None:
        self.text, self.calls = text, calls

    def complete_turn(self, request: Any, grammar: Any, **kwargs: Any) -> TurnOutput:
        return TurnOutput(self.text, [], "stop", True, Usage(), self.calls)

    async def acomplete_turn(self, request: Any, grammar: Any, **kwargs: Any) -> TurnOutput:
        return self.complete_turn(request, grammar, **kwargs)


def _even(n: int) -> int:
    if n % 2:  # a rule the grammar cannot see: checked after parsing, then retried
        raise ValueError("n must be even")
    return n


@tool
def half(n: Annotated[int, AfterValidator(_even)]) -> int:
    """Halve an even number."""
    return n // 2


def _call(a: Any) -> ToolCallScript:
    return ToolCallScript("add", {"a": a, "b": 1})


# name -> (expected error, agent factory(tokenizer), raw output that must be carried)
CASES: dict[str, tuple[type[AgentRunError], Callable[[Any], Agent[Any]], str]] = {
    "retries_exhausted_tool": (
        RetriesExhausted,
        lambda tok: Agent(
            TestModel([ToolCallScript("half", {"n": 3})] * 2, tokenizer=tok),
            tools=[half],
            retries=1,
        ),
        '{"n": 3}',
    ),
    "retries_exhausted_output": (
        RetriesExhausted,
        lambda tok: Agent(
            TestModel(['{"n": 1}'] * 2, tokenizer=tok), output_type=Positive, retries=1
        ),
        '{"n": 1}',
    ),
    "truncation_in_call": (
        TruncationError,
        lambda tok: Agent(
            TestModel([_call(123456789)], tokenizer=tok), tools=[add], max_tokens=8, retries=0
        ),
        "<tool_call>",
    ),
    "truncation_in_output": (
        TruncationError,
        lambda tok: Agent(
            TestModel(['{"n":123456789}'], tokenizer=tok), output_type=Out, max_tokens=3, retries=0
        ),
        '{"n',
    ),
    "step_limit": (
        StepLimitExceeded,
        lambda tok: Agent(TestModel([_call(1), _call(5)], tokenizer=tok), tools=[add], max_steps=2),
        '"a": 5',
    ),
    "tool_error_raised": (
        ToolExecutionError,
        lambda tok: Agent(TestModel([_call(-1)], tokenizer=tok), tools=[add], tool_errors="raise"),
        '"a": -1',
    ),
    "grammar_rejection": (
        UnexpectedModelBehavior,
        lambda tok: Agent(
            TestModel([ToolCallScript("add", '{"a":"x"}')], tokenizer=tok), tools=[add]
        ),
        '{"a":',
    ),
    "script_exhausted": (
        UnexpectedModelBehavior,
        lambda tok: Agent(TestModel([_call(1)], tokenizer=tok), tools=[add]),
        "",
    ),
    "tool_not_offered": (
        ToolNotOffered,
        lambda tok: Agent(_Remote("calling rm", [ParsedCall("rm", {}, "{}")]), tools=[add]),
        "calling rm",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_failures_carry_transcript_and_raw_output(smollm2_tokenizer: Any, case: str) -> None:
    error, make, raw = CASES[case]
    agent = make(smollm2_tokenizer)
    with pytest.raises(error) as info:
        agent.run_sync("please")
    exc = info.value
    assert type(exc) is error, f"{type(exc).__name__}: {exc}"
    # the transcript: at least the prompt, in order, as it stood at the failure
    assert exc.messages, "no transcript"
    assert [m.content for m in exc.messages if m.role == "user"][:1] == ["please"]
    # the raw output of the failing turn / attempt
    assert exc.raw_output is not None, "no raw output"
    assert raw in exc.raw_output, f"{raw!r} not in {exc.raw_output!r}"
    if isinstance(exc, RetriesExhausted):
        assert exc.attempts and exc.attempts[-1].raw == exc.raw_output
    if isinstance(exc, TruncationError):
        assert exc.partial_text == exc.raw_output
    if isinstance(exc, ToolExecutionError):
        assert isinstance(exc.__cause__, ValueError)
    if case in ("step_limit", "tool_error_raised", "retries_exhausted_tool", "script_exhausted"):
        assert any(m.role == "assistant" and m.tool_calls for m in exc.messages)


def test_every_failure_class_is_covered() -> None:
    covered = {c[0] for c in CASES.values()}
    assert covered == {
        RetriesExhausted,
        TruncationError,
        StepLimitExceeded,
        ToolExecutionError,
        UnexpectedModelBehavior,
        ToolNotOffered,
    }
