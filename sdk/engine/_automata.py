"""Byte-level automata: regex AST → NFA → trimmed DFA, with intersection for lookaheads.

A `Dfa` is a dense table `trans[state, byte]` with state 0 the dead state and state 1 the
start, so that vectorised walks over a whole vocabulary are plain numpy indexing. Every state
but 0 can still reach an accepting state (trimmed): "live" therefore means "can complete",
which is what exact masks need.
"""

from __future__ import annotations

import itertools
from array import array
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from ..errors import TooComplexError
from . import _regex as rx
from ._cache import BoundedCache

MAX_NFA_STATES = 400_000
MAX_DFA_STATES = 100_000

_serial = itertools.count(1)


@dataclass(eq=False)
class Dfa:
    trans: np.ndarray  # int32 [n_states, 256]; row 0 is the dead state
    accepting: np.ndarray  # bool [n_states]
    serial: int = field(default_factory=lambda: next(_serial))

    @property
    def n_states(self) -> int:
        return int(self.trans.shape[0])

    @cached_property
    def table(self) -> array[int]:
        """`trans` flattened (`table[state * 256 + byte]`): fast scalar lookups, cheap to build."""
        return array("i", self.trans.astype(np.int32, copy=False).tobytes())

    @cached_property
    def accepting_list(self) -> list[bool]:
        return self.accepting.tolist()

    @property
    def nullable(self) -> bool:
        return bool(self.accepting[1])

    def matches(self, data: bytes) -> bool:
        s = 1
        for b in data:
            s = int(self.trans[s, b])
            if s == 0:
                return False
        return bool(self.accepting[s])

    def without_empty(self) -> Dfa:
        """The same language minus the empty string (a fresh, non-accepting start state)."""
        if not self.nullable:
            return self
        trans = np.concatenate([self.trans[:1], self.trans[1:2], self.trans[1:]], axis=0)
        trans = np.where(trans > 0, trans + 1, 0).astype(np.int32)
        acc = np.concatenate([[False, False], self.accepting[1:]])
        return _trim(trans, acc)


# ---------------------------------------------------------------- UTF-8 ranges


def utf8_sequences(lo: int, hi: int) -> list[list[tuple[int, int]]]:
    """Split a code-point range into byte-range sequences (surrogates excluded)."""
    out: list[list[tuple[int, int]]] = []
    stack = [(lo, hi)]
    while stack:
        lo, hi = stack.pop()
        if lo > hi:
            continue
        if lo <= 0xDFFF and hi >= 0xD800:
            stack.append((0xE000, hi))
            stack.append((lo, 0xD7FF))
            continue
        split = False
        for b in (0x7F, 0x7FF, 0xFFFF):
            if lo <= b < hi:
                stack.append((b + 1, hi))
                stack.append((lo, b))
                split = True
                break
        if split:
            continue
        if hi <= 0x7F:
            out.append([(lo, hi)])
            continue
        for i in range(1, 4):
            m = (1 << (6 * i)) - 1
            if (lo & ~m) != (hi & ~m):
                if (lo & m) != 0:
                    stack.append(((lo | m) + 1, hi))
                    stack.append((lo, lo | m))
                    split = True
                    break
                if (hi & m) != m:
                    stack.append((hi & ~m, hi))
                    stack.append((lo, (hi & ~m) - 1))
                    split = True
                    break
        if split:
            continue
        a = chr(lo).encode("utf-8")
        b2 = chr(hi).encode("utf-8")
        out.append(list(zip(a, b2, strict=True)))
    return out


# ---------------------------------------------------------------- NFA


