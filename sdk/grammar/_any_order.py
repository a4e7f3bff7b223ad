"""`member_order="any"`: an object's declared members in any order, each at most once. Small
objects get one rule per set of members written so far; bigger ones one rule for the member
list and an `//@any_order` line from which the engine tracks the set (`sdk.engine._any_order`).
Helpers of `Emitter`, which they take first."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, cast

from ._depends import Deps, deps_met, needs_the_impossible
from ._exprs import DEAD, alt, extras_only, opt, seq, sym
from ._trees import SEQ, E

if TYPE_CHECKING:
    from ._emit import Emitter

#: The line that tells the engine which rules an any-order member list is made of.
ANY_ORDER_NOTE = "//@any_order "


def members_any_order(
    em: Emitter,
    members: list[tuple[E, bool]],
    extra: E | None,
    ex_lo: int,
    ex_hi: int | None,
    name: str,
    deps: Deps,
) -> tuple[E, bool] | None | object:
    """`Emitter._members` with the declared members in any order, each at most once: one rule
    per set of members written so far, which ends only once every required member is in it
    and every dependency of those in it is met. Extra members go where `Emitter._members`
    puts them (anywhere when their number is unbounded, else after all the declared ones)."""
    n = len(members)
    comma = sym("COMMA")
    extra, star, tail, interleave = em.extras_layout(extra, ex_lo, ex_hi, name, n)
    pairs = em.shared_pairs(members, name, set(range(n)))  # each in 2^(n-1) rules
    required = sum(1 << i for i, (_, r) in enumerate(members) if r)
    after: dict[int, E | None | object] = {}

    def following(seen: int) -> E | None | object:
        """What may follow once the members in `seen` (a bit set) are written: None for
        nothing, `DEAD` when no continuation makes a valid object."""
        if seen in after:
            return after[seen]
        alts: list[E] = []
        for i in range(n):
            if not seen >> i & 1:
                nxt = following(seen | 1 << i)
                if nxt is not DEAD:
                    alts.append(seq([comma, pairs[i], cast(E | None, nxt)]))
        done = seen & required == required and deps_met(deps, seen)
        if done and tail is not None:
            alts.append(tail)
        body = alt(alts)
        if body is None and not done:
            after[seen] = DEAD
            return DEAD
        if body is not None and done and tail is None:
            body = opt(body)
        if star is not None:  # extra members first, wherever the object may go on
            body = seq([star, body])
        if body is not None and not re.fullmatch(r"\w+", body[0]):  # shared: a rule
            rule = em.names.rule(f"{name}_seen{seen}")
            em.rules[rule] = body
            body = sym(rule)
        after[seen] = body
        return body

    alts: list[E] = []
    for i in range(n):
        nxt = following(1 << i)
        if nxt is not DEAD:
            alts.append(seq([pairs[i], cast(E | None, nxt)]))
    if interleave and extra is not None:
        nxt = following(0)
        if nxt is not DEAD:
            alts.append(seq([extra, cast(E | None, nxt)]))
    elif not required and extra is not None and ex_hi != 0:
        alts.append(extras_only(extra, ex_lo, ex_hi))
    may_be_empty = not required and (extra is None or interleave or ex_lo == 0)
    body = alt(alts)
    if body is None:
        return None if may_be_empty else DEAD
    return body, may_be_empty


def members_seen_set(
    em: Emitter,
    members: list[tuple[E, bool]],
    extra: E | None,
    ex_lo: int,
    ex_hi: int | None,
    name: str,
    deps: Deps,
) -> tuple[E, bool] | object:
    """`members_any_order` for objects too big for a rule per subset: one rule,
    `NAME_any`, stands for the non-empty member list, and an `//@any_order` line names its
    parts (member rules, comma, extra members, bounded tail) and constraints (required,
    dependencies), from which the engine builds the positions "members S written" as the
    parse reaches them. Lark, which ignores the line, reads the rule as a superset (members
    repeated); `gbnf` refuses it."""
    n = len(members)
    if needs_the_impossible(deps, {i for i, (_, r) in enumerate(members) if r}):
        return DEAD
    extra, _star, tail, interleave = em.extras_layout(extra, ex_lo, ex_hi, name, n)
    pairs = [_rule_for(em, m, f"{name}_member{i}") for i, (m, _) in enumerate(members)]
    comma = _rule_for(em, sym("COMMA"), f"{name}_comma")
    extra_rule = _rule_for(em, extra, f"{name}_extra") if interleave and extra else None
    tail_rule = _rule_for(em, tail, f"{name}_tail") if tail is not None else None
    required = [i for i, (_, r) in enumerate(members) if r]
    items = " | ".join(pairs + ([extra_rule] if extra_rule else []))
    rule = em.names.rule(f"{name}_any")
    text = f"({items}) ({comma} ({items}))*" + (f" {tail_rule}?" if tail_rule else "")
    em.rules[rule] = (text, SEQ, None)
    spec = {
        "rule": rule,
        "members": pairs,
        "comma": comma,
        "required": required,
        "extra": extra_rule,
        "tail": tail_rule,
        "deps": [[t, list(need)] for t, need in deps],
    }
    em.notes.append(ANY_ORDER_NOTE + json.dumps(spec, separators=(",", ":")))
    alts: list[E] = [sym(rule)]
    if not interleave and not required and extra is not None and ex_hi != 0:
        alts.append(extras_only(extra, ex_lo, ex_hi))
    body = alt(alts)
    assert body is not None
    return body, not required and (extra is None or interleave or ex_lo == 0)


def _rule_for(em: Emitter, e: E, base: str) -> str:
    """`e` as a rule name: itself when it is one, else a new rule `base`."""
    if re.fullmatch(r"[a-z_][a-z0-9_]*", e[0]):
        return e[0]
    rule = em.names.rule(base)
    em.rules[rule] = e
    return rule
