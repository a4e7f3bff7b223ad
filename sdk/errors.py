"""The typed error hierarchy: every failure the SDK raises derives from `SDKError`.

One public module for all of them: schema and grammar errors, tool definition errors, and the
errors of an agent run, which keep the transcript and the model's last raw output (users of
neighbouring SDKs lose the failed attempts when retries run out, Instructor #1418, #602).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sdk.messages import Message
    from sdk.result import ToolCall, Usage


class SDKError(Exception):
    """Base class of every error this package raises on purpose."""


class ConfigError(SDKError, ValueError, TypeError):
    """A setting or argument of the public API is invalid (a negative `max_tokens`, `tools=`
    given a bare function, a history entry that is not a message, ...).

    Raised where the mistake is made, before anything runs. It is a `ValueError` and a
    `TypeError` too, so code written against Python's conventions catches it either way.
    """


class SchemaError(SDKError, ValueError):
    """The input is not a usable JSON Schema (malformed, dangling `$ref`, bad regex, ...).

    Attributes:
        pointer: the JSON pointer (RFC 6901) of the offending place in the input schema.
    """

    def __init__(self, message: str, pointer: str = "") -> None:
        self.pointer = pointer
        super().__init__(f"{message} (at {pointer or '/'})")


class UnsupportedSchemaError(SchemaError):
    """A keyword the grammar cannot enforce, rejected because `strict=True` was asked for.

    Attributes:
        keyword: the JSON Schema keyword (`pointer` says where it is).
        detail: why it cannot be enforced ("" when the keyword says it all).
    """

    def __init__(self, keyword: str, pointer: str = "", detail: str = "") -> None:
        self.keyword = keyword
        self.detail = detail
        msg = f"keyword {keyword!r} cannot be enforced by the grammar"
        if detail:
            msg += f": {detail}"
        super().__init__(msg, pointer)


class GrammarError(SDKError, ValueError):
    """A Lark grammar the engine cannot compile (syntax, unsupported construct, left recursion)."""


class RegexError(GrammarError):
    """A regular expression outside the supported dialect, or invalid."""


class TooComplexError(GrammarError):
    """Compilation or matching exceeded a resource cap (automaton states, stack depth, ...)."""


class MatcherError(SDKError):
    """Base class of run-time matcher errors."""


class TokenRejectedError(MatcherError):
    """`advance` was given a token the grammar does not allow at this point."""


class NoValidTokenError(MatcherError):
    """No token can continue the output; raised instead of producing an all -inf mask."""


class TokenizerError(SDKError):
    """A tokenizer could not be indexed or loaded."""


class ToolDefinitionError(SDKError, TypeError):
    """A function or model cannot become a tool; raised when the tool is defined.

    Attributes:
        function: the function, model or tool name at fault.
        parameter: the parameter at fault, when one is (else None).
    """

    def __init__(
        self, message: str, *, function: str | None = None, parameter: str | None = None
    ) -> None:
        self.function = function
        self.parameter = parameter
        super().__init__(message)


# ---------------------------------------------------------------- errors of an agent run


@dataclass(frozen=True)
class FailedAttempt:
    """One rejected tool call or final output: what the model wrote and why it was refused.

    Attributes:
        tool_name: the tool called; None for the final output (`output_type`) or a reply
            `max_tokens` cut.
        raw: the arguments or output JSON as generated.
        error: the feedback that was sent back to the model.
        step: the model turn it happened in.
    """

    tool_name: str | None  # None for the final output (`output_type`)
    raw: str  # the arguments / output JSON as generated
    error: str  # the feedback that was sent back to the model
    step: int


class AgentRunError(SDKError):
    """Base of run-time agent failures: `messages` is the transcript up to the failure.

    Attributes:
        messages: the transcript up to the failure.
        raw_output: the model's last raw output, when there was one.
        tool_calls: raised out of a run, every call the run made, with its arguments,
            result or error.
        usage: raised out of a run, its `Usage` (tokens, steps, retries); None otherwise.
    """

    def __init__(
        self,
        message: str,
        *,
        messages: list[Message] | None = None,
        raw_output: str | None = None,
    ) -> None:
        self.messages: list[Message] = list(messages or [])
        self.raw_output = raw_output
        self.tool_calls: list[ToolCall] = []
        self.usage: Usage | None = None
        super().__init__(message)


class UnexpectedModelBehavior(AgentRunError):
    """The model produced something the run cannot use (a rejected token, an unparsable call)."""


class RetriesExhausted(UnexpectedModelBehavior):
    """A tool's arguments (or the final output) failed validation more often than allowed.

    Attributes:
        attempts: every failed attempt of the run (`FailedAttempt`), oldest first;
            `raw_output` is the last one's text.
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
    """`max_tokens` ran out inside a tool call or a structured output, or a value there ran
    away (the same few tokens over and over, stopped early): `partial_text` has it.

    Attributes:
        partial_text: the cut turn's text (also `raw_output`).
        runaway: the text the runaway value repeated ("" when `max_tokens` ran out).
    """

    def __init__(
        self,
        message: str,
        *,
        partial_text: str,
        messages: list[Message] | None = None,
        runaway: str = "",
    ) -> None:
        self.partial_text = partial_text
        self.runaway = runaway
        super().__init__(message, messages=messages, raw_output=partial_text)


