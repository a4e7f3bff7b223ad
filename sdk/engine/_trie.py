"""Native walks of a vocabulary through one lexer state (numba-compiled loops).

Numba, because the walk is the one loop of the engine that touches every token: in numpy it
costs a pass per byte column over all still-live rows (150-400 µs for a narrow state, ms for a
wide one, ten times that on a 262k vocabulary), in plain Python far more. Compiled, a token
trie is walked depth first and a dead node skips its whole subtree, so a narrow state costs a few
hundred node visits. Wide states (a string body, a length counter) are cut short by per-node
summaries, the set of bytes below a node and its depth: where the node's state surely stays
alive over that many of those bytes (`chains`), every token below stays inside the lexeme and
the subtree is taken whole. The kernels are cached on disk (`cache=True`): only
the first process on a machine pays their compilation (a few seconds).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

# ---------------------------------------------------------------- building the trie


@njit(cache=True, nogil=True)
def _links(depth: np.ndarray, byte: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per node (depth-first preorder): the index just past its subtree, the set of bytes
    strictly below it (256 bits as 4 words) and how many bytes deep the subtree goes."""
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
    for j in range(n - 1, -1, -1):
        p = parent[j]
        if p >= 0:
            b = byte[j]
            for w in range(4):
                below[p, w] |= below[j, w]
            below[p, b >> 6] |= np.uint64(1) << np.uint64(b & 63)
            height[p] = max(height[p], height[j] + 1)
    return skip, below, height


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
    max_depth: int

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
            )
        )


def build_trie(matrix: np.ndarray, lengths: np.ndarray, ids: np.ndarray) -> Trie:
    """The trie of the rows of a zero-padded byte matrix (row r holds `lengths[r]` bytes)."""
    n, width = matrix.shape
    # bytes + 1, padding 0: lexicographic order of the rows is then the order of these keys
    keys = matrix.astype(np.uint16) + 1
    keys[np.arange(width)[None, :] >= lengths[:, None]] = 0
    order = np.lexsort(keys.T[::-1]) if n else np.zeros(0, dtype=np.int64)
    keys = keys[order]
    lens = lengths[order].astype(np.int64)
    # shared prefix with the previous row: a row adds nodes only past it
    lcp = np.zeros(n, dtype=np.int64)
    if n > 1:
        diff = keys[1:] != keys[:-1]
        first = np.where(diff.any(axis=1), diff.argmax(axis=1), width)
        lcp[1:] = np.minimum(first, np.minimum(lens[1:], lens[:-1]))
    counts = lens - lcp
    starts = np.cumsum(counts) - counts
    node_row = np.repeat(np.arange(n, dtype=np.int64), counts)
    node_col = (
        np.arange(len(node_row), dtype=np.int64)
        - np.repeat(starts, counts)
        + np.repeat(lcp, counts)
    )
    byte = (keys[node_row, node_col].astype(np.int64) - 1).astype(np.int32)
    depth = (node_col + 1).astype(np.int32)
    skip, below, height = _links(depth, byte)
    n_nodes = len(byte)
    # the node each position ends at
    ends = starts + counts - 1  # a duplicate adds no node: this is where its twin ends
    nodes = np.arange(n_nodes)
    i32 = np.int32
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
        max_depth=int(width),
    )


#: Rounds of the chain computation: chains are known up to this many bytes (longer subtrees
#: are walked node by node, which is always exact).
CHAIN_BYTES = 64


@njit(cache=True, nogil=True)
def _chains(trans: np.ndarray, rounds: int) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover
    n = trans.shape[0]
    main = np.zeros(n, np.int64)  # the live target most bytes lead to (0: none)
    plain = np.zeros((n, 4), np.uint64)  # the bytes that lead there
    count = np.zeros(n, np.int64)
    for q in range(1, n):
        row = trans[q]
        best = 0
        best_count = 0
        for b in range(256):
            t = row[b]
            if t != 0:
                count[t] += 1
                if count[t] > best_count:
                    best_count = count[t]
                    best = t
        for b in range(256):
            count[row[b]] = 0
        main[q] = best
        if best != 0:
            for b in range(256):
                if row[b] == best:
                    plain[q, b >> 6] |= np.uint64(1) << np.uint64(b & 63)
    reach = np.zeros(n, np.int32)
    bytes_ = plain.copy()
    for _ in range(rounds):
        changed = False
        new_reach = np.zeros(n, np.int32)
        new_bytes = plain.copy()
        for q in range(1, n):
            m = main[q]
            if m == 0:
                continue
            new_reach[q] = 1 + reach[m]
            if reach[m] > 0:
                for w in range(4):
                    new_bytes[q, w] = plain[q, w] & bytes_[m, w]
            if new_reach[q] != reach[q]:
                changed = True
            for w in range(4):
                if new_bytes[q, w] != bytes_[q, w]:
                    changed = True
        reach = new_reach
        bytes_ = new_bytes
        if not changed:
            break
    return reach, bytes_


