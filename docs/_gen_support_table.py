"""Generate the JSON Schema support table of docs/schema-support.md from the compiler itself.

    .venv/bin/python docs/_gen_support_table.py          # rewrite the table in place
    .venv/bin/python docs/_gen_support_table.py --check  # exit 1 if the page is stale

Each row is a small probe schema. It is compiled twice with `sdk.grammar.compile_schema`:
normally, to read whether the keyword lands in `.enforced` (the grammar's language is exact
for it) or in `.validated` (the grammar accepts a superset, validation checks the rest), and
with `strict=True`, to see whether strict mode accepts it or raises `UnsupportedSchemaError`.
Nothing in the table is typed by hand except the probes and their one-line notes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

PAGE = Path(__file__).resolve().parent / "schema-support.md"

S = {"type": "string"}
I = {"type": "integer"}  # noqa: E741

# (keyword, probe schema, note). Keywords are grouped as in the JSON Schema spec.
PROBES: list[tuple[str, Any, str]] = [
    ("type", {"type": ["string", "null"]}, "single types and type lists"),
    ("description", {"type": "string", "description": "A city"}, "title, default, examples too"),
    ("enum", {"enum": ["celsius", "fahrenheit", 0, None]}, "any JSON values"),
    ("const", {"const": {"a": [1, 2]}}, "any JSON value"),
    ("minLength", {"type": "string", "minLength": 2}, "counted in characters"),
    ("maxLength", {"type": "string", "maxLength": 64}, "counted in characters"),
    ("pattern", {"type": "string", "pattern": "^[A-Z]{3}$"}, "ECMA-262 regex"),
    ("pattern", {"type": "string", "pattern": "^(\\w+)-\\1$"}, "with a backreference"),
    ("format", {"type": "string", "format": "date"}, "date"),
    ("format", {"type": "string", "format": "date-time"}, "date-time"),
    ("format", {"type": "string", "format": "uuid"}, "uuid"),
    ("format", {"type": "string", "format": "email"}, "email"),
    ("format", {"type": "string", "format": "ipv4"}, "ipv4"),
    ("format", {"type": "string", "format": "uri"}, "uri"),
    ("format", {"type": "string", "format": "hostname"}, "hostname"),
    ("format", {"type": "string", "format": "color"}, "unknown names: no constraint"),
    ("minimum", {"type": "integer", "minimum": -5}, "integers"),
    ("maximum", {"type": "number", "maximum": 99.5}, "numbers"),
    (
        "exclusiveMinimum",
        {"type": "number", "exclusiveMinimum": 0},
        "numbers; bounds at 0 accept every spelling (`1e-06`, `-0`), others plain decimals"
        " and scientific notation (`1e+16`, `1.5e-07`)",
    ),
    ("exclusiveMaximum", {"type": "integer", "exclusiveMaximum": 10}, "integers"),
    ("multipleOf", {"type": "integer", "multipleOf": 5}, "integer multiple of an integer"),
    (
        "multipleOf",
        {"type": "number", "multipleOf": 0.01},
        "a decimal step c·10^e, c = 2^a·5^b (0.01, 0.25, 1.5), without bounds or bounded at 0;"
        " plain decimal spellings",
    ),
    (
        "multipleOf",
        {"type": "number", "multipleOf": 0.25, "minimum": 1, "maximum": 100},
        "both bounds, at most 4096 multiples between them (listed)",
    ),
    (
        "multipleOf",
        {"type": "number", "multipleOf": 0.3},
        "other steps without two bounds; a one-sided bound away from 0",
    ),
    ("items", {"type": "array", "items": S}, ""),
    ("prefixItems", {"type": "array", "prefixItems": [S, I]}, "tuples"),
    ("minItems", {"type": "array", "items": S, "minItems": 1}, ""),
    ("maxItems", {"type": "array", "items": S, "maxItems": 5}, ""),
    ("uniqueItems", {"type": "array", "items": S, "uniqueItems": True}, ""),
    ("contains", {"type": "array", "contains": {"const": 1}}, "without bounds"),
    (
        "minContains",
        {"type": "array", "contains": {"const": 1}, "minContains": 2},
        "",
    ),
    ("properties", {"type": "object", "properties": {"a": S}}, "in declaration order"),
    ("required", {"type": "object", "properties": {"a": S, "b": I}, "required": ["a"]}, ""),
    (
        "additionalProperties",
        {"type": "object", "properties": {"a": S}, "additionalProperties": False},
        "false",
    ),
    (
        "additionalProperties",
        {"type": "object", "additionalProperties": I},
        "a schema (dict[str, int])",
    ),
    (
        "patternProperties",
        {"type": "object", "patternProperties": {"^x-": S}, "additionalProperties": False},
        "",
    ),
    (
        "propertyNames",
        {"type": "object", "propertyNames": {"pattern": "^[a-z]+$"}, "additionalProperties": I},
        "string constraints on names",
    ),
    ("minProperties", {"type": "object", "additionalProperties": I, "minProperties": 1}, ""),
    ("maxProperties", {"type": "object", "additionalProperties": I, "maxProperties": 3}, ""),
    (
        "maxProperties",
        {"type": "object", "properties": {"a": S, "b": S}, "maxProperties": 1},
        "with optional declared members",
    ),
    (
        "dependentRequired",
        {"type": "object", "properties": {"a": S, "b": S}, "dependentRequired": {"a": ["b"]}},
        "between declared members (others validated)",
    ),
    (
        "dependentSchemas",
        {"type": "object", "properties": {"a": S}, "dependentSchemas": {"a": {"required": ["b"]}}},
        "",
    ),
    ("anyOf", {"anyOf": [S, I]}, ""),
    ("oneOf", {"oneOf": [S, I]}, "disjoint alternatives"),
    ("oneOf", {"oneOf": [{"type": "number"}, I]}, "overlapping alternatives"),
    (
        "oneOf",
        {"oneOf": [{"required": ["a"]}, {"required": ["b"]}]},
        "overlapping, each alternative's negation expressible (as for `if`)",
    ),
    ("allOf", {"allOf": [{"type": "integer"}, {"minimum": 0}]}, "intersected"),
    ("not", {"not": {"type": "string"}}, "of a type"),
    ("not", {"type": "string", "not": {"pattern": "^a"}}, "of a pattern"),
    ("if", {"if": {"type": "integer"}, "then": {"minimum": 0}}, "with then/else"),
    (
        "if",
        {"if": {"required": ["a"]}, "then": {"required": ["b"]}},
        "a condition whose negation is expressible (types, enums, required, booleans)",
    ),
    ("not", {"not": {"type": "object", "required": ["a", "b"]}}, "of a conjunction"),
    (
        "$ref",
        {
            "$defs": {"A": {"type": "object", "properties": {"x": {"$ref": "#/$defs/A"}}}},
            "$ref": "#/$defs/A",
        },
        "local, recursive",
    ),
    (
        "unevaluatedProperties",
        {"allOf": [{"properties": {"a": S}}], "unevaluatedProperties": False},
        "",
    ),
]


def _uses(uses: tuple[Any, ...], keyword: str) -> bool:
    return any(u.keyword == keyword for u in uses)


def classify(keyword: str, schema: Any) -> tuple[str, str]:
    """(how the default compile treats `keyword`, what strict mode does)."""
    from sdk.errors import SchemaError, UnsupportedSchemaError
    from sdk.grammar import compile_schema

    try:
        sg = compile_schema(schema)
    except SchemaError as exc:
        return f"rejected: {exc}", "rejected"
    if _uses(sg.validated, keyword):
        how = "validated after parsing"
    elif _uses(sg.enforced, keyword):
        how = "**grammar**"
    else:
        how = "ignored (annotation)"
    try:
        compile_schema(schema, strict=True)
        strict = "accepted"
    except UnsupportedSchemaError:
        strict = "`UnsupportedSchemaError`"
    except SchemaError as exc:
        strict = f"rejected: {exc}"
    return how, strict


def table() -> str:
    rows = [
        "| Keyword | Probe schema | Note | Default compile | `strict=True` |",
        "| --- | --- | --- | --- | --- |",
    ]
    for keyword, schema, note in PROBES:
        how, strict = classify(keyword, schema)
        probe = json.dumps(schema, separators=(", ", ": ")).replace("|", "\\|")
        rows.append(f"| `{keyword}` | `{probe}` | {note} | {how} | {strict} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    sys.path.insert(0, str(PAGE.parent.parent))
    from _gen_common import main

    raise SystemExit(main(sys.argv[1:], PAGE, "_gen_support_table.py", table))
