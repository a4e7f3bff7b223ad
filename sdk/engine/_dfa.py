"""The table DFA every engine part reads: `trans[state, byte]`, state 0 dead, state 1 the start.

Every state but 0 can still reach an accepting state (trimmed), so "live" means "can complete",
which is what exact masks need. Tables too big to hold are `_lazy.LazyDfa`s instead.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

_serial = itertools.count(1)


def next_serial() -> int:
    """A process-unique id for an automaton (table or lazy): the key of its cached walks."""
    return next(_serial)


def empty_dfa() -> Dfa:
    """The empty language: a start state with no moves that does not accept."""
    return Dfa(np.zeros((2, 256), dtype=np.int32), np.zeros(2, dtype=bool))


@dataclass(eq=False)
class Dfa:
    trans: np.ndarray  # int32 [n_states, 256]; row 0 is the dead state
    accepting: np.ndarray  # bool [n_states]
    serial: int = field(default_factory=next_serial)

    @property
    def n_states(self) -> int:
        return int(self.trans.shape[0])

    @cached_property
    def chains(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per state, how many bytes (or characters) of which set surely keep it alive
        (`_trie.chains`): trie
        walks take a subtree whole where it fits."""
        from ._trie import chains

        return chains(self.trans)

    @property
    def first(self) -> np.ndarray:
        """bool [256]: the bytes the start state takes."""
        return np.asarray(self.trans[1] != 0)

    @property
    def is_empty(self) -> bool:
        """The empty language (trimmed DFAs: the start is then dead-ended and non-accepting)."""
        return not self.accepting[1] and not self.trans[1].any()

    @property
    def nullable(self) -> bool:
        return bool(self.accepting[1])

    def matches(self, data: bytes) -> bool:
        s = 1
        for b in data:
            s = int(self.trans[s, b])
            if s == 0:
                return False
        return bool(self.accepting[s])

    def without_empty(self) -> Dfa:
        """The same language minus the empty string: a fresh start state, not accepting, with
        the old start's moves. Every state stays live unless the old start had none (the
        language was just the empty string); the old start may become unreachable, which is
        harmless."""
        if not self.nullable:
            return self
        if not self.trans[1].any():
            return empty_dfa()
        trans = np.concatenate([self.trans[:1], self.trans[1:2], self.trans[1:]], axis=0)
        trans = np.where(trans > 0, trans + 1, 0).astype(np.int32)
        acc = np.concatenate([[False, False], self.accepting[1:]])
        return Dfa(np.ascontiguousarray(trans), acc)
