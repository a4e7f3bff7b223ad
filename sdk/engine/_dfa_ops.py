"""Table-level operations shared by the automaton constructions: byte classes, trimming,
minimisation, and the caps and sizes every construction reads.

A `Dfa` is a dense table `trans[state, byte]` (or one column per byte class) with state 0 the
dead state and state 1 the start; constructions run on one column per class and hand their
scratch table to `_trim`, which keeps only the states that are reachable and can finish.
"""

from __future__ import annotations

import numpy as np

from ._dfa import COMPACT_MIN_STATES, Dfa, byte_classes
from ._lazy import LazyDfa, materialize
from ._owner import OWNER

#: A table DFA, or a lazy one (see `_lazy`).
AnyDfa = Dfa | LazyDfa


def table(d: AnyDfa) -> Dfa:
    """`d` as a table: lazy automata are materialised, or `TooComplexError` when too big."""
    if isinstance(d, LazyDfa) and d.tabulate is not None:
        return d.tabulate()
    return materialize(d, OWNER.limits.dfa_states)


#: Bytes per state that a table's first walk adds (`Dfa.chains`: 18 int32 per state).
CHAIN_BYTES_PER_STATE = 72


def compacted(d: AnyDfa) -> AnyDfa:
    """`Dfa.compacted` for a table; a lazy automaton as it is."""
    return d.compacted() if isinstance(d, Dfa) else d


def cache_size(d: AnyDfa) -> int:
    """Bytes a cached automaton holds: its table and the chains its walks add (lazy ones are
    small but for what they say they hold, a length product's levels). Grammars read tables
    in place: no copy to count. With one column per byte class the chains are most of it."""
    if isinstance(d, Dfa):
        return d.nbytes + CHAIN_BYTES_PER_STATE * d.n_states + 512
    return max(64 << 10, int(getattr(d, "nbytes", 0)))


_BYTES = np.arange(256)


def _segments(dfa: Dfa) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Runs of equal targets in every row: (state, first byte, last byte, target), dead dropped.
    On runs of bytes of one class (a handful), not on 256 columns per state."""
    if dfa.dense:
        trans, run_lo, run_hi = dfa.table, _BYTES, _BYTES
    else:
        cls = dfa.classes
        cut = np.flatnonzero(cls[1:] != cls[:-1]) + 1
        run_lo = np.concatenate([[0], cut])
        run_hi = np.concatenate([cut - 1, [255]])
        trans = dfa.table[:, cls[run_lo]]  # one column per run of bytes
    n, k = trans.shape
    starts = np.ones((n, k), dtype=bool)
    starts[:, 1:] = trans[:, 1:] != trans[:, :-1]
    rows, cols = np.nonzero(starts)
    ends = np.empty_like(cols)
    ends[:-1] = cols[1:] - 1
    last_in_row = np.ones(len(rows), dtype=bool)
    last_in_row[:-1] = rows[1:] != rows[:-1]
    ends[last_in_row] = k - 1
    targets = trans[rows, cols]
    keep = (targets != 0) & (rows != 0)
    return rows[keep], run_lo[cols[keep]], run_hi[ends[keep]], targets[keep]


def _joint_classes(a: Dfa, b: Dfa) -> tuple[np.ndarray, np.ndarray]:
    """The byte classes neither `a` nor `b` tells apart: (a representative byte per class,
    the class of every byte), for constructions that run on one column per class (`columns_at`)."""
    class_a = _classes_of(a)
    class_b = _classes_of(b)
    _, reps, class_ab = np.unique(class_a * 256 + class_b, return_index=True, return_inverse=True)
    return reps, class_ab.reshape(-1)


def _classes_of(d: Dfa) -> np.ndarray:
    """The class of every byte (int64), as few classes as `d` tells apart."""
    return byte_classes(d.table)[1] if d.dense else d.classes.astype(np.int64)


def _columns(d: Dfa) -> tuple[np.ndarray, np.ndarray]:
    """`d`'s table with one column per class of bytes it tells apart, and the class of every
    byte (int64)."""
    if d.dense:
        reps, classes = byte_classes(d.table)
        return d.table[:, reps], classes
    return d.table, d.classes.astype(np.int64)


def columns_at(d: Dfa, reps: np.ndarray) -> np.ndarray:
    """`d`'s moves on the bytes `reps` (one column each)."""
    return d.table[:, d.classes[reps]]


