"""Schema fuzzing: whatever schema a user hands over, compiling it ends in a grammar or a typed
`SDKError` — never another exception, never a hang, with bounded memory.

Each schema goes through `compile_schema`, `CompiledGrammar.from_schema` and one
`Matcher.mask()` (SmolLM2 vocabulary) under a watchdog (`_schema_fuzz.BUDGET_S`, 10 s of CPU;
40 s under coverage, which slows pure-Python compiles ~3.5x).
Sources: hypothesis-generated schemas (every keyword, wrong-typed values, dangling and cyclic
refs, pathological regexes) and mutations of the MaskBench dev schemas (dangling refs, cycles,
huge enums, deep nesting, contradictory bounds, nested quantifiers, huge bounds, intersections).

The default run is a small sample; the long run is on demand:

    SDK_FUZZ_EXAMPLES=2000 HF_HUB_OFFLINE=1 .venv/bin/python -m pytest -m slow -s \
        tests/test_hardening_schemas.py
"""

from __future__ import annotations

import os
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from sdk.errors import GrammarError, SchemaError, SDKError, TooComplexError
from tests import _schema_fuzz as fz

LONG_EXAMPLES = int(os.environ.get("SDK_FUZZ_EXAMPLES", "1000"))
RSS_LIMIT = 3 << 30  # growth over a whole fuzz run


def _check(outcome: fz.Outcome, schema: Any) -> None:
    assert outcome.kind not in ("crash", "hang"), f"{outcome.detail}\nschema: {fz.short(schema)}"


# ------------------------------------------------------------------ hand-written adversaries


def _deep(depth: int, wrap: str) -> dict[str, Any]:
    node: dict[str, Any] = {"type": "integer"}
    for _ in range(depth):
        if wrap == "items":
            node = {"type": "array", "items": node}
        elif wrap == "anyOf":
            node = {"anyOf": [node, {"type": "null"}]}
        else:
            node = {"type": "object", "properties": {"p": node}, "required": ["p"]}
    return node


