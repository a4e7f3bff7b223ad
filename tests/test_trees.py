"""The schema compiler's statement trees are exactly the trees Lark reads from its text."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from sdk.engine import CompiledGrammar
from sdk.errors import SDKError
from sdk.grammar import _emit as em
from sdk.grammar import _trees, compile_schema
from tests._data import maskbench_sample
from tests._lark_trees import lark_statement, same_tree
from tests._oracle import ByteIndex, engine_accepts

_OPTIONS: list[dict[str, Any]] = [
    {"whitespace": "flexible"},
    {"whitespace": "spaced", "member_order": "any"},
    {"surface": "python", "close_objects": True},
    {"surface": "xml", "close_objects": True},
    {"surface": "gemma", "close_objects": True},
    {"whitespace": "flexible", "reserved": ["</tool_call>"], "close_objects": True},
]


def _definition_lines(text: str) -> list[str]:
    return [line for line in text.split("\n") if line.strip() and not line.startswith("//@")]


def _check(text: str, statements: Any) -> int:
    """Statements checked against Lark's reading of their lines; how many lines had one."""
    built = 0
    for line in _definition_lines(text):
        stmt = statements.get(line.split(":")[0])
        if stmt is not None:
            built += 1
            assert same_tree(stmt, lark_statement(line)), line
    return built


def test_statements_on_dev_schemas() -> None:
    built = total = 0
    for path in maskbench_sample(25):
        schema = json.loads(path.read_text())["schema"]
        for options in _OPTIONS:
            try:
                sg = compile_schema(schema, **options)
            except SDKError:
                continue
            built += _check(sg.lark, sg.statements)
            total += len(_definition_lines(sg.lark))
    assert built > 0.98 * total


def test_statements_of_hand_written_rules_are_left_to_the_reader() -> None:
    """An any-order member list too big for a rule per subset is written by hand: no tree,
    and the grammar still compiles the same."""
    schema = {
        "type": "object",
        "properties": {k: {"type": "integer"} for k in "abcde"},
        "required": ["a"],
    }
    sg = compile_schema(schema, member_order="any")
    missing = [
        line.split(":")[0]
        for line in _definition_lines(sg.lark)
        if line.split(":")[0] not in sg.statements
    ]
    assert missing == ["root_any"]
    g = CompiledGrammar.from_schema(schema, member_order="any")
    index = ByteIndex.of(['{"', '":', ",", '"', "1", "2", "}", "a", "c"])
    assert engine_accepts(g, '{"c":1,"a":2}', index)
    assert not engine_accepts(g, '{"c":1}', index)
    assert not engine_accepts(g, '{"a":1,"a":2}', index)


_LEAVES = ["rule_a", "b", "_c", "TERM", "_T", '"x"', '"a\\"b"', '"{"', "NEVER"]


@st.composite
def _expressions(draw: Any, depth: int = 3) -> Any:
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        return em.sym(draw(st.sampled_from(_LEAVES)))
    kind = draw(st.sampled_from(["seq", "alt", "opt", "rep"]))
    if kind in ("seq", "alt"):
        parts = draw(st.lists(_expressions(depth - 1), min_size=1, max_size=4))
        if kind == "seq":
            return em.seq(parts)
        return em.alt(parts)
    inner = draw(_expressions(depth - 1))
    if inner[0][-1] in "?*+":  # `a??` is not Lark (one operator per atom): never written
        return inner
    if kind == "opt":
        return em.opt(inner)
    lo = draw(st.integers(0, 4))
    hi = draw(st.one_of(st.none(), st.integers(lo, lo + 3)))
    got = em.rep(inner, lo, hi)
    return inner if got is None else got


@settings(max_examples=300, deadline=None)
@given(e=_expressions())
def test_combinators_build_the_tree_lark_reads(e: Any) -> None:
    stmt = _trees.Trees().rule("r", e)
    assert stmt is not None
    assert same_tree(stmt, lark_statement(f"r: {e[0]}")), e[0]