def with_classes(table: np.ndarray, accepting: np.ndarray, byte_class: np.ndarray) -> Dfa:
    """The DFA of a table with one column per byte class (`byte_class[b]`: the column of byte
    b), its identical columns merged: small tables are spread to one column per byte."""
    if table.shape[0] < COMPACT_MIN_STATES:
        return Dfa(np.take(table, byte_class, axis=1), accepting)
    reps, merged = byte_classes(table)
    classes = merged[byte_class]
    if len(reps) < table.shape[1]:  # classes to merge; else the table as it is (no copy)
        table = table[:, reps]
    return Dfa(table, accepting, classes.astype(np.uint8))


def _trim(trans: np.ndarray, acc: np.ndarray, byte_class: np.ndarray | None = None) -> Dfa:
    """Drop states that cannot reach acceptance or cannot be reached; renumber from 1.

    With `byte_class` (the column of every byte), `trans` has one column per byte class, and
    so has the result: products and subset constructions know their classes, and every step
    here then touches a few columns instead of 256.

    `trans` is the caller's scratch (int32, built for this call): it is edited in place and
    may become the result's table. A construction's table is its peak memory: copies of it
    here took a 100k-state product's transient from one table's bytes to several."""
    from ._pairs import trim_states

    n = trans.shape[0]
    acc = np.array(acc, dtype=bool)
    acc[0] = False

    def done(t: np.ndarray, accepting: np.ndarray) -> Dfa:
        t = np.ascontiguousarray(t, dtype=np.int32)
        return Dfa(t, accepting) if byte_class is None else with_classes(t, accepting, byte_class)

    if n < 2:
        return Dfa(np.zeros((2, 256), dtype=np.int32), np.zeros(2, dtype=bool))
    if trans.dtype != np.int32 or not trans.flags.c_contiguous:
        trans = np.ascontiguousarray(trans, dtype=np.int32)
    reach = trim_states(trans, acc)  # moves into dead ends now go to the dead state
    if not reach[1]:  # empty language
        return Dfa(np.zeros((2, 256), dtype=np.int32), np.zeros(2, dtype=bool))
    if reach[1:].all():
        return done(trans, acc)
    idx = np.concatenate([[0], np.nonzero(reach)[0]])  # start (1) stays first among kept
    remap = np.zeros(n, dtype=trans.dtype)
    remap[idx] = np.arange(len(idx))
    new_trans = remap[trans[idx]]
    new_trans[0] = 0
    return done(new_trans, acc[idx])


def minimize(dfa: Dfa, max_rounds: int = 24) -> Dfa:
    """Moore refinement with exact sorting (no hashing); returns `dfa` unchanged when it does
    not settle within `max_rounds` (long counting chains), which is still correct."""
    acc = dfa.accepting
    n = dfa.n_states
    if n <= 3:
        return dfa
    t, classes = _columns(dfa)
    cls = acc.astype(np.int64)
    cls[0] = -1  # keep the dead state alone (it is also the only non-coreachable state)
    count = len(np.unique(cls))
    for _ in range(max_rounds):
        sig = np.concatenate([cls[:, None], cls[t]], axis=1)
        order = np.lexsort(sig.T[::-1])
        sorted_sig = sig[order]
        boundary = np.ones(n, dtype=bool)
        boundary[1:] = (sorted_sig[1:] != sorted_sig[:-1]).any(axis=1)
        new = np.empty(n, dtype=np.int64)
        new[order] = np.cumsum(boundary) - 1
        new_count = int(boundary.sum())
        cls = new
        if new_count == count:
            break
        count = new_count
    else:
        return dfa
    if count == n:
        return dfa
    # renumber: dead -> 0, start -> 1, then by first appearance
    first_seen: dict[int, int] = {int(cls[0]): 0, int(cls[1]): 1}
    for c in cls.tolist():
        if c not in first_seen:
            first_seen[c] = len(first_seen)
    mapping = np.asarray([first_seen[c] for c in cls.tolist()], dtype=np.int64)
    reps = np.zeros(count, dtype=np.int64)
    reps[mapping[::-1]] = np.arange(n - 1, -1, -1)
    new_trans = mapping[t[reps]].astype(np.int32)
    return with_classes(np.ascontiguousarray(new_trans), acc[reps].copy(), classes)