class ToolNotOffered(UnexpectedModelBehavior):
    """The model called a tool that was not offered (impossible under the turn grammar).

    Attributes:
        tool_name: the name it called.
    """

    def __init__(self, tool_name: str, **kwargs: Any) -> None:
        self.tool_name = tool_name
        super().__init__(f"the model called {tool_name!r}, which was not offered", **kwargs)


class StepLimitExceeded(AgentRunError):
    """The run needed more model turns than `max_steps` allows."""


class UsageLimitExceeded(AgentRunError):
    """The run reached one of its `UsageLimits` (tokens, tool calls) and was stopped."""


class ApprovalRequired(AgentRunError):
    """Not a failure: the run stopped at calls a person must approve (`@tool(requires_approval=
    True)` or the run's `requires_approval`). `pending` holds them, validated, with their ids;
    `messages` is the transcript (store it as JSON: `[m.to_dict() for m in messages]`).
    Resume with `agent.run(message_history=messages, approvals={id: True | False |
    ToolDenied(...) | ToolReturn(...)})`.

    Attributes:
        pending: the calls awaiting a decision (`ToolCall`s with validated `args`; their
            `id` is the key in `approvals`).
    """

    def __init__(self, pending: list[ToolCall], **kwargs: Any) -> None:
        self.pending = list(pending)
        names = ", ".join(f"{c.name} ({c.id})" for c in pending)
        super().__init__(f"waiting for approval of {len(pending)} call(s): {names}", **kwargs)


class ContextLengthError(AgentRunError):
    """The prompt does not fit the model's context window (checked before generating):
    `prompt_tokens` against `context_length`. Shorten the history
    (`Agent(history_processors=[keep_last(...)])`) or the tools' descriptions.

    Attributes:
        prompt_tokens: the prompt's length in tokens.
        context_length: the model's context window in tokens.
    """

    def __init__(self, prompt_tokens: int, context_length: int, **kwargs: Any) -> None:
        self.prompt_tokens = prompt_tokens
        self.context_length = context_length
        super().__init__(
            f"the prompt is {prompt_tokens:,} tokens and the model's context window is "
            f"{context_length:,}: shorten the conversation (history_processors=[keep_last(n)]) "
            "or the tools' descriptions",
            **kwargs,
        )


class ToolExecutionError(AgentRunError):
    """A tool raised (with `tool_errors="raise"`); the original exception is `__cause__`.

    Attributes:
        tool_name: the tool that raised.
    """

    def __init__(self, tool_name: str, message: str, **kwargs: Any) -> None:
        self.tool_name = tool_name
        super().__init__(message, **kwargs)


# ------------------------------------------------------------------ raised where they happen
# (each is re-exported by the module that raises it, where it was defined before)


class ModelRetry(Exception):
    """Raised by a tool to send `message` back to the model and ask it to call again.

    For failures the model can fix (an unknown city, a date in the past) where a plain
    exception would end the run.

    Attributes:
        message: the feedback the model gets.
    """

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(message)


class ModelLoadError(SDKError):
    """An embedded or local model could not be found, converted or loaded."""


class LocalModelError(SDKError):
    """A local model's runtime failed while running a turn (llama.cpp's `llama_decode`
    returned an error): not the model's output, so no retry can fix it."""


class RemoteModelError(AgentRunError):
    """The server failed: an HTTP error status, an unreadable reply, or a transport error
    after `max_retries` retries.

    Attributes:
        status_code: the last HTTP reply's status, if any.
        body: the last HTTP reply's body, if any.
    """

    def __init__(
        self, message: str, *, status_code: int | None = None, body: str | None = None
    ) -> None:
        self.status_code = status_code
        self.body = body
        super().__init__(message)


class RemoteTimeoutError(RemoteModelError):
    """The server did not answer within `timeout` seconds, `max_retries + 1` times."""


class MCPToolError(Exception):
    """The server reported that a tool call failed (`isError`); the text goes back to the
    model like any tool exception (`Agent(tool_errors=...)`)."""


class TurnCancelled(Exception):
    """The turn's run was cancelled (raised in its worker thread, where nobody awaits it)."""
