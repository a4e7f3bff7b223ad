"""What `Agent.run_stream` yields while a run is under way.

A turn streams as it is generated: `TextDelta`s for the text outside calls, and for each call
`CallStarted` (once its tool name is complete) then `ArgsDelta`s (the arguments' JSON text as it
is written, with everything parsed so far). Calls run only once complete and validated:
`CallValidated` then `ToolResult`, or `Retry` (the call, or a typed final answer, failed to
parse or validate, or its tool raised `ModelRetry`: the error goes back to the model). `CallDropped` withdraws a call the decoding loop cut away (a repeated call, see
`Agent(drop_repeated_calls=...)`); `TextWithdrawn` takes back the end of a turn's text where
decoding backed out of a dead end. The last event is `FinalResult` with the `RunResult`; a run
that fails raises its error from the iterator instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sdk.result import RunResult, ToolCall

__all__ = [
    "ArgsDelta",
    "CallDropped",
    "CallStarted",
    "CallValidated",
    "FinalResult",
    "Retry",
    "StreamEvent",
    "TextDelta",
    "TextWithdrawn",
    "ToolResult",
]


@dataclass(frozen=True)
class TextDelta:
    """Text of the turn outside its calls (the whole reply for a typed output: its JSON).

    Attributes:
        step: the model turn (1-based) the text belongs to.
        text: the new text, to append to what came before.
    """

    step: int
    text: str


@dataclass(frozen=True)
class TextWithdrawn:
    """The last `chars` characters of the turn's streamed text are taken back: decoding backed
    out of free text that led nowhere (a prefix only JSON or a call could continue, or a run of
    blanks; "Dead ends" on the tool-call-span concepts page) and writes on from before them.

    Attributes:
        step: the model turn (1-based).
        chars: how many characters to remove from the end of the step's text so far.
    """

    step: int
    chars: int


@dataclass(frozen=True)
class CallStarted:
    """The `index`-th call of the turn names `name` (its arguments follow).

    Attributes:
        step: the model turn (1-based).
        index: the call's position in the turn (0-based): the key that ties this call's
            `ArgsDelta`s and `CallDropped` together.
        name: the tool called.
    """

    step: int
    index: int
    name: str


@dataclass(frozen=True)
class ArgsDelta:
    """More of a call's arguments JSON; `partial` is everything parsed so far (a dict that
    only grows: an unfinished string or number is left out until it is complete).

    Attributes:
        step: the model turn (1-based).
        index: the call's position in the turn (as in its `CallStarted`).
        delta: the new JSON text, to append to what came before.
        partial: the arguments parsed so far (not validated; left out of `==`).
    """

    step: int
    index: int
    delta: str
    partial: Any = field(default=None, compare=False)


@dataclass(frozen=True)
class CallDropped:
    """The `index`-th call of the turn was cut away before it ran (it repeated an earlier one).

    Attributes:
        step: the model turn (1-based).
        index: the dropped call's position in the turn (as in its `CallStarted`).
    """

    step: int
    index: int


@dataclass(frozen=True)
class CallValidated:
    """A call parsed and validated; it runs next. `call.args` is the arguments object.

    Attributes:
        step: the model turn (1-based).
        call: the call, as it will appear in `RunResult.tool_calls` (its `result` is set
            once the tool has run).
    """

    step: int
    call: ToolCall


@dataclass(frozen=True)
class Retry:
    """A call (`call`; None for a typed final answer or a reply cut by `max_tokens`) did not
    parse or validate, or its tool raised `ModelRetry`, or `max_tokens` cut a value: `error` is
    the feedback the model gets before it tries again.

    Attributes:
        step: the model turn (1-based) that failed.
        call: the failed call (None for a typed final answer or a reply cut by
            `max_tokens`).
        error: the feedback sent back to the model.
    """

    step: int
    call: ToolCall | None
    error: str


@dataclass(frozen=True)
class ToolResult:
    """What a tool returned, as the text the model is shown.

    Attributes:
        step: the model turn (1-based) the call was made in; 0 for a call carried out from
            `approvals=` when a run resumes.
        call_id: the call's id (`ToolCall.id`).
        name: the tool's name.
        content: the result as the text the model is shown (the tool message's content).
    """

    step: int
    call_id: str
    name: str
    content: str


@dataclass(frozen=True)
class FinalResult:
    """The run is over: the last event.

    Attributes:
        result: what `Agent.run` returns for the same run.
    """

    result: RunResult[Any]


StreamEvent = (
    TextDelta
    | TextWithdrawn
    | CallStarted
    | ArgsDelta
    | CallDropped
    | CallValidated
    | Retry
    | ToolResult
    | FinalResult
)
"""Any of the events above: what `Agent.run_stream` and `Agent.run_stream_sync` yield."""