class Nfa:
    def __init__(self) -> None:
        self.eps: list[list[int]] = []
        self.edges: list[list[tuple[int, int, int]]] = []

    def state(self) -> int:
        if len(self.eps) >= MAX_NFA_STATES:
            raise TooComplexError(f"automaton exceeds {MAX_NFA_STATES} NFA states")
        self.eps.append([])
        self.edges.append([])
        return len(self.eps) - 1

    def build(self, node: rx.Node) -> tuple[int, int]:
        """Thompson construction; returns (start, end)."""
        if isinstance(node, rx.Chars):
            s, e = self.state(), self.state()
            for seq in _cached_sequences(node.ranges):
                cur = s
                for k, (lo, hi) in enumerate(seq):
                    nxt = e if k == len(seq) - 1 else self.state()
                    self.edges[cur].append((lo, hi, nxt))
                    cur = nxt
            return s, e
        if isinstance(node, rx.Seq):
            return self.build_seq(node.items)
        if isinstance(node, rx.Alt):
            s, e = self.state(), self.state()
            for item in node.items:
                a, b = self.build(item)
                self.eps[s].append(a)
                self.eps[b].append(e)
            return s, e
        if isinstance(node, rx.Repeat):
            return self.build_repeat(node)
        if isinstance(node, rx.Look):
            return self.build_seq((node,))
        raise TypeError(node)

    def build_seq(self, items: tuple[rx.Node, ...]) -> tuple[int, int]:
        s = cur = self.state()
        for k, item in enumerate(items):
            if isinstance(item, rx.Look):
                rest = rx.Seq(items[k + 1 :])
                dfa = look_intersection(item, rest)
                a, b = self.embed(dfa)
                self.eps[cur].append(a)
                return s, b
            a, b = self.build(item)
            self.eps[cur].append(a)
            cur = b
        return s, cur

    def build_repeat(self, node: rx.Repeat) -> tuple[int, int]:
        if node.max is not None and node.max > 4:
            counted = _counted_repeat(node)
            if counted is not None:
                return self.embed(counted)
        s = cur = self.state()
        for _ in range(node.min):
            a, b = self.build(node.item)
            self.eps[cur].append(a)
            cur = b
        if node.max is None:
            a, b = self.build(node.item)
            loop = self.state()
            self.eps[cur].append(loop)
            self.eps[loop].append(a)
            self.eps[b].append(loop)
            return s, loop
        end = self.state()
        self.eps[cur].append(end)
        for _ in range(node.max - node.min):
            a, b = self.build(node.item)
            self.eps[cur].append(a)
            self.eps[b].append(end)
            cur = b
        return s, end

    def embed(self, dfa: Dfa) -> tuple[int, int]:
        base = len(self.eps)
        for _ in range(dfa.n_states):
            self.state()
        end = self.state()
        states, los, his, targets = _segments(dfa.trans)
        edges = self.edges
        for q, lo, hi, tgt in zip(
            states.tolist(), los.tolist(), his.tolist(), targets.tolist(), strict=True
        ):
            edges[base + q].append((lo, hi, base + tgt))
        for q in np.nonzero(dfa.accepting)[0].tolist():
            self.eps[base + q].append(end)
        return base + 1, end


def _counted_repeat(node: rx.Repeat) -> Dfa | None:
    """`X{lo,hi}` built directly as (count × X-state) when X is prefix-free (a character, an
    escape): linear in hi, where Thompson copies + subset construction are quadratic-ish."""
    assert node.max is not None
    lo, hi = node.min, node.max
    x = compile_node(node.item)
    acc = x.accepting
    if x.nullable or x.n_states > 256 or x.trans[acc].any():
        return None
    inner = [q for q in range(1, x.n_states) if not acc[q]]
    width = len(inner)
    pos = np.zeros(x.n_states, dtype=np.int64)
    step = np.zeros(x.n_states, dtype=np.int64)
    for i, q in enumerate(inner):
        pos[q] = i
    for q in range(1, x.n_states):
        if acc[q]:
            pos[q] = 0  # an item is complete: back to X's start, one count up
            step[q] = 1
    sub = x.trans[inner]
    live = sub != 0
    if (hi + 1) * width + 1 > MAX_DFA_STATES:
        raise TooComplexError(f"automaton exceeds {MAX_DFA_STATES} DFA states")
    trans = np.zeros(((hi + 1) * width + 1, 256), dtype=np.int32)
    accepting = np.zeros(len(trans), dtype=bool)
    for k in range(hi + 1):
        newk = k + step[sub]
        ok = live & (newk <= hi)
        trans[1 + k * width : 1 + (k + 1) * width] = np.where(ok, 1 + newk * width + pos[sub], 0)
        accepting[1 + k * width] = lo <= k
    return _trim(trans, accepting)


