"""`Matcher`: the per-sequence state over a shared `CompiledGrammar` and tokenizer index."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import NoValidTokenError, TokenRejectedError
from . import _vocab
from ._owner import OWNER
from ._runtime import Runtime, State
from .logits import Logits, keep_only

if TYPE_CHECKING:
    from .grammar import CompiledGrammar

_lock = threading.Lock()


def _runtime(grammar: CompiledGrammar, index: Any) -> Runtime:
    """The grammar's tables for this vocabulary, in the owner's table keyed weakly by grammar
    (`Owner.runtimes`): they die with the grammar, as a runtime holds the grammar's parts and
    never the grammar."""
    vocab = _vocab.vocab_of(index)
    with _lock:
        per_vocab = OWNER.runtimes.get(grammar)
        if per_vocab is None:
            per_vocab = OWNER.runtimes[grammar] = {}
        rt = per_vocab.get(id(vocab))
        if rt is None or rt.vocab is not vocab:
            rt = Runtime(grammar, vocab)
            per_vocab[id(vocab)] = rt
            _bound_memos()
        return rt


#: Memo entries all live runtimes may hold together, per byte of the cache budget: a
#: quarter of it at ~100 bytes an entry (64 MB at the default 256 MiB).
_MEMO_ENTRIES_PER_BYTE = 1 / 400


def _bound_memos() -> None:
    """Empty the oldest grammars' runtime memos until all together fit their share of the
    budget. Each runtime caps its own memos, but a runtime lives as long as its grammar, and
    the turn-grammar table keeps hundreds: at 152k tokens one runtime's step memo reached
    2 MB in one BFCL call, and fifty tool sets added 100 MB nothing counted."""
    limit = int(OWNER.caches.budget * _MEMO_ENTRIES_PER_BYTE)
    runtimes = [rt for per_vocab in list(OWNER.runtimes.values()) for rt in per_vocab.values()]
    total = sum(rt.memo_entries() for rt in runtimes)
    for rt in runtimes:  # oldest grammar first
        if total <= limit:
            break
        total -= rt.clear_memos()


class Matcher:
    """Which tokens may come next, exactly; cheap to create, fork and roll back.

    A token is allowed iff some continuation after it completes a string of the grammar's
    language; end-of-sequence ids are allowed iff the output so far is complete.
    """

    def __init__(self, grammar: CompiledGrammar, index: Any) -> None:
        self.grammar = grammar
        self.index = index
        self._rt = _runtime(grammar, index)
        self._history: list[State] = [self._rt.initial]
        self._tokens: list[int] = []

    # -- state

    @property
    def _state(self) -> State:
        return self._history[-1]

    @property
    def vocab_size(self) -> int:
        return self._rt.vocab.size

    @property
    def tokens(self) -> tuple[int, ...]:
        """Tokens accepted so far."""
        return tuple(self._tokens)

    def is_accepting(self) -> bool:
        """The output so far is a complete string of the language (EOS is allowed)."""
        return self._rt.accepting(self._state)

    def is_terminated(self) -> bool:
        """Complete and nothing can follow: only EOS is allowed."""
        return self.is_accepting() and not self._any_token()

    def _any_token(self) -> bool:
        m = self._rt.state_mask(self._state) & ~self._rt.eos_bits
        return bool(m.any())

    # -- masks

    def packed_mask(self) -> np.ndarray:
        """The allowed set as a little-endian packed bitmask (uint8, `ceil(vocab_size/8)` bytes).

        Shared with the cache: do not modify it.
        """
        state = self._state
        rt = self._rt
        if not state and not (len(self._history) == 1 and rt.initial_accepts):
            raise NoValidTokenError("no token can continue the output (the output has ended)")
        if not rt.has_token(state):
            raise NoValidTokenError("no token can continue the output")
        return rt.state_mask(state)

    def mask(self) -> np.ndarray:
        """The allowed set as a bool array of length `vocab_size`."""
        packed = self.packed_mask()
        return np.unpackbits(packed, count=self.vocab_size, bitorder="little").view(bool)

    def fill_bitmask(self, out: np.ndarray) -> None:
        """Write the mask into an int32 array of `ceil(vocab_size/32)` words (XGrammar layout)."""
        packed = self.packed_mask()
        words = out.view(np.uint8)
        words[: len(packed)] = packed
        words[len(packed) :] = 0

    def is_allowed(self, token_id: int) -> bool:
        if token_id < 0 or token_id >= self.vocab_size:
            return False
        packed = self._rt.state_mask(self._state)
        return bool((packed[token_id >> 3] >> (token_id & 7)) & 1)

    def apply_to_logits(self, logits: Logits) -> Logits:
        """Set forbidden logits (last dimension) to -inf in place; padding ids are forbidden.
        `logits`: a torch tensor (any device) or a NumPy array."""
        keep_only(logits, self.mask())
        return logits

    # -- moves

    def advance(self, token_id: int) -> None:
        """Consume one token; raises `TokenRejectedError` (state unchanged) if not allowed."""
        rt = self._rt
        if token_id in rt.vocab.eos_ids:
            if not self.is_accepting():
                raise TokenRejectedError(f"end of sequence (token {token_id}) before completion")
            self._history.append(0)  # the dead state
            self._tokens.append(token_id)
            return
        nxt = rt.advance(self._state, token_id)
        if not nxt:
            raise TokenRejectedError(f"token {token_id} is not allowed here")
        self._history.append(nxt)
        self._tokens.append(token_id)

    def try_advance(self, token_id: int) -> bool:
        try:
            self.advance(token_id)
        except TokenRejectedError:
            return False
        return True

    def advance_bytes(self, data: bytes) -> None:
        """Consume raw bytes (e.g. a forced continuation); not recorded as a token."""
        nxt = self._rt.feed(self._state, data)
        if not nxt:
            raise TokenRejectedError(f"bytes {data!r} are not allowed here")
        self._history.append(nxt)
        self._tokens.append(-1)

    def rollback(self, n: int = 1) -> None:
        if n < 0 or n > len(self._tokens):
            raise ValueError(f"cannot roll back {n} of {len(self._tokens)} tokens")
        for _ in range(n):
            self._history.pop()
            self._tokens.pop()

    def reset(self) -> None:
        del self._history[1:]
        self._tokens.clear()

    def fork(self) -> Matcher:
        """An independent copy sharing the compiled tables."""
        other = Matcher.__new__(Matcher)
        other.grammar = self.grammar
        other.index = self.index
        other._rt = self._rt
        other._history = list(self._history)
        other._tokens = list(self._tokens)
        return other

    def forced_bytes(self) -> bytes:
        """The bytes every valid continuation starts with (empty where there is a choice)."""
        return self._rt.forced_bytes(self._state)
