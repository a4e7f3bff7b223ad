"""Schema → Lark compiler: hand-written schemas checked with the Lark oracle, errors, goldens."""

from __future__ import annotations

import json
import os
from typing import Any

import jsonschema
import pytest
from hypothesis import given, reject, settings
from hypothesis import strategies as st

from sdk.engine import CompiledGrammar
from sdk.errors import SchemaError, TooComplexError, UnsupportedSchemaError
from sdk.grammar import compile_schema
from tests._oracle import accepts, engine_accepts, parser

GOLDEN = os.path.join(os.path.dirname(__file__), "golden")


def check(schema: Any, valid: list[Any], invalid: list[Any], **options: Any) -> None:
    """Every valid instance parses and every invalid one is rejected, in both whitespace modes."""
    for ws in ("compact", "flexible"):
        g = compile_schema(schema, whitespace=ws, **options)
        p = parser(g.lark)
        for v in valid:
            texts = [json.dumps(v, separators=(",", ":"), ensure_ascii=False)]
            if ws == "flexible":
                texts += [
                    json.dumps(v, ensure_ascii=False),
                    json.dumps(v, indent=2, ensure_ascii=False),
                ]
            for t in texts:
                assert accepts(p, t), (ws, t, g.lark)
        for v in invalid:
            t = json.dumps(v, separators=(",", ":"), ensure_ascii=False)
            assert not accepts(p, t), (ws, t, g.lark)
            if ws == "flexible":
                assert not accepts(p, json.dumps(v, ensure_ascii=False)), (ws, v)


def test_object_properties_required_and_additional() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "boolean"}},
        "required": ["b"],
    }
    check(
        schema,
        [
            {"b": "x"},
            {"a": 1, "b": "x"},
            {"a": 1, "b": "x", "c": True},
            {"b": "", "zz": [1, None]},
            {"a": -3, "b": 'é\n"', "c": False, "d": {"e": 1.5e3}},
        ],
        [
            {},
            {"a": 1},
            {"a": 1.5, "b": "x"},
            {"b": 1},
            {"b": "x", "a": 1},
            {"b": "x", "c": 1},
            [],
            "x",
            {"b": "x", "zz": 1, "b2": None, "a": 2},
        ],
    )


def test_closed_objects_and_close_objects_option() -> None:
    schema = {"properties": {"a": {"type": "null"}}, "additionalProperties": False}
    check(schema, [{}, {"a": None}, 3, "s", [1]], [{"a": 1}, {"b": None}, {"a": None, "b": 1}])
    check(
        {"type": "object", "properties": {"a": {}}},
        [{}, {"a": [1]}],
        [{"b": 1}],
        close_objects=True,
    )


def test_close_objects_closes_the_whole_object_not_each_part() -> None:
    """Tool arguments and typed outputs compile with `close_objects`: an object that declares
    members takes no others. Its members may be declared in parts (`allOf` branches, a `$ref`
    and its siblings): closed one by one, each part would forbid the others' members (the
    grammar was `{}` alone, or no grammar). Closing applies to the object they make together;
    an `additionalProperties` the schema does say keeps its standard meaning."""
    base = {"properties": {"a": {"type": "integer"}}, "required": ["a"]}
    extra = {"properties": {"b": {"type": "string"}}}
    for schema, both in (  # members in the merged declaration order
        ({"type": "object", "allOf": [base, extra]}, {"a": 1, "b": "x"}),
        ({"type": "object", **extra, "allOf": [base]}, {"b": "x", "a": 1}),
        ({"$defs": {"Base": base}, "$ref": "#/$defs/Base", **extra}, {"a": 1, "b": "x"}),
    ):
        check(
            schema,
            [{"a": 1}, both],
            [{}, {"b": "x"}, {"a": 1, "c": 1}, {**both, "c": None}],
            close_objects=True,
        )
    said = {"allOf": [{**base, "additionalProperties": False}, extra], "type": "object"}
    check(said, [{"a": 1}], [{"a": 1, "b": "x"}, {"a": 1, "c": 1}], close_objects=True)
    # A required member no part declares is a member of the object, not a contradiction.
    check(
        {"type": "object", **extra, "required": ["c"]},
        [{"c": 1}, {"b": "x", "c": [1]}],
        [{}, {"b": "x"}, {"c": 1, "d": 2}],
        close_objects=True,
    )


