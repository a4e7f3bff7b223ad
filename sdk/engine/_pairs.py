"""The reachable pairs of a product automaton, breadth-first, compiled.

`_products.product` numbers pairs through a dense table of every (a, b) pair: fine for small
products, but `maxLength` around a long `pattern` pairs 4,648 x 7,005 states, a 130 MB table
of which ~100k entries are used. Here pairs are numbered through an open-addressing hash of
the pairs actually reached (a few MB), in the same order as the dense path (level by level,
each level's new pairs in ascending pair code), so both paths build the same automaton.
"""

from __future__ import annotations

import numpy as np

from ._length_product import _mark_sources
from ._native import kernel

__all__ = ["pair_bfs"]

#: `pair_bfs` modes: L(a) ∩ L(b); L(a) \ L(b) (b's dead state is a sink); L(a) ∪ L(b).
INTERSECTION, DIFFERENCE, UNION = 0, 1, 2


@kernel()
def _slot(keys: np.ndarray, code: np.int64) -> int:  # pragma: no cover - compiled
    mask = len(keys) - 1
    h = int((np.uint64(code) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(32)) & mask
    while keys[h] != -1 and keys[h] != code:
        h = (h + 1) & mask
    return h


@kernel(inline=True)
def _live(tx: np.int64, ty: np.int64, mode: int) -> bool:  # pragma: no cover - compiled
    if mode == INTERSECTION:
        return tx != 0 and ty != 0
    if mode == DIFFERENCE:
        return tx != 0
    return tx != 0 or ty != 0


@kernel("(i8[::1, :], i8[::1, :], i8, i8)")
def pair_bfs(
    a_trans: np.ndarray, b_trans: np.ndarray, mode: int, limit: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:  # pragma: no cover - compiled
    """(rows [n + 1, classes] of pair ids, x and y of every id, n); n = -1 past `limit`
    states. Pair (1, 1) is id 1; id 0 is the dead state; `a_trans`/`b_trans` are int64
    tables with one column per byte class, row 0 all zeros.

    The rows are written once every pair is numbered, in one array of the exact size: an
    attempt refused at `limit` (a table tried before a lazy automaton) then never holds a
    table, and a kept one has no doubling slack (a refused 100k-state attempt held 37 MB)."""
    n_cls = a_trans.shape[1]
    nb = b_trans.shape[0]
    keys = np.full(1 << 12, -1, dtype=np.int64)
    vals = np.zeros(1 << 12, dtype=np.int32)
    cap = 1024
    xs = np.zeros(cap, dtype=np.int64)
    ys = np.zeros(cap, dtype=np.int64)
    start = np.int64(nb + 1)
    h = _slot(keys, start)
    keys[h] = start
    vals[h] = 1
    xs[1] = 1
    ys[1] = 1
    n = 1
    lo, hi = 1, 1  # the frontier: ids lo..hi
    buf = np.empty(1024, dtype=np.int64)
    while lo <= hi:
        k = 0
        for s in range(lo, hi + 1):
            x, y = xs[s], ys[s]
            for c in range(n_cls):
                tx, ty = a_trans[x, c], b_trans[y, c]
                if _live(tx, ty, mode):
                    code = tx * nb + ty
                    if keys[_slot(keys, code)] == -1:
                        if k == len(buf):
                            grown = np.empty(2 * k, dtype=np.int64)
                            grown[:k] = buf
                            buf = grown
                        buf[k] = code
                        k += 1
        new = np.unique(buf[:k])
        if n + len(new) > limit:
            return np.zeros((1, n_cls), dtype=np.int32), xs[:1], ys[:1], -1
        if n + len(new) + 1 > cap:
            while n + len(new) + 1 > cap:
                cap *= 2
            xs2 = np.zeros(cap, dtype=np.int64)
            ys2 = np.zeros(cap, dtype=np.int64)
            xs2[: n + 1] = xs[: n + 1]
            ys2[: n + 1] = ys[: n + 1]
            xs, ys = xs2, ys2
        if 2 * (n + len(new)) > len(keys):  # keep the load under a half
            size = len(keys)
            while 2 * (n + len(new)) > size:
                size *= 2
            old_keys, old_vals = keys, vals
            keys = np.full(size, -1, dtype=np.int64)
            vals = np.zeros(size, dtype=np.int32)
            for j in range(len(old_keys)):
                if old_keys[j] != -1:
                    h = _slot(keys, old_keys[j])
                    keys[h] = old_keys[j]
                    vals[h] = old_vals[j]
        for code in new:
            n += 1
            h = _slot(keys, code)
            keys[h] = code
            vals[h] = n
            xs[n] = code // nb
            ys[n] = code % nb
        lo, hi = hi + 1, n
    rows = np.zeros((n + 1, n_cls), dtype=np.int32)
    for s in range(1, n + 1):
        x, y = xs[s], ys[s]
        for c in range(n_cls):
            tx, ty = a_trans[x, c], b_trans[y, c]
            if _live(tx, ty, mode):
                rows[s, c] = vals[_slot(keys, tx * nb + ty)]
    return rows, xs[: n + 1].copy(), ys[: n + 1].copy(), n


@kernel()
def _slot2(
    kx: np.ndarray, ks: np.ndarray, x: np.int64, s: np.int64
) -> int:  # pragma: no cover - compiled
    mask = len(kx) - 1
    mixed = np.uint64(x) * np.uint64(0x9E3779B97F4A7C15) ^ np.uint64(s) * np.uint64(
        0xC2B2AE3D27D4EB4F
    )
    h = int(mixed >> np.uint64(32)) & mask
    while kx[h] != -1 and (kx[h] != x or ks[h] != s):
        h = (h + 1) & mask
    return h


@kernel("(i8[::1, :], b1[::1], i8[::1, :], b1[::1], i8)")
def concat_bfs(
    a_trans: np.ndarray, a_acc: np.ndarray, b_trans: np.ndarray, b_acc: np.ndarray, limit: int
) -> tuple[np.ndarray, np.ndarray, int]:  # pragma: no cover - compiled
    """L(a)·L(b) as a DFA over (a's state, the set of b's states), b of at most 63 states:
    (rows [n + 1, classes], accepting [n + 1], n); n = -1 past `limit` states. Tables as in
    `pair_bfs`. Every state it numbers is live when a and b are trimmed: a live state of a can
    still reach acceptance and then b's start, a live state of b acceptance."""
    n_cls = a_trans.shape[1]
    nb = b_trans.shape[0]
    b_mask = np.int64(0)
    for j in range(1, nb):
        if b_acc[j]:
            b_mask |= np.int64(1) << np.int64(j)
    start_b = np.int64(2)  # b's start, state 1
    kx = np.full(1 << 12, -1, dtype=np.int64)
    ks = np.zeros(1 << 12, dtype=np.int64)
    vals = np.zeros(1 << 12, dtype=np.int32)
    cap = 1024
    xs = np.zeros(cap, dtype=np.int64)
    ss = np.zeros(cap, dtype=np.int64)
    rows = np.zeros((cap, n_cls), dtype=np.int32)
    s0 = start_b if a_acc[1] else np.int64(0)
    h = _slot2(kx, ks, np.int64(1), s0)
    kx[h], ks[h], vals[h] = 1, s0, 1
    xs[1], ss[1] = 1, s0
    n = 1
    q = 1
    while q <= n:
        x, bits = xs[q], ss[q]
        for c in range(n_cls):
            x2 = a_trans[x, c]
            s2 = np.int64(0)
            if bits != 0:
                for j in range(1, nb):
                    if (bits >> np.int64(j)) & np.int64(1):
                        t = b_trans[j, c]
                        if t != 0:
                            s2 |= np.int64(1) << t
            if x2 != 0 and a_acc[x2]:
                s2 |= start_b
            if x2 == 0 and s2 == 0:
                continue
            h = _slot2(kx, ks, x2, s2)
            if kx[h] == -1:
                if n + 1 > limit:
                    return rows[:1], np.zeros(1, dtype=np.bool_), -1
                n += 1
                if n >= cap:
                    cap *= 2
                    xs2 = np.zeros(cap, dtype=np.int64)
                    ss2 = np.zeros(cap, dtype=np.int64)
                    rows2 = np.zeros((cap, n_cls), dtype=np.int32)
                    xs2[:n] = xs[:n]
                    ss2[:n] = ss[:n]
                    rows2[:n] = rows[:n]
                    xs, ss, rows = xs2, ss2, rows2
                xs[n], ss[n] = x2, s2
                kx[h], ks[h], vals[h] = x2, s2, n
                if 2 * n > len(kx):  # keep the load under a half
                    okx, oks, ovals = kx, ks, vals
                    kx = np.full(2 * len(okx), -1, dtype=np.int64)
                    ks = np.zeros(2 * len(okx), dtype=np.int64)
                    vals = np.zeros(2 * len(okx), dtype=np.int32)
                    for i in range(len(okx)):
                        if okx[i] != -1:
                            g = _slot2(kx, ks, okx[i], oks[i])
                            kx[g], ks[g], vals[g] = okx[i], oks[i], ovals[i]
                    h = _slot2(kx, ks, x2, s2)
            rows[q, c] = vals[h]
        q += 1
    acc = np.zeros(n + 1, dtype=np.bool_)
    for i in range(1, n + 1):
        acc[i] = (ss[i] & b_mask) != 0
    return rows[: n + 1], acc, n


@kernel("(i4[:, ::1], b1[::1])")
def trim_states(trans: np.ndarray, acc: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    """The states of a table that are reachable from state 1 and can reach an accepting one
    (bool [n]; the dead state 0 never). Moves into states that cannot reach acceptance are
    set to 0 in `trans` (the caller's scratch). One pass over the table for the reverse
    edges, then two searches: numpy's sort-based edge lists cost ~0.2 ms per small table."""
    n, k = trans.shape
    deg = np.zeros(n + 1, dtype=np.int64)
    for s in range(1, n):
        for c in range(k):
            t = trans[s, c]
            if t != 0:
                deg[t + 1] += 1
    for i in range(n):
        deg[i + 1] += deg[i]
    fill = deg[:n].copy()
    src = np.zeros(deg[n], dtype=np.int32)
    for s in range(1, n):
        for c in range(k):
            t = trans[s, c]
            if t != 0:
                src[fill[t]] = s
                fill[t] += 1
    live = np.zeros(n, dtype=np.bool_)
    todo = np.zeros(n, dtype=np.int64)
    top = 0
    for s in range(1, n):
        if acc[s]:
            live[s] = True
            todo[top] = s
            top += 1
    while top > 0:
        top -= 1
        top = _mark_sources(deg, src, todo[top], live, todo, top)
    for s in range(1, n):
        for c in range(k):
            if not live[trans[s, c]]:
                trans[s, c] = 0
    keep = np.zeros(n, dtype=np.bool_)
    if n < 2 or not live[1]:
        return keep
    keep[1] = True
    todo[0] = 1
    top = 1
    while top > 0:
        top -= 1
        s = todo[top]
        for c in range(k):
            t = trans[s, c]
            if t != 0 and not keep[t]:
                keep[t] = True
                todo[top] = t
                top += 1
    return keep
