"""Intersection of IR nodes (`allOf`, keywords next to `$ref`/`anyOf`).

Why per type: the intersection of two schemas is computed type by type (objects property by
property, tighter bounds, lookahead-joined string patterns), never by concatenation. Where an
exact intersection is out of reach the left operand is kept (a superset) and `allOf` reported.
"""

from __future__ import annotations

import json
import math
from itertools import count

from ._defs import Cycle, Definitions
from ._ir import (
    ANY,
    NEVER,
    AnyValue,
    Arr,
    Consts,
    Node,
    Num,
    Obj,
    Ref,
    Str,
    Typed,
    Union,
    is_any,
    is_never,
    union,
)
from ._usage import Usage
from ._values import Acceptor, _search

MAX_PRODUCT = 256
MAX_CALLS = 50_000  # beyond this budget intersections are approximated (kept left operand)
MAX_DEPTH = 80
MAX_SYNTHETIC = 400


class Meet:
    def __init__(self, defs: Definitions, usage: Usage) -> None:
        self.defs = defs
        self.usage = usage
        self.memo: dict[tuple[Node, Node], str] = {}
        self.referenced: set[str] = set()
        self._ids = count(1)
        self.depth = 0
        self.calls = 0

    def approx(self, keyword: str, pointer: str, detail: str) -> None:
        self.usage.validate(keyword, pointer, detail)

    def __call__(self, a: Node, b: Node, pointer: str) -> Node:
        if is_any(a):
            return b
        if is_any(b) or a == b:
            return a
        if is_never(a) or is_never(b):
            return NEVER
        self.depth += 1
        self.calls += 1
        try:
            if self.depth > MAX_DEPTH or self.calls > MAX_CALLS:
                self.approx("allOf", pointer, "intersection too complex")
                return a
            return self._meet(a, b, pointer)
        finally:
            self.depth -= 1

    def _meet(self, a: Node, b: Node, pointer: str) -> Node:
        if isinstance(a, Ref) or isinstance(b, Ref):
            return self._ref(a, b, pointer)
        if isinstance(a, Consts) or isinstance(b, Consts):
            c, other = (a, b) if isinstance(a, Consts) else (b, a)
            assert isinstance(c, Consts)
            acc = Acceptor(self.defs)
            kept = tuple(t for t in c.texts if acc.accepts(other, json.loads(t)))
            if acc.unsure:
                self.approx("enum", pointer, "enum values checked against an approximation")
            return Consts(kept)
        if isinstance(a, Union) or isinstance(b, Union):
            alts_a = a.alts if isinstance(a, Union) else (a,)
            alts_b = b.alts if isinstance(b, Union) else (b,)
            if len(alts_a) * len(alts_b) > MAX_PRODUCT:
                self.approx("allOf", pointer, "intersection of large unions")
                return a
            return union([self(x, y, pointer) for x in alts_a for y in alts_b])
        assert isinstance(a, Typed) and isinstance(b, Typed)
        return self._typed(a, b, pointer)

    def _ref(self, a: Node, b: Node, pointer: str) -> Node:
        if not isinstance(a, Ref):
            a, b = b, a
        assert isinstance(a, Ref)
        memo_key = (a, b)
        if memo_key in self.memo:
            key = self.memo[memo_key]
            self.referenced.add(key)
            return Ref(key)
        n = next(self._ids)
        if n > MAX_SYNTHETIC:
            self.approx("allOf", pointer, "too many recursive intersections")
            return a
        key = f"&{n}"
        other = self.defs.names.get(b.key, "x") if isinstance(b, Ref) else "x"
        name = f"{self.defs.names.get(a.key, 'def')}_and_{other}"
        self.memo[memo_key] = key

        def thunk() -> Node:
            try:
                body = self.defs.node(a.key)
            except Cycle:
                if not self.defs.final:
                    raise
                self.approx("allOf", pointer, "intersection through recursive $ref")
                return a
            return self(body, b, pointer)

        self.defs.declare(key, name, thunk)
        try:
            node = self.defs.node(key)
        except Cycle:
            return Ref(key)  # computed later by Definitions.finish
        if key in self.referenced:
            return Ref(key)
        del self.memo[memo_key]
        self.defs.forget(key)
        return node

    def _typed(self, a: Typed, b: Typed, pointer: str) -> Node:
        number = _num(a.number, b.number, self, pointer)
        string = _str(a.string, b.string)
        obj = self._obj(a.obj, b.obj, pointer) if a.obj and b.obj else None
        arr = self._arr(a.arr, b.arr, pointer) if a.arr and b.arr else None
        return Typed(a.null and b.null, a.boolean and b.boolean, number, string, obj, arr)

    def member(self, o: Obj, name: str, pointer: str) -> Node:
        """The schema an object's member `name` must satisfy (declared, patterns, additional)."""
        for n, s in o.props:
            if n == name:
                return s
        if o.names is not None and not _name_ok(o.names, name):
            return NEVER
        matching = [s for p, s in o.patterns if _search(p, name)]
        if not matching:
            return o.additional
        node: Node = ANY
        for s in matching:
            node = self(node, s, pointer)
        return node

    def _obj(self, a: Obj, b: Obj, pointer: str) -> Obj | None:
        if a.patterns and b.patterns and a.patterns != b.patterns:
            self.approx("allOf", pointer, "both sides declare patternProperties")
            return a
        props: list[tuple[str, Node]] = []
        names_b = dict(b.props)
        names_a = dict(a.props)
        for name, s in a.props:
            other = names_b[name] if name in names_b else self.member(b, name, pointer)
            props.append((name, self(s, other, pointer)))
        for name, s in b.props:
            if name not in names_a:
                props.append((name, self(self.member(a, name, pointer), s, pointer)))
        if a.patterns == b.patterns:
            patterns = a.patterns
        else:
            patterns = tuple((p, self(s, b.additional, pointer)) for p, s in a.patterns) + tuple(
                (p, self(s, a.additional, pointer)) for p, s in b.patterns
            )
        names = (
            a.names if b.names is None else b.names if a.names is None else _str(a.names, b.names)
        )
        if (a.names is not None or b.names is not None) and names is None:
            names = Str(min_length=1, max_length=0)
        required = a.required | b.required
        if any(n in required and is_never(s) for n, s in props):
            return None
        max_props = _min_opt(a.max_props, b.max_props)
        min_props = max(a.min_props, b.min_props)
        if max_props is not None and min_props > max_props:
            return None
        return Obj(
            tuple(props),
            required,
            patterns,
            self(a.additional, b.additional, pointer),
            names,
            min_props,
            max_props,
            a.pointer,
            tuple(dict.fromkeys(a.depends + b.depends)),
            explicit=a.explicit or b.explicit,
            closed=not (a.explicit or b.explicit) and (a.closed or b.closed),
        )

    def _arr(self, a: Arr, b: Arr, pointer: str) -> Arr | None:
        n = max(len(a.prefix), len(b.prefix))
        prefix = tuple(
            self(
                a.prefix[i] if i < len(a.prefix) else a.items,
                b.prefix[i] if i < len(b.prefix) else b.items,
                pointer,
            )
            for i in range(n)
        )
        contains = a.contains if b.contains is None else b.contains
        if a.contains is not None and b.contains is not None and a.contains != b.contains:
            self.approx("contains", pointer, "two contains constraints")
        min_items = max(a.min_items, b.min_items)
        max_items = _min_opt(a.max_items, b.max_items)
        if max_items is not None and min_items > max_items:
            return None
        return Arr(
            prefix, self(a.items, b.items, pointer), min_items, max_items, contains, a.pointer
        )


