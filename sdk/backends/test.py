"""Scripted models for testing agents without running a language model.

`TestModel(script=[...])` replies with scripted turns; `FunctionModel(fn)` computes each reply
from the conversation. Neither bypasses anything: each reply is tokenized with a REAL tokenizer
(SmolLM2's by default) and fed token by token through the same decoding loop, turn grammar and
matcher as a real model, as if the model had picked exactly those tokens. So a scripted call
with malformed JSON or an unoffered tool is rejected by the grammar just as a real model would
be stopped (`UnexpectedModelBehavior`), and fast-forwarded bytes must agree with the script.

Write calls with `ToolCallScript(name, args)`: it renders them the way the turn grammar wants
(the format's call style, `json.dumps` spacing by default). A string reply is used verbatim.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sdk.backends.chat_template import encode_prompt, index_for, render_prompt
from sdk.decoding import format_index
from sdk.decoding.formats import format_traits
from sdk.decoding.generate import TurnRequest
from sdk.errors import UnexpectedModelBehavior

if TYPE_CHECKING:
    import torch

    from sdk.decoding.formats import ToolCallFormat
    from sdk.engine.tokenizer import TokenizerIndex
    from sdk.messages import Message

__all__ = ["FunctionModel", "Reply", "TestModel", "ToolCallScript"]


@dataclass(frozen=True)
class ToolCallScript:
    """A scripted tool call; `args` is a dict, or raw JSON text (to script malformed calls)."""

    name: str
    args: Mapping[str, Any] | str = field(default_factory=dict)


Reply = str | ToolCallScript | Sequence[str | ToolCallScript]

_RAW = "\x00sdk-raw\x00"


def render_reply(reply: Reply, fmt: ToolCallFormat) -> str:
    """The text a scripted reply stands for (parts joined by newlines; consecutive calls as
    the format writes several calls, `render_calls`, where it has that)."""
    if isinstance(reply, str):
        return reply
    if isinstance(reply, ToolCallScript):
        reply = [reply]
    pieces: list[str] = []
    group: list[ToolCallScript] = []
    for part in [*reply, ""]:
        if isinstance(part, ToolCallScript):
            group.append(part)
            continue
        if group:
            pieces.append(_render_calls(group, fmt))
            group = []
        if part:
            pieces.append(part)
    return "\n".join(pieces)


def _render_calls(calls: Sequence[ToolCallScript], fmt: ToolCallFormat) -> str:
    marker = json.dumps(_RAW)
    raw: dict[int, str] = {}
    items: list[tuple[str, Any]] = []
    for i, c in enumerate(calls):
        if isinstance(c.args, str):
            raw[i] = c.args
            items.append((c.name, _RAW))
        else:
            items.append((c.name, dict(c.args)))
    several = format_traits(fmt).render_calls
    if several is not None:
        text = str(several(items))
    else:
        text = "\n".join(fmt.render_call(n, a) for n, a in items)
    for i in sorted(raw):  # raw argument texts, in order
        text = text.replace(marker, raw[i], 1)
    return text


class TestModel:
    """Replies with `script` items in order, one per assistant turn.

    `requests` records every turn's `TurnRequest` and `prompts` its rendered prompt, so tests
    can assert on what the model was shown.
    """

    __test__ = False  # not a pytest test class

    def __init__(
        self,
        script: Iterable[Reply] = (),
        *,
        tokenizer: Any = None,
    ) -> None:
        self._script = list(script)
        self._pos = 0
        if tokenizer is None:
            from sdk.backends.embedded import load_tokenizer

            tokenizer = load_tokenizer("smollm2")
        self.tokenizer = tokenizer
        self._index: TokenizerIndex | None = None
        self.requests: list[TurnRequest] = []
        self.prompts: list[str] = []

    @property
    def index(self) -> TokenizerIndex:
        if self._index is None:
            self._index = index_for(self.tokenizer)
        return self._index

    def next_reply(self, request: TurnRequest) -> Reply:
        if self._pos >= len(self._script):
            raise UnexpectedModelBehavior(
                f"TestModel script exhausted after {len(self._script)} replies"
            )
        reply = self._script[self._pos]
        self._pos += 1
        return reply

    def begin_turn(self, request: TurnRequest) -> _ScriptSession:
        reply = self.next_reply(request)
        prompt = render_prompt(self.tokenizer, request)
        self.requests.append(request)
        self.prompts.append(prompt)
        target = render_reply(reply, request.fmt).encode()
        # The format's marker tokens (`[TOOL_CALLS]`) spell their text, as for the matcher.
        index = format_index(self.index, self.tokenizer, request.fmt)
        return _ScriptSession(self, encode_prompt(self.tokenizer, prompt), target, index)


class FunctionModel(TestModel):
    """Replies with `fn(messages, request)` each turn (a `Reply`: text, call(s), or a list)."""

    def __init__(
        self,
        fn: Callable[[list[Message], TurnRequest], Reply],
        *,
        tokenizer: Any = None,
    ) -> None:
        super().__init__((), tokenizer=tokenizer)
        self.fn = fn

    def next_reply(self, request: TurnRequest) -> Reply:
        return self.fn(list(request.messages), request)


class _ScriptSession:
    """Logits that put all mass on the next scripted token (or EOS when the script is done)."""

    def __init__(
        self, owner: TestModel, prompt_ids: list[int], target: bytes, index: TokenizerIndex
    ) -> None:
        self.owner = owner
        self.index = index
        self.prompt_ids = prompt_ids
        self.cached_tokens = 0
        self.target = target
        self.done = b""  # bytes generated so far
        self._fed: list[int] = []
        self._plan: list[int] = []
        self._eos = min(index.eos_ids) if index.eos_ids else 0
        self._size = index.vocab_size

    def _one_hot(self, tid: int) -> torch.Tensor:
        import torch

        logits = torch.full((self._size,), float("-inf"))
        logits[tid] = 0.0
        return logits

    def _next_token(self) -> int:
        if not self.target.startswith(self.done):
            at = next(
                i
                for i, (a, b) in enumerate(zip(self.done, self.target + b"\0", strict=False))
                if a != b
            )
            raise UnexpectedModelBehavior(
                f"scripted reply rejected by the turn grammar: at byte {at} the grammar forced "
                f"{self.done[at : at + 24]!r} where the script has {self.target[at : at + 24]!r}",
                raw_output=self.target.decode("utf-8", "replace"),
            )
        rest = self.target[len(self.done) :]
        if not rest:
            return self._eos
        tb = self.index.token_bytes
        if self._plan and rest.startswith(tb[self._plan[0]]):
            return self._plan[0]
        try:
            text = rest.decode("utf-8")
        except UnicodeDecodeError as exc:
            text = rest[: exc.start].decode("utf-8")
        ids = self.owner.tokenizer.encode(text, add_special_tokens=False) if text else []
        if ids and tb[ids[0]] and rest.startswith(tb[ids[0]]):
            self._plan = list(ids)
            return ids[0]
        self._plan = []
        for tid, piece in enumerate(tb):  # odd bytes: any token spelling a prefix
            if piece and rest.startswith(piece):
                return tid
        raise UnexpectedModelBehavior(f"the tokenizer cannot spell {rest[:20]!r}")

    def prefill(self) -> torch.Tensor:
        return self._one_hot(self._next_token())

    def prefill_with(self, extra: Sequence[int]) -> torch.Tensor:
        return self.feed(extra) if extra else self.prefill()

    def feed(self, ids: Sequence[int]) -> torch.Tensor:
        tb = self.index.token_bytes
        for tid in ids:
            self._fed.append(tid)
            self.done += tb[tid]
            if self._plan and self._plan[0] == tid:
                self._plan.pop(0)
            else:
                self._plan = []
        return self._one_hot(self._next_token())

    def rollback(self, n: int) -> None:
        """Forget the last `n` fed tokens."""
        tb = self.index.token_bytes
        for _ in range(n):
            self.done = self.done[: len(self.done) - len(tb[self._fed.pop()])]
        self._plan = []

    def close(self) -> None:
        return None