def test_additional_properties_schema_and_pattern_properties() -> None:
    schema = {
        "type": "object",
        "properties": {"id": {"type": "integer"}},
        "patternProperties": {"^x-": {"type": "string"}},
        "additionalProperties": {"type": "number", "minimum": 0},
    }
    check(
        schema,
        [{"id": 1, "x-a": "s", "n": 2.5}, {"x-": "", "y": 0}, {}],
        [{"id": "1"}, {"x-a": 1}, {"n": -1}, {"n": "s"}],
    )


def test_arrays_prefix_items_bounds() -> None:
    check(
        {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 3},
        [[1, 2], [1, 2, 3]],
        [[], [1], [1, 2, 3, 4], [1, "2"]],
    )
    check(
        {"type": "array", "prefixItems": [{"type": "string"}, {"type": "boolean"}], "items": False},
        [[], ["a"], ["a", True]],
        [[1], ["a", True, 1], [True]],
    )
    check(  # draft-04 idiom
        {
            "type": "array",
            "items": [{"const": 1}],
            "additionalItems": {"type": "string"},
            "minItems": 1,
        },
        [[1], [1, "a", "b"]],
        [[], [2], [1, 2]],
    )


def test_enum_const_and_types() -> None:
    check(
        {"enum": ["red", 1, None, {"k": [True]}, [1, "a"]]},
        ["red", 1, 1.0, None, {"k": [True]}, [1, "a"]],
        ["blue", 2, True, {"k": [False]}, [1], "Red"],
    )
    check({"type": ["integer", "null"]}, [0, -12, None], [1.5, "1", True])
    check({"const": "a/b\u00e9"}, ["a/b\u00e9"], ["a/b"])


def test_numbers_and_strings() -> None:
    check(
        {"type": "number", "minimum": -1.5, "exclusiveMaximum": 10},
        [-1.5, 0, 9.99, 3],
        [-1.6, 10, 11, "1"],
    )
    check({"type": "integer", "minimum": 0, "exclusiveMinimum": True, "maximum": 5}, [1, 5], [0, 6])
    check({"type": "integer", "multipleOf": 5}, [0, 10, -25], [3, 11])
    check(
        {"type": "string", "minLength": 2, "maxLength": 3, "pattern": "^[a-z]+$"},
        ["ab", "abc"],
        ["a", "abcd", "AB", "a1"],
    )
    check({"type": "string", "format": "date"}, ["2024-02-29"], ["2023-02-29", "x"])


def test_refs_recursion_and_defs() -> None:
    schema = {
        "$defs": {
            "node": {
                "type": "object",
                "properties": {
                    "v": {"type": "integer"},
                    "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}},
                },
                "required": ["v"],
                "additionalProperties": False,
            }
        },
        "$ref": "#/$defs/node",
    }
    check(
        schema,
        [{"v": 1}, {"v": 1, "kids": [{"v": 2, "kids": []}, {"v": 3}]}],
        [{"v": 1, "kids": [{}]}, {"kids": []}],
    )
    g = compile_schema(schema)
    assert "node:" in g.lark and g.lark.count("node:") == 1


def test_id_relative_and_pointer_refs() -> None:
    schema = {
        "$id": "https://example.com/root.json",
        "definitions": {
            "a": {"$id": "item.json", "type": "string", "maxLength": 2},
            "b": {"type": "array", "items": [{"type": "integer"}, {"type": "null"}]},
        },
        "properties": {"x": {"$ref": "item.json"}, "y": {"$ref": "#/definitions/b/items/1"}},
    }
    check(schema, [{"x": "ab", "y": None}], [{"x": "abc"}, {"y": 1}])


