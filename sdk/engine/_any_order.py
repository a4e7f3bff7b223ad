"""Object members in any order, each at most once, with the set written so far in the parse.

A grammar can only say "these members in any order" by spelling out every set of members
already written (2^n rules), so the schema compiler does that for small objects only. For
bigger ones it writes one rule for the member list and an `//@any_order` line naming its parts:
the rules of the members (`key: value` each), of the comma between them, of an extra member
(undeclared names, allowed anywhere) and of a bounded tail of extras (after all the declared
members), with the required members and the dependencies (`a` present ⇒ `b` present).

Here those become parser positions built as the parse reaches them, numbered after the
grammar's static ones by the set written (a bit set):

- `START`: the first item, a member or an extra;
- `A(S)`: after an item, members S written: a comma (→ `B(S)`), the tail, or the end;
- `B(S)`: after a comma: a member not in S (→ `A(S + i)`) or an extra (→ `A(S)`);
- `END`: after the tail.

A position only offers what can still finish: member i is offered from S when every required
member, and every member a dependency of `S + i` needs, can still be written. That keeps the
masks exact (no comma or key that leads nowhere). Each parse reaches at most 2n + 3 of these
positions; the ones built are cached, so memory follows the sets generations visit, never 2^n.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import GrammarError
from ._cache import BoundedCache
from ._positions import Position

#: The line the schema compiler writes for each such object (Lark reads it as a comment).
NOTE = "//@any_order "  # what `sdk.grammar` writes (ANY_ORDER_NOTE there)
#: Positions built so far, per grammar (rebuilt when evicted: they are pure).
CACHE_BYTES = 8 << 20

_START, _A, _B, _END = range(4)


@dataclass(frozen=True)
class Spec:
    """One member list, by rule ids (names resolved by the grammar builder)."""

    rule: int
    members: tuple[int, ...]
    comma: int
    required: int  # bit set over `members`
    extra: int | None
    tail: int | None
    deps: tuple[tuple[int, tuple[int | None, ...]], ...]


def read_notes(text: str) -> tuple[str, list[dict[str, Any]]]:
    """The grammar text without its `//@any_order` lines, and what those lines say."""
    if NOTE not in text:
        return text, []
    kept: list[str] = []
    notes: list[dict[str, Any]] = []
    for line in text.split("\n"):
        if line.lstrip().startswith(NOTE):
            try:
                note = json.loads(line.lstrip()[len(NOTE) :])
            except ValueError as e:
                raise GrammarError(f"unreadable //@any_order line: {e}") from None
            if not isinstance(note, dict):
                raise GrammarError("an //@any_order line must hold a JSON object")
            notes.append(note)
        else:
            kept.append(line)
    return "\n".join(kept), notes


def make_spec(note: dict[str, Any], rule_ids: dict[str, int]) -> Spec:
    """A note's rule names as ids, checked: a malformed note is a `GrammarError`."""

    def rule(name: Any) -> int:
        if not isinstance(name, str) or name not in rule_ids:
            raise GrammarError(f"//@any_order names an undefined rule {name!r}")
        return rule_ids[name]

    def maybe(name: Any) -> int | None:
        return None if name is None else rule(name)

    try:
        members = tuple(rule(m) for m in note["members"])
        n = len(members)

        def index(i: Any) -> int:
            if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < n:
                raise GrammarError(f"//@any_order member index {i!r} out of range")
            return i

        deps = tuple(
            (index(t), tuple(None if x is None else index(x) for x in need))
            for t, need in note.get("deps", [])
        )
        return Spec(
            rule=rule(note["rule"]),
            members=members,
            comma=rule(note["comma"]),
            required=sum(1 << index(i) for i in set(note.get("required", []))),
            extra=maybe(note.get("extra")),
            tail=maybe(note.get("tail")),
            deps=deps,
        )
    except (KeyError, TypeError, ValueError) as e:
        raise GrammarError(f"malformed //@any_order line: {type(e).__name__}: {e}") from None


