"""Lazy automata: terminals too big to tabulate (a string with `maxLength: 65535`) are built on
demand, with the same languages as tables, exact windows for vocabulary walks, sound sharing
keys, and exact masks end to end."""

from __future__ import annotations

import functools
import json
import random
import re
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from sdk.engine import CompiledGrammar, Matcher, _products
from sdk.engine import _automata as au
from sdk.engine import _regex as rx
from sdk.engine._lazy import LazyDfa, materialize
from sdk.engine._owner import OWNER, Limits
from sdk.errors import TooComplexError
from tests._automata_runs import brute_force_mask, live_states, reachable, run_lazy, run_table
from tests._depth import examples
from tests._oracle import engine_accepts

_ATOMS = st.sampled_from(["a", "b", "[ab]", "[^a]", "é", "ab", "(?:a|ab)", "b*", "a?", "\\\\[ab]"])


def _regexes() -> st.SearchStrategy[str]:
    def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.one_of(
            st.tuples(inner, inner).map(lambda t: t[0] + t[1]),
            st.tuples(inner, inner).map(lambda t: f"(?:{t[0]}|{t[1]})"),
            st.tuples(inner, st.integers(0, 3), st.integers(0, 9)).map(
                lambda t: f"(?:{t[0]}){{{t[1]},{t[1] + t[2]}}}"
            ),
            st.tuples(st.booleans(), inner, inner).map(
                lambda t: f"(?{'!' if t[0] else '='}{t[1]}){t[2]}"
            ),
        )

    inner = st.recursive(_ATOMS, extend, max_leaves=4)
    # what lazy automata are built from: a counted repeat between fixed parts, alternatives
    # with distinct first bytes, and the empty string taken out (a nullable terminal)
    counted = st.tuples(
        st.sampled_from(["", '"', "c", "c?"]),
        inner,
        st.integers(0, 3),
        st.integers(1, 9),
        st.sampled_from(["", '"', "c", "d*"]),
    ).map(lambda t: f"{t[0]}(?:{t[1]}){{{t[2]},{t[2] + t[3]}}}{t[4]}")
    sides = st.tuples(counted, counted).map(lambda t: f"(?:x{t[0]}|y{t[1]})")
    return st.one_of(inner, counted, sides)