def test_allof_intersection_and_sibling_keywords() -> None:
    schema = {
        "definitions": {
            "base": {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
        },
        "allOf": [
            {"$ref": "#/definitions/base"},
            {"properties": {"a": {"minimum": 0}, "b": {"enum": ["x", "y", 3]}}, "required": ["b"]},
        ],
        "properties": {"b": {"type": "string"}},
    }
    check(
        schema,
        [{"a": 0, "b": "x"}, {"a": 5, "b": "y", "c": 1}],
        [{"a": -1, "b": "x"}, {"a": 1, "b": 3}, {"a": 1}, {"b": "x"}],
    )
    check(
        {"allOf": [{"type": "string", "pattern": "^a"}, {"pattern": "b$"}]},
        ["ab", "acb"],
        ["a", "b", "ba"],
    )


def test_anyof_oneof_not() -> None:
    check({"anyOf": [{"type": "string"}, {"type": "integer", "minimum": 3}]}, ["s", 3], [2, None])
    schema = {
        "oneOf": [
            {
                "type": "object",
                "properties": {"kind": {"const": "a"}, "x": {"type": "integer"}},
                "required": ["kind"],
            },
            {"type": "object", "properties": {"kind": {"const": "b"}}, "required": ["kind"]},
        ]
    }
    g = compile_schema(schema)
    assert g.validated == ()
    check(schema, [{"kind": "a", "x": 1}, {"kind": "b"}], [{"kind": "c"}, {}])
    g = compile_schema({"oneOf": [{"type": "integer"}, {"minimum": 2}]})
    assert ("oneOf", "") in g.validated
    check({"type": "string", "not": {"enum": ["a", "b"]}}, ["c", "ab"], ["a", "b"])
    check({"not": {"type": ["string", "null"]}}, [1, [], {}], ["s", None])
    check({"type": "object", "not": {"required": ["x"]}}, [{}, {"y": 1}], [{"x": 1}])


def test_min_max_properties_and_contains() -> None:
    check(
        {
            "type": "object",
            "additionalProperties": {"type": "integer"},
            "minProperties": 1,
            "maxProperties": 2,
        },
        [{"a": 1}, {"a": 1, "b": 2}],
        [{}, {"a": 1, "b": 2, "c": 3}, {"a": "x"}],
    )
    check(
        {
            "type": "object",
            "properties": {"a": {}, "b": {}},
            "additionalProperties": False,
            "minProperties": 1,
        },
        [{"a": 1}, {"b": 2}],
        [{}],
    )
    check({"type": "array", "contains": {"const": 5}}, [[5], [1, 5, 2]], [[], [1, 2]])


def test_boolean_schemas() -> None:
    check(True, [1, "s", None, {"a": [True]}], [])
    check({"properties": {"a": False}}, [{}, {"b": 1}], [{"a": 1}])
    with pytest.raises(SchemaError):
        compile_schema(False)


def test_validated_keywords_reported() -> None:
    g = compile_schema(
        {"type": "array", "uniqueItems": True, "items": {"type": "number", "multipleOf": 0.3}}
    )
    assert {k for k, _ in g.validated} == {"uniqueItems", "multipleOf"}
    g = compile_schema({"type": "number", "multipleOf": 0.1})
    assert g.validated == () and ("multipleOf", "") in g.enforced
    g = compile_schema({"if": {"properties": {"a": {"const": 1}}}, "then": {"required": ["b"]}})
    assert g.validated == (("if", ""),)
    assert ("type", "") in compile_schema({"type": "string"}).enforced


def test_strict_mode_names_keyword_and_pointer() -> None:
    with pytest.raises(UnsupportedSchemaError) as info:
        compile_schema({"properties": {"a": {"type": "array", "uniqueItems": True}}}, strict=True)
    assert info.value.keyword == "uniqueItems"
    assert info.value.pointer == "/properties/a"
    compile_schema({"type": "object", "properties": {"a": {"type": "string"}}}, strict=True)


@pytest.mark.parametrize(
    ("schema", "pointer"),
    [
        ({"$ref": "#/definitions/missing"}, ""),
        (
            {"properties": {"a": {"type": "string", "pattern": "(unclosed"}}},
            "/properties/a/pattern",
        ),
        ({"type": "string", "minLength": 3, "maxLength": 2}, ""),
        ({"minimum": 3, "maximum": 2}, ""),
        ({"type": "strange"}, "/type"),
        ({"properties": {"a": 3}}, "/properties/a"),
        ({"allOf": [{"type": "string"}, {"type": "integer"}]}, ""),
        ({"required": "a"}, "/required"),
    ],
)
def test_malformed_schemas_raise_schema_error(schema: Any, pointer: str) -> None:
    with pytest.raises(SchemaError) as info:
        compile_schema(schema)
    assert info.value.pointer == pointer


def test_deep_nesting_is_bounded() -> None:
    schema: dict[str, Any] = {"type": "integer"}
    for _ in range(5000):
        schema = {"type": "array", "items": schema}
    with pytest.raises((SchemaError, TooComplexError)):
        compile_schema(schema)
    with pytest.raises(SchemaError):
        compile_schema([1, 2])


def test_unknown_keywords_are_ignored() -> None:
    g = compile_schema(
        {"type": "string", "_format": "email", "x-foo": 1, "description": "d", "title": "t"}
    )
    assert g.validated == ()
    assert compile_schema({"type": "string", "format": "no-such-format"}).validated == ()


@pytest.mark.parametrize(
    "name",
    ["person", "recursive_tree", "enum_union", "array_tuple"],
)
def test_golden(name: str) -> None:
    with open(os.path.join(GOLDEN, name + ".json")) as f:
        schema = json.load(f)
    got = compile_schema(schema).lark
    path = os.path.join(GOLDEN, name + ".lark")
    if os.environ.get("UPDATE_GOLDEN"):
        with open(path, "w") as f:
            f.write(got)
    with open(path) as f:
        assert got == f.read()


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.sampled_from(["</b>", "<", "/", "b>", "a", '"', "\\", "\n", "\u00e9"]), max_size=6)
)
def test_reserved_text_is_subtracted_from_every_string(parts: list[str]) -> None:
    """Lark's oracle (Python `re`): with a reserved text, exactly the JSON texts that hold it
    raw are lost, in plain strings, keys, constants and constrained strings alike; its
    escaped spelling (`<\\/b>`) stays accepted."""
    value = "".join(parts)
    schemas: list[Any] = [
        {"type": "string"},
        {"type": "object", "additionalProperties": {"type": "integer"}},
        {"enum": [value, "x"]},
        {"type": "string", "pattern": "b"},
        {"type": "string", "maxLength": 10},
    ]
    for schema in schemas:
        instance: Any = {value: 1} if schema.get("type") == "object" else value
        plain = parser(compile_schema(schema).lark)
        reserved = parser(compile_schema(schema, reserved=("</b>",)).lark)
        raw = json.dumps(instance, ensure_ascii=False)
        for text in (raw, raw.replace("/", "\\/")):
            want = accepts(plain, text) and "</b>" not in text
            assert accepts(reserved, text) == want, (schema, text)


