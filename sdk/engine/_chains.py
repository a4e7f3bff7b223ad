"""Chains: per lexer state, how many bytes of the bytes most of its moves share keep it alive,
in bytes and in whole UTF-8 characters (compiled loops, written for numba).

A trie walk (`_trie.walk_trie`) takes a node's whole subtree when its depth and its bytes fit
the chain of the node's state, instead of visiting every node below: that is what makes wide
states (a string body, a length counter) cheap. Computed once per table (`Dfa.chains`).
"""

from __future__ import annotations

import numpy as np

from ._native import kernel
from ._trie import UTF8

#: Rounds of the chain computation: chains are known up to this many bytes (longer subtrees
#: are walked node by node, which is always exact).
CHAIN_BYTES = 64


@kernel()
def _rest(
    trans: np.ndarray, cls: np.ndarray, utf8: np.ndarray, memo: np.ndarray, u: int, p: int
) -> int:  # pragma: no cover - compiled
    """The one state every rest of a character from UTF-8 state u (1-7) leads to from lexer
    state p, each byte alive; -1 if one dies or they part ways (memoised: -2 is unknown)."""
    got = memo[u, p]
    if got != -2:
        return got
    got = -1
    last_t = -1
    last_v = -1
    for b in range(0x80, 0xC0):
        v = utf8[u, b]
        if v == 8:
            continue
        t = trans[p, cls[b]]
        if t == last_t and v == last_v:
            continue  # as the byte before
        last_t = t
        last_v = v
        if t != 0 and v != 0:
            t = _rest(trans, cls, utf8, memo, v, t)
        if t <= 0 or (got != -1 and t != got):
            got = -1
            break
        got = t
    memo[u, p] = got
    return got


@kernel()
def _multibyte_target(
    trans: np.ndarray, cls: np.ndarray, utf8: np.ndarray, memo: np.ndarray, q: int
) -> int:  # pragma: no cover - compiled
    """The one state every well-formed multi-byte character leads to from q, every byte on
    the way alive; -1 if there is none (one dies, or two characters part ways)."""
    got = -1
    last_p = -1
    last_u = -1
    for b in range(0xC2, 0xF5):
        p = trans[q, cls[b]]
        u = utf8[0, b]
        if p == last_p and u == last_u:
            continue  # as the byte before
        last_p = p
        last_u = u
        t = _rest(trans, cls, utf8, memo, u, p) if p != 0 else -1
        if t < 0 or (got != -1 and t != got):
            return -1
        got = t
    return got


@kernel()
def _popcount(x: np.uint64) -> int:  # pragma: no cover - compiled
    x = x - ((x >> np.uint64(1)) & np.uint64(0x5555555555555555))
    x = (x & np.uint64(0x3333333333333333)) + ((x >> np.uint64(2)) & np.uint64(0x3333333333333333))
    x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return int((x * np.uint64(0x0101010101010101)) >> np.uint64(56))


