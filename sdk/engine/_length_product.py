"""A pattern under a length bound, built on demand: `(?=u X{lo,hi} v)R` without its product.

JSON Schema's `maxLength` next to a `pattern` compiles to a lookahead that counts the
string's characters in front of the pattern's automaton. Their product has a state for every
(count, character state, pattern state) that can still finish: 4,000 characters against a
4,600-state URI pattern is over 10^8 of them, where one generation visits a few hundred.

`LengthProduct` numbers all of them arithmetically (`_lazy.LazyDfa`) and computes rows when
asked. What makes that exact is liveness: a state (k, c, r) can finish when some number m of
further items takes the pattern from (c, r) to a place where `v` may follow, with
lo <= k + m <= hi. The sets L_m of (c, r) that finish with exactly m more items are computed
level by level backwards (L_{m+1} from L_m), on (c, r) only, until they repeat: from there
they are periodic, which answers every m up to hi in (levels x pairs) memory.
"""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np

from ..errors import TooComplexError
from ._dfa import Dfa, empty_dfa
from ._lazy import LazyDfa, item_moves, item_width
from ._native import kernel

__all__ = ["LengthProduct", "length_product"]

#: Level-by-level work (edges visited) before the construction gives up: a pattern whose
#: finishing sets never repeat below a bound of thousands (`(ab){0,3000}` under `{0,4000}`).
MAX_LEVEL_WORK = 200_000_000
#: Memory of the next-finishing-count table (levels x pairs, int32).
MAX_TABLE_BYTES = 64 << 20
_FAR = np.iinfo(np.int32).max


def _walk(trans: np.ndarray, cls: np.ndarray, states: np.ndarray, text: bytes) -> np.ndarray:
    for b in text:
        states = trans[states, cls[b]]
    return states