class _Object:
    """One spec with the rules' productivity (from the grammar's fixpoint) folded in."""

    __slots__ = ("comma", "deps", "extra", "required", "spec", "tail", "usable")

    def __init__(self, spec: Spec, productive: Sequence[bool]) -> None:
        self.spec = spec
        self.usable = sum(1 << i for i, r in enumerate(spec.members) if productive[r])
        self.comma = productive[spec.comma]
        self.extra = spec.extra is not None and productive[spec.extra]
        self.tail = spec.tail is not None and productive[spec.tail]
        self.required = spec.required
        self.deps = spec.deps

    def done(self, seen: int) -> bool:
        """The member list may end here (before the tail, if there is one)."""
        if seen & self.required != self.required:
            return False
        for t, need in self.deps:
            if seen >> t & 1 and not all(x is not None and seen >> x & 1 for x in need):
                return False
        return self.spec.tail is None or self.tail

    def live(self, seen: int) -> bool:
        """Some way on from `seen` ends: the members it must still get can all be written."""
        if self.spec.tail is not None and not self.tail:
            return False
        need = seen | self.required
        changed = True
        while changed:
            changed = False
            for t, want in self.deps:
                if need >> t & 1:
                    for x in want:
                        if x is None:
                            return False
                        if not need >> x & 1:
                            need |= 1 << x
                            changed = True
        missing = need & ~seen
        # each member still missing is one more item, after a comma
        return missing & ~self.usable == 0 and (not missing or self.comma)

    def nexts(self, seen: int) -> Iterator[int]:
        """Members that may come after `seen`, in order (lazily: callers often need one)."""
        for i in range(len(self.spec.members)):
            if not seen >> i & 1 and self.usable >> i & 1 and self.live(seen | 1 << i):
                yield i

    def goes_on(self, seen: int) -> bool:
        """Some member may come after `seen`."""
        return next(self.nexts(seen), None) is not None

    def productive(self) -> bool:
        return self.goes_on(0) or (self.extra and self.live(0))


def productive(spec: Spec, productive: Sequence[bool]) -> bool:
    """Whether the member list can be written at all, given the rules' productivity so far
    (monotone in it, so the grammar's fixpoint may ask in every pass)."""
    return _Object(spec, productive).productive()


class DynamicPositions:
    """The positions of every any-order object of one grammar, numbered from `base` (after
    the grammar's static positions) by arithmetic on (object, kind, set written): a number is
    a pure function of what it stands for, so nothing is allocated ahead, and a position is
    built the first time the parser stands on it and kept in a byte-bounded cache."""

    def __init__(self, base: int, specs: list[Spec], productive: Sequence[bool]) -> None:
        self.base = base
        self.objects = [_Object(s, productive) for s in specs]
        self.cache: BoundedCache[int, Position] = BoundedCache("any-order positions", CACHE_BYTES)

    def number(self, k: int, kind: int, seen: int) -> int:
        return self.base + ((seen << 2 | kind) * len(self.objects) + k)

    def start(self, k: int) -> int:
        """The number of object `k`'s first position (its rule's start)."""
        return self.number(k, _START, 0)

    def get(self, index: int) -> Position:
        got = self.cache.get(index)
        if got is None:
            got = self._build(index)
            self.cache.put(index, got, 120 + 40 * len(got.calls))
        return got

    def _build(self, index: int) -> Position:
        k = (index - self.base) % len(self.objects)
        code = (index - self.base) // len(self.objects)
        kind, seen = code & 3, code >> 2
        obj = self.objects[k]
        spec = obj.spec
        calls: list[tuple[int, int]] = []
        final = False
        if kind in (_START, _B):
            for i in obj.nexts(seen):
                calls.append((spec.members[i], self.number(k, _A, seen | 1 << i)))
            if obj.extra and spec.extra is not None and (kind == _B or obj.live(seen)):
                calls.append((spec.extra, self.number(k, _A, seen)))
        elif kind == _A:
            if obj.comma and (obj.extra or obj.goes_on(seen)):
                calls.append((spec.comma, self.number(k, _B, seen)))
            if obj.done(seen):
                if spec.tail is None:
                    final = True
                else:
                    calls.append((spec.tail, self.number(k, _END, 0)))
        else:
            final = True
        return Position(spec.rule, {}, tuple(calls), final)
