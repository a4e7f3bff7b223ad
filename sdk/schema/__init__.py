"""JSON Schema normalisation: `$ref` resolution, draft idioms and intersections, into an IR.

`normalize` is the single entry point; `sdk.grammar` turns its result into Lark text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sdk.errors import SchemaError

from ._defs import Definitions
from ._ir import (
    ANY,
    FULL,
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
)
from ._keywords import CONSTRAINING
from ._lower import Lowerer
from ._usage import KeywordUse, Usage


@dataclass
class Normalized:
    """A schema in IR form: the root node, its named definitions, and the keyword bookkeeping."""

    root: Node
    defs: Definitions
    usage: Usage


def normalize(schema: Any, *, strict: bool = False, close_objects: bool = False) -> Normalized:
    """Lower `schema` to the IR; SchemaError (with a pointer) for malformed input."""
    if not isinstance(schema, dict | bool):
        raise SchemaError("a schema must be an object or a boolean", "")
    usage = Usage(strict)
    lowerer = Lowerer(schema, usage, close_objects)
    root = lowerer.run()
    return Normalized(root, lowerer.defs, usage)


__all__ = [
    "ANY",
    "CONSTRAINING",
    "FULL",
    "NEVER",
    "AnyValue",
    "Arr",
    "Consts",
    "Definitions",
    "KeywordUse",
    "Node",
    "Normalized",
    "Num",
    "Obj",
    "Ref",
    "Str",
    "Typed",
    "Union",
    "Usage",
    "is_any",
    "is_never",
    "normalize",
]