def test_reserved_texts_are_checked() -> None:
    for bad in ("", "a<", '<"', "<\\", "[x", " <", "/x"):
        with pytest.raises(SchemaError, match="reserved text"):
            compile_schema({"type": "string"}, reserved=(bad,))


# ------------------------------------------------------------------ conditions and negations


@pytest.mark.parametrize(
    ("schema", "valid", "invalid"),
    [
        # boolean and empty conditions decide the branch outright
        ({"if": True, "then": {"const": "t"}, "else": {"const": "e"}}, ["t"], ["e", 1]),
        ({"if": False, "then": {"const": "t"}, "else": {"const": "e"}}, ["e"], ["t", 1]),
        ({"if": {}, "then": {"const": "t"}, "else": {"const": "e"}}, ["t"], ["e"]),
        ({"if": {"not": {}}, "then": {"const": "t"}, "else": {"const": "e"}}, ["e"], ["t"]),
        # a negatable condition: (if AND then) OR (NOT if AND else)
        (
            {"if": {"type": "string"}, "then": {"minLength": 2}, "else": {"type": "integer"}},
            ["ab", 3],
            ["a", 1.5, None],
        ),
        (
            {"if": {"required": ["a"]}, "then": {"required": ["b"]}},
            [{"a": 1, "b": 2}, {"c": 1}, 5],
            [{"a": 1}],
        ),
        # `required` holds for every non-object, so its negation holds for none
        ({"not": {"required": ["a"]}}, [{}, {"b": 1}], [{"a": 1}, 3, "s", None]),
        ({"not": {"required": ["a", "b"]}}, [{}, {"a": 1}], [{"a": 1, "b": 2}, 3]),
        ({"not": {"required": []}}, [], []),
        # De Morgan over conjunctions of independent keywords, and over allOf
        ({"not": {"type": "object", "required": ["a"]}}, [{}, 3, "s"], [{"a": 1}]),
        (
            {"not": {"allOf": [{"required": ["a"]}, {"required": ["b"]}]}},
            [{"a": 1}, {}],
            [{"a": 1, "b": 2}, 7],
        ),
        ({"not": {"type": "string", "enum": ["x", "y"]}}, ["z", 1, None], ["x", "y"]),
        # overlapping oneOf: each alternative and not the others
        (
            {"oneOf": [{"required": ["a"]}, {"required": ["b"]}]},
            [{"a": 1}, {"b": 1}],
            [{"a": 1, "b": 2}, {}, 3],
        ),
        ({"oneOf": [{"type": "string"}, {"enum": ["a", "b"]}]}, ["c"], ["a", 1]),
    ],
)
def test_conditions_and_negations_are_exact(
    schema: Any, valid: list[Any], invalid: list[Any]
) -> None:
    if schema == {"not": {"required": []}}:
        with pytest.raises(SchemaError, match="admits no value|intersection .* is empty"):
            compile_schema(schema, strict=True)
        return
    check(schema, valid, invalid, strict=True)
    import jsonschema

    for v in valid:
        assert jsonschema.Draft202012Validator(schema).is_valid(v), v
    for v in invalid:
        assert not jsonschema.Draft202012Validator(schema).is_valid(v), v