def _lazy(pattern: str, *, refusable: bool = True) -> au.AnyDfa:
    """The pattern built from parts, every counted repeat lazy. A refusal is a failure where
    the reference took the pattern (the parts take what the whole takes; `_NESTED_COUNTS`
    and `_GLUED_COUNTS` below were refused), else (`refusable`) the draw is passed over."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(au, "DIRECT_WEIGHT", 0)  # build from parts wherever possible
        mp.setattr(au, "LAZY_MIN_STATES", 0)  # every counted repeat lazy
        try:
            return au.compile_node(rx.parse(pattern))
        except TooComplexError:
            if not refusable:
                raise
            assume(False)
            raise


@functools.lru_cache(maxsize=32)
def _lazy_and_table(pattern: str) -> tuple[au.AnyDfa, au.Dfa]:
    """`_lazy` and the reference, one NFA's subset construction: most of these tests' time,
    so only the tests that compare languages build it, once a pattern (explicit examples
    share patterns; shrinking retries them)."""
    node = rx.parse(pattern)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(au, "DIRECT_WEIGHT", 10**9)  # one NFA, subset construction
        mp.setattr(au, "LAZY_MIN_STATES", 10**9)
        try:
            table = au.compile_node(node)
        except TooComplexError:  # nested ambiguous counts: the reference itself gives up
            assume(False)
            raise
    assert isinstance(table, au.Dfa)
    return _lazy(pattern, refusable=False), table


# A lazy counted repeat as the item of another was not counted: each outer copy rebuilt the
# inner repeat's copies (12 x 11 of `é{1,10}`), and subset construction ran past its budget
# (5.3M steps) where the whole pattern takes 4.7M.
_NESTED_COUNTS = "(?:x(?:a){0,1}|y(?:(?:(?:é){1,10}){2,11}){3,12})"
# Gluing `c?` to the repeat's 30,648-state table ran subset construction over sets of its DFA
# states past Limits.dfa_states, where the whole pattern's NFA gives 31,793 states; the second
# (62,704 states whole), another draw, failed the same way.
_GLUED_COUNTS = "c?(?:(?:[^a]){2,5}(?:(?:a|[^a])){0,6}){1,7}"
_GLUED_COUNTS_2 = "c?(?:(?:[^a]){2,8}[^a][ab]){0,3}d*"


@given(pattern=_regexes(), s=st.text(alphabet='abcdxy"\\é', max_size=12))
@example(pattern=_NESTED_COUNTS, s="y" + "é" * 6)
@example(pattern=_NESTED_COUNTS, s="y" + "é" * 5)
@example(pattern=_GLUED_COUNTS, s="cbb" + "a" * 6 + "bb")
@example(pattern=_GLUED_COUNTS_2, s="cbbbbd")
@settings(max_examples=examples(150), deadline=None)
def test_lazy_automata_have_the_languages_of_tables(pattern: str, s: str) -> None:
    """Lazy construction against subset construction on random regexes: equal languages
    (products both ways empty, through `materialize`), agreeing on strings, and every state
    of the lazy automaton live (it can still complete) as exact masks need."""
    lazy, table = _lazy_and_table(pattern)
    assert au.product(lazy, table, negate_b=True).is_empty, pattern
    assert au.product(table, lazy, negate_b=True).is_empty, pattern
    lazy_plus, table_plus = lazy.without_empty(), table.without_empty()
    assert not lazy_plus.nullable and not lazy_plus.matches(b"")
    assert au.product(lazy_plus, table_plus, negate_b=True).is_empty, pattern
    assert au.product(table_plus, lazy_plus, negate_b=True).is_empty, pattern
    assert lazy.matches(s.encode()) == table.matches(s.encode()), (pattern, s)
    # A lookahead sees the rest of its own group (docs/internals/grammar-dialect.md), where
    # Python's sees the rest of the string: `re` is the oracle for patterns without one.
    if "(?=" not in pattern and "(?!" not in pattern:
        assert table.matches(s.encode()) == (re.fullmatch(pattern, s) is not None), (pattern, s)
    if isinstance(lazy, LazyDfa) and not lazy.is_empty:
        full = materialize(lazy, 10**6)
        live = live_states(full)
        for q in reachable(full, 1):  # every state the start reaches can still finish
            assert q in live, (pattern, q)


@given(pattern=_regexes(), data=st.data())
@settings(max_examples=examples(100), deadline=None)
def test_windows_are_exact_and_equal_keys_share_them(pattern: str, data: st.DataObject) -> None:
    """A window of depth h is the automaton itself for every string shorter than h; states
    with equal keys see the same thing within the horizon (so their walks may be shared)."""
    lazy = _lazy(pattern)
    assume(isinstance(lazy, LazyDfa) and lazy.n_states <= 3000)
    assert isinstance(lazy, LazyDfa)
    depth = 6
    q = data.draw(st.sampled_from(range(1, lazy.n_states)))
    window = lazy.window(q, depth)
    same = [r for r in range(1, lazy.n_states) if lazy.key(r, depth) == lazy.key(q, depth)]
    r = data.draw(st.sampled_from(same))
    rng = random.Random(data.draw(st.integers(0, 2**32)))
    for _ in range(20):  # random walks along live moves: every byte of them matters
        s, x = bytearray(), q
        while len(s) < depth - 1:
            row = lazy.rows(np.asarray([x]))[0]
            live = np.nonzero(row)[0].tolist()
            if not live:
                break
            s.append(rng.choice(live))
            x = int(row[s[-1]])
        s.append(rng.randrange(256))  # and one byte past, live or not
        assert run_lazy(lazy, q, bytes(s)) == run_table(window, 1, bytes(s)), (pattern, q, s)
        assert run_lazy(lazy, q, bytes(s)) == run_lazy(lazy, r, bytes(s)), (pattern, q, r, s)


@given(pattern=_regexes(), data=st.data())
@settings(max_examples=examples(150), deadline=None)
def test_one_state_rows_are_the_vectorised_rows(pattern: str, data: st.DataObject) -> None:
    """The parse reads rows one state at a time (`row1`, `acc1`, from per-part tables): every
    byte's target and the acceptance equal the vectorised `rows` and `acc` the walks use."""
    lazy = _lazy(pattern)
    assume(isinstance(lazy, LazyDfa))
    assert isinstance(lazy, LazyDfa)
    qs = data.draw(st.lists(st.integers(1, lazy.n_states - 1), min_size=1, max_size=20))
    rows, acc = lazy.rows(np.asarray(qs)), lazy.acc(np.asarray(qs))
    for q, row, a in zip(qs, rows.tolist(), acc.tolist(), strict=True):
        slots, targets = lazy.row1(q)
        assert len(slots) == 256 and max(slots) < len(targets), (pattern, q)
        assert [targets[s] for s in slots] == row, (pattern, q)
        assert lazy.acc1(q) == a, (pattern, q)


