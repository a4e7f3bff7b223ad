"""A grammar rule as an automaton over symbols (terminals and rule calls): its NFA, built by
`grammar._Builder.rule_nfa`, determinised and minimised here (through `_rule_shapes`, which
reuses the DFA of a shape seen before). Caps keep a pathological rule `TooComplexError`.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from ..errors import TooComplexError
from ._owner import OWNER

Symbol = tuple[str, int]  # ("T", terminal id) | ("R", rule id)

#: Caps on one rule's automata: `X ~ n` copies X n times, and the subset construction of a
#: rule can in principle blow up; past these a grammar is `TooComplexError`, not a hang.


class _SymNfa:
    """Edges by source state; most of a rule's NFA states have no edge of one kind or the
    other, so the lists are only made for those that do."""

    __slots__ = ("cap", "eps", "edges", "n")

    def __init__(self) -> None:
        self.eps: defaultdict[int, list[int]] = defaultdict(list)
        self.edges: defaultdict[int, list[tuple[Symbol, int]]] = defaultdict(list)
        self.n = 0
        self.cap = OWNER.limits.rule_nfa_states

    def state(self) -> int:
        n = self.n
        if n >= self.cap:
            raise TooComplexError(
                f"a rule's automaton exceeds {self.cap} states (Limits.rule_nfa_states)"
            )
        self.n = n + 1
        return n


@dataclass
class _SymDfa:
    trans: list[dict[Symbol, int]]
    final: list[bool]


def _determinize_symbols(nfa: _SymNfa, start: int, end: int) -> _SymDfa:
    cache: dict[int, frozenset[int]] = {}
    eps, edges = nfa.eps, nfa.edges  # read with .get: a read must not add an empty list
    limits = OWNER.limits

    def closure(states: set[int]) -> frozenset[int]:
        out: set[int] = set()
        for q in states:
            c = cache.get(q)
            if c is None:
                seen = {q}
                todo = [q]
                while todo:
                    x = todo.pop()
                    for y in eps.get(x, ()):
                        if y not in seen:
                            seen.add(y)
                            todo.append(y)
                c = frozenset(seen)
                cache[q] = c
            out |= c
        return frozenset(out)

    first = closure({start})
    ids = {first: 0}
    order = [first]
    trans: list[dict[Symbol, int]] = []
    final: list[bool] = []
    k = 0
    work = 0
    while k < len(order):
        cur = order[k]
        k += 1
        work += len(cur)
        if work > limits.rule_subset_work:
            raise TooComplexError(
                f"a rule's automaton is too complex ({len(order)} states; Limits.rule_subset_work)"
            )
        moves: dict[Symbol, set[int]] = {}
        for q in cur:
            for sym, tgt in edges.get(q, ()):
                moves.setdefault(sym, set()).add(tgt)
        row: dict[Symbol, int] = {}
        for sym, tgts in moves.items():
            key = closure(tgts)
            work += len(tgts)
            d = ids.get(key)
            if d is None:
                d = len(order)
                if d >= limits.rule_dfa_states:
                    raise TooComplexError(
                        f"a rule's automaton exceeds {limits.rule_dfa_states} states "
                        "(Limits.rule_dfa_states)"
                    )
                ids[key] = d
                order.append(key)
            row[sym] = d
        trans.append(row)
        final.append(end in cur)
    return _SymDfa(trans, final)


def _rule_dfa(nfa: _SymNfa, start: int, end: int) -> tuple[list[dict[Symbol, int]], list[bool]]:
    d = _minimize_symbols(_determinize_symbols(nfa, start, end))
    return d.trans, d.final


def _minimize_symbols(d: _SymDfa) -> _SymDfa:
    """Hopcroft refinement: equal futures share a state, so parallel edges can merge later.

    O(m log n), where Moore's round-by-round refinement is quadratic on the long chains that
    counted repetitions (`minItems: 1000`) produce. The DFA is partial, so every initial block
    starts on the worklist (Valmari & Lehtinen); afterwards the smaller half suffices.
    """
    n = len(d.trans)
    inv: list[list[tuple[Symbol, int]]] = [[] for _ in range(n)]  # target -> (symbol, source)
    for src, row in enumerate(d.trans):
        for sym, tgt in row.items():
            inv[tgt].append((sym, src))
    finals = [q for q in range(n) if d.final[q]]
    others = [q for q in range(n) if not d.final[q]]
    blocks: list[set[int]] = [set(b) for b in (finals, others) if b]
    block_of = [0] * n
    for bid, members in enumerate(blocks):
        for q in members:
            block_of[q] = bid
    pending = list(range(len(blocks)))
    while pending:
        splitter = pending.pop()
        by_symbol: dict[Symbol, list[int]] = {}
        for t in blocks[splitter]:
            for sym, q in inv[t]:
                by_symbol.setdefault(sym, []).append(q)
        for sources in by_symbol.values():
            hit: dict[int, set[int]] = {}
            for q in sources:
                hit.setdefault(block_of[q], set()).add(q)
            for bid, part in hit.items():
                block = blocks[bid]
                if len(part) == len(block):
                    continue
                rest = block - part
                small, big = (part, rest) if len(part) <= len(rest) else (rest, part)
                blocks[bid] = big
                new = len(blocks)
                blocks.append(small)
                for q in small:
                    block_of[q] = new
                # `bid` (now the bigger half) stays queued if it was; either way the smaller
                # half is a new splitter.
                pending.append(new)
    cls = block_of
    count = len(blocks)
    if count == n:
        return d
    # renumber so the start state stays 0
    order: dict[int, int] = {cls[0]: 0}
    for c in cls:
        order.setdefault(c, len(order))
    trans: list[dict[Symbol, int]] = [{} for _ in range(count)]
    final = [False] * count
    for s in range(n):
        c = order[cls[s]]
        final[c] = d.final[s]
        trans[c] = {sym: order[cls[t]] for sym, t in d.trans[s].items()}
    return _SymDfa(trans, final)
