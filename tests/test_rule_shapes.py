"""Rule automata shared by shape, and union terminals shared by members, across grammars.

A grammar compiled after another with rules of the same shape takes their automata from the
shape cache under its own symbols; these tests fail if the cache hands back the first
grammar's terminals or rules, or builds anything other than what a cold compile builds.
"""

from __future__ import annotations

import random
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from sdk.engine import CompiledGrammar, Matcher, caches
from tests.test_engine import INDEX, TOKENS

SHAPES = "rule automata by shape"


def _accepts(grammar: CompiledGrammar, text: str) -> bool:
    m = Matcher(grammar, INDEX)
    return all(m.try_advance(TOKENS.index(bytes([b]))) for b in text.encode()) and (
        m.is_accepting()
    )


def _entries(name: str) -> int:
    return caches.usage().get(name, (0, 0))[0]


def test_a_rule_of_a_known_shape_keeps_its_own_symbols() -> None:
    """`item` has one shape in both grammars, under other terminals and other terminal ids
    (the second grammar numbers one more terminal before it)."""
    caches.clear()
    first = CompiledGrammar.from_lark('start: "q" item\nitem: "a" ("b" | "bb")? "c"')
    built = _entries(SHAPES)
    second = CompiledGrammar.from_lark('start: "q" "r" item\nitem: "x" ("y" | "yy")? "z"')
    assert _entries(SHAPES) == built + 1  # only `start` was built: `item` came from the cache
    for text, ok in [("qrxz", True), ("qrxyz", True), ("qrxyyz", True), ("qrabc", False)]:
        assert _accepts(second, text) == ok, text
    assert not _accepts(second, "qrxbz") and not _accepts(second, "qrayz")
    assert _accepts(first, "qabbc") and not _accepts(first, "qxyz")


def _positions(grammar: CompiledGrammar) -> list[tuple[object, ...]]:
    return [(p.rule, dict(p.terms), p.calls, p.final) for p in grammar.positions]


def _random_rule(rng: random.Random, words: list[str], rules: list[str], depth: int = 0) -> str:
    kind = rng.randrange(6 if depth < 3 else 2)
    if kind == 0:
        return f'"{rng.choice(words)}"'
    if kind == 1:
        return rng.choice(rules) if rules else f'"{rng.choice(words)}"'
    parts = [_random_rule(rng, words, rules, depth + 1) for _ in range(rng.randint(1, 3))]
    if kind == 2:
        return " ".join(parts)
    if kind == 3:
        return "(" + " | ".join(parts) + ")"
    if kind == 4:
        return "(" + " ".join(parts) + ")" + rng.choice("?*+")
    return "(" + " ".join(parts) + f") ~ {rng.randint(0, 2)}..{rng.randint(2, 3)}"


@given(seed=st.integers(0, 10**6))
@settings(max_examples=60, deadline=None)
def test_a_warm_compile_builds_what_a_cold_one_does(seed: int) -> None:
    """Random grammars: renamed copies compile to the same positions with the shape cache
    cold and warm (the warm one is built from the original's shapes)."""
    rng = random.Random(seed)
    names = ["r0", "r1", "r2"]
    bodies = [_random_rule(rng, ["a", "b", "c"], names[k + 1 :]) for k in range(3)]
    original = "\n".join(f"{n}: {b}" for n, b in zip(["start", *names[1:]], bodies, strict=True))
    renamed = re.sub(r'"([abc])"', lambda m: '"' + "xyz"["abc".index(m[1])] + '"', original)
    assert renamed != original
    caches.clear()
    cold = _positions(CompiledGrammar.from_lark(renamed))
    caches.clear()
    CompiledGrammar.from_lark(original)
    built = _entries(SHAPES)
    warm = CompiledGrammar.from_lark(renamed)
    assert _entries(SHAPES) == built
    assert _positions(warm) == cold


def test_equal_unions_in_two_grammars_are_one_terminal() -> None:
    """An enum's literals merge into one union terminal; the same enum in another grammar is
    the same automaton object (so its vocabulary walks are shared too)."""
    first = CompiledGrammar.from_lark('start: "[" ("ab" | "bc" | "a") "]"')
    second = CompiledGrammar.from_lark('start: "{" ("a" | "ab" | "bc") "}"')
    union_a = [
        t for t, name in zip(first.terminals, first.terminal_names, strict=True) if "|" in name
    ]
    union_b = [
        t for t, name in zip(second.terminals, second.terminal_names, strict=True) if "|" in name
    ]
    assert len(union_a) == len(union_b) == 1
    assert union_a[0] is union_b[0]
    assert _accepts(second, "{bc}") and not _accepts(second, "{b}") and not _accepts(second, "[a]")