def _min_opt(x: int | None, y: int | None) -> int | None:
    if x is None:
        return y
    return x if y is None else min(x, y)


def _name_ok(names: Str, name: str) -> bool:
    if len(name) < names.min_length or (
        names.max_length is not None and len(name) > names.max_length
    ):
        return False
    return name not in names.excluded and all(_search(p, name) for p, _ in names.patterns)


def _str(a: Str | None, b: Str | None) -> Str | None:
    if a is None or b is None:
        return None
    lo = max(a.min_length, b.min_length)
    hi = _min_opt(a.max_length, b.max_length)
    if hi is not None and lo > hi:
        return None
    patterns = a.patterns + tuple(p for p in b.patterns if p not in a.patterns)
    formats = a.formats + tuple(f for f in b.formats if f not in a.formats)
    return Str(lo, hi, patterns, formats, a.excluded | b.excluded, a.pointer)


def _num(a: Num | None, b: Num | None, meet: Meet, pointer: str) -> Num | None:
    if a is None or b is None:
        return None
    lo, lo_x = a.minimum, a.exclusive_minimum
    if b.minimum is not None and (
        lo is None or b.minimum > lo or (b.minimum == lo and b.exclusive_minimum)
    ):
        lo, lo_x = b.minimum, b.exclusive_minimum
    hi, hi_x = a.maximum, a.exclusive_maximum
    if b.maximum is not None and (
        hi is None or b.maximum < hi or (b.maximum == hi and b.exclusive_maximum)
    ):
        hi, hi_x = b.maximum, b.exclusive_maximum
    if lo is not None and hi is not None and (lo > hi or (lo == hi and (lo_x or hi_x))):
        return None
    m = a.multiple_of if b.multiple_of is None else b.multiple_of
    if a.multiple_of is not None and b.multiple_of is not None and a.multiple_of != b.multiple_of:
        x, y = a.multiple_of, b.multiple_of
        if isinstance(x, int) and isinstance(y, int):
            m = x * y // math.gcd(x, y)
        elif (max(x, y) / min(x, y)).is_integer():
            m = max(x, y)
        else:
            meet.approx("multipleOf", pointer, "two incommensurable multipleOf")
    return Num(a.integer or b.integer, lo, lo_x, hi, hi_x, m, a.pointer)


__all__ = ["Meet", "AnyValue"]
