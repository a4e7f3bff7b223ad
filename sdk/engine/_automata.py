"""Byte-level automata: regex AST → NFA → trimmed DFA, with intersection for lookaheads.

A `Dfa` is a dense table `trans[state, byte]` with state 0 the dead state and state 1 the
start, so that vectorised walks over a whole vocabulary are plain numpy indexing. Every state
but 0 can still reach an accepting state (trimmed): "live" therefore means "can complete",
which is what exact masks need.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Sequence
from typing import cast

import numpy as np

from ..errors import TooComplexError
from . import _regex as rx
from ._cache import BoundedCache
from ._dfa import COMPACT_MIN_STATES, IDENTITY, Dfa, byte_classes, empty_dfa
from ._lazy import (
    LazyDfa,
    alternation,
    concatenation,
    counted,
    item_moves,
    item_width,
    materialize,
)

MAX_NFA_STATES = 400_000
MAX_DFA_STATES = 100_000
#: Subset-construction work cap (Python-level loop steps, all DFA states): about 2-3 s.
#: Nested quantifiers such as `(x{0,100}){0,100}` stay under the state caps but would
#: otherwise take minutes.
MAX_SUBSET_WORK = 5_000_000
#: The same work summed over every regex of one grammar (`CompiledGrammar.from_lark` sets
#: `work_budget.left`; per thread): a schema with dozens of heavy patterns stops at ~5-7 s.
MAX_GRAMMAR_WORK = 15_000_000
work_budget = threading.local()
#: Counted repeats with more states than this are built lazily (`_lazy`): the table of a
#: 65,535-character string would take a gigabyte, and even a 300-character one costs more to
#: build (and to copy into the runtime) than a generation visits. Constructions that need a
#: table (products, subset construction) still get one up to MAX_DFA_STATES.
LAZY_MIN_STATES = 4096
#: Products of more pairs than this number their states through a hash of the pairs reached
#: (`_pairs`, compiled) instead of a dense table of every pair (4 bytes a pair).
DENSE_PAIRS = 1 << 20
#: A·B where A's accepting states go on with B's first bytes: up to this many B states, the
#: sets of B's states are bit masks of one int64 (`_pairs.concat_bfs`); beyond, NFA + subsets.
SET_CONCAT_MAX = 63

#: A table DFA, or a lazy one (see `_lazy`).
AnyDfa = Dfa | LazyDfa


def table(d: AnyDfa) -> Dfa:
    """`d` as a table: lazy automata are materialised, or `TooComplexError` when too big."""
    if isinstance(d, LazyDfa) and d.tabulate is not None:
        return d.tabulate()
    return materialize(d, MAX_DFA_STATES)


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
                dfa = table(look_intersection(item, rest))
                a, b = self.embed(dfa)
                self.eps[cur].append(a)
                return s, b
            a, b = self.build(item)
            self.eps[cur].append(a)
            cur = b
        return s, cur

    def build_repeat(self, node: rx.Repeat) -> tuple[int, int]:
        if node.max is not None and node.max > 4:
            direct = _counted_repeat(node)
            if direct is not None:
                return self.embed(table(direct))
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
        states, los, his, targets = _segments(dfa)
        edges = self.edges
        for q, lo, hi, tgt in zip(
            states.tolist(), los.tolist(), his.tolist(), targets.tolist(), strict=True
        ):
            edges[base + q].append((lo, hi, base + tgt))
        for q in np.nonzero(dfa.accepting)[0].tolist():
            self.eps[base + q].append(end)
        return base + 1, end


#: The most states a counted item may have: Unicode `\w` is ~310 (its UTF-8 ranges).
COUNTED_ITEM_MAX_STATES = 1024


def _countable(x: Dfa) -> bool:
    """X is small, not nullable and prefix-free, and its start is never re-entered mid-item
    (`b*a` is refused: a block's start would stand both for "k items done" and for "inside
    item k + 1"): what a counted repeat numbered (count, X-state) needs."""
    return not (
        x.nullable
        or x.n_states > COUNTED_ITEM_MAX_STATES
        or x.table[x.accepting].any()
        or (x.table == 1).any()
    )


def _counted_repeat(node: rx.Repeat) -> AnyDfa | None:
    """`X{lo,hi}` built directly as (count × X-state) when X is prefix-free (a character, an
    escape): linear in hi, where Thompson copies + subset construction are quadratic-ish.
    Above LAZY_MIN_STATES states the same automaton is lazy."""
    assert node.max is not None
    lo, hi = node.min, node.max
    x = compile_node(node.item)
    if not isinstance(x, Dfa):
        return None
    if not _countable(x):
        return None if x.nullable or hi < 1 else _counted_sets(x, lo, hi)
    width = item_width(x)
    if hi * width + 2 > LAZY_MIN_STATES:
        return counted(x, lo, hi)
    # Blocks k < hi hold every X-state; after the hi-th item only its (accepting) start is
    # left, with no moves. Every state is then reachable and can finish (X is trimmed and
    # not nullable), so the table needs no trimming pass.
    live, target, inc = item_moves(x)
    trans = np.zeros((hi * width + 2, 256), dtype=np.int32)
    accepting = np.zeros(len(trans), dtype=bool)
    for k in range(hi):
        newk = k + inc
        trans[1 + k * width : 1 + (k + 1) * width] = np.where(live, 1 + newk * width + target, 0)
        accepting[1 + k * width] = lo <= k
    accepting[1 + hi * width] = True  # lo <= hi
    return Dfa(trans, accepting)


#: Counted repeats of an item that is not prefix-free are built by `_counted_sets` up to this
#: many states (bigger ones go through the NFA and its budgets), and minimised up to the second.
COUNTED_SETS_MAX_STATES = 50_000
COUNTED_SETS_MINIMIZE = 1024
#: ...and within this much work (pairs looked at): a repeat whose subsets keep many pairs
#: (`(?:[^\x00-\x7f]{2,30}|\d{3,}){2,20}`) is left to the NFA path and its budgets.
COUNTED_SETS_MAX_WORK = 1_000_000

_Shape = tuple[tuple[int, int], ...]


def _counted_sets(x: Dfa, lo: int, hi: int) -> Dfa | None:
    """X{lo,hi} (1 <= hi) for a non-nullable X that is not prefix-free (`(?:\\S+\\s+){0,199}`:
    where a word may go on, the next may start): the subset construction over pairs (items
    done before the current one, X-state). A subset is written as its smallest count and the
    shape of its pairs relative to it. A shape's moves depend on the count only near `hi`
    (no item starts past it), so they are computed once per shape and reused at every count:
    the Thompson NFA has `hi` copies of X, and its subsets cost a Python step per copy.
    Every state can finish (X is trimmed, and below `hi` another item may always start)."""
    columns, classes = _columns(x)
    xt: list[list[int]] = columns.tolist()
    acc: list[bool] = x.accepting.tolist()
    first = xt[1]
    n_cls = columns.shape[1]
    # per (shape, room): the distinct successors (count offset, shape) and, per byte class,
    # which of them it leads to (0: dead); a state's row is then a few lookups and one take
    memo: dict[tuple[_Shape, int], tuple[list[tuple[int, _Shape]], np.ndarray]] = {}
    work = 0

    def moves(shape: _Shape, room: int) -> tuple[list[tuple[int, _Shape]], np.ndarray]:
        # room = hi - (smallest count): an item may start after offset dk iff dk + 1 < room
        nonlocal work
        key = (shape, room if room <= shape[-1][0] + 1 else -1)
        got = memo.get(key)
        if got is None:
            work += n_cls * len(shape)
            succ: dict[tuple[int, _Shape], int] = {}
            pick = np.zeros(n_cls, dtype=np.int64)
            for c in range(n_cls):
                pairs: set[tuple[int, int]] = set()
                for dk, q in shape:
                    t = xt[q][c]
                    if t:
                        pairs.add((dk, t))
                    if acc[q] and dk + 1 < room and first[c]:
                        pairs.add((dk + 1, first[c]))
                if pairs:
                    d0 = min(dk for dk, _ in pairs)
                    to = (d0, tuple(sorted((dk - d0, q) for dk, q in pairs)))
                    pick[c] = succ.setdefault(to, len(succ) + 1)
            got = memo[key] = (list(succ), pick)
        return got

    ids: dict[tuple[int, _Shape], int] = {}
    todo: list[tuple[int, _Shape]] = []
    start = np.zeros(n_cls, dtype=np.int64)
    for c in range(n_cls):  # the start: nothing read, no item begun
        if first[c]:
            key: tuple[int, _Shape] = (0, ((0, first[c]),))
            j = ids.get(key)
            if j is None:
                j = ids[key] = 2 + len(todo)
                todo.append(key)
            start[c] = j
    rows: list[np.ndarray] = [np.zeros(n_cls, dtype=np.int64), start]  # dead, start
    accepting = [False, lo == 0]
    i = 0
    while i < len(todo):
        k0, shape = todo[i]
        i += 1
        succ, pick = moves(shape, hi - k0)
        work += len(succ) + 1
        if work > COUNTED_SETS_MAX_WORK:
            return None
        resolved = [0]
        for delta, nxt in succ:
            key = (k0 + delta, nxt)
            j = ids.get(key)
            if j is None:
                j = ids[key] = 2 + len(todo)
                if j >= COUNTED_SETS_MAX_STATES:
                    return None
                todo.append(key)
            resolved.append(j)
        rows.append(np.asarray(resolved, dtype=np.int64)[pick])
        accepting.append(any(acc[q] and lo <= k0 + dk + 1 for dk, q in shape))
    trans = np.stack(rows).astype(np.int32)
    dfa = with_classes(trans, np.asarray(accepting, dtype=bool), classes)
    # Word counts come out minimal; small results are minimised anyway (`(?:a+){1,3}` is
    # `a+`), big ones are left as built: minimising them cost more than building them.
    return minimize(dfa) if dfa.n_states <= COUNTED_SETS_MINIMIZE else dfa


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


_seq_cache: BoundedCache[rx.Ranges, list[list[tuple[int, int]]]] = BoundedCache(
    "UTF-8 sequences", 8 << 20
)


def _cached_sequences(ranges: rx.Ranges) -> list[list[tuple[int, int]]]:
    seqs = _seq_cache.get(ranges)
    if seqs is None:
        seqs = [seq for lo, hi in ranges for seq in utf8_sequences(lo, hi)]
        _seq_cache.put(ranges, seqs, 120 * sum(len(q) + 1 for q in seqs) + 64 * len(ranges))
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
    by_targets: dict[frozenset[int], int] = {}  # NFA targets of a move -> DFA state
    order = [start_set]
    rows: list[list[int]] = []
    acc: list[bool] = [False]
    k = 0
    work = 0
    left = getattr(work_budget, "left", None)
    limit = MAX_SUBSET_WORK if left is None else min(MAX_SUBSET_WORK, left)
    while k < len(order):
        cur = order[k]
        k += 1
        if work > limit:
            what = "regular expression" if limit == MAX_SUBSET_WORK else "grammar's regexes"
            raise TooComplexError(
                f"{what} too complex to determinize ({len(order)} DFA states, {work} subset steps)"
            )
        acc.append(end in cur)
        row = [0] * n_classes
        by_class: dict[int, set[int]] = {}
        for q in cur:
            mq = moves[q]
            work += 1 + len(mq)
            for c, tgts in mq.items():
                by_class.setdefault(c, set()).update(tgts)
        for c, targets in by_class.items():
            # Most classes of a state (every byte but a quote, say) share their targets.
            tkey = frozenset(targets)
            d = by_targets.get(tkey)
            if d is None:
                nxt_set: set[int] = set()
                for t in targets:
                    got = closure(t)
                    work += 1 + (len(got) >> 4)  # set unions run in C: ~16 elements per step
                    nxt_set |= got
                key = frozenset(nxt_set)
                d = ids.get(key)
                if d is None:
                    d = len(order) + 1
                    if d > MAX_DFA_STATES:
                        raise TooComplexError(f"automaton exceeds {MAX_DFA_STATES} DFA states")
                    ids[key] = d
                    order.append(key)
                by_targets[tkey] = d
            row[c] = d
        rows.append(row)
    if left is not None:
        work_budget.left = left - work
    compact = np.zeros((len(order) + 1, n_classes), dtype=np.int32)
    if rows:
        compact[1:] = np.asarray(rows, dtype=np.int32)
    return _trim(compact, np.asarray(acc, dtype=bool), byte_class)


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


# ---------------------------------------------------------------- products


def product(any_a: AnyDfa, any_b: AnyDfa, *, negate_b: bool = False, union: bool = False) -> Dfa:
    """L(a) ∩ L(b), or L(a) \\ L(b) with `negate_b` (b's dead state then acts as a sink), or
    L(a) ∪ L(b) with `union` (either dead state does).

    Breadth-first over pairs, one numpy step per BFS level rather than one Python step per
    state: length-bounded patterns (a pattern × a character counter) reach ~10^5 pairs. Pairs
    are numbered through a dense table of every pair up to `DENSE_PAIRS`, beyond it by the
    compiled BFS of `_pairs` (same numbering), whose memory follows the pairs reached.
    """
    a, b = table(any_a), table(any_b)
    na, nb = a.n_states, b.n_states
    # Only bytes that a or b tell apart matter: run the BFS on one column per class.
    reps, class_ab = _joint_classes(a, b)
    a_trans = columns_at(a, reps).astype(np.int64)
    b_trans = columns_at(b, reps).astype(np.int64)
    if na * nb > DENSE_PAIRS:
        from ._pairs import DIFFERENCE, INTERSECTION, UNION, pair_bfs

        mode = UNION if union else DIFFERENCE if negate_b else INTERSECTION
        compact, xs, ys, n = pair_bfs(a_trans, b_trans, mode, MAX_DFA_STATES)
        if n < 0:
            raise TooComplexError(f"automaton exceeds {MAX_DFA_STATES} DFA states")
        return _product_table(a, b, compact, xs[1:], ys[1:], class_ab, union, negate_b)
    ids = np.zeros(na * nb, dtype=np.int32)
    start = 1 * nb + 1
    ids[start] = 1
    n = 1
    frontier = np.asarray([start], dtype=np.int64)
    pieces: list[tuple[np.ndarray, np.ndarray]] = []  # (state ids, their rows)
    pair_x: list[np.ndarray] = [np.asarray([1])]
    pair_y: list[np.ndarray] = [np.asarray([1])]
    while frontier.size:
        xs, ys = np.divmod(frontier, nb)
        tx, ty = a_trans[xs], b_trans[ys]
        if union:
            live = (tx != 0) | (ty != 0)
        elif negate_b:
            live = tx != 0
        else:
            live = (tx != 0) & (ty != 0)
        codes = tx * nb + ty
        cand = np.unique(codes[live])
        new = cand[ids[cand] == 0]
        if n + len(new) > MAX_DFA_STATES:
            raise TooComplexError(f"automaton exceeds {MAX_DFA_STATES} DFA states")
        ids[new] = np.arange(n + 1, n + 1 + len(new), dtype=np.int32)
        row = np.where(live, ids[np.where(live, codes, 0)], 0)
        n += len(new)
        pieces.append((ids[frontier], row.astype(np.int32, copy=False)))
        nx, ny = np.divmod(new, nb)
        pair_x.append(nx)
        pair_y.append(ny)
        frontier = new
    del ids  # the pair numbering is done: only the rows are still needed
    compact = np.zeros((n + 1, len(reps)), dtype=np.int32)
    while pieces:  # each level's rows go as they are copied: never the table twice over
        sid, rows = pieces.pop()
        compact[sid] = rows
    xs_all = np.concatenate(pair_x)
    ys_all = np.concatenate(pair_y)
    return _product_table(a, b, compact, xs_all, ys_all, class_ab, union, negate_b)


def _product_table(
    a: Dfa,
    b: Dfa,
    compact: np.ndarray,
    xs: np.ndarray,
    ys: np.ndarray,
    class_ab: np.ndarray,
    union: bool,
    negate_b: bool,
) -> Dfa:
    """The product's DFA from its pair rows (one column per byte class) and the pair of every
    state 1..n."""
    acc = np.zeros(len(xs) + 1, dtype=bool)
    b_acc = b.accepting[ys]
    if union:
        acc[1:] = a.accepting[xs] | b_acc
    else:
        acc[1:] = a.accepting[xs] & (~b_acc if negate_b else b_acc)
    return _trim(compact, acc, class_ab)


def prefix_closed(d: Dfa) -> Dfa:
    """L(d)·Σ*: once an accepting state is reached, every continuation is accepted."""
    trans = np.concatenate([d.table, np.zeros((1, d.n_classes), dtype=np.int32)])
    sink = trans.shape[0] - 1
    trans[sink] = sink
    acc = np.concatenate([d.accepting, [True]])
    trans[acc] = sink
    trans[0] = 0
    return _trim(trans, acc, d.classes.astype(np.int64))


_rest_cache: BoundedCache[rx.Node, Dfa] = BoundedCache("lookahead continuations", 32 << 20)


def look_intersection(look: rx.Look, rest: rx.Node) -> AnyDfa:
    # The continuation recurs across terminals (a JSON string after "not one of the declared
    # keys"): built once, whatever the lookahead in front of it.
    after = _rest_cache.get(rest)
    if after is None:
        after = table(compile_node(rest))
        _rest_cache.put(rest, after, cache_size(after))
    if look.negative:
        words = _finite_words(look.body)
        if words is not None:
            return excluding_prefixes(after, words)
    else:
        bounded = _bounded_length(look, after)
        if bounded is not None:
            return bounded
    return _look_product(look, after)


def _look_product(look: rx.Look, after: Dfa) -> Dfa:
    return product(after, prefix_closed(table(compile_node(look.body))), negate_b=look.negative)


#: A length bound on a pattern (`(?=u X{lo,hi} v)R`) whose product may have more pairs than this
#: is built on demand (`_length_product`); below, the table is tried first (its reachable part
#: is often small) and the lazy automaton is the fallback when it is refused for size.
LENGTH_PRODUCT_MIN_PAIRS = 4 * DENSE_PAIRS


def _bounded_length(look: rx.Look, after: Dfa) -> AnyDfa | None:
    """`(?=u X{lo,hi} v)after`, lazily, for literal u and v around one counted repeat of a
    prefix-free X (`maxLength` on a JSON string with a `pattern`), when the table is too big;
    None for other lookaheads."""
    body = look.body
    items = body.items if isinstance(body, rx.Seq) else (body,)
    counts = [i for i, item in enumerate(items) if isinstance(item, rx.Repeat)]
    if len(counts) != 1:
        return None
    i = counts[0]
    rep = items[i]
    assert isinstance(rep, rx.Repeat)
    u = _literal_bytes(rx.Seq(items[:i])) if i else b""
    v = _literal_bytes(rx.Seq(items[i + 1 :])) if i + 1 < len(items) else None
    if rep.max is None or u is None or not v:
        return None
    x = compile_node(rep.item)
    if not isinstance(x, Dfa) or not _countable(x) or x.move(1, v[0]) != 0:
        return None
    width = item_width(x)
    table_tried = (rep.max + 1) * width * (after.n_states - 1) <= LENGTH_PRODUCT_MIN_PAIRS
    if table_tried:
        try:
            return _look_product(look, after)
        except TooComplexError:
            pass
    from ._length_product import length_product

    try:
        lazy = length_product(after, u, x, rep.min, rep.max, v, _joint_classes(x, after)[0])
    except TooComplexError:
        if table_tried:
            raise
        return _look_product(look, after)
    if isinstance(lazy, LazyDfa):
        # what needs a table (a union, an NFA around it) gets the product, if it fits
        lazy.tabulate = functools.cache(lambda: _look_product(look, after))
    return lazy


def excluding_prefixes(after: Dfa, words: list[bytes]) -> Dfa:
    """L(after) minus the strings that start with one of `words` (`(?!w1|w2)rest`, the keys
    an object's other members may not use), built directly: each state of the product is a
    node of the words' trie paired with the one state of `after` its prefix leads to, or a
    state of `after` alone once the text left the trie. The general product spends a numpy
    round per byte of the longest word on what is a trie."""
    if b"" in words:
        return empty_dfa()
    after = after.compacted()  # the same automaton, one column per byte class
    child, end = _word_trie(words)
    n_nodes = len(child)
    table, classes = after.table.tolist(), after.classes.tolist()  # small: Python reads
    at = [0] * n_nodes  # the state of `after` each node's prefix reaches
    at[0] = 1
    used: set[int] = set()  # the bytes of the words
    for u in range(n_nodes):  # parents are created before their children
        row = table[at[u]]
        for b, c in child[u].items():
            at[c] = row[classes[b]]
            used.add(b)
    # nodes with the same state of `after` and the same (merged) children accept the same
    # rests: one state for each, as minimisation would (word endings share their tails)
    same: dict[tuple[object, ...], int] = {}
    canon = list(range(n_nodes))
    for u in range(n_nodes - 1, -1, -1):  # children before parents
        sig = (at[u], end[u], tuple((b, canon[c]) for b, c in sorted(child[u].items())))
        canon[u] = same.setdefault(sig, u)
    # states: 0 dead, 1..n_nodes the trie nodes, then after's states 1.. shifted by n_nodes.
    # Columns: after's byte classes, with each byte of a word in a class of its own (every
    # column is some byte's: a column no byte takes would keep unreachable states alive).
    key = after.classes.astype(np.int64) * 257
    own = np.fromiter(used, dtype=np.int64, count=len(used))
    key[own] += own + 1
    uniq, byte_class = np.unique(key, return_inverse=True)
    byte_class = byte_class.reshape(-1)
    column = byte_class.tolist()
    cols = after.table[:, uniq // 257]
    moved = np.where(cols != 0, cols + n_nodes, 0).astype(np.int32)
    at_arr = np.asarray(at, dtype=np.int64)
    rows = moved[at_arr]
    rows[at_arr == 0] = 0
    for u in range(n_nodes):
        for b, c in child[u].items():
            rows[u, column[b]] = 0 if end[c] or at[c] == 0 else canon[c] + 1
    trans = np.concatenate([np.zeros((1, len(uniq)), dtype=np.int32), rows, moved[1:]])
    acc = np.concatenate([[False], after.accepting[at_arr] & (at_arr != 0), after.accepting[1:]])
    return _trim(trans, acc, byte_class)


#: Above this many states in all, unions are built as pairwise products (numpy, level by
#: level) instead of through the NFA (Python subset construction, cheap for many literals).
UNION_PRODUCT_MIN_STATES = 512


#: Bigger unions are left unminimized: they are length counters that minimization cannot
#: shrink, and trying costs seconds.
UNION_MINIMIZE_MAX_STATES = 4096


def union(any_dfas: Sequence[AnyDfa]) -> Dfa:
    """L(d1) ∪ L(d2) ∪ ..."""
    dfas = [table(d) for d in any_dfas]
    if sum(d.n_states for d in dfas) > UNION_PRODUCT_MIN_STATES:
        parts = sorted(dfas, key=lambda d: d.n_states)
        out = parts[0]
        for d in parts[1:]:
            out = product(out, d, union=True)
            if out.n_states <= UNION_MINIMIZE_MAX_STATES:
                out = minimize(out)
        return out
    nfa = Nfa()
    s, e = nfa.state(), nfa.state()
    for d in dfas:
        a, b = nfa.embed(d)
        nfa.eps[s].append(a)
        nfa.eps[b].append(e)
    return determinize(nfa, s, e)


def concat(any_a: AnyDfa, any_b: AnyDfa) -> AnyDfa:
    """L(a)·L(b). Built directly (A's table, then B's) when no accepting state of A can go on
    with a byte that B can start with: each accepting state of A then simply also takes B's
    first moves. Otherwise through the NFA and subset construction."""
    if any_a.is_empty or any_b.is_empty:
        return any_a if any_a.is_empty else any_b
    if not (isinstance(any_a, Dfa) and isinstance(any_b, Dfa)):
        lazy = concatenation(any_a, any_b)
        if lazy is not None:
            return lazy
    a, b = table(any_a), table(any_b)
    acc_a = a.accepting
    if a.dense and b.dense:  # small parts: no classes to work out
        reps, joint = IDENTITY, None
        ta, tb = a.table, b.table
    else:
        reps, joint = _joint_classes(a, b)
        ta, tb = columns_at(a, reps), columns_at(b, reps)
    b_first = tb[1] != 0
    if (ta[acc_a][:, b_first] != 0).any():
        if b.n_states <= SET_CONCAT_MAX:
            return _concat_sets(a, b)
        nfa = Nfa()
        s1, e1 = nfa.embed(a)
        s2, e2 = nfa.embed(b)
        nfa.eps[e1].append(s2)
        return determinize(nfa, s1, e2)
    off = a.n_states - 1
    trans = np.empty((a.n_states + b.n_states - 1, len(reps)), dtype=np.int32)
    trans[: a.n_states] = ta
    moved = trans[a.n_states :]
    moved[:] = tb[1:]
    np.add(moved, off, out=moved, where=moved > 0)
    rows = np.nonzero(acc_a)[0]
    trans[rows] = np.where(trans[rows] != 0, trans[rows], moved[0][None, :])
    acc = np.concatenate([acc_a & bool(b.accepting[1]), b.accepting[1:]])
    # Both parts are trimmed and non-empty, so every state still reaches acceptance; only
    # B's own start may have become unreachable, which is harmless.
    return Dfa(trans, acc) if joint is None else with_classes(trans, acc, joint)


def _concat_sets(a: Dfa, b: Dfa) -> Dfa:
    """A·B where A may go on after accepting with a byte B starts with (`\\S+\\s+` then
    `\\S+`: the UTF-8 lead bytes of spaces and non-spaces overlap): states are (A's state, the
    set of B's states), B small. What subset construction over both NFAs gives, compiled
    (`_pairs.concat_bfs`): for an 18,700-state A that took 94 MB and seconds in Python."""
    from ._pairs import concat_bfs

    reps, class_ab = _joint_classes(a, b)
    compact, acc, n = concat_bfs(
        columns_at(a, reps).astype(np.int64),
        a.accepting,
        columns_at(b, reps).astype(np.int64),
        b.accepting,
        MAX_DFA_STATES,
    )
    if n < 0:
        raise TooComplexError(f"automaton exceeds {MAX_DFA_STATES} DFA states")
    return _trim(compact, acc, class_ab)


def alternate(any_dfas: list[AnyDfa]) -> AnyDfa:
    """L(d1) ∪ L(d2) ∪ ...: side by side under a fresh start state when their first bytes are
    disjoint (then the start's row is just the union of theirs), else via `union`."""
    nonempty = [d for d in any_dfas if not d.is_empty]
    if len(nonempty) <= 1:
        return nonempty[0] if nonempty else empty_dfa()
    if not all(isinstance(d, Dfa) for d in nonempty):
        return alternation(nonempty) or union(nonempty)
    dfas = [table(d) for d in nonempty]
    seen = np.zeros(256, dtype=bool)
    for d in dfas:
        first = d.first
        if (seen & first).any():
            return union(dfas)
        seen |= first
    # one column per class of bytes that no part tells apart (per byte if all are small)
    joint: np.ndarray | None = None
    reps: np.ndarray = IDENTITY
    if not all(d.dense for d in dfas):
        joint = np.zeros(256, dtype=np.int64)
        for d in dfas:
            _, joint = np.unique(joint * 256 + _classes_of(d), return_inverse=True)
            joint = joint.reshape(-1)
        _, reps = np.unique(joint, return_index=True)
    trans = np.zeros((2 + sum(d.n_states - 1 for d in dfas), len(reps)), dtype=np.int32)
    accs = [np.zeros(2, dtype=bool)]
    off = 1
    for d in dfas:
        part = trans[off + 1 : off + d.n_states]
        part[:] = (d.table if joint is None else columns_at(d, reps))[1:]
        np.add(part, off, out=part, where=part > 0)
        accs.append(d.accepting[1:])
        trans[1] += part[0]  # disjoint first bytes: rows add without clashing
        accs[0][1] |= bool(d.accepting[1])
        off += d.n_states - 1
    acc = np.concatenate(accs)
    # parts trimmed: so is this
    return Dfa(trans, acc) if joint is None else with_classes(trans, acc, joint)


#: Above this estimated size a sequence or alternation is built from the DFAs of its parts
#: (numpy tables glued together) instead of one Thompson NFA and a Python subset construction.
DIRECT_WEIGHT = 256


def _weight(node: rx.Node) -> int:
    if isinstance(node, rx.Chars):
        return 1
    if isinstance(node, rx.Seq | rx.Alt):
        return sum(_weight(i) for i in node.items)
    if isinstance(node, rx.Repeat):
        item = node.item
        # a class's automaton grows with its ranges: Unicode `\w` (734 of them) is ~310
        # UTF-8 states, and `[\w-]{5,96}` weighed as 96 bytes went through subset
        # construction (2.5 s) where the counted construction takes 40 ms (Lark grammars:
        # schemas map `\w` to ASCII)
        if isinstance(item, rx.Chars) and node.max is not None:
            one = len(item.ranges)
        else:
            one = _weight(item)
        return one * max(node.max or 0, node.min, 1)
    if isinstance(node, rx.Look):
        return DIRECT_WEIGHT + 1
    return 1


def compile_node(node: rx.Node) -> AnyDfa:
    words = _finite_words(node)
    if words is not None:
        return _chain(words[0]) if len(words) == 1 else _trie(words)
    if _weight(node) > DIRECT_WEIGHT:
        direct = _compile_direct(node)
        if direct is not None:
            return direct
    nfa = Nfa()
    s, e = nfa.build(node)
    dfa = determinize(nfa, s, e)
    return minimize(dfa) if dfa.n_states <= 20_000 else dfa


def _literal_bytes(node: rx.Node) -> bytes | None:
    """The one text `node` matches, when it is a plain literal (single code points in a row,
    no surrogates): object keys, `true`, punctuation. None otherwise."""
    items = node.items if isinstance(node, rx.Seq) else (node,)
    cps: list[int] = []
    for item in items:
        if not isinstance(item, rx.Chars) or len(item.ranges) != 1:
            return None
        lo, hi = item.ranges[0]
        if lo != hi or 0xD800 <= lo <= 0xDFFF:
            return None
        cps.append(lo)
    return "".join(map(chr, cps)).encode("utf-8")


def _chain(text: bytes) -> Dfa:
    """The minimal DFA of one text, built directly: states in reading order after the dead
    state, as `minimize` numbers them. Keys and keywords are most of a schema's terminals, and
    the general construction costs ~20x more for them."""
    n = len(text)
    trans = np.zeros((n + 2, 256), dtype=np.int32)
    trans[np.arange(1, n + 1), np.frombuffer(text, dtype=np.uint8)] = np.arange(2, n + 2)
    accepting = np.zeros(n + 2, dtype=bool)
    accepting[n + 1] = True
    return Dfa(trans, accepting)


#: Finite languages up to this many texts (and bytes in all) are built as a trie directly.
MAX_TRIE_WORDS = 4096
MAX_TRIE_BYTES = 1 << 16


def _finite_words(node: rx.Node) -> list[bytes] | None:
    """Every text `node` matches, when it is a small finite set of plain literals (an enum,
    the declared keys an open object's key must not be): None otherwise."""
    if isinstance(node, rx.Chars | rx.Seq):
        text = _literal_bytes(node)  # one pass for a whole literal, not one level per byte
        if text is not None:
            return [text]
    if isinstance(node, rx.Seq | rx.Alt):
        out: list[bytes] = [b""] if isinstance(node, rx.Seq) else []
        for item in node.items:
            sub = _finite_words(item)
            if sub is None:
                return None
            out = [w + t for w in out for t in sub] if isinstance(node, rx.Seq) else out + sub
            if len(out) > MAX_TRIE_WORDS or sum(map(len, out)) > MAX_TRIE_BYTES:
                return None
        return out
    return None


def _word_trie(words: list[bytes]) -> tuple[list[dict[int, int]], list[bool]]:
    """The trie of `words`: per node (0 the root, parents numbered before their children) its
    children by byte, and whether a word ends there."""
    children: list[dict[int, int]] = [{}]
    final = [False]
    for w in dict.fromkeys(words):
        node = 0
        for b in w:
            nxt = children[node].get(b)
            if nxt is None:
                nxt = len(children)
                children.append({})
                final.append(False)
                children[node][b] = nxt
            node = nxt
        final[node] = True
    return children, final


def _trie(words: list[bytes]) -> Dfa:
    """The minimal DFA of a finite set of texts: their trie (one state per distinct prefix),
    then minimised (shared suffixes). Subset construction over the alternation costs ~10x
    more for the same automaton."""
    children, final = _word_trie(words)
    trans = np.zeros((len(children) + 1, 256), dtype=np.int32)
    for k, edges in enumerate(children):
        for b, t in edges.items():
            trans[k + 1, b] = t + 1
    accepting = np.zeros(len(children) + 1, dtype=bool)
    accepting[1:] = final
    return minimize(Dfa(trans, accepting))


def _excluding_run(looks: Sequence[rx.Node], rest: rx.Node) -> AnyDfa:
    """`(?!a)(?!b)...rest` as `(?!w)(?!p)rest`: w the union of the bodies that are finite word
    sets (the declared keys: their trie, `excluding_prefixes`), p of the others (patterns: one
    product)."""
    finite = [(b, _finite_words(b) is not None) for b in (cast("rx.Look", i).body for i in looks)]
    words = tuple(b for b, is_words in finite if is_words)
    others = tuple(b for b, is_words in finite if not is_words)
    if not words or not others:
        return look_intersection(rx.Look(rx.Alt(words or others), negative=True), rest)
    inner = look_intersection(rx.Look(rx.Alt(words), negative=True), rest)
    return _look_product(rx.Look(rx.Alt(others), negative=True), table(inner))


def _compile_direct(node: rx.Node) -> AnyDfa | None:
    if isinstance(node, rx.Seq):
        items = node.items
        parts: list[AnyDfa] = []
        light: list[rx.Node] = []
        for k, item in enumerate(items):
            if isinstance(item, rx.Look):
                if light:
                    parts.append(compile_node(rx.Seq(tuple(light))))
                    light = []
                # A run of negative lookaheads is one: (?!a)(?!b)R is (?!a|b)R. One product
                # with the union, not a chain nested as deep as the run (the keys of an open
                # object with n patternProperties: quadratic, and refused past ~400).
                j = k + 1
                while item.negative and j < len(items):
                    nxt = items[j]
                    if not (isinstance(nxt, rx.Look) and nxt.negative):
                        break
                    j += 1
                if j > k + 1:
                    parts.append(_excluding_run(items[k:j], rx.Seq(items[j:])))
                else:
                    parts.append(look_intersection(item, rx.Seq(items[j:])))
                break
            if _weight(item) > DIRECT_WEIGHT:
                if light:
                    parts.append(compile_node(rx.Seq(tuple(light))))
                    light = []
                parts.append(compile_node(item))
            else:
                light.append(item)
        if light:
            if not parts:  # every item light, however heavy together: one NFA
                return None
            parts.append(compile_node(rx.Seq(tuple(light))))
        out = parts[0]
        for p in parts[1:]:
            out = concat(out, p)
        return out
    if isinstance(node, rx.Alt):
        heavy = [i for i in node.items if _weight(i) > DIRECT_WEIGHT]
        if not heavy:
            # Many small alternatives (an enum): one NFA and subset construction is ~6x faster
            # than a DFA per alternative, and `alternate` falls back to `union` anyway when
            # their first bytes overlap.
            return None
        small = tuple(i for i in node.items if _weight(i) <= DIRECT_WEIGHT)
        parts = [compile_node(i) for i in heavy]
        if small:
            parts.append(compile_node(small[0] if len(small) == 1 else rx.Alt(small)))
        return alternate(parts)
    if isinstance(node, rx.Repeat) and node.max is not None:
        return _counted_repeat(node)
    return None


_regex_cache: BoundedCache[tuple[str, bool], AnyDfa] = BoundedCache("regex DFAs", 64 << 20)


def compile_regex(text: str, *, ignore_case: bool = False) -> AnyDfa:
    """Regex text → DFA, memoised per process (shared terminals share mask caches)."""
    key = (text, ignore_case)
    dfa = _regex_cache.get(key)
    if dfa is None:
        dfa = compacted(compile_node(rx.parse(text, ignore_case=ignore_case)))
        _regex_cache.put(key, dfa, cache_size(dfa))
    return dfa
