"""Members in any order for objects too big for a rule per subset (`member_order="any"`).

The engine tracks the set of members written (`sdk.engine._any_order`). The oracles are
jsonschema (is the object valid?), the 2^n rules the compiler writes for small objects (the
same language), and a brute-force mask (every token's bytes fed to the parser state).
"""

from __future__ import annotations

import json
import random
from typing import Any

import jsonschema
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import sdk.grammar._emit as emit
from sdk.engine import CompiledGrammar, Matcher
from sdk.engine.gbnf import to_gbnf
from sdk.errors import GrammarError, SDKError
from sdk.grammar import compile_schema
from tests._oracle import ByteIndex, brute_force_mask, engine_accepts

INDEX = ByteIndex.of(
    ['{"', '":', ',"', '":1', '":1,"', '"p1":1', "}", "1}", ',"p2":', '"x":', ', "', " "]
)


def _accepts(grammar: CompiledGrammar, text: str) -> bool:
    return engine_accepts(grammar, text, INDEX)


def _schema(
    n: int, required: set[int], deps: dict[int, list[int]], extra: Any, counts: tuple[int, int]
) -> dict[str, Any]:
    names = [f"p{i}" for i in range(n)]
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {name: {"type": "integer"} for name in names},
        "required": [names[i] for i in sorted(required) if i < n],
        "additionalProperties": extra,
    }
    live = {f"p{t}": [f"p{x}" for x in need] for t, need in deps.items() if t < n}
    if live:
        schema["dependencies"] = live
    lo, hi = counts
    if lo:
        schema["minProperties"] = lo
    if hi < 99:
        schema["maxProperties"] = hi
    return schema


def _text(members: list[str]) -> str:
    return "{" + ",".join(f'"{m}":1' for m in members) + "}"


