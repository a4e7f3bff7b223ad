"""Free text the mask has led into a dead end: back out of it instead of writing junk.

An answer next to tools may not open as JSON (`turn_grammar._answer_regex`: such text is a
call in disguise), but the rule's lookahead rules a start out only once it is complete. A
tool-trained model that wants to write a call anyway first writes a prefix only JSON can
continue, then finds every token it wants masked: Qwen2.5-Coder-0.5B, asked for an answer
after a tool result, writes "```json\\n[\\n", its `{` is masked, and greedy decoding goes on
with what is left: spaces until `max_tokens` (500 spaces and 41 s in a new-user app), or, its
`"` masked, `'https://api.weatherapi.com/...'` as the answer (the mask left the model 0.6 % of
its own mass after "```json\\n", 0.04 % by the URL). That is the masked sampler's bias
(`sdk.decoding.exact`) at its worst: the prefix has all but no valid mass left, yet each step
renormalizes what remains.

So free text is a dead end where it has written `BLANK_RUN` whitespace-only tokens in a row,
or, in turns where no call may open (`tool_choice="none"`, the agent's answer turns), where a
step's mask leaves the model less than `DEAD_SHARE` of its own probability and the pick among
what is left is more text. A pick that ends the text (EOS) or opens a call is no dead end: an
answer that is complete when the model wanted to call again stays as it is. Where calls may
open, a prefix only JSON continues is the model writing its call untagged, which the agent
takes as the call it names (`disguised_call`); backing out of it there lost three of the loop
bench's calls.

At a dead end the turn goes back to where that text began (its first non-blank token, at the
turn's start or after its last call) and bans the token it chose there, at most
`MAX_RETREATS` times; a blank run after that stops the turn as a runaway
(`TurnOutput.runaway`, a "length" finish). Text the grammar allows as the model writes it is
untouched, and legitimate text does not write 32 blank tokens in a row (tokenizers merge runs
of spaces).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from sdk.engine.logits import Logits, copy, fill_neginf

if TYPE_CHECKING:
    from sdk.decoding._gate import GateRun
    from sdk.engine.matcher import Matcher
    from sdk.engine.tokenizer import TokenizerIndex

BLANK_RUN = 32
"""Whitespace-only tokens in a row, in free text, that make a dead end."""
MAX_RETREATS = 3
"""Tokens banned at one place before the turn gives up (and stops, at a blank run)."""
DEAD_SHARE = math.log(0.01)
"""A step of free text where the mask leaves less of the model's own mass than this (log) is
a dead end too: the model is writing something the grammar rules out."""

_WS = b" \t\r\n"


@dataclass
class _Origin:
    """Where the free text began: what the turn looked like just before its first
    non-blank token was chosen."""

    logits: Logits  # the model's logits there, before any mask
    n_out: int  # tokens of the turn up to there (all fed)
    n_matcher: int  # the matcher's steps up to there
    steer: GateRun | None  # the gate's state there


@dataclass
class Retreat:
    """One turn's dead-end watch (`_Turn` calls `at_step` before each pick, `chose` after
    it, `blank` with each step's tokens)."""

    index: TokenizerIndex
    origin: _Origin | None = None
    banned: list[int] = field(default_factory=list)  # may not open this free text
    frozen: bool = False  # the origin is past: a non-blank token was chosen there
    blank_run: int = 0
    retreats: int = 0

    def at_step(
        self, logits: Logits, n_out: int, matcher: Matcher | None, steer: GateRun | None
    ) -> None:
        """Before a pick in free text: while the text so far is blank, this is the origin."""
        if not self.frozen:
            n_matcher = len(matcher.tokens) if matcher is not None else 0
            self.origin = _Origin(
                copy(logits), n_out, n_matcher, steer.snapshot() if steer else None
            )

    def ban(self, logits: Logits) -> None:
        """While the free text is still blank: mask the tokens that opened it into a dead end
        before (after the grammar's mask and the gate, which decided on the model's own mass)."""
        if self.banned and not self.frozen:
            where = np.zeros(logits.shape[-1], dtype=bool)
            where[[t for t in self.banned if t < len(where)]] = True
            fill_neginf(logits, where)

    def chose(self, tid: int) -> None:
        """A token was picked in free text: a non-blank one fixes the origin."""
        if not self.frozen and not _is_blank(self.index, tid):
            self.frozen = True

    def reset(self) -> None:
        """A call opened: the free text after it has its own origin."""
        self.origin, self.frozen, self.blank_run, self.banned = None, False, 0, []

    def blank(self, feed: list[int]) -> bool:
        """Account for one step's tokens in free text; True at a dead end."""
        if all(_is_blank(self.index, t) for t in feed):
            self.blank_run += len(feed)
        else:
            self.blank_run = 0
        return self.blank_run >= BLANK_RUN

    def can_back(self, n_out: int) -> bool:
        """Is there free text to back out of, and a try left?"""
        origin = self.origin
        return (
            origin is not None
            and self.frozen
            and self.retreats < MAX_RETREATS
            and n_out > origin.n_out
        )

    def back(self, out: list[int]) -> _Origin | None:
        """The origin to go back to, with the token that led away from it banned; None when
        there is none (`can_back`)."""
        origin = self.origin
        if origin is None or not self.can_back(len(out)):
            return None
        self.banned.append(out[origin.n_out])
        self.retreats += 1
        self.frozen, self.blank_run = False, 0
        return origin

    @staticmethod
    def restore(origin: _Origin) -> tuple[Logits, GateRun | None]:
        """A fresh copy of the origin's logits and gate state (the logits are masked in
        place again)."""
        return copy(origin.logits), (origin.steer.snapshot() if origin.steer else None)


def _is_blank(index: TokenizerIndex, tid: int) -> bool:
    tb = index.token_bytes
    piece = tb[tid] if 0 <= tid < len(tb) else b""
    return bool(piece) and not piece.strip(_WS)