@given(a=_regexes(), b=_regexes(), mode=st.sampled_from(["and", "minus", "or"]))
@settings(max_examples=examples(150), deadline=None)
def test_big_products_number_pairs_as_small_ones_do(a: str, b: str, mode: str) -> None:
    """Past `DENSE_PAIRS` pairs a product numbers its states through the compiled hash BFS
    (`_pairs`): the same automaton, state for state, as the dense table's numbering."""
    try:
        da, db = au.table(au.compile_regex(a)), au.table(au.compile_regex(b))
    except TooComplexError:
        assume(False)
        raise
    kw = {"and": {}, "minus": {"negate_b": True}, "or": {"union": True}}[mode]
    try:
        dense = au.product(da, db, **kw)
    except TooComplexError:  # past the state limit: the hashed numbering refuses it too
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(_products, "DENSE_PAIRS", 0)
            with pytest.raises(TooComplexError, match=r"Limits.dfa_states"):
                au.product(da, db, **kw)
        return
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_products, "DENSE_PAIRS", 0)
        hashed = au.product(da, db, **kw)
    assert np.array_equal(dense.trans, hashed.trans), (a, b, mode)
    assert np.array_equal(dense.accepting, hashed.accepting), (a, b, mode)


@pytest.mark.parametrize("dense_pairs", [1 << 20, 0])
def test_a_product_past_the_state_limit_is_refused_by_both_numberings(
    dense_pairs: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The compiled BFS stops at the limit without building rows (a refused table attempt
    comes before a lazy automaton): a refusal, never a truncated table."""
    a = au.table(au.compile_regex("[a-z]{0,30}"))
    b = au.table(au.compile_regex("(?:[a-m][n-z]){0,20}"))
    full = au.product(a, b)
    monkeypatch.setattr(_products, "DENSE_PAIRS", dense_pairs)
    monkeypatch.setattr(OWNER, "limits", Limits(dfa_states=full.n_states - 2))
    with pytest.raises(TooComplexError, match=r"DFA states \(Limits.dfa_states\)"):
        au.product(a, b)
    monkeypatch.setattr(OWNER, "limits", Limits(dfa_states=full.n_states + 1))
    got = au.product(a, b)
    assert np.array_equal(got.trans, full.trans)


@given(a=_regexes(), b=_regexes(), data=st.data())
@settings(max_examples=examples(150), deadline=None)
def test_concatenation_over_sets_of_states_is_subset_construction(
    a: str, b: str, data: st.DataObject
) -> None:
    """A·B where A goes on after accepting with B's first bytes: the compiled (A state, set of
    B states) construction has the language of the NFA + subset construction."""
    try:
        da, db = au.table(au.compile_regex(a)), au.table(au.compile_regex(b))
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(au, "SET_CONCAT_MAX", 0)
            reference = au.table(au.concat(da, db))
    except TooComplexError:
        assume(False)
        raise
    assume(db.n_states <= au.SET_CONCAT_MAX)
    got = au.table(au.concat(da, db))
    assert au.product(got, reference, negate_b=True).is_empty, (a, b)
    assert au.product(reference, got, negate_b=True).is_empty, (a, b)
    text = data.draw(st.text(alphabet='abcé\\"d', max_size=8))
    assert got.matches(text.encode()) == reference.matches(text.encode()), (a, b, text)


def test_a_product_past_the_state_cap_is_refused_without_a_table_of_every_pair() -> None:
    """4,000 x 4,000 pairs (a 64 MB dense numbering) of which more than the cap are reached:
    refused with a typed error, having held only the pairs reached."""
    import tracemalloc

    a = au.table(au.compile_regex("[a-z]{0,3999}"))  # no lazy: both are tables
    b = au.table(au.compile_regex("(?:[a-m][n-z]?){0,2000}"))
    assert a.n_states * b.n_states > 4 * _products.DENSE_PAIRS
    with pytest.MonkeyPatch.context() as mp:  # numba imported and the BFS loaded beforehand
        mp.setattr(_products, "DENSE_PAIRS", 0)
        au.product(au.table(au.compile_regex("a")), au.table(au.compile_regex("a")))
    tracemalloc.start()
    try:
        with pytest.raises(TooComplexError, match="DFA states"):
            au.product(a, b)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 32 << 20, peak


def test_tables_are_kept_below_the_lazy_threshold() -> None:
    """Lazy automata are only for what a table cannot hold: ordinary lengths stay tables, and
    a table-only construction over a huge one is refused with a typed error."""
    assert isinstance(au.compile_regex(f"[a-z]{{0,{au.LAZY_MIN_STATES // 2}}}"), au.Dfa)
    huge = au.compile_regex(r"[a-z]{0,500000}")
    assert isinstance(huge, LazyDfa) and huge.n_states > Limits().dfa_states
    assert huge.matches(b"abc") and not huge.matches(b"abC")
    last = huge.n_states - 1  # 500,000 letters read: only the end is left
    assert huge.acc(np.asarray([last]))[0] and not huge.rows(np.asarray([last])).any()
    with pytest.raises(TooComplexError, match="DFA states"):
        au.product(huge, au.compile_regex("a+"))


MAX = 10_000  # 14 states per character: a 140,000-state table, over the cap


@pytest.fixture(scope="module")
def long_string_grammar() -> CompiledGrammar:
    schema = {
        "type": "object",
        "properties": {"note": {"type": "string", "maxLength": MAX}, "n": {"type": "integer"}},
        "required": ["note", "n"],
    }
    grammar = CompiledGrammar.from_schema(schema)
    assert any(isinstance(t, LazyDfa) for t in grammar.terminals)
    return grammar


def _doc(note: str) -> str:
    return json.dumps({"note": note, "n": 7}, separators=(",", ":"), ensure_ascii=False)


def _walk(grammar: CompiledGrammar, tokenizer: Any, index: Any, text: str) -> Matcher | None:
    m = Matcher(grammar, index)
    for tid in tokenizer.encode(text, add_special_tokens=False):
        if not m.mask()[tid]:
            return None
        m.advance(tid)
    return m


def test_a_string_too_long_to_tabulate_is_enforced_exactly(
    long_string_grammar: CompiledGrammar, smollm2_tokenizer: Any, smollm2_index: Any
) -> None:
    """maxLength 10,000 compiles (it used to be refused), the longest value is accepted token
    by token with its mask, one more character is refused, and the masks at the boundary are
    exactly the set of tokens `advance` accepts."""
    grammar = long_string_grammar
    body = "ab é\n" * (MAX // 5)
    done = _walk(grammar, smollm2_tokenizer, smollm2_index, _doc(body))
    assert done is not None and done.is_accepting()
    assert _walk(grammar, smollm2_tokenizer, smollm2_index, _doc(body + "x")) is None
    # memory follows the visited states, not the automaton's 140,000
    rt = done._rt
    assert len(rt._lazy_rows) < 3 * len(_doc(body).encode())
    # at the boundary: a few characters short of the limit, every token tried on its own
    m = Matcher(grammar, smollm2_index)
    m.advance_bytes(_doc(body[:-3])[: -len('","n":7}')].encode())
    got = m.mask()
    assert np.array_equal(got, brute_force_mask(m, smollm2_index))
    letters = [
        (len(b), bool(got[t]))
        for t, b in enumerate(smollm2_index.token_bytes)
        if b and b.isalpha() and b.isascii() and len(b) <= 6
    ]
    assert max(n for n, ok in letters if ok) == 3  # three characters are left
    assert any(n == 4 for n, ok in letters if not ok)


@settings(max_examples=examples(80), deadline=None)
@given(
    shape=st.sampled_from([(r"[\+\w-]", 5, 96), (r"\w", 2, 30), (r"[\w-]", 3, 8), (r"\d", 1, 15)]),
    data=st.data(),
)
def test_counted_unicode_classes_match_python(
    shape: tuple[str, int, int], data: st.DataObject
) -> None:
    """A counted class of hundreds of UTF-8 states (Unicode `\\w` is ~310) is built as a
    counted repeat, a table or lazy (it went through subset construction: 2.5 s for
    `[\\+\\w-]{5,96}`), with the language Python's `re` gives it, at the counts' edges."""
    cls, lo, hi = shape
    pattern = f"{cls}{{{lo},{hi}}}"
    members = "٣9" if cls == r"\d" else "aZ_9é٣日"
    n = data.draw(st.sampled_from([lo - 1, lo, lo + 1, hi - 1, hi, hi + 1]))
    text = "".join(data.draw(st.lists(st.sampled_from(members), min_size=n, max_size=n)))
    if data.draw(st.booleans()):  # one character outside the class, anywhere
        i = data.draw(st.integers(0, len(text)))
        text = text[:i] + data.draw(st.sampled_from(" +-x\u2028")) + text[i:]
    assert engine_accepts(f"start: /{pattern}/", text) == bool(re.fullmatch(pattern, text))
