"""Errors an agent run raises; each keeps the transcript and the model's last raw output.

Users of neighbouring SDKs lose the failed attempts when retries run out (Instructor #1418,
#602); here every run-time failure carries what is needed to see what the model did.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sdk.errors import SDKError

if TYPE_CHECKING:
    from sdk.messages import Message

__all__ = [
    "AgentRunError",
    "FailedAttempt",
    "RetriesExhausted",
    "StepLimitExceeded",
    "ToolExecutionError",
    "ToolNotOffered",
    "TruncationError",
    "UnexpectedModelBehavior",
]


@dataclass(frozen=True)
class FailedAttempt:
    """One rejected tool call or final output: what the model wrote and why it was refused."""

    tool_name: str | None  # None for the final output (`output_type`)
    raw: str  # the arguments / output JSON as generated
    error: str  # the feedback that was sent back to the model
    step: int


class AgentRunError(SDKError):
    """Base of run-time agent failures: `messages` is the transcript up to the failure."""

    def __init__(
        self,
        message: str,
        *,
        messages: list[Message] | None = None,
        raw_output: str | None = None,
    ) -> None:
        self.messages: list[Message] = list(messages or [])
        self.raw_output = raw_output
        super().__init__(message)


class UnexpectedModelBehavior(AgentRunError):
    """The model produced something the run cannot use (a rejected token, an unparsable call)."""


class RetriesExhausted(UnexpectedModelBehavior):
    """A tool's arguments (or the final output) failed validation more often than allowed.

    `attempts` lists every failed attempt of the run, oldest first; `raw_output` is the last.
    """

    def __init__(
        self,
        message: str,
        *,
        attempts: list[FailedAttempt],
        messages: list[Message] | None = None,
        raw_output: str | None = None,
    ) -> None:
        self.attempts = list(attempts)
        super().__init__(message, messages=messages, raw_output=raw_output)


class TruncationError(UnexpectedModelBehavior):
    """`max_tokens` ran out inside a tool call or a structured output: `partial_text` has it."""

    def __init__(
        self, message: str, *, partial_text: str, messages: list[Message] | None = None
    ) -> None:
        self.partial_text = partial_text
        super().__init__(message, messages=messages, raw_output=partial_text)


class ToolNotOffered(UnexpectedModelBehavior):
    """The model called a tool that was not offered (impossible under the turn grammar)."""

    def __init__(self, tool_name: str, **kwargs: Any) -> None:
        self.tool_name = tool_name
        super().__init__(f"the model called {tool_name!r}, which was not offered", **kwargs)


class StepLimitExceeded(AgentRunError):
    """The run needed more model turns than `max_steps` allows."""


class UsageLimitExceeded(AgentRunError):
    """The run reached one of its `UsageLimits` (tokens, tool calls) and was stopped."""


class ToolExecutionError(AgentRunError):
    """A tool raised (with `tool_errors="raise"`); the original exception is `__cause__`."""

    def __init__(self, tool_name: str, message: str, **kwargs: Any) -> None:
        self.tool_name = tool_name
        super().__init__(message, **kwargs)