def _segments(trans: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Runs of equal targets in every row: (state, first byte, last byte, target), dead dropped."""
    n = trans.shape[0]
    starts = np.ones((n, 256), dtype=bool)
    starts[:, 1:] = trans[:, 1:] != trans[:, :-1]
    rows, cols = np.nonzero(starts)
    ends = np.empty_like(cols)
    ends[:-1] = cols[1:] - 1
    last_in_row = np.ones(len(rows), dtype=bool)
    last_in_row[:-1] = rows[1:] != rows[:-1]
    ends[last_in_row] = 255
    targets = trans[rows, cols]
    keep = (targets != 0) & (rows != 0)
    return rows[keep], cols[keep], ends[keep], targets[keep]


_seq_cache: dict[rx.Ranges, list[list[tuple[int, int]]]] = {}


def _cached_sequences(ranges: rx.Ranges) -> list[list[tuple[int, int]]]:
    seqs = _seq_cache.get(ranges)
    if seqs is None:
        seqs = [seq for lo, hi in ranges for seq in utf8_sequences(lo, hi)]
        if len(_seq_cache) > 4096:
            _seq_cache.clear()
        _seq_cache[ranges] = seqs
    return seqs


# ---------------------------------------------------------------- determinisation


def determinize(nfa: Nfa, start: int, end: int) -> Dfa:
    n = len(nfa.eps)
    bounds = {0, 256}
    for es in nfa.edges:
        for lo, hi, _ in es:
            bounds.add(lo)
            bounds.add(hi + 1)
    cuts = sorted(bounds)
    byte_class = np.zeros(256, dtype=np.int32)
    for k in range(len(cuts) - 1):
        byte_class[cuts[k] : cuts[k + 1]] = k
    n_classes = len(cuts) - 1
    # per NFA state: class -> targets
    moves: list[dict[int, list[int]]] = [{} for _ in range(n)]
    for q in range(n):
        for lo, hi, tgt in nfa.edges[q]:
            for c in range(int(byte_class[lo]), int(byte_class[hi]) + 1):
                moves[q].setdefault(c, []).append(tgt)
    closure_cache: dict[int, frozenset[int]] = {}

    def closure(q: int) -> frozenset[int]:
        got = closure_cache.get(q)
        if got is not None:
            return got
        seen = {q}
        todo = [q]
        while todo:
            x = todo.pop()
            for y in nfa.eps[x]:
                if y not in seen:
                    seen.add(y)
                    todo.append(y)
        fs = frozenset(seen)
        closure_cache[q] = fs
        return fs

    start_set = closure(start)
    ids: dict[frozenset[int], int] = {start_set: 1}
    order = [start_set]
    rows: list[list[int]] = []
    acc: list[bool] = [False]
    k = 0
    while k < len(order):
        cur = order[k]
        k += 1
        acc.append(end in cur)
        row = [0] * n_classes
        by_class: dict[int, set[int]] = {}
        for q in cur:
            for c, tgts in moves[q].items():
                by_class.setdefault(c, set()).update(tgts)
        for c, targets in by_class.items():
            nxt_set: set[int] = set()
            for t in targets:
                nxt_set |= closure(t)
            key = frozenset(nxt_set)
            d = ids.get(key)
            if d is None:
                d = len(order) + 1
                if d > MAX_DFA_STATES:
                    raise TooComplexError(f"automaton exceeds {MAX_DFA_STATES} DFA states")
                ids[key] = d
                order.append(key)
            row[c] = d
        rows.append(row)
    compact = np.zeros((len(order) + 1, n_classes), dtype=np.int32)
    if rows:
        compact[1:] = np.asarray(rows, dtype=np.int32)
    trans = compact[:, byte_class]
    return _trim(np.ascontiguousarray(trans), np.asarray(acc, dtype=bool))


def _edges(trans: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct (source, target) pairs of a transition table, dead state excluded."""
    n = trans.shape[0]
    codes = np.unique(np.arange(n, dtype=np.int64)[:, None] * n + trans)
    src, dst = np.divmod(codes, n)
    keep = (dst != 0) & (src != 0)
    return src[keep], dst[keep]


def _bfs(start: np.ndarray, src: np.ndarray, dst: np.ndarray, n: int) -> np.ndarray:
    """States reachable from `start` (bool mask) following src → dst edges (CSR, plain BFS)."""
    order = np.argsort(src, kind="stable")
    bounds = np.searchsorted(src[order], np.arange(n + 1)).tolist()
    targets = dst[order].tolist()
    seen = start.tolist()
    todo = [q for q in range(n) if seen[q]]
    while todo:
        q = todo.pop()
        for t in targets[bounds[q] : bounds[q + 1]]:
            if not seen[t]:
                seen[t] = True
                todo.append(t)
    return np.asarray(seen, dtype=bool)


def _trim(trans: np.ndarray, acc: np.ndarray) -> Dfa:
    """Drop states that cannot reach acceptance or cannot be reached; renumber from 1."""
    n = trans.shape[0]
    acc = acc.copy()
    acc[0] = False
    if n < 2:
        return Dfa(np.zeros((2, 256), dtype=np.int32), np.zeros(2, dtype=bool))
    src, dst = _edges(trans)
    live = _bfs(acc, dst, src, n)  # co-reachable: reverse edges from accepting states
    live[0] = False
    if not live[1]:  # empty language
        return Dfa(np.zeros((2, 256), dtype=np.int32), np.zeros(2, dtype=bool))
    t = np.where(live[trans], trans, 0)
    keep_edge = live[src] & live[dst]
    start = np.zeros(n, dtype=bool)
    start[1] = True
    reach = _bfs(start, src[keep_edge], dst[keep_edge], n) & live
    if reach.all() or (reach[1:].all()):
        return Dfa(np.ascontiguousarray(t.astype(np.int32)), acc)
    idx = np.concatenate([[0], np.nonzero(reach)[0]])  # start (1) stays first among kept
    remap = np.zeros(n, dtype=np.int64)
    remap[idx] = np.arange(len(idx))
    new_trans = remap[t[idx]].astype(np.int32)
    new_trans[0] = 0
    return Dfa(np.ascontiguousarray(new_trans), acc[idx])


def minimize(dfa: Dfa, max_rounds: int = 24) -> Dfa:
    """Moore refinement with exact sorting (no hashing); returns `dfa` unchanged when it does
    not settle within `max_rounds` (long counting chains), which is still correct."""
    trans, acc = dfa.trans, dfa.accepting
    n = trans.shape[0]
    if n <= 3:
        return dfa
    _, cols = np.unique(trans, axis=1, return_index=True)
    t = trans[:, np.sort(cols)]
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
    new_trans = mapping[trans[reps]].astype(np.int32)
    return Dfa(np.ascontiguousarray(new_trans), acc[reps].copy())


# ---------------------------------------------------------------- products


def product(a: Dfa, b: Dfa, *, negate_b: bool = False) -> Dfa:
    """L(a) ∩ L(b), or L(a) \\ L(b) with `negate_b` (b's dead state then acts as a sink)."""
    nb = b.n_states
    ids: dict[int, int] = {1 * nb + 1: 1}
    order = [(1, 1)]
    rows: list[np.ndarray] = []
    acc = [False]
    k = 0
    while k < len(order):
        x, y = order[k]
        k += 1
        if negate_b:
            acc.append(bool(a.accepting[x]) and not bool(b.accepting[y]))
        else:
            acc.append(bool(a.accepting[x]) and bool(b.accepting[y]))
        nx = a.trans[x].astype(np.int64)
        ny = b.trans[y].astype(np.int64)
        live = nx != 0 if negate_b else (nx != 0) & (ny != 0)
        codes = nx * nb + ny
        row = np.zeros(256, dtype=np.int32)
        uniq, inverse = np.unique(codes[live], return_inverse=True)
        targets = np.empty(len(uniq), dtype=np.int32)
        for u, code in enumerate(uniq.tolist()):
            d = ids.get(code)
            if d is None:
                d = len(order) + 1
                if d > MAX_DFA_STATES:
                    raise TooComplexError(f"automaton exceeds {MAX_DFA_STATES} DFA states")
                ids[code] = d
                order.append(divmod(code, nb))
            targets[u] = d
        row[live] = targets[inverse]
        rows.append(row)
    trans = np.zeros((len(order) + 1, 256), dtype=np.int32)
    trans[1:] = np.stack(rows)
    return _trim(trans, np.asarray(acc, dtype=bool))


def prefix_closed(d: Dfa) -> Dfa:
    """L(d)·Σ*: once an accepting state is reached, every continuation is accepted."""
    trans = np.concatenate([d.trans, np.zeros((1, 256), dtype=np.int32)])
    sink = trans.shape[0] - 1
    trans[sink] = sink
    acc = np.concatenate([d.accepting, [True]])
    trans[acc] = sink
    trans[0] = 0
    return _trim(trans, acc)


def look_intersection(look: rx.Look, rest: rx.Node) -> Dfa:
    body = prefix_closed(compile_node(look.body))
    return product(compile_node(rest), body, negate_b=look.negative)


def union(dfas: list[Dfa]) -> Dfa:
    """L(d1) ∪ L(d2) ∪ ..., through the NFA (cheap for many literal terminals)."""
    nfa = Nfa()
    s, e = nfa.state(), nfa.state()
    for d in dfas:
        a, b = nfa.embed(d)
        nfa.eps[s].append(a)
        nfa.eps[b].append(e)
    return determinize(nfa, s, e)


def compile_node(node: rx.Node) -> Dfa:
    nfa = Nfa()
    s, e = nfa.build(node)
    dfa = determinize(nfa, s, e)
    return minimize(dfa) if dfa.n_states <= 20_000 else dfa


_regex_cache: BoundedCache[tuple[str, bool], Dfa] = BoundedCache(128 << 20)


def compile_regex(text: str, *, ignore_case: bool = False) -> Dfa:
    """Regex text → DFA, memoised per process (shared terminals share mask caches)."""
    key = (text, ignore_case)
    dfa = _regex_cache.get(key)
    if dfa is None:
        dfa = compile_node(rx.parse(text, ignore_case=ignore_case))
        _regex_cache.put(key, dfa, dfa.trans.nbytes)
    return dfa
