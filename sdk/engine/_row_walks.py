"""Walks of the vocabulary's byte matrix rows rather than its trie (compiled loops, written
for numba): the tokens a trie walk left crossing a lexeme boundary, read on from the byte where
their lexeme could end (`walk_rows`), and the plan that groups them by the byte after it
(`plan_ranges`, for `_vocab.suffix_plan`).
"""

from __future__ import annotations

import numpy as np

from ._native import kernel
from ._trie import _grown


@kernel("(u1[:, ::1], i8[::1], i8[::1], i8, i4[:, ::1], u1[::1], b1[::1], i8)")
def walk_rows(
    matrix: np.ndarray,
    lengths: np.ndarray,
    rows: np.ndarray,
    col: int,
    trans: np.ndarray,
    cls: np.ndarray,
    acc: np.ndarray,
    start: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """Matrix rows `rows` (int64, contiguous) from lexer state `start` at byte `col`: those
    that stay inside the lexeme to their last byte (int32), and the boundary events of the
    rows that died later with a complete lexeme after byte c, grouped by c: the columns c
    ascending, where each one's rows start in the third array (and a last bound), the rows
    (in input order within a column)."""
    n = rows.shape[0]
    kept = np.empty(n, np.int32)
    n_kept = 0
    ev_col = np.empty(64, np.int64)
    ev_row = np.empty(64, np.int64)
    n_ev = 0
    ends = np.empty(matrix.shape[1] + 1, np.int64)
    for i in range(n):
        r = rows[i]
        last = lengths[r] - 1
        q = start
        n_ends = 0
        dead = False
        for k in range(col, last + 1):
            q = trans[q, cls[matrix[r, k]]]
            if q == 0:
                dead = True
                break
            if k < last and acc[q]:
                ends[n_ends] = k + 1
                n_ends += 1
        if not dead:
            kept[n_kept] = r
            n_kept += 1
        elif n_ends:
            while n_ev + n_ends > ev_col.shape[0]:
                ev_col = _grown(ev_col, n_ev)
                ev_row = _grown(ev_row, n_ev)
            for j in range(n_ends):
                ev_col[n_ev] = ends[j]
                ev_row[n_ev] = r
                n_ev += 1
    # grouped by column in one counting pass (the columns are at most a token's length)
    start_of = np.zeros(matrix.shape[1] + 2, np.int64)
    for j in range(n_ev):
        start_of[ev_col[j] + 1] += 1
    n_cols = 0
    for c in range(matrix.shape[1] + 1):
        if start_of[c + 1]:
            n_cols += 1
        start_of[c + 1] += start_of[c]
    cols = np.empty(n_cols, np.int64)
    bounds = np.empty(n_cols + 1, np.int64)
    k = 0
    for c in range(matrix.shape[1] + 1):
        if start_of[c + 1] > start_of[c]:
            cols[k] = c
            bounds[k] = start_of[c]
            k += 1
    bounds[n_cols] = n_ev
    grouped = np.empty(n_ev, np.int64)
    for j in range(n_ev):
        c = ev_col[j]
        grouped[start_of[c]] = ev_row[j]
        start_of[c] += 1
    return kept[:n_kept], cols, bounds, grouped


@kernel("(i4[:, ::1], u1[:, ::1], i8[::1], i8)")
def plan_ranges(
    ranges: np.ndarray, matrix: np.ndarray, order: np.ndarray, max_rows: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """`_vocab.suffix_plan` in one pass (its numpy version was ~20 us of a cold mask in
    small-array overheads): of the boundary ranges `(c, lo, hi)`, those of columns with at
    most `max_rows` tokens, stably sorted by the byte after c; the offsets of each byte's
    ranges (257), and the bytes that have any as four 64-bit words."""
    k = ranges.shape[0]
    per_col = np.zeros(matrix.shape[1] + 1, np.int64)
    for r in range(k):
        per_col[ranges[r, 0]] += ranges[r, 2] - ranges[r, 1]
    first = np.empty(k, np.int64)
    counts = np.zeros(256, np.int64)
    for r in range(k):
        c = ranges[r, 0]
        if per_col[c] <= max_rows:
            b = np.int64(matrix[order[ranges[r, 1]], c])
            first[r] = b
            counts[b] += 1
        else:
            first[r] = -1
    offsets = np.zeros(257, np.int64)
    for b in range(256):
        offsets[b + 1] = offsets[b] + counts[b]
    out = np.empty((offsets[256], 3), np.int32)
    fill = offsets[:256].copy()
    for r in range(k):
        b = first[r]
        if b >= 0:
            j = fill[b]
            out[j, 0] = ranges[r, 0]
            out[j, 1] = ranges[r, 1]
            out[j, 2] = ranges[r, 2]
            fill[b] = j + 1
    bits = np.zeros(4, np.uint64)
    for b in range(256):
        if counts[b]:
            bits[b >> 6] |= np.uint64(1) << np.uint64(b & 63)
    return out, offsets, bits