ADVERSARIES: dict[str, tuple[Any, tuple[type[SDKError], ...] | None]] = {
    # name: (schema, the typed errors it may raise; None = must compile)
    "dangling_ref": ({"$ref": "#/$defs/missing"}, (SchemaError,)),
    "remote_ref": ({"$ref": "https://example.invalid/s.json"}, (SchemaError,)),
    "ref_cycle": (
        {"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"},
        (SchemaError, TooComplexError),
    ),
    "self_ref_root": ({"$ref": "#"}, (SchemaError, TooComplexError)),
    "allof_cycle": (
        {"$defs": {"c": {"allOf": [{"$ref": "#/$defs/c"}]}}, "$ref": "#/$defs/c"},
        (SchemaError, TooComplexError),
    ),
    "infinite_required_recursion": (
        {"type": "object", "properties": {"n": {"$ref": "#"}}, "required": ["n"]},
        (SchemaError, GrammarError),
    ),
    "recursive_tree": (
        {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#"}}}},
        None,
    ),
    "huge_enum_strings": ({"enum": [f"v{i:05d}" for i in range(3000)]}, None),
    "huge_enum_objects": ({"enum": [{"k": i} for i in range(500)]}, None),
    "deep_items_2000": (_deep(2000, "items"), (TooComplexError, GrammarError)),
    "deep_anyof_2000": (_deep(2000, "anyOf"), (TooComplexError, GrammarError)),
    "deep_props_300": (_deep(300, "props"), (TooComplexError, GrammarError)),
    "min_gt_max_length": ({"type": "string", "minLength": 10, "maxLength": 2}, (SchemaError,)),
    "min_gt_max_number": ({"type": "number", "minimum": 5, "maximum": 1}, (SchemaError,)),
    "empty_integer_range": (
        {"type": "integer", "exclusiveMinimum": 1, "exclusiveMaximum": 2},
        (SchemaError,),
    ),
    "required_false_property": (
        {"type": "object", "properties": {"a": False}, "required": ["a"]},
        (SchemaError,),
    ),
    "string_and_integer": ({"allOf": [{"type": "string"}, {"type": "integer"}]}, (SchemaError,)),
    "nested_quantifier_counts": (
        {"type": "string", "pattern": "^(?:x{0,100}){0,100}$"},
        (TooComplexError,),
    ),
    "nested_quantifier_alternation": (
        {"type": "string", "pattern": r"^(?:[^\x00-\x7f]{2,30}|\d{3,}){2,20}$"},
        (TooComplexError,),
    ),
    "catastrophic_backtracking": ({"type": "string", "pattern": "^(a+)+$"}, None),
    "backreference": ({"type": "string", "pattern": r"^(a)\1$"}, (SchemaError, GrammarError)),
    "invalid_regex": ({"type": "string", "pattern": "(("}, (SchemaError, GrammarError)),
    "min_items_1000": ({"type": "array", "items": {"type": "integer"}, "minItems": 1000}, None),
    "min_properties_400_patterns": (
        {"type": "object", "patternProperties": {"a": {"type": "integer"}}, "minProperties": 400},
        (TooComplexError,),
    ),
    "min_length_huge": ({"type": "string", "minLength": 2**31}, (TooComplexError, SchemaError)),
    "max_items_huge": ({"type": "array", "maxItems": 10**12}, None),
    "tiny_multiple_of": (
        {"type": "number", "multipleOf": 1e-300, "maximum": 1e300},
        (GrammarError, TooComplexError),
    ),
    "wrong_typed_keyword": ({"type": "string", "minLength": "ten"}, (SchemaError,)),
    "not_a_schema": (["type", "string"], (SchemaError,)),
}


@pytest.mark.parametrize("name", sorted(ADVERSARIES))
def test_adversarial_schema(smollm2_index: Any, name: str) -> None:
    schema, allowed = ADVERSARIES[name]
    outcome = fz.compile_checked(schema, smollm2_index)
    _check(outcome, schema)
    if allowed is None:
        assert outcome.kind == "ok", outcome.detail
    else:
        names = {cls.__name__ for cls in allowed} | {"ok"}
        # a subclass of an allowed error is fine too (RegexError is a GrammarError)
        if outcome.kind not in names:
            import sdk.errors as errors

            cls = getattr(errors, outcome.kind)
            assert issubclass(cls, allowed), f"{name}: {outcome.kind}: {outcome.detail}"


# ------------------------------------------------------------------ generated and mutated


@given(schema=fz.schemas())
@settings(
    max_examples=40,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
    phases=[Phase.explicit, Phase.generate],  # no shrinking: a failure prints its schema
)
def test_generated_schemas_end_in_grammar_or_typed_error(smollm2_index: Any, schema: Any) -> None:
    _check(fz.compile_checked(schema, smollm2_index), schema)


SMALL_DEV = [p for p in fz.DEV_FILES if p.stat().st_size < 20_000]


def _mutation_run(index: Any, n: int, seed: int, files: list[Any]) -> fz.Tally:
    rng = random.Random(seed)
    tally = fz.Tally()
    for _ in range(n):
        path = rng.choice(files)
        schema = fz.mutate(fz.dev_schema(path), rng)
        outcome = fz.compile_checked(schema, index)
        tally.add(outcome, f"{path.stem} {fz.short(schema, 200)}")
    return tally


def test_mutated_dev_schemas(smollm2_index: Any) -> None:
    before = fz.rss_bytes()
    tally = _mutation_run(smollm2_index, 30, seed=1234, files=SMALL_DEV)
    print("\nmutated dev schemas:", tally.summary())
    assert tally.total == 30
    assert not tally.crashes and not tally.hangs, tally.crashes + tally.hangs
    assert fz.rss_bytes() - before < RSS_LIMIT


# ------------------------------------------------------------------ the long run (-m slow)


@pytest.mark.slow
def test_long_fuzz(smollm2_index: Any) -> None:
    """`SDK_FUZZ_EXAMPLES` generated schemas plus as many mutated dev schemas (any size)."""
    before = fz.rss_bytes()
    generated = fz.Tally()

    @given(schema=fz.schemas())
    @settings(
        max_examples=LONG_EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        phases=[Phase.generate],
    )
    def run(schema: Any) -> None:
        generated.add(fz.compile_checked(schema, smollm2_index), "generated")

    run()
    mutated = _mutation_run(smollm2_index, LONG_EXAMPLES, seed=99, files=fz.DEV_FILES)
    growth = fz.rss_bytes() - before
    print(f"\ngenerated: {generated.summary()}\nmutated:   {mutated.summary()}")
    print(f"RSS growth: {growth / 2**20:.0f} MiB")
    for line in generated.crashes + generated.hangs + mutated.crashes + mutated.hangs:
        print("  !", ascii(line[:400]))
    assert not generated.crashes and not generated.hangs, generated.crashes + generated.hangs
    assert not mutated.crashes and not mutated.hangs, mutated.crashes + mutated.hangs
    assert growth < RSS_LIMIT


# ------------------------------------------------------------------ regressions found by the fuzz


def test_long_counted_repetition_compiles_fast(smollm2_index: Any) -> None:
    """`minItems: 915` became `X ~ 914`: rule minimisation and trimming were quadratic in the
    chain length (18 s); Hopcroft refinement and a backwards trim make it linear-ish."""
    import time

    from sdk.engine import CompiledGrammar, Matcher

    t0 = time.thread_time()  # CPU time: other work on the machine does not count
    g = CompiledGrammar.from_lark('start: "[" "1" ("," "1") ~ 2999 "]"')
    assert time.thread_time() - t0 < 5
    m = Matcher(g, smollm2_index)
    data = ("[" + ",".join(["1"] * 3000) + "]").encode()
    for b in data[:-1]:
        m.advance_bytes(bytes([b]))
        assert not m.is_accepting()
    m.advance_bytes(b"]")
    assert m.is_accepting()


def test_nested_quantifiers_are_too_complex_not_a_hang() -> None:
    import time

    from sdk.engine._automata import compile_regex

    t0 = time.thread_time()
    with pytest.raises(TooComplexError):
        compile_regex("(?:x{0,100}){0,100}")
    assert time.thread_time() - t0 < fz.BUDGET_S


def test_astronomical_counts_are_no_bound_not_an_overflow(smollm2_index: Any) -> None:
    """`maxLength: 1e30` (a real schema's) overflowed the counted automaton's state numbers
    (OverflowError, found by the long fuzz). No output reaches such a count: it is no bound,
    and such a lower bound is a typed refusal."""
    from sdk.engine import CompiledGrammar, Matcher
    from sdk.errors import SDKError, TokenRejectedError

    for schema in (
        {"type": "string", "minLength": 2, "maxLength": 10**30},
        {"type": "string", "minLength": 2, "maxLength": 10**30, "pattern": "^a+$"},
    ):
        g = CompiledGrammar.from_schema(schema)
        for text, ok in (('"aa"', True), ('"a"', False), ('"' + "a" * 5000 + '"', True)):
            m = Matcher(g, smollm2_index)
            try:
                m.advance_bytes(text.encode())
            except TokenRejectedError:
                assert not ok, text[:8]
            else:
                assert m.is_accepting() == ok, text[:8]
    m = Matcher(CompiledGrammar.from_schema({"type": "array", "maxItems": 10**30}), smollm2_index)
    m.advance_bytes(b"[1,2,3]")
    assert m.is_accepting()
    with pytest.raises(SDKError):
        CompiledGrammar.from_schema({"type": "string", "minLength": 10**30})
