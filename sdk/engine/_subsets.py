"""Subset constructions: a byte-level NFA to a DFA (`determinize`), a counted repeat of an
item that is not prefix-free (`_counted_sets`), and A·B where A goes on after accepting
(`_concat_sets`). Each is bounded: past its caps a construction is `TooComplexError`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol

import numpy as np

from ..errors import TooComplexError
from ._dfa import Dfa
from ._dfa_ops import (
    _columns,
    _joint_classes,
    _trim,
    columns_at,
    minimize,
    with_classes,
)
from ._owner import OWNER

#: What is left of the grammar's `Limits.grammar_work` (`CompiledGrammar.from_lark` sets
#: `work_budget.left`; per thread), which `determinize` spends.
work_budget = threading.local()


class NfaGraph(Protocol):
    """What subset construction reads of an NFA (`_automata.Nfa`): per state, its epsilon
    targets and its byte-range edges (first byte, last byte, target)."""

    eps: list[list[int]]
    edges: list[list[tuple[int, int, int]]]


def _edge_classes(edges: list[list[tuple[int, int, int]]]) -> tuple[np.ndarray, int]:
    """The classes of bytes that no edge tells apart: the class of every byte, and how many:
    the construction runs on one column per class, not 256."""
    bounds = {0, 256}
    for es in edges:
        for lo, hi, _ in es:
            bounds.add(lo)
            bounds.add(hi + 1)
    cuts = sorted(bounds)
    byte_class = np.zeros(256, dtype=np.int32)
    for k in range(len(cuts) - 1):
        byte_class[cuts[k] : cuts[k + 1]] = k
    return byte_class, len(cuts) - 1


def _class_moves(
    edges: list[list[tuple[int, int, int]]], n: int, byte_class: np.ndarray
) -> list[dict[int, list[int]]]:
    """Per NFA state: byte class -> targets."""
    moves: list[dict[int, list[int]]] = [{} for _ in range(n)]
    for q in range(n):
        for lo, hi, tgt in edges[q]:
            for c in range(int(byte_class[lo]), int(byte_class[hi]) + 1):
                moves[q].setdefault(c, []).append(tgt)
    return moves


def _closures(eps: list[list[int]]) -> Callable[[int], frozenset[int]]:
    """The epsilon closure of one state, memoised per construction."""
    closure_cache: dict[int, frozenset[int]] = {}

    def closure(q: int) -> frozenset[int]:
        got = closure_cache.get(q)
        if got is not None:
            return got
        seen = {q}
        todo = [q]
        while todo:
            x = todo.pop()
            for y in eps[x]:
                if y not in seen:
                    seen.add(y)
                    todo.append(y)
        fs = frozenset(seen)
        closure_cache[q] = fs
        return fs

    return closure


def determinize(nfa: NfaGraph, start: int, end: int) -> Dfa:
    """The trimmed DFA of `nfa` from `start` to `end`, within `Limits.subset_work` steps (and what
    is left of the grammar's `work_budget`, which it spends)."""
    n = len(nfa.eps)
    byte_class, n_classes = _edge_classes(nfa.edges)
    moves = _class_moves(nfa.edges, n, byte_class)
    closure = _closures(nfa.eps)
    start_set = closure(start)
    ids: dict[frozenset[int], int] = {start_set: 1}
    by_targets: dict[frozenset[int], int] = {}  # NFA targets of a move -> DFA state
    order = [start_set]
    rows: list[list[int]] = []
    acc: list[bool] = [False]
    k = 0
    work = 0
    left = getattr(work_budget, "left", None)
    limits = OWNER.limits
    one = limits.subset_work
    limit = one if left is None else min(one, left)
    while k < len(order):
        cur = order[k]
        k += 1
        if work > limit:
            what = (
                "regular expression (Limits.subset_work)"
                if limit == one
                else "grammar's regexes (Limits.grammar_work)"
            )
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
                    if d > limits.dfa_states:
                        raise TooComplexError(
                            f"automaton exceeds {limits.dfa_states} DFA states (Limits.dfa_states)"
                        )
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
        OWNER.limits.dfa_states,
    )
    if n < 0:
        cap = OWNER.limits.dfa_states
        raise TooComplexError(f"automaton exceeds {cap} DFA states (Limits.dfa_states)")
    return _trim(compact, acc, class_ab)


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