class LengthProduct(LazyDfa):
    """R ∩ u·X{lo,hi}·v·Σ*; states: u's positions, then (k, c, r) for k items done, X's
    inner state c and R's state r, then (j, r) inside v, then R's states alone."""

    branchy = True

    def __init__(
        self, rest: Dfa, u: bytes, x: Dfa, lo: int, hi: int, v: bytes, reps: np.ndarray
    ) -> None:
        super().__init__()
        self.w = item_width(x)
        self.live_x, self.target, self.inc = item_moves(x)
        self.rt = rest.table  # int32, shared with `rest`: an int64 copy doubled the biggest
        # table of a compile (54 MB for a 26k-state continuation)
        self.rcls = rest.classes.astype(np.int64)  # R's column of every byte
        self.racc = rest.accepting
        self.nr = nr = rest.n_states - 1
        self.u, self.v, self.lo, self.hi = u, v, lo, hi
        self.u_arr = np.frombuffer(u, dtype=np.uint8).astype(np.int64)
        self.v_arr = np.frombuffer(v, dtype=np.uint8).astype(np.int64)
        self.cb = 1 + len(u) if u else 1
        self.vb = self.cb + (hi + 1) * self.w * nr
        self.rb = self.vb + (len(v) - 1) * nr
        self.n_states = self.rb + nr
        self.nullable = False
        # R's state along u; whether R can still read v[j:] from each state
        path = [1]
        for b in u:
            path.append(rest.move(path[-1], b))
        self.u_path = path
        r_all = np.arange(1, nr + 1)
        self.v_ok = np.stack(
            [_walk(self.rt, self.rcls, r_all, v[j:]) != 0 for j in range(len(v) + 1)]
        )
        self.levels = _levels(self, hi, reps)
        self.nbytes = self.levels.nbytes + self.rt.nbytes

    # -- numbering

    def c_state(self, k: np.ndarray, c: np.ndarray, r: np.ndarray) -> np.ndarray:
        return self.cb + (k * self.w + c) * self.nr + r - 1

    def _c_alive(self, k: np.ndarray, c: np.ndarray, r: np.ndarray) -> np.ndarray:
        a = np.maximum(self.lo - k, 0)
        return self.levels.first_from(a, c * self.nr + r - 1) <= self.hi - k

    # -- LazyDfa

    def rows(self, qs: np.ndarray) -> np.ndarray:
        qs = np.asarray(qs, dtype=np.int64)
        return self.step(np.repeat(qs, 256), np.tile(np.arange(256), len(qs))).reshape(-1, 256)

    def step(self, qs: np.ndarray, bs: np.ndarray) -> np.ndarray:
        qs = np.asarray(qs, dtype=np.int64)
        bs = np.asarray(bs, dtype=np.int64)
        out = np.zeros(len(qs), dtype=np.int64)
        in_u = qs < self.cb
        if in_u.any():
            i = qs[in_u] - 1
            last = self.cb + self.u_path[-1] - 1
            nxt = np.where(i + 1 < len(self.u), i + 2, last)
            out[in_u] = np.where(bs[in_u] == self.u_arr[i], nxt, 0)
        in_c = (qs >= self.cb) & (qs < self.vb)
        if in_c.any():
            out[in_c] = self._c_step(qs[in_c] - self.cb, bs[in_c])
        in_v = (qs >= self.vb) & (qs < self.rb)
        if in_v.any():
            j0, r0 = np.divmod(qs[in_v] - self.vb, self.nr)
            out[in_v] = self._v_step(j0 + 1, r0 + 1, bs[in_v])
        in_r = qs >= self.rb
        if in_r.any():
            t = self.rt[qs[in_r] - self.rb + 1, self.rcls[bs[in_r]]].astype(np.int64)
            out[in_r] = np.where(t != 0, t + self.rb - 1, 0)
        return out

    def _c_step(self, local: np.ndarray, bs: np.ndarray) -> np.ndarray:
        kc, r0 = np.divmod(local, self.nr)
        k, c = np.divmod(kc, self.w)
        r = r0 + 1
        r2 = self.rt[r, self.rcls[bs]].astype(np.int64)
        k2 = k + self.inc[c, bs]
        c2 = self.target[c, bs]
        ok = self.live_x[c, bs] & (r2 != 0) & (k2 <= self.hi)
        ok[ok] = self._c_alive(k2[ok], c2[ok], r2[ok])
        out = np.where(ok, self.c_state(k2, c2, r2), 0)
        # at an item boundary with enough items, v's first byte leaves the count
        leave = (c == 0) & (k >= self.lo) & (bs == self.v[0])
        if leave.any():
            out[leave] = self._after_v(1, r2[leave])
        return out

    def _after_v(self, j: int | np.ndarray, r: np.ndarray) -> np.ndarray:
        """The state for R at `r` (0: dead) having read v[:j]."""
        j = np.broadcast_to(np.asarray(j, dtype=np.int64), r.shape)
        ok = r != 0
        ok[ok] = self.v_ok[j[ok], r[ok] - 1]
        done = j == len(self.v)
        return np.where(ok, np.where(done, self.rb + r - 1, self.vb + (j - 1) * self.nr + r - 1), 0)

    def _v_step(self, j: np.ndarray, r: np.ndarray, bs: np.ndarray) -> np.ndarray:
        r2 = np.where(bs == self.v_arr[j], self.rt[r, self.rcls[bs]].astype(np.int64), 0)
        return self._after_v(j + 1, r2)

    def acc(self, qs: np.ndarray) -> np.ndarray:
        qs = np.asarray(qs, dtype=np.int64)
        out = np.zeros(len(qs), dtype=bool)
        in_r = qs >= self.rb
        out[in_r] = self.racc[qs[in_r] - self.rb + 1]
        return out

    def key(self, q: int, horizon: int) -> Hashable:
        if not self.cb <= q < self.vb:
            return q
        kc, r0 = divmod(q - self.cb, self.nr)
        k, c = divmod(kc, self.w)
        # Inside `horizon` bytes the count grows by at most `horizon`. What the window sees of
        # the lower bound is its exact distance while it is ahead; of the upper one, its
        # distance up to where every finishing count is in reach (see `_Levels`).
        a = max(self.lo - k, 0)
        b = min(self.hi - k, horizon + a + self.levels.reach + 1)
        return ("c", c, r0, a, b)

    @property
    def first(self) -> np.ndarray:
        return np.asarray(self.rows(np.asarray([1]))[0] != 0)

    @property
    def final_out(self) -> np.ndarray:
        return np.asarray((self.rt[1:][self.racc[1:]] != 0).any(axis=0)[self.rcls])