def chains(trans: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per state q, a byte set P(q) and a depth h(q) such that every string of at most h(q)
    bytes, all in P(q), keeps the lexer alive from q: the chain of states most bytes lead to
    (a string body loops on itself, h unbounded; a length counter steps to its next count,
    h = the counts left). A trie node in state q whose subtree is at most h(q) deep and uses
    only P(q) bytes is taken whole. h is capped at CHAIN_BYTES (a lower bound: safe)."""
    return _chains(trans, CHAIN_BYTES)


# ---------------------------------------------------------------- walks


@njit(cache=True, nogil=True)
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
    max_depth: int,
    trans: np.ndarray,
    acc: np.ndarray,
    reach: np.ndarray,
    safe: np.ndarray,
    start: int,
    bits: np.ndarray,
) -> np.ndarray:  # pragma: no cover - compiled
    state = np.empty(max_depth + 1, np.int32)
    state[0] = start
    acc_at = np.empty(max_depth + 1, np.int64)  # depths on the current path where it accepts
    n_acc = 0
    cap = 64
    events = np.empty((cap, 3), np.int64)
    n_ev = 0
    i = 0
    n = byte.shape[0]
    while i < n:
        d = depth[i]
        while n_acc > 0 and acc_at[n_acc - 1] >= d:
            n_acc -= 1
        q = trans[state[d - 1], byte[i]]
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
        if (
            height[i] <= reach[q]
            and (
                (below[i, 0] & ~safe[q, 0])
                | (below[i, 1] & ~safe[q, 1])
                | (below[i, 2] & ~safe[q, 2])
                | (below[i, 3] & ~safe[q, 3])
            )
            == 0
        ):
            # the subtree is shallow enough and uses only bytes of q's chain: every token
            # below stays inside the lexeme
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
        while lo < hi:
            t = tid[lo]
            bits[t >> 3] |= np.uint8(1 << (t & 7))
            lo += 1
    return events[:n_ev]


def walk_trie(
    trie: Trie,
    trans: np.ndarray,
    acc: np.ndarray,
    chain: tuple[np.ndarray, np.ndarray],
    state: int,
    packed_len: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Every token from lexer state `state`: the packed bitmask (by token id) of those that stay
    inside the lexeme to their last byte, and the boundary events of the others as rows
    (depth c, lo, hi): tokens at positions lo:hi died after the lexeme was complete at byte c."""
    bits = np.zeros(packed_len, dtype=np.uint8)
    events = _walk_trie(
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
        trie.max_depth,
        trans,
        acc,
        chain[0],
        chain[1],
        state,
        bits,
    )
    return bits, events


@njit(cache=True, nogil=True)
def walk_rows(
    matrix: np.ndarray,
    lengths: np.ndarray,
    rows: np.ndarray,
    col: int,
    trans: np.ndarray,
    acc: np.ndarray,
    start: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """Matrix rows `rows` (int64, contiguous) from lexer state `start` at byte `col`: those
    that stay inside the lexeme to their last byte, and (column, row) pairs where a row that
    died later had a complete lexeme after byte column."""
    n = rows.shape[0]
    kept = np.empty(n, np.int64)
    n_kept = 0
    cap = 64
    ev_col = np.empty(cap, np.int64)
    ev_row = np.empty(cap, np.int64)
    n_ev = 0
    ends = np.empty(matrix.shape[1] + 1, np.int64)
    for i in range(n):
        r = rows[i]
        last = lengths[r] - 1
        q = start
        n_ends = 0
        dead = False
        for k in range(col, last + 1):
            q = trans[q, matrix[r, k]]
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
            if n_ev + n_ends > cap:
                cap = 2 * (n_ev + n_ends)
                grown_c = np.empty(cap, np.int64)
                grown_c[:n_ev] = ev_col[:n_ev]
                ev_col = grown_c
                grown_r = np.empty(cap, np.int64)
                grown_r[:n_ev] = ev_row[:n_ev]
                ev_row = grown_r
            for j in range(n_ends):
                ev_col[n_ev] = ends[j]
                ev_row[n_ev] = r
                n_ev += 1
    return kept[:n_kept], ev_col[:n_ev], ev_row[:n_ev]


@njit(cache=True, nogil=True)
def _pack(ids: np.ndarray, rows: np.ndarray, packed_len: int) -> np.ndarray:  # pragma: no cover
    bits = np.zeros(packed_len, np.uint8)
    for i in range(rows.shape[0]):
        t = ids[rows[i]]
        bits[t >> 3] |= np.uint8(1 << (t & 7))
    return bits


def pack_rows(ids: np.ndarray, rows: np.ndarray, packed_len: int) -> np.ndarray:
    """The packed bitmask (by token id) of matrix rows `rows`, whose ids are `ids[rows]`."""
    return _pack(ids, np.ascontiguousarray(rows, dtype=np.int64), packed_len)


@njit(cache=True, nogil=True)
def canonical_order(trans: np.ndarray, start: int, limit: int) -> np.ndarray:  # pragma: no cover
    """The states reachable from `start`, numbered breadth first with successors taken in byte
    order (isomorphic sub-automata get the same numbering); empty if more than `limit`."""
    number = np.full(trans.shape[0], -1, np.int64)
    order = np.empty(limit, np.int64)
    order[0] = start
    number[start] = 0
    n = 1
    i = 0
    while i < n:
        row = trans[order[i]]
        for b in range(256):
            v = row[b]
            if v != 0 and number[v] < 0:
                if n >= limit:
                    return order[:0]
                number[v] = n
                order[n] = v
                n += 1
        i += 1
    return order[:n]
