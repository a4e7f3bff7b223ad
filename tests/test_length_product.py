"""A pattern under a length bound too big to tabulate (`maxLength` with a `pattern`) is built
on demand: the same language as the eager product, every state it hands out can finish,
walks over token paths see the automaton, equal keys see the same thing, and masks through the
real tokenizer are exact."""

from __future__ import annotations

import itertools
import json
import random
import re
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from sdk.engine import CompiledGrammar, Matcher
from sdk.engine import _automata as au
from sdk.engine import _regex as rx
from sdk.engine._lazy import LazyDfa, materialize
from sdk.engine._length_product import LengthProduct, length_product
from sdk.errors import TooComplexError
from tests._automata_runs import brute_force_mask, reachable, run_lazy, run_table

_ITEMS = ["[ab]", "a", "é", "\\\\[ab]|[ac]", "(?:b|ca)"]  # prefix-free: what a count takes
_REST = st.recursive(
    st.sampled_from(["a", "b", "c", "[ab]", "é", "[^b]", "\\\\a", "(?:ab)?"]),
    lambda inner: st.one_of(
        st.tuples(inner, inner).map(lambda t: t[0] + t[1]),
        st.tuples(inner, inner).map(lambda t: f"(?:{t[0]}|{t[1]})"),
        inner.map(lambda t: f"(?:{t})*"),
        st.tuples(inner, st.integers(0, 2), st.integers(0, 3)).map(
            lambda t: f"(?:{t[0]}){{{t[1]},{t[1] + t[2]}}}"
        ),
    ),
    max_leaves=5,
)


@st.composite
def _cases(draw: st.DrawFn) -> tuple[str, str, str, int, int, str, str]:
    u = draw(st.sampled_from(["", '"', "cd"]))
    item = draw(st.sampled_from(_ITEMS))
    lo = draw(st.integers(0, 4))
    hi = lo + draw(st.integers(0, 6))
    v = draw(st.sampled_from(['"', "d", '"d']))
    rest = draw(_REST)
    # the continuation usually frames its body like the count does (a JSON string)
    if draw(st.booleans()):
        rest = f"{re.escape(u)}(?:{rest}){re.escape(v)}"
    return (
        u,
        item,
        v,
        lo,
        hi,
        rest,
        f"(?={re.escape(u)}(?:{item}){{{lo},{hi}}}{re.escape(v)}){rest}",
    )


def _both(u: str, item: str, v: str, lo: int, hi: int, rest: str) -> tuple[au.AnyDfa, au.Dfa]:
    body = rx.parse(f"{re.escape(u)}(?:{item}){{{lo},{hi}}}{re.escape(v)}")
    after = au.table(au.compile_node(rx.parse(rest)))
    eager = au.product(after, au.prefix_closed(au.table(au.compile_node(body))))
    return _lazy(body, after), eager


def _both_or_skip(case: tuple[str, str, str, int, int, str, str]) -> tuple[au.AnyDfa, au.Dfa]:
    try:
        return _both(*case[:6])
    except TooComplexError:  # the eager reference itself gives up: nothing to compare
        assume(False)
        raise


def _lazy(body: rx.Node, after: au.Dfa) -> au.AnyDfa:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(au, "LENGTH_PRODUCT_MIN_PAIRS", -1)  # never the table first
        lazy = au._bounded_length(rx.Look(body, negative=False), after)
    assert lazy is not None
    return lazy


@given(case=_cases(), data=st.data())
@settings(max_examples=200, deadline=None)
def test_the_lazy_product_is_the_eager_one(
    case: tuple[str, str, str, int, int, str, str], data: st.DataObject
) -> None:
    u, item, v, lo, hi, rest, pattern = case
    lazy, eager = _both_or_skip(case)
    text = data.draw(st.text(alphabet='abcd"\\é', max_size=14))
    expected = re.fullmatch(pattern, text) is not None
    assert lazy.matches(text.encode()) == expected == eager.matches(text.encode()), (pattern, text)
    if not isinstance(lazy, LazyDfa):
        assert eager.is_empty, pattern  # an empty language is the one non-lazy answer
        return
    assert isinstance(lazy, LengthProduct)
    full = materialize(lazy, 10**6)
    assert au.product(full, eager, negate_b=True).is_empty, pattern
    assert au.product(eager, full, negate_b=True).is_empty, pattern
    for q in reachable(full, 1):  # every state handed out can still finish: exact masks
        assert full.accepting[list(reachable(full, q))].any(), (pattern, q)
    assert np.array_equal(lazy.first, full.trans[1] != 0)
    # where a table is needed, the eager product is built after all
    assert au.product(au.table(lazy), eager, negate_b=True).is_empty, pattern
    assert au.product(eager, au.table(lazy), negate_b=True).is_empty, pattern


