"""Schema pieces: compiled once, finished for any layout and reserved texts, joined into turn
grammars without compiling a schema again."""

from __future__ import annotations

import json
from typing import Any, Literal

import pytest
from hypothesis import HealthCheck, given, settings

from sdk.decoding.call_style import COMPACT, FLEXIBLE, SPACED
from sdk.decoding.formats import HERMES
from sdk.decoding.turn_grammar import build_turn_grammar
from sdk.engine import caches
from sdk.engine.pieces import schema_piece
from sdk.errors import SDKError
from sdk.grammar import compile_schema
from sdk.grammar.pieces import SchemaPiece, compile_piece, punct_definitions
from sdk.tools import as_tool, tool
from tests._data import maskbench_sample
from tests._oracle import engine_accepts
from tests._schema_fuzz import schemas
from tests._specs import Spec

Layout = tuple[Literal["compact", "spaced", "flexible"], tuple[str, ...], str]
LAYOUTS: list[Layout] = [
    ("spaced", ("</tool_call>",), "json"),
    ("flexible", (), "json"),
    ("compact", ("<tool_call>",), "python"),
]


def _finished(piece: SchemaPiece, whitespace: Any, reserved: tuple[str, ...]) -> set[str]:
    """The piece's whole grammar in one layout, names without the namespace."""
    defs = piece.definitions(reserved)
    punct = punct_definitions(piece.punct, whitespace)
    text = "\n".join([*defs.lines, *punct.lines])
    text = text.replace(piece.namespace + "_", "").replace(piece.namespace.upper() + "_", "")
    return set(text.splitlines())


def _same_as_compile_schema(schema: Any, whitespace: Any, reserved: Any, surface: Any) -> None:
    try:
        expected = compile_schema(
            schema, close_objects=True, whitespace=whitespace, reserved=reserved, surface=surface
        )
    except SDKError as exc:
        with pytest.raises(type(exc)):
            schema_piece(schema, surface=surface, reserved=reserved)
        return
    piece = schema_piece(schema, surface=surface, reserved=reserved)
    assert piece.fits(reserved)
    assert _finished(piece, whitespace, reserved) == set(expected.lark.splitlines())
    # The statement trees are what Lark reads from the lines (the engine takes them as read).
    defs = piece.definitions(reserved)
    from sdk.engine._lark_lines import parse_line

    for line in defs.lines:
        stmt = defs.statements.get(line[: line.index(":")])
        if stmt is not None:
            assert parse_line(line) == stmt, line


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda x: f"{x[0]}-{x[2]}")
def test_pieces_finish_to_the_schema_compilers_grammar(layout: Layout) -> None:
    whitespace, reserved, surface = layout
    files = maskbench_sample(every=12)
    assert files
    for path in files:
        schema = json.loads(path.read_text())["schema"]
        _same_as_compile_schema(schema, whitespace, reserved, surface)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schemas())
def test_random_pieces_finish_to_the_schema_compilers_grammar(schema: Any) -> None:
    for whitespace, reserved, surface in LAYOUTS[:2]:
        _same_as_compile_schema(schema, whitespace, reserved, surface)


def test_a_key_holding_a_reserved_text_gets_a_piece_of_its_own() -> None:
    schema = {"type": "object", "properties": {"a@@b": {"type": "string"}}}
    plain = compile_piece(schema)
    assert not plain.fits(["@@"])  # the key is a literal in its rules
    fitted = schema_piece(schema, reserved=["@@"])
    assert fitted.namespace != plain.namespace
    _same_as_compile_schema(schema, "compact", ("@@",), "json")


def _misses() -> int:
    return caches.lookups().get("schema pieces", (0, 0))[1]


def test_turn_grammars_over_defined_tools_compile_no_schema() -> None:
    @tool
    def forecast(city: str, days: int = 3, unit: Literal["c", "f"] = "c") -> str:
        """Forecast."""
        return city

    @tool
    def alarm(minutes: int, label: str | None = None) -> str:
        """Alarm."""
        return label or ""

    tools = [as_tool(forecast), as_tool(alarm)]
    before = _misses()
    for choice in ("auto", "required", "alarm"):
        for style in (SPACED, FLEXIBLE, COMPACT):
            build_turn_grammar(tools, choice, None, HERMES.with_style(style))
    assert _misses() == before
    turn = build_turn_grammar(tools, "required", None, HERMES)
    assert turn.compiled is not None
    call = HERMES.render_call("alarm", {"minutes": 5, "label": "tea"})
    assert engine_accepts(turn.compiled, call)
    assert not engine_accepts(turn.compiled, call.replace('"alarm"', '"forecast"'))
    assert not engine_accepts(turn.compiled, call.replace("</tool_call>", "</tool_call>x"))


def test_one_schema_in_two_places_of_a_turn() -> None:
    """Two tools with one schema share its piece; the same schema as the typed output (other
    reserved texts: the opener, not the closer) gets names of its own."""
    schema = {
        "type": "object",
        "properties": {"note": {"type": "string"}},
        "required": ["note"],
    }
    tools = [Spec("a", schema), Spec("b", schema)]
    turn = build_turn_grammar(tools, "auto", schema, HERMES)
    assert turn.compiled is not None
    for name in ("a", "b"):
        assert engine_accepts(turn.compiled, HERMES.render_call(name, {"note": "x"}))
    assert engine_accepts(turn.compiled, '{"note": "x"}')
    # The call's strings may hold the opener, the output's may hold the closer, not the
    # reverse (each is subtracted where it would be read as the turn's structure).
    assert engine_accepts(turn.compiled, HERMES.render_call("a", {"note": "<tool_call>"}))
    assert not engine_accepts(turn.compiled, '{"note": "<tool_call>"}')
    assert engine_accepts(turn.compiled, '{"note": "</tool_call>"}')


def test_turn_grammars_keep_member_order_apart() -> None:
    """Two tool lists that differ only in the order of a schema's properties are two
    grammars: the order is the one the model is asked to write."""
    ab = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}
    ba = {"type": "object", "properties": {"b": {"type": "integer"}, "a": {"type": "integer"}}}
    first = build_turn_grammar([Spec("t", ab)], "required", None, HERMES)
    second = build_turn_grammar([Spec("t", ba)], "required", None, HERMES)
    assert first.compiled is not None and second.compiled is not None
    text = HERMES.render_call("t", {"b": 1, "a": 2})
    assert engine_accepts(second.compiled, text)
    assert not engine_accepts(first.compiled, text)
