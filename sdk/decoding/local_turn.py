"""What a local model's turn runs on: the decoding layer owns the matcher.

The agent decides what a turn may contain (its `TurnGrammar`, its `CallGate`); `open_turn`
turns that into what `generate_turn` needs: the vocabulary index with the format's control
tokens spelled as text, the grammar's `Matcher`, and the backend's session over the rendered
prompt. It also reads the prompt's end: a template that already opened the reasoning span
(R1-style `<think>\\n` in the generation prompt) makes the turn start inside it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from sdk.decoding._markers import format_index
from sdk.decoding.formats import format_traits

if TYPE_CHECKING:
    from sdk.backends import ModelBackend
    from sdk.decoding._gate import CallGate
    from sdk.decoding.generate import DecodeSession, TurnRequest
    from sdk.decoding.turn_grammar import TurnGrammar
    from sdk.engine.matcher import Matcher
    from sdk.engine.tokenizer import TokenizerIndex

__all__ = ["LocalTurn", "open_turn", "reasoning_start"]


def reasoning_start(fmt: object) -> str:
    """The format's reasoning start marker (`<think>`), or "" for formats without one."""
    marks = format_traits(fmt).reasoning
    return str(marks[0]) if marks else ""


@dataclass(frozen=True)
class LocalTurn:
    session: DecodeSession
    matcher: Matcher | None  # None: an unconstrained turn
    index: TokenizerIndex
    gate: CallGate | None
    reasoning_opened: bool  # the prompt ended inside the format's reasoning span


def open_turn(
    backend: ModelBackend, request: TurnRequest, grammar: TurnGrammar, gate: CallGate | None
) -> LocalTurn:
    """The turn's matcher, index and session (the grammar is matched before the backend is
    asked for a session, so a grammar error leaves the backend untouched)."""
    from sdk.engine.matcher import Matcher

    index = format_index(backend.index, backend.tokenizer, request.fmt)
    matcher = Matcher(grammar.compiled, index) if grammar.compiled else None
    session = backend.begin_turn(request)
    start = reasoning_start(request.fmt)
    opened = False
    if start:
        tail = index.decode_bytes(list(session.prompt_ids)[-8:]).decode("utf-8", "replace")
        opened = tail.rstrip().endswith(start)
    if gate is not None and opened:
        gate = replace(gate, reasoning_opened=True)
    return LocalTurn(session, matcher, index, gate, opened)