@given(case=_cases(), data=st.data())
@settings(max_examples=100, deadline=None)
def test_walks_along_token_paths_and_shared_keys_are_exact(
    case: tuple[str, str, str, int, int, str, str], data: st.DataObject
) -> None:
    """A window along a tree of byte paths is the automaton on those paths; states with equal
    keys behave the same within the horizon."""
    pattern = case[-1]
    lazy, _ = _both_or_skip(case)
    assume(isinstance(lazy, LazyDfa))
    assert isinstance(lazy, LazyDfa)
    full = materialize(lazy, 10**6)
    q = data.draw(st.sampled_from(sorted(reachable(full, 1))))
    rng = random.Random(data.draw(st.integers(0, 2**32)))
    horizon = 4
    paths: list[bytes] = []
    for _ in range(12):  # random walks along live moves, then one byte past
        s, x = bytearray(), q
        while len(s) < horizon - 1:
            live = np.nonzero(full.row(x))[0].tolist()
            if not live:
                break
            s.append(rng.choice(live))
            x = full.move(x, s[-1])
        s.append(rng.randrange(256))
        paths.append(bytes(s))
    window = lazy.window_along(q, _levels(paths))
    for s in paths:
        assert run_lazy(lazy, q, s) == run_table(window, 1, s), (pattern, q, s)
    key = lazy.key(q, horizon)
    same = [r for r in reachable(full, 1) if r != q and lazy.key(r, horizon) == key]
    if same:
        _same_within(lazy, q, data.draw(st.sampled_from(same)), horizon)


def _same_within(lazy: LazyDfa, q: int, r: int, horizon: int) -> None:
    """States q and r agree on every string shorter than the horizon."""
    alphabet = sorted(set('abcd"\\é'.encode()))
    for n in range(horizon):
        for text in itertools.product(alphabet, repeat=n):
            assert run_lazy(lazy, q, bytes(text)) == run_lazy(lazy, r, bytes(text)), (q, r, text)


