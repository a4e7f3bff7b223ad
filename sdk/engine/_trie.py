"""Native walks of a vocabulary through one lexer state (compiled loops, written for numba).

Numba, because the walk is the one loop of the engine that touches every token: in numpy it
costs a pass per byte column over all still-live rows (150-400 µs for a narrow state, ms for a
wide one, ten times that on a 262k vocabulary), in plain Python far more. Compiled, a token
trie is walked depth first and a dead node skips its whole subtree, so a narrow state costs a few
hundred node visits. Wide states (a string body, a length counter) are cut short by per-node
summaries, the set of bytes below a node and its depth: where the node's state surely stays
alive over that many of those bytes (`_chains`), every token below stays inside the lexeme and
the subtree is taken whole. Non-ASCII text is summarised by character, not byte: a node also
knows from which UTF-8 states every path below it is well formed, and a state knows whether
every multi-byte character steps it like one byte of its chain, so a 262k vocabulary (a
third of its tokens non-ASCII) is taken whole from a string body too (0.1 ms, was 6 ms).
Where most tokens are taken, the mask starts full and the gaps are cleared. The kernels are
built ahead of time, once per machine (`_native`): a process loads them without numba.
Walks of matrix rows are in `_row_walks`, scans of one automaton's table in `_dfa_kernels`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ._native import kernel

# ---------------------------------------------------------------- UTF-8


def _utf8_table() -> np.ndarray:
    """The well-formed UTF-8 automaton (RFC 3629 table 3-7) as `[state, byte] -> state`:
    0 between characters, 1-3 that many continuation bytes still due, 4-7 the second byte of
    E0, ED, F0, F4 (narrower ranges), 8 dead."""
    t = np.full((9, 256), 8, np.int8)
    t[0, 0x00:0x80] = 0
    t[0, 0xC2:0xE0] = 1
    t[0, 0xE0] = 4
    t[0, 0xE1:0xED] = 2
    t[0, 0xED] = 5
    t[0, 0xEE:0xF0] = 2
    t[0, 0xF0] = 6
    t[0, 0xF1:0xF4] = 3
    t[0, 0xF4] = 7
    t[1, 0x80:0xC0] = 0
    t[2, 0x80:0xC0] = 1
    t[3, 0x80:0xC0] = 2
    t[4, 0xA0:0xC0] = 1
    t[5, 0x80:0xA0] = 1
    t[6, 0x90:0xC0] = 2
    t[7, 0x80:0x90] = 2
    return t


UTF8 = _utf8_table()

# ---------------------------------------------------------------- building the trie


@kernel("(i4[::1], i4[::1], i1[:, ::1])")
def _links(
    depth: np.ndarray, byte: np.ndarray, utf8: np.ndarray
) -> tuple[
    np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray
]:  # pragma: no cover - compiled
    """Per node (depth-first preorder): the index just past its subtree, the set of bytes
    strictly below it (256 bits as 4 words), how many bytes deep the subtree goes, the UTF-8
    states u from which every path below it is a prefix of well-formed UTF-8 (bit u), and
    the UTF-8 state its own path from the root ends in (8: ill formed)."""
    n = depth.shape[0]
    skip = np.full(n, n, np.int32)
    parent = np.full(n, -1, np.int64)
    path = np.empty(n + 1, np.int64)
    for j in range(n):
        d = depth[j]
        if d > 1:
            parent[j] = path[d - 2]
        path[d - 1] = j
    # a node's subtree ends at the next node that is not deeper
    open_ = np.empty(n + 1, np.int64)
    top = 0
    for j in range(n):
        d = depth[j]
        while top > 0 and depth[open_[top - 1]] >= d:
            top -= 1
            skip[open_[top]] = j
        open_[top] = j
        top += 1
    below = np.zeros((n, 4), np.uint64)
    height = np.zeros(n, np.int32)
    # bit u: every path below, read from UTF-8 state u, stays well formed (children first)
    wf = np.full(n, 0xFF, np.int32)
    for j in range(n - 1, -1, -1):
        p = parent[j]
        if p >= 0:
            b = byte[j]
            for w in range(4):
                below[p, w] |= below[j, w]
            below[p, b >> 6] |= np.uint64(1) << np.uint64(b & 63)
            height[p] = max(height[p], height[j] + 1)
            ok = 0
            for u in range(8):
                v = utf8[u, b]
                if v < 8 and (wf[j] >> v) & 1:
                    ok |= 1 << u
            wf[p] &= ok
    phase = np.empty(n, np.uint8)
    for j in range(n):
        p = parent[j]
        u = 0 if p < 0 else phase[p]
        phase[j] = utf8[u, byte[j]] if u < 8 else 8
    return skip, below, height, wf.astype(np.uint8), phase


@dataclass(frozen=True, eq=False)
class Trie:
    """The vocabulary's byte strings as a trie in depth-first preorder.

    Tokens are numbered by their position in lexicographic order (`order[k]` is the matrix row
    of the k-th): the tokens below a node are then the contiguous range `sub_lo:sub_hi`, those
    ending at it `end_lo:end_hi`.
    """

    order: np.ndarray  # int64 [tokens]: matrix row of each position
    tid: np.ndarray  # int32 [tokens]: token id of each position
    lcp: np.ndarray  # int32 [tokens]: bytes shared with the previous position's token
    byte: np.ndarray  # int32 [nodes]
    depth: np.ndarray  # int32 [nodes]: 1 for children of the root
    skip: np.ndarray  # int32 [nodes]: first node after the subtree
    sub_lo: np.ndarray  # int32 [nodes]
    sub_hi: np.ndarray  # int32 [nodes]
    end_lo: np.ndarray  # int32 [nodes]
    end_hi: np.ndarray  # int32 [nodes]
    below: np.ndarray  # uint64 [nodes, 4]: bytes strictly below the node
    height: np.ndarray  # int32 [nodes]: bytes below the node on its longest path
    utf8: np.ndarray  # uint8 [nodes]: bit u: the paths below, from UTF-8 state u, are UTF-8
    phase: np.ndarray  # uint8 [nodes]: the UTF-8 state after the node's own path (8: none)
    full: np.ndarray  # uint8 [packed]: the packed bitmask of every token
    max_depth: int
    #: int32 [256]: the child of the root for each first byte (-1: no token starts with it),
    #: so a walk starts at the subtrees of the bytes its state takes and never touches the
    #: others (a walk's fixed cost was a cache miss per root child, ~12 us on 262k tokens)
    roots: np.ndarray

    @property
    def nbytes(self) -> int:
        return sum(
            a.nbytes
            for a in (
                self.order,
                self.tid,
                self.lcp,
                self.byte,
                self.depth,
                self.skip,
                self.sub_lo,
                self.sub_hi,
                self.end_lo,
                self.end_hi,
                self.below,
                self.height,
                self.utf8,
                self.phase,
                self.full,
                self.roots,
            )
        )


def build_trie(
    matrix: np.ndarray,
    lengths: np.ndarray,
    ids: np.ndarray,
    packed_len: int,
    rows: Sequence[bytes] | None = None,
) -> Trie:
    """The trie of the rows of a zero-padded byte matrix (row r holds `lengths[r]` bytes, and
    is `rows[r]` where the caller has them as bytes); token ids below `packed_len * 8`."""
    n, width = matrix.shape
    # Rows in the byte strings' own order (a prefix before its extensions), sorted as Python
    # bytes. (A 16-bit key matrix telling padding from a 0 byte, sorted with lexsort, cost 4x
    # the matrix in temporaries: 80 MB at 152k tokens, at the peak of a process's memory.)
    if rows is None:
        rows = [matrix[r, : lengths[r]].tobytes() for r in range(n)]
    order = np.asarray(sorted(range(n), key=rows.__getitem__), dtype=np.int64)
    lens = lengths[order].astype(np.int64)
    # shared prefix with the previous row: a row adds nodes only past it (padding may match
    # a 0 byte: the lengths bound it), in blocks so the comparison stays small
    lcp = np.zeros(n, dtype=np.int64)
    block = 8192
    for lo in range(1, n, block):
        hi = min(lo + block, n)
        diff = matrix[order[lo:hi]] != matrix[order[lo - 1 : hi - 1]]
        first = np.where(diff.any(axis=1), diff.argmax(axis=1), width)
        lcp[lo:hi] = np.minimum(first, np.minimum(lens[lo:hi], lens[lo - 1 : hi - 1]))
    counts = lens - lcp
    starts = np.cumsum(counts) - counts
    node_row = np.repeat(np.arange(n, dtype=np.int64), counts)
    node_col = (
        np.arange(len(node_row), dtype=np.int64)
        - np.repeat(starts, counts)
        + np.repeat(lcp, counts)
    )
    byte = matrix[order[node_row], node_col].astype(np.int32)
    depth = (node_col + 1).astype(np.int32)
    skip, below, height, utf8, phase = _links(depth, byte, UTF8)
    n_nodes = len(byte)
    # the node each position ends at
    ends = starts + counts - 1  # a duplicate adds no node: this is where its twin ends
    nodes = np.arange(n_nodes)
    i32 = np.int32
    roots = np.full(256, -1, dtype=i32)
    top = np.flatnonzero(depth == 1)
    roots[byte[top]] = top
    return Trie(
        order=order.astype(np.int64),
        tid=ids[order].astype(i32),
        lcp=lcp.astype(i32),
        byte=byte,
        depth=depth,
        skip=skip,
        sub_lo=node_row.astype(i32),
        sub_hi=np.append(node_row, n)[skip].astype(i32),
        end_lo=np.searchsorted(ends, nodes, "left").astype(i32),
        end_hi=np.searchsorted(ends, nodes, "right").astype(i32),
        below=below,
        height=height,
        utf8=utf8,
        phase=phase,
        full=_pack(ids.astype(np.int64), np.arange(n, dtype=np.int64), packed_len),
        max_depth=int(width),
        roots=roots,
    )


# ---------------------------------------------------------------- walks


@kernel()
def _run_rows(
    run_lo: np.ndarray, run_hi: np.ndarray, n_run: int, taken: int, order: np.ndarray
) -> np.ndarray:  # pragma: no cover - compiled
    """The matrix rows of the trie positions in runs lo:hi (`taken` of them in all)."""
    rows = np.empty(taken, np.int32)
    k = 0
    for r in range(n_run):
        for p in range(run_lo[r], run_hi[r]):
            rows[k] = order[p]
            k += 1
    return rows


@kernel()
def _grown(a: np.ndarray, n: int) -> np.ndarray:  # pragma: no cover - compiled
    """`a` with twice the room, its first n entries kept."""
    out = np.empty(2 * a.shape[0], a.dtype)
    out[:n] = a[:n]
    return out


@kernel(
    "(i4[::1], i4[::1], i4[::1], i4[::1], i4[::1], i4[::1], i4[::1], i4[::1],"  # trie nodes, tid
    " u8[:, ::1], i4[::1], u1[::1], u1[::1], i8,"  # below, height, utf8, phase, max_depth
    " i4[:, ::1], u1[::1], b1[::1],"  # the lexer: trans, cls, acc
    " i4[::1], u8[:, ::1], i4[::1], i4[:, ::1], i8,"  # its chains, start
    " u1[::1], u1[::1], i4[::1], i8[::1], i8)"  # full, bits, roots, order, sparse_max
)
def _walk_trie(
    byte: np.ndarray,
    depth: np.ndarray,
    skip: np.ndarray,
    sub_lo: np.ndarray,
    sub_hi: np.ndarray,
    end_lo: np.ndarray,
    end_hi: np.ndarray,
    tid: np.ndarray,
    below: np.ndarray,
    height: np.ndarray,
    utf8: np.ndarray,
    phase: np.ndarray,
    max_depth: int,
    trans: np.ndarray,
    cls: np.ndarray,
    acc: np.ndarray,
    reach: np.ndarray,
    safe: np.ndarray,
    wide: np.ndarray,
    rest: np.ndarray,
    start: int,
    full: np.ndarray,
    bits: np.ndarray,
    roots: np.ndarray,
    order: np.ndarray,
    sparse_max: int,
) -> tuple[np.ndarray, np.ndarray, bool]:  # pragma: no cover - compiled
    state = np.empty(max_depth + 1, np.int32)
    state[0] = start
    acc_at = np.empty(max_depth + 1, np.int64)  # depths on the current path where it accepts
    n_acc = 0
    cap = 64
    events = np.empty((cap, 3), np.int64)
    n_ev = 0
    # runs of trie positions of the tokens that stay inside the lexeme
    run_lo = np.empty(64, np.int64)
    run_hi = np.empty(64, np.int64)
    n_run = 0
    taken = 0
    # Only the subtrees of the root's children that the start state takes: a token dying at
    # its first byte makes no event (nothing on its path was complete), so the others are
    # skipped without being read. Byte order is trie order: positions still increase.
    b0 = 0
    i = 0
    stop = 0
    while True:
        if i >= stop:
            while b0 < 256 and (roots[b0] < 0 or trans[start, cls[b0]] == 0):
                b0 += 1
            if b0 == 256:
                break
            i = roots[b0]
            stop = skip[i]
            b0 += 1
        d = depth[i]
        while n_acc > 0 and acc_at[n_acc - 1] >= d:
            n_acc -= 1
        q = trans[state[d - 1], cls[byte[i]]]
        if q == 0:
            # every token below dies here: one event per depth where the lexeme was complete
            if n_acc > 0:
                if n_ev + n_acc > cap:
                    cap = 2 * (n_ev + n_acc)
                    grown = np.empty((cap, 3), np.int64)
                    grown[:n_ev] = events[:n_ev]
                    events = grown
                for a in range(n_acc):
                    events[n_ev, 0] = acc_at[a]
                    events[n_ev, 1] = sub_lo[i]
                    events[n_ev, 2] = sub_hi[i]
                    n_ev += 1
            i = skip[i]
            continue
        state[d] = q
        h = height[i]
        u = phase[i]
        whole = False
        if ((below[i, 0] & ~safe[q, 0]) | (below[i, 1] & ~safe[q, 1])) == 0:
            if h <= reach[q] and ((below[i, 2] & ~safe[q, 2]) | (below[i, 3] & ~safe[q, 3])) == 0:
                whole = True  # bytes of q's chain only
            elif (u == 0 or u == 8) and h <= wide[q] and utf8[i] & 1:
                whole = True  # bytes and whole characters of q's chain
        if not whole and 0 < u < 8:
            # inside a character: its rest leads to s, then the chain of s as above
            s = rest[u, q]
            if (
                s > 0
                and h - 1 <= wide[s]
                and (utf8[i] >> u) & 1
                and ((below[i, 0] & ~safe[s, 0]) | (below[i, 1] & ~safe[s, 1])) == 0
            ):
                whole = True
        if whole:
            # the subtree is shallow enough and uses only bytes (or characters) of q's
            # chain: every token below stays inside the lexeme
            lo = sub_lo[i]
            hi = sub_hi[i]
            i = skip[i]
        else:
            lo = end_lo[i]
            hi = end_hi[i]
            if acc[q]:
                acc_at[n_acc] = d
                n_acc += 1
            i += 1
        if lo < hi:
            # positions come in increasing order: extend the last run or open one
            if n_run > 0 and run_hi[n_run - 1] == lo:
                run_hi[n_run - 1] = hi
            else:
                if n_run == run_lo.shape[0]:
                    run_lo = _grown(run_lo, n_run)
                    run_hi = _grown(run_hi, n_run)
                run_lo[n_run] = lo
                run_hi[n_run] = hi
                n_run += 1
            taken += hi - lo
    n_pos = tid.shape[0]
    if taken <= sparse_max:
        # few tokens stay inside: their matrix rows, not a bitmask of the whole vocabulary
        return events[:n_ev], _run_rows(run_lo, run_hi, n_run, taken, order), False
    if 2 * taken > n_pos:
        # most tokens stay inside: start from all of them and clear the gaps between runs
        bits[:] = full
        prev = 0
        for r in range(n_run + 1):
            stop = run_lo[r] if r < n_run else n_pos
            for p in range(prev, stop):
                t = tid[p]
                bits[t >> 3] &= np.uint8(255 - (1 << (t & 7)))
            if r < n_run:
                prev = run_hi[r]
    else:
        for r in range(n_run):
            for p in range(run_lo[r], run_hi[r]):
                t = tid[p]
                bits[t >> 3] |= np.uint8(1 << (t & 7))
    return events[:n_ev], np.empty(0, np.int32), True


def walk_trie(
    trie: Trie,
    trans: np.ndarray,
    cls: np.ndarray,
    acc: np.ndarray,
    chain: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    state: int,
    packed_len: int,
) -> tuple[np.ndarray | None, np.ndarray, np.ndarray]:
    """Every token from lexer state `state`: those that stay inside the lexeme to their last
    byte, as a packed bitmask by token id, or (None, their matrix rows) when they are few
    enough that the rows take less memory (the median walk keeps 4 tokens of 49,152: a
    bitmask is 6 KB of a cached walk, the rows 16 bytes); and the boundary events of the
    others as rows (depth c, lo, hi): tokens at positions lo:hi died after the lexeme was
    complete at byte c."""
    bits = np.zeros(packed_len, dtype=np.uint8)
    events, rows, dense = _walk_trie(
        trie.byte,
        trie.depth,
        trie.skip,
        trie.sub_lo,
        trie.sub_hi,
        trie.end_lo,
        trie.end_hi,
        trie.tid,
        trie.below,
        trie.height,
        trie.utf8,
        trie.phase,
        trie.max_depth,
        trans,
        cls,
        acc,
        chain[0],
        chain[1],
        chain[2],
        chain[3],
        state,
        trie.full,
        bits,
        trie.roots,
        trie.order,
        packed_len // 4,  # int32 rows up to the bitmask's size
    )
    return (bits if dense else None), rows, events


@kernel(
    "(i4[::1], i4[::1], i4[::1], i4[::1], i4[::1], i4[::1], i4[::1], i8[::1], u1[::1])"
)  # trie nodes, roots, order; the literal
def walk_literal(
    byte: np.ndarray,
    skip: np.ndarray,
    sub_lo: np.ndarray,
    sub_hi: np.ndarray,
    end_lo: np.ndarray,
    end_hi: np.ndarray,
    roots: np.ndarray,
    order: np.ndarray,
    text: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """`_walk_trie` for a lexer state whose language is one string, `text`, read along its
    one trie path (no table, no whole-vocabulary scan): the matrix rows of the tokens that
    are prefixes of it (they stay inside the lexeme), and per child of its node the event
    (len(text), lo, hi) of the tokens that go on past its end."""
    n = text.shape[0]
    rows = np.empty(0, np.int32)
    events = np.empty((0, 3), np.int64)
    lo_at = np.empty(n, np.int64)  # the end range of each node on the path
    hi_at = np.empty(n, np.int64)
    i = roots[text[0]]
    if i < 0:
        return events, rows
    d = 1
    while True:
        lo_at[d - 1] = end_lo[i]
        hi_at[d - 1] = end_hi[i]
        if d == n:
            break
        c = i + 1  # the first child, if the subtree has more than the node
        found = -1
        while c < skip[i]:
            if byte[c] == text[d]:
                found = c
                break
            c = skip[c]
        if found < 0:
            break
        i = found
        d += 1
    taken = 0
    for k in range(d):
        taken += hi_at[k] - lo_at[k]
    rows = _run_rows(lo_at, hi_at, d, taken, order)
    if d < n:  # the path ends inside the text: nothing completes the lexeme
        return events, rows
    events = np.empty((256, 3), np.int64)  # a node has at most one child per byte
    m = 0
    c = i + 1
    while c < skip[i]:
        events[m, 0] = n
        events[m, 1] = sub_lo[c]
        events[m, 2] = sub_hi[c]
        m += 1
        c = skip[c]
    return events[:m], rows


@kernel("(i8[::1], i8[::1], i8)")
def _pack(ids: np.ndarray, rows: np.ndarray, packed_len: int) -> np.ndarray:  # pragma: no cover
    bits = np.zeros(packed_len, np.uint8)
    for i in range(rows.shape[0]):
        t = ids[rows[i]]
        bits[t >> 3] |= np.uint8(1 << (t & 7))
    return bits


def pack_rows(ids: np.ndarray, rows: np.ndarray, packed_len: int) -> np.ndarray:
    """The packed bitmask (by token id) of matrix rows `rows`, whose ids are `ids[rows]`."""
    return _pack(ids, np.ascontiguousarray(rows, dtype=np.int64), packed_len)