@kernel("(i4[:, ::1], u1[::1], i1[:, ::1], i8)")
def _chains(
    trans: np.ndarray, cls: np.ndarray, utf8: np.ndarray, rounds: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    n, n_cls = trans.shape
    # Per byte class: its bytes as a set, how many, and its last byte. A state's targets are
    # tallied per class, not per byte (a table has a column per class: 25 at the median).
    n_bytes = np.zeros(n_cls, np.int64)
    last = np.zeros(n_cls, np.int64)
    bits = np.zeros((n_cls, 4), np.uint64)
    for b in range(256):
        c = cls[b]
        n_bytes[c] += 1
        last[c] = b
        bits[c, b >> 6] |= np.uint64(1) << np.uint64(b & 63)
    main = np.zeros(n, np.int64)  # the live target most bytes lead to (0: none)
    plain = np.zeros((n, 4), np.uint64)  # the bytes that lead there
    count = np.zeros(n, np.int64)
    done = np.zeros(n, np.int64)  # a target's last byte: of two as common, the one done first
    chars = np.full(n, -1, np.int64)  # where each multi-byte character leads
    memo = np.full((8, n), -2, np.int64)
    for q in range(1, n):
        for c in range(n_cls):
            t = trans[q, c]
            if t != 0:
                count[t] += n_bytes[c]
                done[t] = max(done[t], last[c])
        best = 0
        best_count = 0
        best_done = 256
        for c in range(n_cls):
            t = trans[q, c]
            if t != 0 and (
                count[t] > best_count or (count[t] == best_count and done[t] < best_done)
            ):
                best, best_count, best_done = t, count[t], done[t]
        for c in range(n_cls):
            count[trans[q, c]] = 0
            done[trans[q, c]] = 0
        main[q] = best
        if best != 0:
            for c in range(n_cls):
                if trans[q, c] == best:
                    for w in range(4):
                        plain[q, w] |= bits[c, w]
            chars[q] = _multibyte_target(trans, cls, utf8, memo, q)
    total = np.zeros(n, np.int64)
    for q in range(1, n):
        for w in range(4):
            total[q] += _popcount(plain[q, w])
    reach = np.zeros(n, np.int32)
    wide = np.zeros(n, np.int32)
    bytes_ = plain.copy()
    # The chains follow `main`, a graph with one edge per state: each state's values come
    # from its successor's, so states are settled successor first (a path is followed to a
    # settled state, then unwound); a cycle (a loop of the lexer) is settled by rounds of the
    # same rule over its states alone.
    color = np.zeros(n, np.int8)  # 0 new, 1 on the current path, 2 settled
    color[0] = 2
    path = np.empty(n, np.int64)
    for q0 in range(1, n):
        if color[q0]:
            continue
        top = 0
        q = q0
        while color[q] == 0:
            color[q] = 1
            path[top] = q
            top += 1
            q = main[q]
        if color[q] == 1:  # a cycle: path[k:top] from q on
            k = top - 1
            while path[k] != q:
                k -= 1
            cyc = path[k:top]
            size = cyc.shape[0]
            if size == 1:
                # A loop on itself (a string body): its bytes stay its own and each round
                # adds a byte to both chains up to the cap, so the rounds are settled at once
                # (run one by one, they took about a microsecond per such state)
                reach[q] = rounds
                wide[q] = rounds if chars[q] == q else 0
            else:
                nr = np.empty(size, np.int32)
                nw = np.empty(size, np.int32)
                nb = np.empty((size, 4), np.uint64)
                for _ in range(rounds):
                    changed = False
                    for i in range(size):
                        c = cyc[i]
                        nr[i], nw[i] = _chain_step(
                            c, main[c], plain, total, chars, reach, wide, bytes_, nb, i, rounds
                        )
                    for i in range(size):
                        c = cyc[i]
                        if nr[i] != reach[c] or nw[i] != wide[c]:
                            changed = True
                        for w in range(4):
                            if nb[i, w] != bytes_[c, w]:
                                changed = True
                            bytes_[c, w] = nb[i, w]
                        reach[c] = nr[i]
                        wide[c] = nw[i]
                    if not changed:
                        break
            for c in cyc:
                color[c] = 2
            top = k
        while top > 0:  # unwind: each state's successor is settled
            top -= 1
            q = path[top]
            reach[q], wide[q] = _chain_step(
                q, main[q], plain, total, chars, reach, wide, bytes_, bytes_, q, rounds
            )
            color[q] = 2
    return reach, bytes_, wide, memo


@kernel()
def _chain_step(
    q: int,
    m: int,
    plain: np.ndarray,
    total: np.ndarray,
    chars: np.ndarray,
    reach: np.ndarray,
    wide: np.ndarray,
    bytes_: np.ndarray,
    out_bytes: np.ndarray,
    out: int,
    cap: int,
) -> tuple[int, int]:  # pragma: no cover - compiled
    """q's chain from its successor m's: (h, w), and P(q) written to out_bytes[out]."""
    if m == 0:
        for w in range(4):
            out_bytes[out, w] = plain[q, w]
        return 0, 0
    # follow the chain while it keeps most of q's bytes: a counter's last step (only the
    # closing quote) would leave none, so the chain stops before it
    kept = total[q]
    if (
        (plain[q, 0] & ~bytes_[m, 0])
        | (plain[q, 1] & ~bytes_[m, 1])
        | (plain[q, 2] & ~bytes_[m, 2])
        | (plain[q, 3] & ~bytes_[m, 3])
    ):
        kept = 0
        for w in range(4):
            kept += _popcount(plain[q, w] & bytes_[m, w])
    if reach[m] > 0 and 2 * kept >= total[q]:
        for w in range(4):
            out_bytes[out, w] = plain[q, w] & bytes_[m, w]
        return min(cap, 1 + reach[m]), (min(cap, 1 + wide[m]) if chars[q] == m else 0)
    for w in range(4):
        out_bytes[out, w] = plain[q, w]
    return 1, (1 if chars[q] == m else 0)


def chains(
    trans: np.ndarray, cls: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per state q, a byte set P(q) and depths h(q), w(q): every string of at most h(q) bytes,
    all in P(q), keeps the lexer alive from q (the chain of states most bytes lead to: a
    string body loops on itself, h unbounded; a length counter steps to its next count, h =
    the counts left), and so does every string of at most w(q) bytes whose ASCII bytes are in
    P(q) and which is a prefix of well-formed UTF-8 (each multi-byte character, like a byte of
    P(q), steps to the chain's next state). A trie node in state q whose subtree fits either
    is taken whole. h and w are capped at CHAIN_BYTES (lower bounds: safe). Fourth, per
    UTF-8 state u and lexer state p inside a character, the state every rest of the
    character leads to (`rest[u, p]`; below 1 if none or unknown): a node inside a character
    is taken whole when its rest leads into a chain that fits."""
    reach, safe, wide, rest = _chains(trans, cls, UTF8, CHAIN_BYTES)
    return reach, safe, wide, rest.astype(np.int32)
