"""The engine's one owner (`sdk.engine.compiler`): its limits take effect where the work is
done, its tables hold the turn grammars and the runtimes, and what it holds goes with the
objects it was built for."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from typing import Any

import pytest

from sdk.decoding.formats import HERMES
from sdk.decoding.turn_grammar import build_turn_grammar
from sdk.engine.compiler import GrammarCompiler, Limits, default_compiler
from sdk.errors import ConfigError, TooComplexError
from tests._oracle import ByteIndex
from tests._specs import Spec


@pytest.fixture
def compiler() -> Iterator[GrammarCompiler]:
    c = default_compiler()
    before = c.limits
    yield c
    c.set_limits(before)


NESTED = 'start: "[" start "]" | "x"'


def test_limits_set_on_the_compiler_bound_the_parses_begun_after(
    compiler: GrammarCompiler,
) -> None:
    assert compiler.limits == Limits()
    compiler.set_limits(Limits(stack_depth=10))
    m = compiler.matcher(compiler.compile_lark(NESTED), ByteIndex.of([]))
    m.advance_bytes(b"[" * 9)
    with pytest.raises(TooComplexError, match=r"deeper than 10 \(Limits.stack_depth\)"):
        m.advance_bytes(b"[x")
    compiler.set_limits(Limits())
    m = compiler.matcher(compiler.compile_lark(NESTED), ByteIndex.of([]))
    m.advance_bytes(b"[" * 20 + b"x" + b"]" * 20)
    assert m.is_accepting()


def test_compile_limits_name_the_limit(compiler: GrammarCompiler) -> None:
    compiler.clear_caches()  # automata compiled before would be reused, not rebuilt
    compiler.set_limits(Limits(nfa_states=5))
    with pytest.raises(TooComplexError, match=r"Limits.nfa_states"):
        compiler.compile_lark(r"start: /(x|y)+z(w|v)+q(u|t)*/")
    compiler.set_limits(Limits(rule_nfa_states=5))
    with pytest.raises(TooComplexError, match=r"Limits.rule_nfa_states"):
        compiler.compile_lark('start: "a" "b" "c" "d" "e" "f"')


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "10"])
def test_limits_are_positive_ints(bad: Any) -> None:
    with pytest.raises(ConfigError, match="stack_depth"):
        Limits(stack_depth=bad)


def test_set_limits_takes_limits(compiler: GrammarCompiler) -> None:
    with pytest.raises(ConfigError, match="Limits"):
        compiler.set_limits({"stack_depth": 10})  # type: ignore[arg-type]


def test_turn_grammars_live_in_the_budgeted_tables(compiler: GrammarCompiler) -> None:
    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    tools = [Spec("search_budgeted", schema)]
    first = build_turn_grammar(tools, "required", None, HERMES)
    assert build_turn_grammar(tools, "required", None, HERMES) is first
    assert compiler.cache_usage()["turn grammars"][0] >= 1
    hits, _ = compiler.cache_lookups()["turn grammars"]
    assert hits >= 1
    compiler.clear_caches()
    assert compiler.cache_usage()["turn grammars"] == (0, 0)
    assert build_turn_grammar(tools, "required", None, HERMES) is not first


def test_a_grammars_runtimes_go_with_it(compiler: GrammarCompiler) -> None:
    from sdk.engine._owner import OWNER

    grammar = compiler.compile_lark(NESTED)
    m = compiler.matcher(grammar, ByteIndex.of([]))
    assert grammar in OWNER.runtimes
    dead = weakref.ref(grammar)
    gc.disable()
    try:
        del grammar, m
        assert dead() is None  # no reference cycle keeps it: reference counting frees it
    finally:
        gc.enable()
    assert all(g is not None for g in OWNER.runtimes)