_MEMBER_VALUES = {"integer": 1, "string": "s", "boolean": True, "null": None}


@settings(max_examples=40, deadline=None)
@given(
    types=st.lists(st.sampled_from(sorted(_MEMBER_VALUES)), min_size=2, max_size=4),
    required=st.sets(st.integers(0, 3)),
    extra=st.sampled_from([False, True, {"type": "integer"}]),
    min_props=st.sampled_from([None, 1, 2]),
    data=st.data(),
)
def test_any_member_order_is_exact(
    types: list[str], required: set[int], extra: Any, min_props: int | None, data: Any
) -> None:
    """`member_order="any"`: a member list is accepted in any order exactly when jsonschema
    says the object is valid (each declared member at most once, the required ones present,
    extra members anywhere), unless a keyword is reported as validated; the default accepts
    valid objects in declaration order."""
    names = [f"p{i}" for i in range(len(types))]
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {n: {"type": t} for n, t in zip(names, types, strict=True)},
        "required": [names[i] for i in sorted(required) if i < len(names)],
        "additionalProperties": extra,
    }
    if min_props is not None:
        schema["minProperties"] = min_props
    compiled = compile_schema(schema, member_order="any")
    any_order = CompiledGrammar.from_lark(compiled.lark)  # Lark would ignore `//@any_order`
    declared = parser(compile_schema(schema).lark)
    pool = [(n, _MEMBER_VALUES[t]) for n, t in zip(names, types, strict=True)]
    pool += [("x", 7), ("y", "s")]
    items = data.draw(st.lists(st.sampled_from(pool), max_size=len(pool), unique_by=lambda m: m[0]))
    items = data.draw(st.permutations(items))

    def text(members: list[tuple[str, Any]]) -> str:
        return "{" + ",".join(f"{json.dumps(k)}:{json.dumps(v)}" for k, v in members) + "}"

    valid = jsonschema.Draft202012Validator(schema).is_valid(dict(items))
    if compiled.validated:  # member counting left to validation: only valid => accepted
        assert not valid or engine_accepts(any_order, text(items)), (schema, items)
    else:
        assert engine_accepts(any_order, text(items)) == valid, (schema, items)
    in_order = [k for k, _ in items if k in names]
    if valid and in_order == sorted(in_order, key=names.index) and len(in_order) == len(items):
        assert accepts(declared, text(items)), (schema, items)
    declared_items = [m for m in items if m[0] in names]
    if declared_items:  # a declared member twice: never
        assert not engine_accepts(any_order, text([*items, declared_items[0]])), (schema, items)


