"""JSON values in the IR: canonical equality keys and membership tests against nodes."""

from __future__ import annotations

import json
import re
from typing import Any

from ._defs import Cycle, Definitions
from ._ir import AnyValue, Arr, Consts, Node, Num, Obj, Ref, Str, Typed, Union


def text(value: Any) -> str:
    """The JSON text stored in `Consts` (declaration order, non-ASCII kept)."""
    return json.dumps(value, ensure_ascii=False)


def _canon(value: Any) -> Any:
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _canon(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_canon(v) for v in value]
    return value


def canonical(value: Any) -> str:
    """Equality key with JSON Schema semantics (1 == 1.0, key order irrelevant, true != 1)."""
    return json.dumps(_canon(value), sort_keys=True, ensure_ascii=False)


def type_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


class Acceptor:
    """Decides whether a concrete value is in a node's language (used to intersect enums).

    It errs on the side of acceptance where it cannot decide (formats, recursion in progress);
    `unsure` is then set so the caller can report the keyword as validated.
    """

    def __init__(self, defs: Definitions) -> None:
        self.defs = defs
        self.unsure = False

    def accepts(self, node: Node, value: Any, depth: int = 0) -> bool:
        if depth > 64:
            self.unsure = True
            return True
        if isinstance(node, AnyValue):
            return True
        if isinstance(node, Ref):
            try:
                return self.accepts(self.defs.node(node.key), value, depth + 1)
            except Cycle:
                self.unsure = True
                return True
        if isinstance(node, Union):
            return any(self.accepts(a, value, depth + 1) for a in node.alts)
        if isinstance(node, Consts):
            key = canonical(value)
            return any(canonical(json.loads(t)) == key for t in node.texts)
        assert isinstance(node, Typed)
        kind = type_of(value)
        if kind == "null":
            return node.null
        if kind == "boolean":
            return node.boolean
        if kind == "number":
            return node.number is not None and self._num(node.number, value)
        if kind == "string":
            return node.string is not None and self._str(node.string, value)
        if kind == "array":
            return node.arr is not None and self._arr(node.arr, value, depth)
        return node.obj is not None and self._obj(node.obj, value, depth)

    def _num(self, c: Num, v: float) -> bool:
        if c.integer and not (isinstance(v, int) or float(v).is_integer()):
            return False
        if c.minimum is not None and (v < c.minimum or (c.exclusive_minimum and v == c.minimum)):
            return False
        if c.maximum is not None and (v > c.maximum or (c.exclusive_maximum and v == c.maximum)):
            return False
        if c.multiple_of is not None:
            q = v / c.multiple_of
            if abs(q - round(q)) > 1e-9:
                return False
        return True

    def _str(self, c: Str, v: str) -> bool:
        if len(v) < c.min_length or (c.max_length is not None and len(v) > c.max_length):
            return False
        if v in c.excluded:
            return False
        for pattern, _ in c.patterns:
            try:
                if re.search(pattern, v) is None:
                    return False
            except re.error:
                self.unsure = True
        if c.formats:
            self.unsure = True
        return True

    def value_schema(self, c: Obj, name: str) -> list[Node]:
        """The schemas an object member named `name` must satisfy."""
        for n, s in c.props:
            if n == name:
                return [s]
        out = [s for p, s in c.patterns if _search(p, name)]
        return out or [c.extra]

    def _obj(self, c: Obj, v: dict[str, Any], depth: int) -> bool:
        if not c.required <= v.keys():
            return False
        if len(v) < c.min_props or (c.max_props is not None and len(v) > c.max_props):
            return False
        if any(t in v and not set(need) <= v.keys() for _, t, need in c.depends):
            return False
        for k, x in v.items():
            if c.names is not None and not self._str(c.names, k):
                return False
            if not all(self.accepts(s, x, depth + 1) for s in self.value_schema(c, k)):
                return False
        return True

    def _arr(self, c: Arr, v: list[Any], depth: int) -> bool:
        if len(v) < c.min_items or (c.max_items is not None and len(v) > c.max_items):
            return False
        for i, x in enumerate(v):
            s = c.prefix[i] if i < len(c.prefix) else c.items
            if not self.accepts(s, x, depth + 1):
                return False
        if c.contains is not None:
            return any(self.accepts(c.contains, x, depth + 1) for x in v)
        return True


def _search(pattern: str, name: str) -> bool:
    try:
        return re.search(pattern, name) is not None
    except re.error:
        return True
