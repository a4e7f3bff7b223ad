"""What a run returns: the typed output, every tool call with typed arguments, usage."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Generic, TypeVar

from sdk.messages import Message

__all__ = ["RunResult", "ToolCall", "Usage"]

OutputT = TypeVar("OutputT")


@dataclass
class ToolCall:
    """One tool call the model made, after validation.

    Attributes:
        name: the tool's name.
        args: the tool's arguments model instance, validated (None when validation failed:
            see `error`).
        raw: the arguments JSON exactly as the model generated it.
        id: the call's id (`call_<turn>_<i>`), the `tool_call_id` of the tool message that
            answers it.
        result: what the tool returned (for a repeated call, the earlier call's result; for
            an approval answered with `ToolReturn`, its value).
        error: None when the call ran; otherwise why not: the validation feedback or
            `ModelRetry` message sent back to the model, the tool's exception
            (`"ValueError: ..."`, with `tool_errors="return"`), or `"denied: ..."` for a call
            a person did not approve.
        step: the model turn (1-based) the call was made in; 0 for a call carried out from
            `approvals=` when a run resumes.
    """

    name: str
    args: Any  # typed Any: each tool has its own arguments model
    raw: str
    id: str = ""
    result: Any = None
    error: str | None = None
    step: int = 0

    @property
    def ok(self) -> bool:
        """True when the call validated and ran (`error` is None)."""
        return self.error is None

    def __repr__(self) -> str:
        args = self.args if self.args is not None else self.raw
        tail = f"error={self.error!r}" if self.error is not None else f"result={self.result!r}"
        return f"ToolCall({self.name}, args={args!r}, {tail})"


@dataclass
class Usage:
    """Token and time accounting over a run (summed over its model turns).

    Attributes:
        prompt_tokens: prompt tokens, each turn's whole prompt counted.
        completion_tokens: every generated token, the forced ones included.
        forced_tokens: the part of `completion_tokens` the grammar dictated (appended without
            sampling, several in one forward pass).
        forward_passes: the model's forward passes (fewer than tokens where forced tokens
            go in together).
        cached_prompt_tokens: prompt tokens reused from an earlier turn's KV cache instead
            of computed again (for a remote server: the `cached_tokens` it reports).
        retries: failed attempts sent back to the model to try again (a call or an output
            that failed validation, a `ModelRetry`, a value `max_tokens` cut).
        steps: model turns.
        repeated_calls: calls that repeated an earlier one: cut away within a turn, or
            answered from the earlier result in a later turn (not run again).
        cut_calls: calls `max_tokens` cut (the complete calls before them were kept).
        dead_ends: times a turn's free text backed out of a dead end (a prefix only JSON or a
            call could continue, or a run of blanks) and wrote on from where it began.
        exact_attempts: draws tried by turns sampled with `decoding="exact"`, the kept ones
            included (0: no turn was): the attempts beyond one per turn are the price of
            exactness.
        loosened_turns: remote turns whose server-side grammar was looser than the turn
            grammar, because the server's grammar format cannot express one of its constructs
            (logged at export, see `OpenAIChatModel`); the agent's own parse and validation
            checked those replies, and retried them where they failed.
        mask_time_s: seconds spent computing token masks and advancing matchers.
        generation_time_s: seconds spent generating (for a remote server: waiting for its
            replies).
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    forced_tokens: int = 0
    forward_passes: int = 0
    cached_prompt_tokens: int = 0
    retries: int = 0
    steps: int = 0
    # calls that repeated an earlier one: cut away within a turn, or answered from the
    # earlier result in a later turn (not run again)
    repeated_calls: int = 0
    cut_calls: int = 0  # calls max_tokens cut (the complete calls before them were kept)
    dead_ends: int = 0  # free text backed out of (`sdk.decoding._retreat`)
    exact_attempts: int = 0  # draws tried by exactly sampled turns, the kept ones included
    loosened_turns: int = 0  # remote turns sent a looser grammar than theirs (logged)
    mask_time_s: float = 0.0
    generation_time_s: float = 0.0

    @property
    def total_tokens(self) -> int:
        """`prompt_tokens + completion_tokens`."""
        return self.prompt_tokens + self.completion_tokens

    def add(self, other: Usage) -> None:
        """Add `other`'s counts to this one's, field by field (in place).

        Args:
            other: the usage to add (another turn's, another run's).
        """
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


@dataclass
class RunResult(Generic[OutputT]):
    """The outcome of `Agent.run`: `output` is a `str`, or an instance of the `output_type`.

    `messages` is the whole conversation (system prompt and earlier history included): pass it
    as `message_history=` to continue. `new_messages()` are those this run added.

    Attributes:
        output: the final answer: the reply's text, or the `output_type` instance validated
            from its JSON (`Agent.plan_sync`: the turn's raw text).
        messages: the whole conversation, the system message and the history passed in
            included; what `all_messages()` returns.
        tool_calls: every call of this run in order, with its validated `args` and its
            `result`, or its `error` (failed, retried and repeated calls included).
        usage: tokens, turns, retries and time, summed over this run's turns.
        finish_reason: how the final turn ended: "stop", or "length" when `max_tokens` cut
            it, or its text ran away (one phrase over and over: stopped there, not at
            `max_tokens`); a text answer is returned as cut, a cut call or typed output never
            is.
        raw_output: the final turn's text exactly as generated (call markup and reasoning
            included).
        reasoning: the final turn's reasoning span (`<think>...</think>`, markers included)
            for reasoning models; "" otherwise. Earlier turns keep theirs in `messages`.
    """

    output: OutputT
    messages: list[Message]
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    finish_reason: str = "stop"
    raw_output: str = ""
    # The final turn's reasoning span (`<think>...</think>`, markers included) for reasoning
    # models; "" otherwise. Earlier turns keep theirs in `messages`.
    reasoning: str = ""
    _new_from: int = 0

    def all_messages(self) -> list[Message]:
        """The whole conversation (a copy of `messages`): pass it as `message_history=` to
        continue it, or store it (`Message.to_dict`)."""
        return list(self.messages)

    def new_messages(self) -> list[Message]:
        """The messages this run added: its prompt (when one was given), the model's turns
        and the tool results; not the system message or the history passed in."""
        return list(self.messages[self._new_from :])
