"""Compiled scans of one automaton's table (written for numba): its byte classes when small,
the bytes a state moves on, the one literal a state's language may be, and a canonical form of
the sub-automaton a state reaches (equal for isomorphic ones: walks are shared by it).
"""

from __future__ import annotations

import numpy as np

from ._native import kernel


@kernel("(i4[:, ::1],)")
def small_table_classes(table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover
    """`_dfa.byte_classes` for a table with one column per byte and few rows (10-25 us on
    tables of 12-32 states, where the vectorised one takes 50-90 us): columns hashed, equal
    hashes verified, classes numbered in first-seen order. Returns (representative byte per
    class, uint8 class per byte)."""
    n = table.shape[0]
    h = np.empty(256, np.uint64)
    for b in range(256):
        acc = np.uint64(14695981039346656037)
        for s in range(n):
            acc = (acc ^ np.uint64(table[s, b])) * np.uint64(1099511628211)
        h[b] = acc
    classes = np.empty(256, np.uint8)
    reps = np.empty(256, np.int64)
    k = 0
    for b in range(256):
        found = -1
        for c in range(k):
            r = reps[c]
            if h[r] == h[b]:
                same = True
                for s in range(n):
                    if table[s, r] != table[s, b]:
                        same = False
                        break
                if same:
                    found = c
                    break
        if found < 0:
            reps[k] = b
            classes[b] = k
            k += 1
        else:
            classes[b] = found
    return reps[:k], classes


@kernel("(i4[:, ::1], u1[::1], b1[::1], i8, i8)")
def canonical_form(
    trans: np.ndarray, cls: np.ndarray, acc: np.ndarray, start: int, limit: int
) -> np.ndarray:  # pragma: no cover - compiled
    """The sub-automaton reachable from `start` as int32s, equal exactly for isomorphic ones
    (empty if it has more than `limit` states): states numbered breadth first with successors
    in byte order, each written as a header (-1, or -2 if it accepts) and then its rows' runs
    as (first byte, target number, 0 for dead). Runs, not rows: a string body's row is a
    handful of runs, and hashing 256 targets a state cost more than the walk it names."""
    number = np.full(trans.shape[0], -1, np.int64)
    order = np.empty(limit, np.int64)
    order[0] = start
    number[start] = 0
    n = 1
    i = 0
    while i < n:
        row = trans[order[i]]
        for b in range(256):
            v = row[cls[b]]
            if v != 0 and number[v] < 0:
                if n >= limit:
                    return np.empty(0, np.int32)
                number[v] = n
                order[n] = v
                n += 1
        i += 1
    out = np.empty(n * (1 + 2 * 256), np.int32)
    k = 0
    for i in range(n):
        row = trans[order[i]]
        out[k] = -2 if acc[order[i]] else -1
        k += 1
        prev = -1
        for b in range(256):
            v = row[cls[b]]
            if v != prev:
                out[k] = b
                out[k + 1] = number[v] + 1 if v != 0 else 0
                k += 2
                prev = v
    return out[:k]


@kernel("(i4[:, ::1], u1[::1], i8)")
def live_bytes(trans: np.ndarray, cls: np.ndarray, q: int) -> np.ndarray:  # pragma: no cover
    """The bytes state q has a move on, as 256 bits in 4 words (bit b & 63 of word b >> 6)."""
    out = np.zeros(4, np.uint64)
    row = trans[q]
    for b in range(256):
        if row[cls[b]] != 0:
            out[b >> 6] |= np.uint64(1) << np.uint64(b & 63)
    return out


@kernel("(i4[:, ::1], u1[::1], b1[::1], i8, i8)")
def literal_path(
    trans: np.ndarray, cls: np.ndarray, acc: np.ndarray, start: int, limit: int
) -> np.ndarray:  # pragma: no cover - compiled
    """The bytes read from `start` while each state is not accepting and has one move, when
    that path ends, after at least one byte, at an accepting state with no move (the language
    of `start` is that one string); empty otherwise or past `limit` bytes."""
    read = np.empty(limit, np.uint8)
    none = read[:0]
    n = 0
    q = start
    while not acc[q]:
        if n == limit:
            return none
        row = trans[q]
        move = -1
        for b in range(256):
            if row[cls[b]] != 0:
                if move >= 0:
                    return none
                move = b
        if move < 0:
            return none
        read[n] = move
        n += 1
        q = row[cls[move]]
    if n == 0:
        return none
    row = trans[q]
    for b in range(row.shape[0]):
        if row[b] != 0:
            return none
    return read[:n]
