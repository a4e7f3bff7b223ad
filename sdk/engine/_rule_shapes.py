"""Rule automata by shape: a rule's symbol DFA, built once per shape of its NFA, per process.

Determinising and minimising a rule's NFA reads its symbols only to tell them apart, so the
DFA of an NFA whose symbols are renamed is the same DFA with the same renaming. Schemas repeat
a few shapes (an object of n members in order with some optional, an array of one item type,
an enum) under different terminals and rules: on the dev MaskBench schemas 96 % of 44,599
rules had a shape seen before, and their subset construction and minimisation took 3.4 s of
the 4.2 s all rules took. The shape is the NFA with each symbol replaced by its rank of first
appearance, written as bytes (exact: no digest, so two shapes never share an entry).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Mapping
from typing import Protocol, TypeVar

from ._cache import BoundedCache

S = TypeVar("S")

#: A rule DFA over symbol ranks: per state, its (rank, target) moves in the order the subset
#: construction made them, and the final flags.
Shape = tuple[tuple[tuple[tuple[int, int], ...], ...], tuple[bool, ...]]


class SymNfa(Protocol[S]):
    @property
    def n(self) -> int: ...
    @property
    def eps(self) -> Mapping[int, list[int]]: ...
    @property
    def edges(self) -> Mapping[int, list[tuple[S, int]]]: ...


_shapes: BoundedCache[bytes, Shape] = BoundedCache("rule automata by shape", 16 << 20)


def shape_key(nfa: SymNfa[S], start: int, end: int) -> tuple[bytes, list[S]]:
    """The NFA's shape and the symbols in rank order (rank i is `symbols[i]`)."""
    rank: dict[S, int] = {}
    out = array("q", (nfa.n, start, end))
    eps, edges = nfa.eps, nfa.edges
    for q in range(nfa.n):
        ep = eps.get(q)
        ed = edges.get(q)
        if not ep and not ed:
            continue
        out.append(q)
        if ep:
            out.append(len(ep))
            out.extend(ep)
        else:
            out.append(0)
        if ed:
            out.append(len(ed))
            for sym, tgt in ed:
                r = rank.get(sym)
                if r is None:
                    r = rank[sym] = len(rank)
                out.append(r)
                out.append(tgt)
        else:
            out.append(0)
    return out.tobytes(), list(rank)


def rule_dfa(
    nfa: SymNfa[S],
    start: int,
    end: int,
    build: Callable[[], tuple[list[dict[S, int]], list[bool]]],
) -> tuple[list[dict[S, int]], list[bool]]:
    """`build()` (the rule's minimal DFA: rows of moves, final flags), taken
    from the shape cache when an NFA of the same shape was built before. The rows are fresh
    dicts: callers trim them in place."""
    key, symbols = shape_key(nfa, start, end)
    got = _shapes.get(key)
    if got is None:
        trans, final = build()
        rank = {sym: i for i, sym in enumerate(symbols)}
        got = (
            tuple(tuple((rank[sym], t) for sym, t in row.items()) for row in trans),
            tuple(final),
        )
        _shapes.put(key, got, len(key) + 64 + sum(48 + 64 * len(row) for row in got[0]))
    rows, finals = got
    return [{symbols[r]: t for r, t in row} for row in rows], list(finals)
