"""Automata too big to tabulate, built on demand.

A string with `maxLength: 65535` is a counted repeat of ~10^6 DFA states, a 1 GB dense table,
of which one generation visits a few hundred. A `LazyDfa` numbers its states like a `Dfa`
(0 dead, 1 the start, every other state live: it can complete) but computes rows only when
asked, vectorised over many states at once. Nothing downstream sees a partial table:

- the runtime copies rows into its global table as the parse reaches states;
- vocabulary walks run on `window(state, depth)`, the exact table of every state within
  `depth` bytes of `state` (a token is never longer), and are cached by `key(state, horizon)`:
  states whose windows are the same automaton (the middle of a long string) share one walk.

Only constructions that keep every state live are lazy: counted repeats of a prefix-free item,
concatenation where an accepting state of the first part never takes a first byte of the
second, alternation with disjoint first bytes, and the empty string removed. Everything else
(products, subset construction, minimisation) needs the table: `materialize()` gives it when it
is small enough, else `TooComplexError`.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Hashable, Sequence

import numpy as np

from ..errors import TooComplexError
from ._dfa import Dfa, next_serial

#: A state's row, compact: byte -> slot (256 bytes), slot -> target state (0: dead).
Row = tuple[bytes, tuple[int, ...]]

__all__ = [
    "LazyDfa",
    "Row",
    "alternation",
    "concatenation",
    "counted",
    "item_moves",
    "item_width",
    "materialize",
    "table_of",
]


class LazyDfa:
    """States and rows on demand; `n_states` counts them all (the dead state included)."""

    n_states: int
    nullable: bool

    def __init__(self) -> None:
        self.serial = next_serial()

    # -- what each construction defines

    def rows(self, qs: np.ndarray) -> np.ndarray:
        """int64 [len(qs), 256]: the rows of states `qs` (0 < q < n_states)."""
        raise NotImplementedError

    def acc(self, qs: np.ndarray) -> np.ndarray:
        """bool [len(qs)]: which of `qs` accept."""
        raise NotImplementedError

    def key(self, q: int, horizon: int) -> Hashable:
        """Equal keys (in one automaton): the states' windows of up to `horizon` bytes are the
        same automaton, so every walk from them gives the same tokens."""
        raise NotImplementedError

    def row1(self, q: int) -> Row:
        """One state's row, compact: (byte -> slot, 256 bytes; slot -> target). The parse
        asks for rows one state at a time, as it reaches them (a long string: a new state per
        byte): vectorised code costs tens of microseconds a call there, so the constructions
        answer from per-part tables in a few Python operations."""
        return _compact(self.rows(np.asarray([q]))[0])

    def acc1(self, q: int) -> bool:
        """Whether state `q` accepts (`acc` for one state)."""
        return bool(self.acc(np.asarray([q]))[0])

    @property
    def first(self) -> np.ndarray:
        """bool [256]: the bytes the start state takes."""
        raise NotImplementedError

    @property
    def final_out(self) -> np.ndarray:
        """bool [256]: the bytes some accepting state takes (a superset is safe)."""
        raise NotImplementedError

    # -- derived

    @property
    def takes_a_byte(self) -> bool:
        """Whether the start state has a move (the terminal matches a non-empty string)."""
        return bool(self.first.any())

    @property
    def is_empty(self) -> bool:
        return not self.nullable and not self.takes_a_byte

    def matches(self, data: bytes) -> bool:
        q = 1
        for b in data:
            q = int(self.rows(np.asarray([q]))[0, b])
            if q == 0:
                return False
        return bool(self.acc(np.asarray([q]))[0])

    def without_empty(self) -> LazyDfa | Dfa:
        if not self.nullable:
            return self
        if not self.first.any():
            return Dfa(np.zeros((2, 256), dtype=np.int32), np.zeros(2, dtype=bool))
        return _NonEmpty(self)

    def step(self, qs: np.ndarray, bs: np.ndarray) -> np.ndarray:
        """int64 [len(qs)]: the target of each state `qs[i]` on byte `bs[i]`."""
        uq, inv = np.unique(qs, return_inverse=True)
        return self.rows(uq)[inv.reshape(-1), bs]

    #: How to build this automaton's table where one is needed (a union, an NFA around it)
    #: when `materialize` would number too many states: the reachable part may be small.
    tabulate: Callable[[], Dfa] | None = None

    #: Whether walks should see only the states tokens reach (`window_along`) rather than
    #: every state within a token's length (`window`): for automata that branch so much
    #: that the latter has millions of states.
    branchy = False

    def window_along(self, q: int, levels: Sequence[tuple[np.ndarray, np.ndarray]]) -> Dfa:
        """The table of the states that the byte paths of a tree reach from `q` (renumbered
        1), with only the tree's moves in it: a walk of the same paths sees the automaton.
        `levels[d]` holds the nodes at depth d + 1 as (index of the parent among the nodes of
        the level above, with the root alone at depth 0; byte)."""
        cur = np.asarray([q], dtype=np.int64)
        src: list[np.ndarray] = []
        byt: list[np.ndarray] = []
        dst: list[np.ndarray] = []
        for parent, byte in levels:
            ps = cur[parent]
            alive = np.nonzero(ps != 0)[0]
            if not len(alive):
                break
            code, inv = np.unique(ps[alive] * 256 + byte[alive], return_inverse=True)
            s, b = np.divmod(code, 256)
            t = self.step(s, b)
            src.append(s)
            byt.append(b)
            dst.append(t)
            cur = np.zeros(len(parent), dtype=np.int64)
            cur[alive] = t[inv.reshape(-1)]
        states = np.unique(np.concatenate([np.asarray([q], dtype=np.int64), *dst]))
        states = states[states != 0]
        # q first, as state 1
        states = np.concatenate([[q], states[states != q]])
        order = np.argsort(states, kind="stable")
        ordered = states[order]

        def local(x: np.ndarray) -> np.ndarray:
            return np.where(x != 0, order[np.searchsorted(ordered, x)] + 1, 0)

        table = np.zeros((len(states) + 1, 256), dtype=np.int32)
        if src:
            s_all, b_all, d_all = np.concatenate(src), np.concatenate(byt), np.concatenate(dst)
            table[local(s_all), b_all] = local(d_all)
        accepting = np.zeros(len(states) + 1, dtype=bool)
        accepting[1:] = self.acc(states)
        return Dfa(table, accepting)

    def window(self, q: int, depth: int) -> Dfa:
        """The table of the states within `depth` bytes of `q`, `q` renumbered 1. States at
        exactly `depth` keep their acceptance but have no moves: a walk of at most
        `depth - 1` bytes from the start never reads their rows."""
        levels = [np.asarray([q], dtype=np.int64)]
        computed: list[np.ndarray] = []
        seen = {q}
        frontier = levels[0]
        for _ in range(depth):
            rows = self.rows(frontier)
            computed.append(rows)
            targets = np.unique(rows[rows != 0]).tolist()
            new = [t for t in targets if t not in seen]
            if not new:
                break
            seen.update(new)
            frontier = np.asarray(new, dtype=np.int64)
            levels.append(frontier)
        states = np.concatenate(levels)
        order = np.argsort(states, kind="stable")
        ordered = states[order]
        table = np.zeros((len(states) + 1, 256), dtype=np.int32)
        done = np.concatenate(computed)
        idx = np.minimum(np.searchsorted(ordered, done), len(states) - 1)
        table[1 : 1 + len(done)] = np.where(done != 0, order[idx] + 1, 0)
        accepting = np.zeros(len(states) + 1, dtype=bool)
        accepting[1:] = self.acc(states)
        return Dfa(table, accepting)


def materialize(d: LazyDfa | Dfa, limit: int) -> Dfa:
    """The whole table (every state a lazy automaton numbers), or `TooComplexError` above
    `limit` states."""
    if isinstance(d, Dfa):
        return d
    if d.n_states > limit:
        raise TooComplexError(f"automaton exceeds {limit} DFA states")
    qs = np.arange(1, d.n_states, dtype=np.int64)
    trans = np.zeros((d.n_states, 256), dtype=np.int32)
    accepting = np.zeros(d.n_states, dtype=bool)
    # 1,024 states a round: a round's rows pass through int64 temporaries of 2 KB per state
    # at every level of the automaton's expression (4,096 made a 55 MB transient)
    for lo in range(0, len(qs), 1024):
        part = qs[lo : lo + 1024]
        trans[part] = d.rows(part)
        accepting[part] = d.acc(part)
    return Dfa(trans, accepting)


def _shift(rows: np.ndarray, by: int) -> np.ndarray:
    return np.where(rows != 0, rows + by, 0)


def _compact(row: np.ndarray) -> Row:
    """A row of 256 targets as a `Row`."""
    targets, slots = np.unique(row, return_inverse=True)
    return slots.astype(np.uint8).tobytes(), tuple(targets.tolist())


def _shift1(row: Row, by: int) -> Row:
    return row[0], tuple([t + by if t else 0 for t in row[1]])


_DEAD1: Row = (bytes(256), (0,))


class _Table(LazyDfa):
    """A table DFA as a part of a lazy one."""

    def __init__(self, dfa: Dfa) -> None:
        super().__init__()
        self.dfa = dfa
        self.n_states = dfa.n_states
        self.nullable = dfa.nullable

    def rows(self, qs: np.ndarray) -> np.ndarray:
        return self.dfa.table[qs][:, self.dfa.classes].astype(np.int64)

    def acc(self, qs: np.ndarray) -> np.ndarray:
        return np.asarray(self.dfa.accepting[qs])

    def row1(self, q: int) -> Row:
        rows: dict[int, Row] = self.__dict__.setdefault("_rows1", {})
        got = rows.get(q)
        if got is None:
            got = rows[q] = _compact(self.dfa.row(q))
        return got

    def acc1(self, q: int) -> bool:
        return bool(self.dfa.accepting[q])

    def key(self, q: int, horizon: int) -> Hashable:
        return q

    @property
    def first(self) -> np.ndarray:
        return self.dfa.first

    @property
    def final_out(self) -> np.ndarray:
        d = self.dfa
        return np.asarray((d.table[d.accepting] != 0).any(axis=0)[d.classes])


def table_of(d: LazyDfa | Dfa) -> LazyDfa:
    return d if isinstance(d, LazyDfa) else _Table(d)


class _Counted(LazyDfa):
    """`X{lo,hi}` for a prefix-free X (no accepting state moves, the start is never
    re-entered): state (k, p) is "k items done, inside the next at X's p-th non-accepting
    state", numbered 1 + k * width + p; the last one, (hi, 0), has no moves. The same numbering
    as the table `_automata._counted_repeat` builds, so `materialize` gives that table."""

    def __init__(self, item: Dfa, lo: int, hi: int) -> None:
        super().__init__()
        self.width = width = item_width(item)
        self.live, self.target, self.inc = item_moves(item)
        self.lo, self.hi = lo, hi
        self.n_states = hi * width + 2
        self.nullable = lo == 0
        #: per inner state p: (byte -> slot, and per slot: live, items completed, inner
        #: target), the distinct moves of `live/inc/target[p]`, built when p is first asked for
        self._moves1: dict[int, tuple[bytes, tuple[tuple[bool, int, int], ...]]] = {}

    def _split(self, qs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        k, p = np.divmod(np.asarray(qs, dtype=np.int64) - 1, self.width)
        return k, p

    def rows(self, qs: np.ndarray) -> np.ndarray:
        k, p = self._split(qs)
        out = np.where(
            self.live[p], 1 + (k[:, None] + self.inc[p]) * self.width + self.target[p], 0
        )
        out[k >= self.hi] = 0
        return out

    def acc(self, qs: np.ndarray) -> np.ndarray:
        k, p = self._split(qs)
        return np.asarray((p == 0) & (k >= self.lo) & (k <= self.hi))

    def row1(self, q: int) -> Row:
        k, p = divmod(q - 1, self.width)
        if k >= self.hi:
            return _DEAD1
        got = self._moves1.get(p)
        if got is None:
            per_byte = zip(
                self.live[p].tolist(), self.inc[p].tolist(), self.target[p].tolist(), strict=True
            )
            slots: dict[tuple[bool, int, int], int] = {}
            classes = bytes(slots.setdefault(move, len(slots)) for move in per_byte)
            got = self._moves1[p] = (classes, tuple(slots))
        classes, moves = got
        w = self.width
        return classes, tuple([1 + (k + inc) * w + t if live else 0 for live, inc, t in moves])

    def acc1(self, q: int) -> bool:
        k, p = divmod(q - 1, self.width)
        return p == 0 and self.lo <= k <= self.hi

    def key(self, q: int, horizon: int) -> Hashable:
        # Within `horizon` bytes at most `horizon` items complete: what the window sees of the
        # bounds is how far they are, up to horizon + 1 ("out of sight").
        k, p = divmod(q - 1, self.width)
        return (p, min(max(self.lo - k, 0), horizon + 1), min(max(self.hi - k, 0), horizon + 1))

    @property
    def first(self) -> np.ndarray:
        return np.asarray(self.live[0]) if self.hi > 0 else np.zeros(256, dtype=bool)

    @property
    def final_out(self) -> np.ndarray:
        return np.asarray(self.live[0]) if self.lo < self.hi else np.zeros(256, dtype=bool)


class _Concat(LazyDfa):
    """A·B where no accepting state of A takes a first byte of B: A's states, then B's but its
    start (numbered after A's); an accepting state of A also takes B's first moves."""

    def __init__(self, a: LazyDfa, b: LazyDfa) -> None:
        super().__init__()
        self.a, self.b = a, b
        self.off = a.n_states - 1  # B's state j > 0 is off + j
        self.n_states = a.n_states + b.n_states - 1
        self.nullable = a.nullable and b.nullable
        self.b_start = _shift(b.rows(np.asarray([1]))[0], self.off)
        self._b_start1 = _shift1(b.row1(1), self.off)
        #: A's byte -> slot maps glued to B's start: (merged map, per slot (A's, B's slot))
        self._glued: dict[bytes, tuple[bytes, tuple[tuple[int, int], ...]]] = {}

    def rows(self, qs: np.ndarray) -> np.ndarray:
        qs = np.asarray(qs, dtype=np.int64)
        out = np.zeros((len(qs), 256), dtype=np.int64)
        in_a = qs < self.a.n_states
        if in_a.any():
            qa = qs[in_a]
            ra = self.a.rows(qa)
            glue = self.a.acc(qa)
            ra[glue] = np.where(ra[glue] != 0, ra[glue], self.b_start[None, :])
            out[in_a] = ra
        if not in_a.all():
            out[~in_a] = _shift(self.b.rows(qs[~in_a] - self.off), self.off)
        return out

    def row1(self, q: int) -> Row:
        if q >= self.a.n_states:
            return _shift1(self.b.row1(q - self.off), self.off)
        row = self.a.row1(q)
        if not self.a.acc1(q):
            return row
        classes, targets = row
        glued = self._glued.get(classes)
        if glued is None:
            b_classes = self._b_start1[0]
            pairs: dict[tuple[int, int], int] = {}
            merged = bytes(
                pairs.setdefault(pair, len(pairs)) for pair in zip(classes, b_classes, strict=True)
            )
            glued = self._glued[classes] = (merged, tuple(pairs))
        b_targets = self._b_start1[1]
        return glued[0], tuple([targets[i] or b_targets[j] for i, j in glued[1]])

    def acc1(self, q: int) -> bool:
        if q < self.a.n_states:
            return self.b.nullable and self.a.acc1(q)
        return self.b.acc1(q - self.off)

    def acc(self, qs: np.ndarray) -> np.ndarray:
        qs = np.asarray(qs, dtype=np.int64)
        out = np.zeros(len(qs), dtype=bool)
        in_a = qs < self.a.n_states
        if in_a.any() and self.b.nullable:
            out[in_a] = self.a.acc(qs[in_a])
        if not in_a.all():
            out[~in_a] = self.b.acc(qs[~in_a] - self.off)
        return out

    def key(self, q: int, horizon: int) -> Hashable:
        if q < self.a.n_states:
            return ("a", self.a.key(q, horizon))
        return ("b", self.b.key(q - self.off, horizon))

    @property
    def first(self) -> np.ndarray:
        return self.a.first | self.b.first if self.a.nullable else self.a.first

    @property
    def final_out(self) -> np.ndarray:
        out = self.b.final_out
        return out | self.a.final_out | self.b.first if self.b.nullable else out


class _Alternation(LazyDfa):
    """A|B|... with pairwise disjoint first bytes: a fresh start whose row is the sum of the
    parts' start rows, then each part's states but its start."""

    def __init__(self, parts: list[LazyDfa]) -> None:
        super().__init__()
        self.parts = parts
        offs = [1]
        for p in parts:
            offs.append(offs[-1] + p.n_states - 1)
        self.offs = offs  # part i's state j > 0 is offs[i] + j
        self.n_states = offs[-1] + 1
        self.nullable = any(p.nullable for p in parts)
        start = np.zeros(256, dtype=np.int64)
        for p, off in zip(parts, offs, strict=False):
            start += _shift(p.rows(np.asarray([1]))[0], off)
        self.start = start
        self._start1 = _compact(start)

    def _part(self, qs: np.ndarray) -> np.ndarray:
        return np.searchsorted(np.asarray(self.offs[1:]), qs, side="left")

    def rows(self, qs: np.ndarray) -> np.ndarray:
        qs = np.asarray(qs, dtype=np.int64)
        out = np.zeros((len(qs), 256), dtype=np.int64)
        out[qs == 1] = self.start
        which = self._part(qs)
        for i in np.unique(which[qs > 1]).tolist():
            sel = (qs > 1) & (which == i)
            out[sel] = _shift(self.parts[i].rows(qs[sel] - self.offs[i]), self.offs[i])
        return out

    def acc(self, qs: np.ndarray) -> np.ndarray:
        qs = np.asarray(qs, dtype=np.int64)
        out = np.zeros(len(qs), dtype=bool)
        out[qs == 1] = self.nullable
        which = self._part(qs)
        for i in np.unique(which[qs > 1]).tolist():
            sel = (qs > 1) & (which == i)
            out[sel] = self.parts[i].acc(qs[sel] - self.offs[i])
        return out

    def row1(self, q: int) -> Row:
        if q == 1:
            return self._start1
        i = bisect.bisect_left(self.offs, q, 1) - 1
        return _shift1(self.parts[i].row1(q - self.offs[i]), self.offs[i])

    def acc1(self, q: int) -> bool:
        if q == 1:
            return self.nullable
        i = bisect.bisect_left(self.offs, q, 1) - 1
        return self.parts[i].acc1(q - self.offs[i])

    def key(self, q: int, horizon: int) -> Hashable:
        if q == 1:
            return ("start",)
        i = bisect.bisect_left(self.offs, q, 1) - 1  # offs[i] < q <= offs[i + 1]
        return (i, self.parts[i].key(q - self.offs[i], horizon))

    @property
    def first(self) -> np.ndarray:
        return np.asarray(self.start != 0)

    @property
    def final_out(self) -> np.ndarray:
        out = np.zeros(256, dtype=bool)
        for p in self.parts:
            out |= p.final_out
        return out | self.first if self.nullable else out


class _NonEmpty(LazyDfa):
    """The language minus the empty string: a fresh, non-accepting start with the old start's
    moves (which it has: see `without_empty`), then the old states shifted by one."""

    def __init__(self, inner: LazyDfa) -> None:
        super().__init__()
        self.inner = inner
        self.n_states = inner.n_states + 1
        self.nullable = False

    def rows(self, qs: np.ndarray) -> np.ndarray:
        qs = np.asarray(qs, dtype=np.int64)
        return _shift(self.inner.rows(np.where(qs == 1, 1, qs - 1)), 1)

    def acc(self, qs: np.ndarray) -> np.ndarray:
        qs = np.asarray(qs, dtype=np.int64)
        return np.asarray(self.inner.acc(np.where(qs == 1, 1, qs - 1)) & (qs != 1))

    def row1(self, q: int) -> Row:
        return _shift1(self.inner.row1(1 if q == 1 else q - 1), 1)

    def acc1(self, q: int) -> bool:
        return q != 1 and self.inner.acc1(q - 1)

    def key(self, q: int, horizon: int) -> Hashable:
        return ("start",) if q == 1 else ("in", self.inner.key(q - 1, horizon))

    @property
    def first(self) -> np.ndarray:
        return self.inner.first

    @property
    def final_out(self) -> np.ndarray:
        return self.inner.final_out


def item_width(item: Dfa) -> int:
    """The states a counted item can be in between two counts: its non-accepting ones."""
    return item.n_states - 1 - int(np.count_nonzero(item.accepting[1:]))


def item_moves(item: Dfa) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A prefix-free item's moves from each of its inner states p (`item_width` of them, the
    start first), per byte: (live, target inner state, 1 where the move completes the item and
    the target is its start again)."""
    acc = item.accepting
    inner = [q for q in range(1, item.n_states) if not acc[q]]
    pos = np.zeros(item.n_states, dtype=np.int64)
    inc = np.zeros(item.n_states, dtype=np.int64)
    pos[inner] = np.arange(len(inner))
    inc[np.nonzero(acc)[0]] = 1
    sub = item.table[inner][:, item.classes]
    return sub != 0, pos[sub], inc[sub]


def counted(item: Dfa, lo: int, hi: int) -> LazyDfa:
    """`item{lo,hi}`; the item must be trimmed, not nullable and prefix-free, its start never
    re-entered (what `_automata._counted_repeat` checks)."""
    return _Counted(item, lo, hi)


def concatenation(a: LazyDfa | Dfa, b: LazyDfa | Dfa) -> LazyDfa | None:
    """A·B when no accepting state of A takes a first byte of B, else None."""
    la, lb = table_of(a), table_of(b)
    if (la.final_out & lb.first).any():
        return None
    return _Concat(la, lb)


def alternation(parts: list[LazyDfa | Dfa]) -> LazyDfa | None:
    """A|B|... when the parts' first bytes are pairwise disjoint, else None."""
    lazy = [table_of(p) for p in parts]
    seen = np.zeros(256, dtype=bool)
    for p in lazy:
        if (seen & p.first).any():
            return None
        seen |= p.first
    return _Alternation(lazy)
