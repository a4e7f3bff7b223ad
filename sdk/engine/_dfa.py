"""The table DFA every engine part reads: state 0 dead, state 1 the start.

Bytes that no state tells apart share a column: `table[state, classes[byte]]` is the move.
A hostname automaton of 27,599 states has five classes of bytes, and its table is 0.53 MB
where one column per byte took 28 MB (and the constructions that made it several times that).
Every state but 0 can still reach an accepting state (trimmed), so "live" means "can
complete", which is what exact masks need. Tables too big to hold are `_lazy.LazyDfa`s instead.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from . import _dfa_kernels
from ._cache import BoundedCache

_serial = itertools.count(1)

#: The classes of a table with one column per byte (shared: `is` tells a dense table).
#: Writable like every other class map: numba compiles a kernel apart for a read-only array.
IDENTITY = np.arange(256, dtype=np.uint8)
#: Tables of this many states or more keep one column per byte class; smaller ones one per
#: byte (1 MB at most): working out the classes of every small table cost compile time, and
#: the big tables (formats, length-bounded patterns) are where the memory is.
COMPACT_MIN_STATES = 1024


def next_serial() -> int:
    """A process-unique id for an automaton (table or lazy): the key of its cached walks."""
    return next(_serial)


def empty_dfa() -> Dfa:
    """The empty language: a start state with no moves that does not accept."""
    return Dfa(np.zeros((2, 1), dtype=np.int32), np.zeros(2, dtype=bool), np.zeros(256, np.uint8))


@dataclass(eq=False)
class Dfa:
    """Every column of `table` is the column of some byte. A big table given with one column
    per byte is compacted on construction, whoever built it."""

    table: np.ndarray  # int32 [n_states, n_classes]; row 0 is the dead state
    accepting: np.ndarray  # bool [n_states]
    #: uint8 [256]: the column of every byte (`IDENTITY`: one column per byte)
    classes: np.ndarray = field(default_factory=lambda: IDENTITY)
    serial: int = field(default_factory=next_serial)

    def __post_init__(self) -> None:
        # the compiled kernels take C-ordered int32 tables and bool flags, nothing else
        self.table = np.ascontiguousarray(self.table, dtype=np.int32)
        self.accepting = np.ascontiguousarray(self.accepting, dtype=np.bool_)
        if self.classes is IDENTITY and self.table.shape[0] >= COMPACT_MIN_STATES:
            reps, classes = byte_classes(self.table)
            if len(reps) < 256:
                self.table = np.ascontiguousarray(self.table[:, reps], dtype=np.int32)
                self.classes = classes.astype(np.uint8)

    @property
    def n_states(self) -> int:
        return int(self.table.shape[0])

    @property
    def n_classes(self) -> int:
        return int(self.table.shape[1])

    @property
    def dense(self) -> bool:
        return self.classes is IDENTITY

    @property
    def trans(self) -> np.ndarray:
        """int32 [n_states, 256]: the moves with one column per byte. A copy unless the table
        is dense: for tests, exports and small automata; engine paths read `table`."""
        return self.table if self.classes is IDENTITY else self.table[:, self.classes]

    def row(self, state: int) -> np.ndarray:
        """int32 [256]: the moves of one state by byte (a view of a dense table's row)."""
        row = self.table[state]
        return row if self.classes is IDENTITY else row[self.classes]

    def live_bits(self, state: int) -> int:
        """The bytes `state` has a move on, as a 256-bit integer (bit b: byte b): one compiled
        pass over the class row (a row expanded to 256 bytes and counted took 3 us)."""
        w0, w1, w2, w3 = _dfa_kernels.live_bytes(self.table, self.classes, state).tolist()
        return w0 | w1 << 64 | w2 << 128 | w3 << 192

    def move(self, state: int, byte: int) -> int:
        return int(self.table[state, self.classes[byte]])

    @cached_property
    def chains(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per state, how many bytes (or characters) of which set surely keep it alive
        (`_chains.chains`): trie
        walks take a subtree whole where it fits."""
        from ._chains import chains

        return chains(self.table, self.classes)

    def compacted(self) -> Dfa:
        """This automaton with one column per byte class (the same states, language and
        serial, so the same cached walks), for a table about to be cached for reuse: a
        literal key's table of 15 states is 15 KB with a column per byte and 0.7 KB with one
        per class, and such tables were most of what the compile caches held. Intermediate
        tables of a construction stay dense (classes for all of them cost compile time)."""
        if self.classes is not IDENTITY:
            return self
        # remembered: a cached table is asked again (False: it stays as it is; never `self`,
        # which would make a reference cycle only the collector frees)
        got: Dfa | bool | None = self.__dict__.get("_compacted")
        if got is None:
            from ._dfa_kernels import small_table_classes

            reps, classes = small_table_classes(self.table)
            got = False
            if 2 * len(reps) <= 256:
                got = Dfa(self.table[:, reps], self.accepting, classes, self.serial)
            self.__dict__["_compacted"] = got
        return got if isinstance(got, Dfa) else self

    @property
    def first(self) -> np.ndarray:
        """bool [256]: the bytes the start state takes."""
        return np.asarray(self.row(1) != 0)

    @property
    def takes_a_byte(self) -> bool:
        """Whether the start state has a move: read from its row of classes (every column is
        some byte's), not expanded to 256 bytes as `first` is."""
        return bool(self.table[1].any())

    @property
    def is_empty(self) -> bool:
        """The empty language (trimmed DFAs: the start is then dead-ended and non-accepting)."""
        return not self.accepting[1] and not self.takes_a_byte

    @property
    def nullable(self) -> bool:
        return bool(self.accepting[1])

    @property
    def nbytes(self) -> int:
        return int(self.table.nbytes + self.accepting.nbytes) + (
            0 if self.classes is IDENTITY else 256
        )

    def matches(self, data: bytes) -> bool:
        s = 1
        table, classes = self.table, self.classes
        for b in data:
            s = int(table[s, classes[b]])
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
        if not self.table[1].any():
            return empty_dfa()
        t = self.table
        table = np.concatenate([t[:1], t[1:2], t[1:]], axis=0)
        table = np.where(table > 0, table + 1, 0).astype(np.int32)
        acc = np.concatenate([[False, False], self.accepting[1:]])
        return Dfa(table, acc, self.classes)


# ---------------------------------------------------------------- byte classes


def byte_classes(trans: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Bytes whose columns are identical in `trans`: (one representative byte per class,
    class of every byte). Columns are bucketed by a random 64-bit fingerprint, then every
    bucket is verified exactly (a collision only costs the slow exact path)."""
    n = trans.shape[0]
    weights = _fingerprint_weights(n)
    # In blocks of rows: a whole uint64 copy of a 20k-state table is 40 MB. The sum of the
    # blocks' products wraps modulo 2^64 as one product does.
    h = np.zeros(trans.shape[1], dtype=np.uint64)
    for lo in range(0, n, _BLOCK_ROWS):
        h += weights[lo : lo + _BLOCK_ROWS] @ trans[lo : lo + _BLOCK_ROWS].astype(np.uint64)
    _, first, inverse = np.unique(h, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    column = first[inverse]
    for lo in range(0, n, _BLOCK_ROWS):
        block = trans[lo : lo + _BLOCK_ROWS]
        if (block != block[:, column]).any():  # a fingerprint collision: be exact
            return _exact_classes(trans)
    return in_first_seen_order(first, inverse)


_BLOCK_ROWS = 4096


def _exact_classes(trans: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    _, reps, inverse = np.unique(trans.T, axis=0, return_index=True, return_inverse=True)
    return in_first_seen_order(reps, inverse)


def in_first_seen_order(first: np.ndarray, inverse: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`np.unique`'s (first index, inverse) renumbered so that class k is the k-th to appear:
    (first member of each class, ascending; class of every item)."""
    order = np.argsort(first, kind="stable")
    remap = np.empty(len(first), dtype=np.int64)
    remap[order] = np.arange(len(first))
    return first[order], remap[inverse.reshape(-1)]


_weights_cache: BoundedCache[int, np.ndarray] = BoundedCache("fingerprint weights", 16 << 20)


def _fingerprint_weights(n: int) -> np.ndarray:
    size = 1 << max(10, (n - 1).bit_length())
    w = _weights_cache.get(size)
    if w is None:
        w = np.random.default_rng(0x5D4).integers(1, 2**63, size, dtype=np.uint64) | 1
        _weights_cache.put(size, w, w.nbytes)
    return w[:n]