def test_any_member_order_stays_small() -> None:
    """One rule per set of members written (each named once, never inlined: inlining
    repeats a state's text per path, n! of them) up to 3 members; past that one rule and an
    `//@any_order` line for the engine, whose text grows linearly."""

    def schema(n: int, extra: bool) -> dict[str, Any]:
        props = {
            f"p{i}": {"type": "object", "properties": {"x": {"type": "integer"}}} for i in range(n)
        }
        return {"type": "object", "properties": props, "additionalProperties": extra}

    for extra in (False, True):
        three = compile_schema(schema(3, extra), member_order="any").lark
        assert len(three) < 10_000 and "//@any_order" not in three, (extra, len(three))
        four = compile_schema(schema(4, extra), member_order="any").lark
        fifty = compile_schema(schema(50, extra), member_order="any").lark
        assert four.count("//@any_order") == fifty.count("//@any_order") == 1
        assert len(fifty) < 15 * len(four), (len(four), len(fifty))


@settings(max_examples=150, deadline=None)
@given(
    n=st.integers(2, 5),
    required=st.sets(st.integers(0, 4)),
    deps=st.dictionaries(st.integers(0, 4), st.lists(st.integers(0, 5), max_size=3), max_size=3),
    extra=st.sampled_from([False, True]),
    order=st.sampled_from(["declared", "any"]),
    data=st.data(),
)
def test_dependencies_between_members_are_exact(
    n: int, required: set[int], deps: dict[int, list[int]], extra: bool, order: str, data: Any
) -> None:
    """Array-form `dependencies` between declared members are enforced (reported so, never
    validated): a member list is accepted exactly when jsonschema says the object is valid,
    in declaration order, and in any order with `member_order="any"`. A dependency naming an
    undeclared member (`p5`) is validated instead."""
    names = [f"p{i}" for i in range(n)]
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {name: {"type": "integer"} for name in names},
        "required": [names[i] for i in sorted(required) if i < n],
        "dependencies": {f"p{t}": [f"p{x}" for x in need] for t, need in deps.items() if t < n},
        "additionalProperties": extra,
    }
    try:
        compiled = compile_schema(schema, member_order=order)  # type: ignore[arg-type]
    except SchemaError:
        reject()  # admits no value: nothing to check
    undeclared = any(x not in names for need in schema["dependencies"].values() for x in need)
    used = {u.keyword for u in compiled.validated}
    assert ("dependencies" in used) == (undeclared and extra), (schema, compiled.validated)
    p = CompiledGrammar.from_lark(compiled.lark)  # Lark would ignore `//@any_order`
    members = data.draw(st.lists(st.sampled_from([*names, "x"]), unique=True))
    if order == "declared":
        members = sorted(members, key=lambda m: names.index(m) if m in names else -1)
    value = {m: 1 for m in members}
    text = "{" + ",".join(f'"{m}":1' for m in members) + "}"
    valid = jsonschema.Draft7Validator(schema).is_valid(value)
    if not compiled.validated:
        assert engine_accepts(p, text) == valid, (schema, text)
    elif valid:
        assert engine_accepts(p, text), (schema, text)


def test_member_order_is_checked() -> None:
    with pytest.raises(SchemaError, match="member_order"):
        compile_schema({"type": "object"}, member_order="sorted")  # type: ignore[arg-type]


_NEGATED = st.sampled_from(
    [
        {"multipleOf": 7},
        {"multipleOf": 3},
        {"type": "integer"},
        {"enum": [1, "a"]},
        {"pattern": "^a"},
        {"oneOf": [{"minimum": 2}, {"maximum": 5}]},
        {"not": {"type": "string"}},
    ]
)


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(
        st.one_of(st.integers(-20, 20), st.sampled_from(["a", "ab", "b", "7"]), st.none()),
        min_size=1,
        max_size=6,
        unique_by=lambda v: (type(v).__name__, v),
    ),
    negated=_NEGATED,
    as_all_of=st.booleans(),
)
def test_finite_values_are_decided_by_the_reference_validator(
    values: list[Any], negated: dict[str, Any], as_all_of: bool
) -> None:
    """An `enum` beside (or in an `allOf` with) what the grammar cannot express is exact:
    each candidate is kept exactly when jsonschema accepts it under the whole schema, and
    strict mode compiles it instead of refusing the keyword."""
    schema: dict[str, Any] = (
        {"allOf": [{"enum": values}, {"not": negated}]}
        if as_all_of
        else {"enum": values, "not": negated}
    )
    keep = [v for v in values if jsonschema.Draft202012Validator(schema).is_valid(v)]
    if not keep:
        with pytest.raises(SchemaError, match="admits no value|intersection .* is empty"):
            compile_schema(schema, strict=True)
        return
    compiled = compile_schema(schema, strict=True)
    assert not compiled.validated
    p = parser(compiled.lark)
    for v in values:
        assert accepts(p, json.dumps(v)) == (v in keep), (schema, v)


