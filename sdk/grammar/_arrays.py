"""Array bodies: `prefixItems` tuples, counted `items`, `contains`. A helper of `Emitter`,
which it takes first."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sdk.schema import Arr

from ._exprs import PENDING, opt, rep, seq, sym
from ._trees import E

if TYPE_CHECKING:
    from ._emit import Emitter

MAX_REPEAT = 1000  # larger item-count bounds are validated instead of counted
#: Optional tuple items (`prefixItems` past `minItems`) per rule; the rest is a rule of its own
TUPLE_CHUNK = 64


def arr_body(em: Emitter, a: Arr, name: str) -> E | None:
    lo, hi = a.min_items, a.max_items
    if lo > MAX_REPEAT:
        em.usage.validate("minItems", a.pointer, "bound too large to count")
        lo = 0
    if hi is not None and hi > MAX_REPEAT:
        em.usage.validate("maxItems", a.pointer, "bound too large to count")
        hi = None
    comma = sym("COMMA")
    if a.contains is not None:
        item = em.expr(a.items, f"{name}_item")
        c = em.expr(a.contains, f"{name}_contains")
        if c is None:
            return None
        before = rep(seq([item, comma]), 0, None) if item else None
        after = rep(seq([comma, item]), 0, None) if item else None
        return seq([sym("LSQB"), before, c, after, sym("RSQB")])
    k = len(a.prefix) if hi is None else min(len(a.prefix), hi)
    pe: list[E] = []
    rest_ok = True
    for i in range(k):
        e = em.expr(a.prefix[i], f"{name}_{i}")
        if e is None:
            if i < lo:
                return None
            rest_ok = False
            break
        pe.append(e)
    k = len(pe)
    r = em.expr(a.items, f"{name}_item") if rest_ok and (hi is None or hi > k) else None
    ex_lo = max(lo - k, 0)
    ex_hi = None if hi is None else max(hi - k, 0)
    if r is None:
        if ex_lo > 0:
            return None
        ex_hi = 0
    cur: E | None
    if k == 0:
        cur = None
        if ex_hi != 0 and r is not None:
            more = rep(seq([comma, r]), max(ex_lo - 1, 0), None if ex_hi is None else ex_hi - 1)
            cur = seq([r, more])
            if ex_lo == 0:
                cur = opt(cur)
    else:
        # Optional items nest, each in the one before (`(, a (, b ...)?)?`): past
        # TUPLE_CHUNK of them the rest of the tail is a rule of its own, called last (a
        # tail call, no deeper parser stack), so no expression nests deeper than that
        tails: dict[int, str] = {}
        for i in range(max(lo, 1), k):  # reserved in reading order
            if (k - i) % TUPLE_CHUNK == 0:
                tails[i] = em.names.rule(f"{name}_tail{i}")
                em.rules[tails[i]] = PENDING
        cur = rep(seq([comma, r]), ex_lo, ex_hi) if r is not None else None
        for i in reversed(range(k)):
            cur = seq([comma if i else None, pe[i], cur])
            if i >= lo:
                cur = opt(cur)
            if i in tails:
                em.rules[tails[i]] = cur
                cur = sym(tails[i])
    return seq([sym("LSQB"), cur, sym("RSQB")])