def _compile_both(
    schema: dict[str, Any],
) -> tuple[CompiledGrammar | None, CompiledGrammar | None, Any]:
    """The same schema with a rule per subset (static) and with a tracked set (dynamic)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(emit, "MAX_ANY_ORDER", 6)
        try:
            static = CompiledGrammar.from_schema(schema, member_order="any")
        except SDKError:
            static = None
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(emit, "MAX_ANY_ORDER", 1)
        try:
            sg = compile_schema(schema, member_order="any")
            dynamic = CompiledGrammar.from_schema(schema, member_order="any")
        except SDKError:
            sg = dynamic = None
    return static, dynamic, sg


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(2, 5),
    required=st.sets(st.integers(0, 4)),
    deps=st.dictionaries(st.integers(0, 4), st.lists(st.integers(0, 4), max_size=2), max_size=2),
    extra=st.sampled_from([False, True, {"type": "integer"}]),
    counts=st.sampled_from([(0, 99), (0, 99), (2, 99), (0, 3), (3, 3)]),
    data=st.data(),
)
def test_a_tracked_member_set_is_exact(
    n: int,
    required: set[int],
    deps: dict[int, list[int]],
    extra: Any,
    counts: tuple[int, int],
    data: Any,
) -> None:
    """A member list is accepted with the tracked set exactly when the 2^n rules accept it,
    and (unless a keyword is left to validation) exactly when jsonschema says the object is
    valid; a declared member written twice never is."""
    schema = _schema(n, required, deps, extra, counts)
    static, dynamic, sg = _compile_both(schema)
    assert (static is None) == (dynamic is None), schema
    assume(static is not None and dynamic is not None)
    assert static is not None and dynamic is not None
    assert dynamic.dynamic is not None and static.dynamic is None
    names = [f"p{i}" for i in range(n)]
    rng = random.Random(data.draw(st.integers(0, 2**16)))
    validator = jsonschema.Draft7Validator(schema)
    for bits in range(1 << (n + 1)):  # every subset of the members and "x", in some order
        members = [m for i, m in enumerate([*names, "x"]) if bits >> i & 1]
        rng.shuffle(members)
        if counts[1] < 99:  # a bounded number of extra members comes after the declared ones
            members.sort(key=lambda m: m not in names)
        text = _text(members)
        got = _accepts(dynamic, text)
        assert got == _accepts(static, text), (schema, text)
        valid = validator.is_valid({m: 1 for m in members})
        if not sg.validated:
            assert got == valid, (schema, text)
        elif valid:
            assert got, (schema, text)
        for again in [m for m in members if m in names][:1]:  # extras' names are not tracked
            assert not _accepts(dynamic, _text([*members, again])), (schema, members)


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(2, 5),
    required=st.sets(st.integers(0, 4)),
    deps=st.dictionaries(st.integers(0, 4), st.lists(st.integers(0, 5), max_size=2), max_size=2),
    extra=st.sampled_from([False, True]),
    counts=st.sampled_from([(0, 99), (2, 99), (0, 3)]),
    seed=st.integers(0, 2**16),
)
def test_masks_over_a_tracked_member_set_are_exact(
    n: int,
    required: set[int],
    deps: dict[int, list[int]],
    extra: bool,
    counts: tuple[int, int],
    seed: int,
) -> None:
    """Random walks: each mask equals the brute-force one (every token's bytes fed) and the
    mask of the 2^n rules, whose every position can finish: so no key that can never be
    completed (a member needing an undeclared one, `p5`), no comma that leads nowhere, no key
    written twice, no early end."""
    static, dynamic, _ = _compile_both(_schema(n, required, deps, extra, counts))
    assume(static is not None and dynamic is not None)
    assert static is not None and dynamic is not None
    rng = random.Random(seed)
    m, ref = Matcher(dynamic, INDEX), Matcher(static, INDEX)
    out = b""
    for _ in range(60):
        mask = m.mask()
        assert (mask == brute_force_mask(m, INDEX)).all(), out
        assert (mask == ref.mask()).all(), out
        allowed = np.nonzero(mask)[0].tolist()
        tid = rng.choice(allowed)
        if tid in INDEX.eos_ids:
            json.loads(out)
            return
        m.advance(tid)
        ref.advance(tid)
        out += INDEX.token_bytes[tid]


def test_big_objects_take_any_order_and_each_member_once() -> None:
    """40 members, 3 required: any permutation of any subset holding the required ones, and
    nothing else; the positions built stay few (one per set a parse reached)."""
    names = [f"p{i}" for i in range(40)]
    schema = {
        "type": "object",
        "properties": {name: {"type": "integer"} for name in names},
        "required": ["p3", "p17", "p39"],
        "additionalProperties": False,
    }
    g = CompiledGrammar.from_schema(schema, member_order="any")
    rng = random.Random(7)
    for _ in range(200):
        members = rng.sample(names, rng.randint(0, 12))
        valid = {"p3", "p17", "p39"} <= set(members)
        assert _accepts(g, _text(members)) == valid, members
        if members:
            assert not _accepts(g, _text([*members, members[0]]))
    assert g.dynamic is not None and len(g.dynamic.cache) <= 200 * (2 * 12 + 3)


def test_a_member_that_can_never_be_complete_is_never_offered() -> None:
    """`p0` needs `zz`, which no object may hold: its key is cut at its first byte that only
    it could take, in any position; once every member is written no comma is offered."""
    names = [f"p{i}" for i in range(9)]
    schema = {
        "type": "object",
        "properties": {name: {"type": "integer"} for name in names},
        "dependencies": {"p0": ["zz"]},
        "additionalProperties": False,
    }
    g = CompiledGrammar.from_schema(schema, member_order="any")
    zero = INDEX.token_bytes.index(b"0")
    for prefix in (b'{"p', b'{"p3":1,"p'):
        m = Matcher(g, INDEX)
        m.advance_bytes(prefix)
        assert not m.is_allowed(zero) and m.is_allowed(zero + 1), prefix
    m = Matcher(g, INDEX)
    m.advance_bytes(_text(names[1:]).encode()[:-1])
    assert not m.is_allowed(INDEX.token_bytes.index(b",")) and m.is_allowed(
        INDEX.token_bytes.index(b"}")
    )


def test_the_lark_text_carries_the_set_and_gbnf_refuses_it() -> None:
    """The text round-trips through `from_lark` with the same language (the `//@any_order`
    line is read back); GBNF, which cannot track a set, is refused with a clear error."""
    schema = {"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(8)}}
    text = compile_schema(schema, member_order="any").lark
    assert "//@any_order " in text
    g = CompiledGrammar.from_lark(text)
    assert _accepts(g, _text(["p7", "p0", "p3"]))
    assert not _accepts(g, _text(["p7", "p0", "p7"]))
    with pytest.raises(GrammarError, match="any order"):
        to_gbnf(text)


_HAND_WRITTEN = r"""
start: "{" obj "}"
obj: (a | b | c) (comma (a | b | c))*
a: "\"a\":1"
b: "\"b\":" b
c: "\"c\":1"
comma: ","
//@any_order {"rule": "obj", "members": ["a", "b", "c"], "comma": "comma", "required": REQ}
"""


def test_a_member_rule_that_never_ends_is_never_offered() -> None:
    """A hand-written `//@any_order` line over a member rule that cannot finish (`b`): its
    key is never offered; required, the grammar's language is empty."""
    g = CompiledGrammar.from_lark(_HAND_WRITTEN.replace("REQ", "[]"))
    assert _accepts(g, '{"c":1,"a":1}') and not _accepts(g, '{"a":1,"a":1}')
    m = Matcher(g, INDEX)
    m.advance_bytes(b'{"')
    assert m.is_allowed(INDEX.token_bytes.index(b"a"))
    assert not m.is_allowed(INDEX.token_bytes.index(b"b"))
    with pytest.raises(GrammarError, match="empty"):
        CompiledGrammar.from_lark(_HAND_WRITTEN.replace("REQ", "[1]"))
    # a comma that never ends: one member at most, and two required ones are impossible
    no_comma = _HAND_WRITTEN.replace('comma: ","', 'comma: "," comma')
    g = CompiledGrammar.from_lark(no_comma.replace("REQ", "[]"))
    assert _accepts(g, '{"c":1}') and not _accepts(g, '{"c":1,"a":1}')
    m = Matcher(g, INDEX)
    m.advance_bytes(b'{"a":1')
    assert not m.is_allowed(INDEX.token_bytes.index(b","))
    with pytest.raises(GrammarError, match="empty"):
        CompiledGrammar.from_lark(no_comma.replace("REQ", "[0, 2]"))


@pytest.mark.parametrize(
    "line",
    [
        '//@any_order {"rule": "nope", "members": [], "comma": "c"}',
        '//@any_order {"rule": "start", "members": ["start"], "comma": "start", "required": [3]}',
        "//@any_order [1, 2]",
        "//@any_order {not json",
    ],
)
def test_a_malformed_any_order_line_is_a_grammar_error(line: str) -> None:
    with pytest.raises(GrammarError, match="any_order"):
        CompiledGrammar.from_lark(f'start: "a"\n{line}\n')