@pytest.mark.parametrize(
    ("body", "rest"),
    [
        ('"[ab]{0,40}"', '"(?:aaaaaa)*"'),  # 6 more items due, 5 left: dead, 11 left: alive
        ('"[ab]{3,30}"', '"(?:aaa|b)*a"'),
        ('"(?:[ab]|\\\\a){0,30}"', '"(?:(?:\\\\a){4}|b)*"'),
    ],
)
def test_states_with_equal_keys_agree_within_the_horizon(body: str, rest: str) -> None:
    """Every pair of reachable states that share a key, on every short string: a key that
    forgot how far the upper bound is would merge a state that can still finish with one
    that cannot."""
    after = au.table(au.compile_node(rx.parse(rest)))
    lazy = _lazy(rx.parse(body), after)
    assert isinstance(lazy, LengthProduct)
    full = materialize(lazy, 10**6)
    horizon = 4
    by_key: dict[Any, list[int]] = {}
    for q in sorted(reachable(full, 1)):
        by_key.setdefault(lazy.key(q, horizon), []).append(q)
    assert any(len(group) > 1 for group in by_key.values())
    for group in by_key.values():
        for r in group[1:][:: max(1, len(group) // 3)]:  # the nearest, the farthest, between
            _same_within(lazy, group[0], r, horizon)


def _levels(paths: list[bytes]) -> list[tuple[np.ndarray, np.ndarray]]:
    """The trie of `paths` as `window_along` levels."""
    nodes: list[dict[bytes, int]] = [{b"": 0}]
    levels = []
    for d in range(1, max(map(len, paths)) + 1):
        here = sorted({p[:d] for p in paths if len(p) >= d})
        nodes.append({p: i for i, p in enumerate(here)})
        parent = np.asarray([nodes[d - 1][p[:-1]] for p in here], dtype=np.int64)
        levels.append((parent, np.asarray([p[-1] for p in here], dtype=np.int64)))
    return levels


# ---------------------------------------------------------------- end to end

URL = "^[a-z]+://[a-z0-9.-]+(/[a-z0-9_.-]*)*$"
MAX = 8000  # 14 states a character: the count alone is over the table cap


@pytest.fixture(scope="module")
def url_grammar() -> CompiledGrammar:
    schema = {
        "type": "object",
        "properties": {
            "url": {"type": "string", "pattern": URL, "minLength": 12, "maxLength": MAX}
        },
        "required": ["url"],
    }
    grammar = CompiledGrammar.from_schema(schema)
    assert any(isinstance(t, LengthProduct) for t in grammar.terminals)
    return grammar


def _doc(url: str) -> str:
    return json.dumps({"url": url}, separators=(",", ":"))


def test_a_long_bounded_pattern_compiles_and_its_masks_are_exact(
    url_grammar: CompiledGrammar, smollm2_tokenizer: Any, smollm2_index: Any
) -> None:
    """It used to be refused ("automaton exceeds 100000 DFA states"). The longest URL is
    accepted token by token, one more character and one too few are refused, and the masks
    near both bounds and in the middle are exactly the tokens `advance` accepts."""
    url = "https://example.com/" + "ab/" * ((MAX - 20) // 3)
    url += "x" * (MAX - len(url))

    def walk(text: str) -> Matcher | None:
        m = Matcher(url_grammar, smollm2_index)
        for tid in smollm2_tokenizer.encode(text, add_special_tokens=False):
            if not m.mask()[tid]:
                return None
            m.advance(tid)
        return m

    done = walk(_doc(url))
    assert done is not None and done.is_accepting()
    assert walk(_doc(url + "y")) is None
    assert walk(_doc("https://a.b")) is None  # 11 characters, minLength 12
    short = walk(_doc("https://a.bc"))
    assert short is not None and short.is_accepting()
    for cut in (len('{"url":"https://a'), len('{"url":"https://example.com/ab'), -len('xxx"}')):
        m = Matcher(url_grammar, smollm2_index)
        m.advance_bytes(_doc(url)[:cut].encode())
        assert np.array_equal(m.mask(), brute_force_mask(m, smollm2_index))


def test_a_pattern_whose_lengths_never_settle_is_refused_with_a_typed_error() -> None:
    """Lengths 0, 2, 4, ... up to 6000 under a count too big to tabulate: the finishing sets
    never repeat below 6000, 6000 levels would take more memory than the budget, and the
    table is too big too: a typed error, not a hang or a gigabyte."""
    with pytest.raises(TooComplexError):
        au.compile_regex(r'(?="(?:[a-z]|\\[a-z]){0,60000}")"(?:ab){0,3000}"')
    item = au.table(au.compile_regex(r"[a-z]|\\[a-z]"))
    after = au.table(au.compile_regex(r'"(?:ab){0,3000}"'))
    with pytest.raises(TooComplexError, match="length"):
        length_product(after, b'"', item, 0, 60000, b'"', np.arange(256))


def test_windows_along_the_trie_and_along_event_rows_see_the_automaton(
    url_grammar: CompiledGrammar, smollm2_index: Any
) -> None:
    """The walks of such a state see only what tokens reach: the trie of the whole
    vocabulary, or the rest of an event's token rows after the byte where a lexeme ended.
    On either, every token's bytes run as on the automaton itself."""
    from sdk.engine._vocab import _row_levels, trie_levels, vocab_of

    vocab = vocab_of(smollm2_index)
    lp = next(t for t in url_grammar.terminals if isinstance(t, LengthProduct))
    q = 1
    for b in b'"http':  # in the scheme: letters stay there, ':' moves on, '/' dies
        q = int(lp.step(np.asarray([q]), np.asarray([b]))[0])
    assert q != 0
    url_bytes = set(b"abcdefghijklmnopqrstuvwxyz0123456789:/._-")
    urlish = [
        r
        for r in range(len(vocab.ids))
        if set(bytes(vocab.matrix[r, : vocab.row_lengths[r]])) <= url_bytes
    ]
    rows = np.asarray(sorted(random.Random(0).sample(urlish, 400)))
    ends = set()
    for levels, col in ((trie_levels(vocab), 0), (_row_levels(vocab, rows, 1), 1)):
        window = lp.window_along(q, levels)
        for row in rows.tolist():
            data = bytes(vocab.matrix[row, col : vocab.row_lengths[row]])
            got = run_lazy(lp, q, data)
            assert got == run_table(window, 1, data), (col, data)
            ends.add(len(got))
    assert len(ends) > 3  # tokens that die early, late, and live on: the paths differ
