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

    `args` is the tool's arguments model instance (None when validation failed: see `error`);
    `result` what the tool returned; `raw` the arguments JSON exactly as generated.
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
        return self.error is None

    def __repr__(self) -> str:
        args = self.args if self.args is not None else self.raw
        tail = f"error={self.error!r}" if self.error is not None else f"result={self.result!r}"
        return f"ToolCall({self.name}, args={args!r}, {tail})"


@dataclass
class Usage:
    """Token and time accounting over a run (summed over its model turns).

    `completion_tokens` counts every generated token, `forced_tokens` the part the grammar
    dictated (appended without sampling, fed in one forward pass); `mask_time_s` is the time
    spent computing masks and advancing matchers.
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
    mask_time_s: float = 0.0
    generation_time_s: float = 0.0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def add(self, other: Usage) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


@dataclass
class RunResult(Generic[OutputT]):
    """The outcome of `Agent.run`: `output` is a `str`, or an instance of the `output_type`.

    `messages` is the whole conversation (system prompt and earlier history included): pass it
    as `message_history=` to continue. `new_messages()` are those this run added.
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
        return list(self.messages)

    def new_messages(self) -> list[Message]:
        return list(self.messages[self._new_from :])