def test_finite_values_keep_the_usual_path_where_the_validator_differs() -> None:
    """`format` (which the reference validator may not check), also behind a `$ref`, and
    objects under `close_objects` (a default only the grammar applies) are not decided by the
    validator:
    the keyword it cannot express is refused in strict mode, as before."""
    with pytest.raises(UnsupportedSchemaError, match="not"):
        compile_schema(
            {"enum": ["a@b.co", "x"], "format": "email", "not": {"multipleOf": 7}}, strict=True
        )
    behind_ref = {
        "$defs": {"mail": {"format": "email"}},
        "properties": {
            "to": {"enum": ["a@b.co", "x"], "$ref": "#/$defs/mail", "not": {"multipleOf": 7}}
        },
    }
    with pytest.raises(UnsupportedSchemaError, match="not"):
        compile_schema(behind_ref, strict=True)
    objects = {"enum": [{"a": 1}, {"a": 1, "b": 2}], "not": {"properties": {"a": {"not": {}}}}}
    compile_schema(objects, strict=True)  # decided: both objects have `a`
    with pytest.raises(UnsupportedSchemaError):
        compile_schema(
            {"type": "object", "properties": {"a": {}}, **objects}, strict=True, close_objects=True
        )


def test_dependencies_of_xml_parameters_are_validated_not_dropped() -> None:
    """XML parameter blocks (the root of a Qwen3-Coder call) have no tracked layout: their
    dependencies are reported as validated (refused in strict mode), never silently dropped;
    a nested object's are enforced as usual."""
    schema = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "a": {"type": "integer"},
            "b": {"type": "integer"},
            "c": {
                "type": "object",
                "additionalProperties": False,
                "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
                "dependentRequired": {"x": ["y"]},
            },
        },
        "dependentRequired": {"a": ["b"]},
    }
    g = compile_schema(schema, surface="xml")
    assert [tuple(u) for u in g.validated] == [("dependentRequired", "")]
    assert ("dependentRequired", "/properties/c") in [tuple(u) for u in g.enforced]
    with pytest.raises(UnsupportedSchemaError, match="dependentRequired"):
        compile_schema(schema, surface="xml", strict=True)


class _NamesByScan:
    """The naming rule by its definition: the smallest free `base_i`, i >= 2 (a scan)."""

    def __init__(self) -> None:
        self.used: set[str] = set()

    def fresh(self, base: str) -> str:
        name, i = base, 2
        while name in self.used:
            name, i = f"{base}_{i}", i + 1
        self.used.add(name)
        return name


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["rule", "terminal", "reserve"]),
            st.sampled_from(["a", "a_2", "a_3", "A_2", "b", "a_2_2", "n_1"]),
        ),
        max_size=60,
    )
)
def test_generated_names_are_the_smallest_free_suffix(ops: list[tuple[str, str]]) -> None:
    """Rule and terminal names continue each base's numbering where it stopped (thousands of
    `anyOf` branches were named in quadratic time), and stay what a scan from 2 gives."""
    from sdk.grammar._names import Names, _clean

    names, ref = Names(), _NamesByScan()
    for op, hint in ops:
        if op == "reserve":
            names.reserve(hint)
            ref.used.add(hint)
        elif op == "rule":
            assert names.rule(hint) == ref.fresh(_clean(hint))
        else:
            assert names.terminal(hint) == ref.fresh(_clean(hint).upper())


def test_hundreds_of_branches_are_named_apart() -> None:
    schema = {"anyOf": [{"const": f"v{i}"} for i in range(500)]}
    lark = compile_schema(schema).lark
    terminals = [line.split(":")[0] for line in lark.splitlines()[1:]]
    assert len(set(terminals)) == len(terminals) == 500
    assert engine_accepts(lark, '"v499"') and not engine_accepts(lark, '"v500"')