class _Levels:
    """L_m (pairs n = c * nr + r - 1 that finish with exactly m more items), as `nxt[m, n]`:
    the least m' >= m with n in L_m'. Past `start` the levels repeat every `period`."""

    def __init__(self, nxt: np.ndarray, start: int, period: int) -> None:
        self.nxt, self.start, self.period = nxt, start, period
        # the least finishing count at or after any m is below m + reach, if there is one
        self.reach = start + period
        self.nbytes = nxt.nbytes

    def first_from(self, a: np.ndarray, n: np.ndarray) -> np.ndarray:
        """The least m >= a with n in L_m (a huge number when none)."""
        a = np.asarray(a, dtype=np.int64)
        rows = len(self.nxt)
        fold = np.where(
            a < rows, a, self.start + (a - self.start) % self.period
        )  # a row of the same phase
        got = self.nxt[fold, n].astype(np.int64)
        return np.where(got >= _FAR, _FAR, got + (a - fold))


def _levels(p: LengthProduct, hi: int, reps: np.ndarray) -> _Levels:
    """The finishing sets of `p`'s (item state, pattern state) pairs, on one column per byte
    class that neither the item nor the pattern tells apart."""
    w, nr = p.w, p.nr
    n_pairs = w * nr
    rt = p.rt[1:][:, p.rcls[reps]].astype(np.int64)  # [nr, classes]
    cl, ct, ci = p.live_x[:, reps], p.target[:, reps], p.inc[:, reps]  # [w, classes]
    ptr1, src1, ptr0, src0 = _edges_by_target(cl, ct, ci.astype(np.bool_), rt)
    finish = np.zeros(n_pairs, dtype=bool)
    finish[:nr] = p.v_ok[0]  # at an item boundary, v (and then anything) may follow
    max_levels = max(2, min(hi + 1, MAX_TABLE_BYTES // (4 * n_pairs)))
    grid, n_levels, start = _level_sets(finish, ptr1, src1, ptr0, src0, max_levels, MAX_LEVEL_WORK)
    if n_levels < 0 or (start < 0 and n_levels <= hi):
        raise TooComplexError("length bound on a pattern: the pattern's lengths do not settle")
    levels = list(grid[:n_levels])
    if start < 0:  # every count up to hi computed: nothing repeats within reach
        start, period = len(levels), 1
        levels.append(np.zeros(n_pairs, dtype=bool))
    else:
        period = n_levels - start
    # two copies of the period, so that the last phase sees the next one's first members
    seq = levels + levels[start:]
    nxt = np.full((len(seq) + 1, n_pairs), _FAR, dtype=np.int32)
    for m in range(len(seq) - 1, -1, -1):
        nxt[m] = np.where(seq[m], m, nxt[m + 1])
    return _Levels(nxt[: len(levels)], start, period)


@kernel("(b1[::1, :], i8[::1, :], b1[::1, :], i8[::1, :])")
def _edges_by_target(
    live: np.ndarray, target: np.ndarray, inc: np.ndarray, rt: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """The moves of the (c, r) graph (pair c * nr + r - 1; one per byte class), grouped by
    target as (offsets, sources): those that complete an item, then those inside one."""
    w, n_classes = live.shape
    nr = rt.shape[0]
    n = w * nr
    ptr = np.zeros((2, n + 1), dtype=np.int64)
    for c in range(w):
        for j in range(n_classes):
            if live[c, j]:
                k = 1 if inc[c, j] else 0
                for r in range(nr):
                    if rt[r, j]:
                        ptr[k, target[c, j] * nr + rt[r, j]] += 1  # offsets shifted by one
    for k in range(2):
        for x in range(n):
            ptr[k, x + 1] += ptr[k, x]
    fill = ptr[:, :n].copy()
    src = np.empty((2, max(ptr[0, n], ptr[1, n])), dtype=np.int64)
    for c in range(w):
        for j in range(n_classes):
            if live[c, j]:
                k = 1 if inc[c, j] else 0
                for r in range(nr):
                    if rt[r, j]:
                        y = target[c, j] * nr + rt[r, j] - 1
                        src[k, fill[k, y]] = c * nr + r
                        fill[k, y] += 1
    return ptr[1], src[1, : ptr[1, n]], ptr[0], src[0, : ptr[0, n]]


@kernel(inline=True)
def _mark_sources(
    ptr: np.ndarray, src: np.ndarray, y: int, marked: np.ndarray, stack: np.ndarray, top: int
) -> int:  # pragma: no cover - compiled
    """Mark the sources of the edges into `y`, pushing the new ones; the new stack top."""
    for e in range(ptr[y], ptr[y + 1]):
        x = src[e]
        if not marked[x]:
            marked[x] = True
            stack[top] = x
            top += 1
    return top


@kernel("(b1[::1], i8[::1], i8[::1], i8[::1], i8[::1], i8, i8)")
def _level_sets(
    finish: np.ndarray,
    ptr1: np.ndarray,
    src1: np.ndarray,
    ptr0: np.ndarray,
    src0: np.ndarray,
    max_levels: int,
    max_work: int,
) -> tuple[np.ndarray, int, int]:  # pragma: no cover - compiled
    """L_0 = finish, L_{m+1} = the pairs with an item-completing edge into L_m, closed back
    along the edges inside an item; until a level repeats an earlier one (returns the levels,
    their count and the first of the repeated one) or `max_levels` are computed (start -1).
    A count of -1: over `max_work` edges."""
    n = len(finish)
    # rows are cleared as they are reached: the pages of levels never computed (most of
    # them when the levels settle early) are never touched, so never resident
    grid = np.empty((max_levels, n), dtype=np.bool_)
    hashes = np.zeros(max_levels, dtype=np.uint64)
    grid[0] = finish
    stack = np.empty(n, dtype=np.int64)
    work = 0
    for m in range(max_levels):
        h = np.uint64(1469598103934665603)
        for x in range(n):
            if grid[m, x]:
                h = (h ^ np.uint64(x + 1)) * np.uint64(1099511628211)
        hashes[m] = h
        for j in range(m):
            if hashes[j] == h:
                same = True
                for x in range(n):
                    if grid[j, x] != grid[m, x]:
                        same = False
                        break
                if same:
                    return grid, m, j
        if m + 1 == max_levels:
            break
        top = 0
        nxt = grid[m + 1]
        nxt[:] = False
        for y in range(n):
            if grid[m, y]:
                top = _mark_sources(ptr1, src1, y, nxt, stack, top)
                work += ptr1[y + 1] - ptr1[y]
        while top:
            top -= 1
            y = stack[top]
            top = _mark_sources(ptr0, src0, y, nxt, stack, top)
            work += ptr0[y + 1] - ptr0[y]
        if work > max_work:
            return grid, -1, -1
    return grid, max_levels, -1


def length_product(
    rest: Dfa, u: bytes, x: Dfa, lo: int, hi: int, v: bytes, reps: np.ndarray
) -> LazyDfa | Dfa:
    """`(?=u X{lo,hi} v)rest` for a prefix-free item X (what `_lazy.counted` takes) and a
    non-empty v whose first byte X cannot start with; `reps` has a byte of every class that
    neither X nor `rest` tells apart. The empty automaton when nothing matches."""
    assert v and x.move(1, v[0]) == 0
    out = LengthProduct(rest, u, x, lo, hi, v, reps)
    r = out.u_path[-1]
    if r == 0 or not out._c_alive(np.asarray([0]), np.asarray([0]), np.asarray([r]))[0]:
        return empty_dfa()
    return out
