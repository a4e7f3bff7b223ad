"""Keyword vocabulary: which keywords constrain, and shape checks of their values.

Why: unknown keywords are annotations and must be ignored, while every *constraining* keyword
must be either enforced or reported; malformed values raise `SchemaError` with a pointer.
"""

from __future__ import annotations

import re
import warnings
from typing import Any

from sdk.errors import SchemaError

from . import _pointer

TYPES = frozenset({"null", "boolean", "integer", "number", "string", "object", "array"})

CONSTRAINING = frozenset(
    {
        "type",
        "enum",
        "const",
        "$ref",
        "$dynamicRef",
        "$recursiveRef",
        "allOf",
        "anyOf",
        "oneOf",
        "not",
        "if",
        "multipleOf",
        "maximum",
        "exclusiveMaximum",
        "minimum",
        "exclusiveMinimum",
        "maxLength",
        "minLength",
        "pattern",
        "format",
        "items",
        "prefixItems",
        "additionalItems",
        "unevaluatedItems",
        "contains",
        "maxItems",
        "minItems",
        "uniqueItems",
        "maxContains",
        "minContains",
        "properties",
        "patternProperties",
        "additionalProperties",
        "unevaluatedProperties",
        "propertyNames",
        "maxProperties",
        "minProperties",
        "required",
        "dependentRequired",
        "dependentSchemas",
        "dependencies",
    }
)

_NONNEG_INT = (
    "maxLength",
    "minLength",
    "maxItems",
    "minItems",
    "maxProperties",
    "minProperties",
    "maxContains",
    "minContains",
)
_NUMBER = ("maximum", "minimum", "multipleOf")
_SCHEMA = (
    "additionalProperties",
    "additionalItems",
    "unevaluatedItems",
    "unevaluatedProperties",
    "contains",
    "propertyNames",
    "not",
    "if",
    "then",
    "else",
)
_SCHEMA_LIST = ("allOf", "anyOf", "oneOf", "prefixItems")
_SCHEMA_MAP = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")


def is_schema(value: Any) -> bool:
    return isinstance(value, dict | bool)


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def as_count(value: Any) -> int:
    """A non-negative integer keyword value (2.0 is accepted as 2)."""
    return int(value)


def compile_pattern(pattern: str, pointer: str) -> re.Pattern[str]:
    """Check an ECMA-262 pattern with Python's `re` (close enough to catch malformed ones)."""
    try:
        with warnings.catch_warnings():
            # "Possible nested set": `[[` means a literal `[` in ECMA-262, as in Python today;
            # the schema's author cannot act on a warning about a future Python.
            warnings.simplefilter("ignore", FutureWarning)
            return re.compile(pattern)
    except (re.error, OverflowError, RecursionError) as exc:
        raise SchemaError(f"invalid regular expression {pattern!r}: {exc}", pointer) from None


def check(schema: dict[str, Any], pointer: str) -> None:
    """Raise SchemaError for keyword values of the wrong shape."""

    def bad(keyword: str, what: str) -> SchemaError:
        return SchemaError(f"{keyword!r} must be {what}", _pointer.join(pointer, keyword))

    for kw in _NONNEG_INT:
        if kw in schema:
            v = schema[kw]
            if not is_number(v) or v < 0 or int(v) != v:
                raise bad(kw, "a non-negative integer")
    for kw in _NUMBER:
        if kw in schema and not is_number(schema[kw]):
            raise bad(kw, "a number")
    if "multipleOf" in schema and schema["multipleOf"] <= 0:
        raise bad("multipleOf", "strictly positive")
    for kw in ("exclusiveMinimum", "exclusiveMaximum"):
        if kw in schema and not (is_number(schema[kw]) or isinstance(schema[kw], bool)):
            raise bad(kw, "a number (or a boolean in draft-04)")
    if "type" in schema:
        t = schema["type"]
        names = t if isinstance(t, list) else [t]
        if not names or not all(isinstance(n, str) and n in TYPES for n in names):
            raise bad("type", f"one of {sorted(TYPES)} or a non-empty list of them")
    if "enum" in schema and not isinstance(schema["enum"], list):
        raise bad("enum", "an array")
    if "required" in schema:
        r = schema["required"]
        if not isinstance(r, list) or not all(isinstance(n, str) for n in r):
            raise bad("required", "an array of strings")
    for kw in ("pattern", "format", "$ref"):
        if kw in schema and not isinstance(schema[kw], str):
            raise bad(kw, "a string")
    if "uniqueItems" in schema and not isinstance(schema["uniqueItems"], bool):
        raise bad("uniqueItems", "a boolean")
    for kw in _SCHEMA:
        if kw in schema and not is_schema(schema[kw]):
            raise bad(kw, "a schema")
    for kw in _SCHEMA_LIST:
        if kw in schema:
            v = schema[kw]
            if not isinstance(v, list) or not v or not all(is_schema(x) for x in v):
                raise bad(kw, "a non-empty array of schemas")
    for kw in _SCHEMA_MAP:
        if kw in schema:
            v = schema[kw]
            if not isinstance(v, dict):
                raise bad(kw, "an object whose values are schemas")
            for name, x in v.items():
                if not is_schema(x):
                    raise SchemaError(
                        "a schema must be an object or a boolean", _pointer.join(pointer, kw, name)
                    )
    if "items" in schema:
        v = schema["items"]
        if not (is_schema(v) or (isinstance(v, list) and all(is_schema(x) for x in v))):
            raise bad("items", "a schema or an array of schemas")
    if "dependentRequired" in schema:
        v = schema["dependentRequired"]
        if not isinstance(v, dict) or not all(
            isinstance(x, list) and all(isinstance(n, str) for n in x) for x in v.values()
        ):
            raise bad("dependentRequired", "an object of string arrays")
    if "dependencies" in schema:
        v = schema["dependencies"]
        if not isinstance(v, dict) or not all(
            is_schema(x) or (isinstance(x, list) and all(isinstance(n, str) for n in x))
            for x in v.values()
        ):
            raise bad("dependencies", "an object of schemas or string arrays")
    if "pattern" in schema:
        compile_pattern(schema["pattern"], _pointer.join(pointer, "pattern"))
    for kw in ("minLength", "minItems", "minProperties", "minimum"):
        hi = "max" + kw[3:]
        if kw in schema and hi in schema and schema[kw] > schema[hi]:
            raise SchemaError(f"contradictory bounds: {kw} > {hi}", pointer)
