"""Dependencies between an object's members (`dependentRequired`, `dependencies`: `a` present
⇒ `b` present), tracked in the grammar over the members' indices. Helpers of `Emitter`, which
they take first."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, cast

from sdk.schema import Obj

from ._exprs import DEAD, alt, extras_only, opt, seq, sym
from ._trees import E

if TYPE_CHECKING:
    from ._emit import Emitter

# Dependencies (`a` present ⇒ `b` present) are tracked over at most this many members: the
# rules of an object multiply by 2 per tracked member.
MAX_TRACKED = 6
#: Each dependency as (trigger, needed members) member indices (None: a needed member that
#: can never be written).
Deps = list[tuple[int, tuple[int | None, ...]]]


def dependencies(em: Emitter, o: Obj, kept: list[str]) -> Deps | None:
    """`o.depends` over member indices (None: a needed member that can never be
    written); None when there is nothing to track or too much (then validated)."""
    if not o.depends:
        return None
    index = {n: i for i, n in enumerate(kept)}
    deps = [(index[t], tuple(index.get(x) for x in need)) for _, t, need in o.depends if t in index]
    tracked = {t for t, _ in deps} | {x for _, need in deps for x in need if x is not None}
    if len(tracked) > MAX_TRACKED:
        for kw in dict.fromkeys(kw for kw, _, _ in o.depends):
            em.usage.validate(kw, o.pointer, "conditional requirements")
        return None
    return deps or None


def members_tracked(
    em: Emitter,
    members: list[tuple[E, bool]],
    extra: E | None,
    ex_lo: int,
    ex_hi: int | None,
    name: str,
    deps: Deps,
) -> tuple[E, bool] | None | object:
    """`Emitter._members` in declaration order for objects with dependencies (`a` present ⇒ `b`
    present): one rule per (next member, set of tracked members written so far), so the
    object can only end once every dependency of what it holds is met. `DEAD` when no
    member list satisfies them (a required trigger whose needed member cannot exist)."""
    n = len(members)
    comma = sym("COMMA")
    extra, star, tail, interleave = em.extras_layout(extra, ex_lo, ex_hi, name, n)
    tracked = {t for t, _ in deps} | {x for _, need in deps for x in need if x is not None}
    pairs = em.shared_pairs(members, name, tracked)
    memo: dict[tuple[int, int], E | None | object] = {}
    last, relevant = _undecided(deps, n)

    def rest(i: int, seen: int) -> E | None | object:
        """Members i.. (each with its leading comma) and the end, after `seen`."""
        decided = [dep for k, dep in enumerate(deps) if last[k] < i]
        if not deps_met(decided, seen):
            return DEAD
        key = (i, seen & relevant[i])
        if key in memo:
            return memo[key]
        if i == n:
            out: E | None | object = tail if deps_met(deps, seen) else DEAD
        else:
            m, req = members[i]
            take = rest(i + 1, seen | 1 << i)
            skip = DEAD if req else rest(i + 1, seen)
            alts: list[E] = []
            if take is not DEAD:
                alts.append(seq([comma, pairs[i], star, cast(E | None, take)]))
            empty = skip is None
            if skip is not DEAD and skip is not None:
                alts.append(cast(E, skip))
            body = alt(alts)
            if body is None:
                out = None if empty else DEAD
            else:
                out = opt(body) if empty else body
                if not re.fullmatch(r"\w+", out[0]):
                    rule = em.names.rule(f"{name}_rest{i}")
                    em.rules[rule] = out
                    out = sym(rule)
        memo[key] = out
        return out

    first_req = next((i for i, (_, r) in enumerate(members) if r), n)
    alts: list[E] = []
    for j in range(min(first_req + 1, n)):
        after = rest(j + 1, 1 << j)
        if after is not DEAD:
            alts.append(seq([pairs[j], star, cast(E | None, after)]))
    may_be_empty = first_req == n
    if interleave and extra is not None:
        after = rest(0, 0)
        if after is not DEAD:
            alts.append(seq([extra, star, cast(E | None, after)]))
    elif first_req == n and extra is not None:
        if ex_hi != 0:
            alts.append(extras_only(extra, ex_lo, ex_hi))
        may_be_empty = may_be_empty and ex_lo == 0
    body = alt(alts)
    if body is None:
        return None if may_be_empty else DEAD
    return body, may_be_empty


def _undecided(deps: Deps, n: int) -> tuple[list[int], list[int]]:
    """The last member each dependency involves (`n` for one that can never be written), and
    for each member index i the mask of the members of the dependencies undecided from i on.

    From member i on, a dependency whose members all lie before i is decided: met (it no
    longer matters) or broken (nothing can follow). Only the undecided ones tell states
    apart, so equal futures share one rule."""
    last = [max(t, *(n if x is None else x for x in need)) for t, need in deps]
    relevant = [
        _mask(
            {
                b
                for k, (t, need) in enumerate(deps)
                if last[k] >= i
                for b in (t, *need)
                if b is not None
            }
        )
        for i in range(n + 1)
    ]
    return last, relevant


def _mask(bits: set[int]) -> int:
    return sum(1 << b for b in bits)


def deps_met(deps: Deps, seen: int) -> bool:
    """Every dependency whose trigger is in `seen` has its needed members there too."""
    return all(
        not seen >> t & 1 or all(x is not None and seen >> x & 1 for x in need) for t, need in deps
    )


def needs_the_impossible(deps: Deps, members: set[int]) -> bool:
    """Whether `members`, with every member their dependencies then need, includes a member
    that can never be written (None)."""
    todo = list(members)
    while todo:
        t = todo.pop()
        for trigger, need in deps:
            if trigger == t:
                for x in need:
                    if x is None:
                        return True
                    if x not in members:
                        members.add(x)
                        todo.append(x)
    return False
