"""A conservative disjointness test, so `oneOf` can be enforced as `anyOf` when exact.

`disjoint(a, b)` returning True is a proof that no value satisfies both; False means unknown.
"""

from __future__ import annotations

import json

from ._defs import Cycle, Definitions
from ._ir import AnyValue, Consts, Node, Num, Obj, Ref, Typed, Union, is_never
from ._values import Acceptor, canonical


def disjoint(a: Node, b: Node, defs: Definitions, depth: int = 0) -> bool:
    if depth > 8:
        return False
    if is_never(a) or is_never(b):
        return True
    if isinstance(a, AnyValue) or isinstance(b, AnyValue):
        return False
    try:
        if isinstance(a, Ref):
            return disjoint(defs.node(a.key), b, defs, depth + 1)
        if isinstance(b, Ref):
            return disjoint(a, defs.node(b.key), defs, depth + 1)
    except Cycle:
        return False
    if isinstance(a, Union):
        return all(disjoint(x, b, defs, depth + 1) for x in a.alts)
    if isinstance(b, Union):
        return all(disjoint(a, y, defs, depth + 1) for y in b.alts)
    if isinstance(a, Consts) and isinstance(b, Consts):
        return not (
            {canonical(json.loads(t)) for t in a.texts}
            & {canonical(json.loads(t)) for t in b.texts}
        )
    if isinstance(a, Consts) or isinstance(b, Consts):
        c, other = (a, b) if isinstance(a, Consts) else (b, a)
        assert isinstance(c, Consts)
        acc = Acceptor(defs)
        hit = any(acc.accepts(other, json.loads(t)) for t in c.texts)
        return not hit and not acc.unsure
    assert isinstance(a, Typed) and isinstance(b, Typed)
    if (a.null and b.null) or (a.boolean and b.boolean):
        return False
    if a.string is not None and b.string is not None:
        return False
    if a.number is not None and b.number is not None and not _num_disjoint(a.number, b.number):
        return False
    if a.arr is not None and b.arr is not None:
        return False
    return not (
        a.obj is not None and b.obj is not None and not _obj_disjoint(a.obj, b.obj, defs, depth)
    )


def _num_disjoint(a: Num, b: Num) -> bool:
    def below(x: Num, y: Num) -> bool:  # every x < every y
        if x.maximum is None or y.minimum is None:
            return False
        return x.maximum < y.minimum or (
            x.maximum == y.minimum and (x.exclusive_maximum or y.exclusive_minimum)
        )

    return below(a, b) or below(b, a)


def _obj_disjoint(a: Obj, b: Obj, defs: Definitions, depth: int) -> bool:
    pa, pb = dict(a.props), dict(b.props)
    for name in a.required:
        if name in pb and is_never(pb[name]):
            return True
        if name not in pb and is_never(b.extra) and not b.patterns:
            return True
        if (
            name in b.required
            and name in pa
            and name in pb
            and disjoint(pa[name], pb[name], defs, depth + 1)
        ):
            return True
    for name in b.required:
        if name in pa and is_never(pa[name]):
            return True
        if name not in pa and is_never(a.extra) and not a.patterns:
            return True
    return False
