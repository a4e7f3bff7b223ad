"""Engine behaviour through the public low-level API, on a small synthetic vocabulary.

The oracles are independent of the engine: Python's `re` for terminals, Lark's own Earley
parser for grammars, and a brute-force "feed every token's bytes" for masks.
"""

from __future__ import annotations

import functools
import itertools
import random
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

import lark
import numpy as np
import pytest
from hypothesis import given, reject, settings
from hypothesis import strategies as st

from sdk.engine import CompiledGrammar, Matcher
from sdk.engine._automata import compile_regex
from sdk.engine._dfa import Dfa
from sdk.errors import GrammarError, NoValidTokenError, RegexError, TokenRejectedError
from tests import _oracle
from tests._data import maskbench_sample
from tests._lark_trees import lark_statement, same_tree


@dataclass(eq=False)
class TinyIndex:
    """A vocabulary with every single byte plus multi-byte tokens that cross JSON lexemes."""

    token_bytes: tuple[bytes, ...]
    eos_ids: frozenset[int]

    @property
    def vocab_size(self) -> int:
        return len(self.token_bytes)


MULTI = [
    '{"',
    '":',
    '","',
    '"}',
    '"},',
    "true",
    "false",
    "null",
    "12",
    "3.",
    ".5",
    "e+",
    "-0",
    '", "',
    '": "',
    "ab",
    "abc",
    "bc",
    '"a',
    'a"',
    "é",
    "😀",
    "}]",
    "],",
    "[{",
    " ",
    "  ",
    '":"a',
    "\\u00",
    "\\n",
    '\\"',
    '}"',
    '{"a":1}',
]
TOKENS = [b""] + [bytes([b]) for b in range(256)] + [t.encode() for t in MULTI]
TOKENS += ["é".encode()[:1], "😀".encode()[:2], "😀".encode()[2:]]
INDEX = TinyIndex(tuple(TOKENS), frozenset({0}))

JSONISH = r"""
start: value
value: obj | arr | STR | NUM | "true" | "false" | "null"
obj: "{" [pair ("," WS? pair)*] "}"
pair: KEY ":" WS? value
arr: "[" [value ("," WS? value)*] "]"
KEY: /"[a-c]{1,2}"/
STR: /"(?:[^"\\\x00-\x1f]|\\["\\\/bfnrt]|\\u[0-9a-fA-F]{4}){0,4}"/
NUM: /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/
WS: " "
"""

AMBIGUOUS = r"""
start: "{" (known | other) "}"
known: "\"a\"" ":" NUM
other: STR ":" STR
STR: /"[a-z]*"/
NUM: /[0-9]+/
"""

REGEXES = [
    r"[a-z]+",
    r'"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"',
    r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?",
    r'"(?=[a-c]{2}")[b-d]*"',
    r'"(?!(?:ab|cd)")[a-d]*"',
    r".{2,4}",
    r"(?:ab|a)*b?",
    r"é|😀|[α-ω]+",
    r"x{0,12}y",
    r"[^a-c\d]{1,3}",
    r"\w+\s?\W",
    r"(?:b*a){1,5}",  # counted repeat of an item that loops on its start
    r"(?:[a-c]*,){2,6}",
]


def brute_force_mask(m: Matcher) -> np.ndarray:
    return _oracle.brute_force_mask(m, INDEX)


def random_walk(
    grammar: CompiledGrammar, rng: random.Random, max_steps: int = 80
) -> tuple[bytes, bool]:
    m = Matcher(grammar, INDEX)
    out = b""
    for _ in range(max_steps):
        mask = m.mask()
        assert (mask == brute_force_mask(m)).all(), f"mask differs from brute force after {out!r}"
        allowed = np.nonzero(mask)[0].tolist()
        assert allowed, "an empty mask must raise instead"
        tid = rng.choice(allowed)
        if tid in INDEX.eos_ids:
            assert m.is_accepting()
            return out, True
        m.advance(tid)
        out += INDEX.token_bytes[tid]
    return out, m.is_accepting()


@pytest.mark.parametrize("pattern", REGEXES)
def test_regex_dfa_agrees_with_python_re(pattern: str) -> None:
    dfa = compile_regex(pattern)
    alphabet = list('abcdxy"\\é😀α\n0-.eE+ /')
    rng = random.Random(pattern)
    for _ in range(2000):
        s = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 7)))
        assert dfa.matches(s.encode()) == (re.fullmatch(pattern, s) is not None), s
    # every short string over a few of the pattern's own characters
    small = sorted({c for c in pattern if c.isalpha() or c in ',"'}, key=lambda c: c in ',"')
    small = small[:4] + ["é"]
    for n in range(7):
        for chars in itertools.product(small, repeat=n):
            s = "".join(chars)
            assert dfa.matches(s.encode()) == (re.fullmatch(pattern, s) is not None), s


@given(st.text(max_size=8))
@settings(max_examples=300, deadline=None)
def test_json_string_regex_agrees_with_json_dumps(value: str) -> None:
    import json

    dfa = compile_regex(REGEXES[1])
    assert dfa.matches(json.dumps(value, ensure_ascii=False).encode())


@pytest.mark.parametrize("grammar_text", [JSONISH, AMBIGUOUS], ids=["jsonish", "ambiguous"])
@given(seed=st.integers(0, 10_000))
@settings(max_examples=25, deadline=None)
def test_random_walks_are_exact_and_parse(grammar_text: str, seed: int) -> None:
    grammar = CompiledGrammar.from_lark(grammar_text)
    oracle = lark.Lark(grammar_text, parser="earley", lexer="dynamic")
    out, complete = random_walk(grammar, random.Random(seed))
    if complete:
        oracle.parse(out.decode("utf-8"))


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ('{"a": 12, "b": [true, null, "x\\"y"]}', True),
        ('{"a":1.5e+3}', True),
        ('{"ab":"é😀"}', True),
        ('{"a": 01}', False),
        ('{"d": 1}', False),
        ('{"a":"abcde"}', False),
        ('{"a":tru}', False),
        ("[1,2,]", False),
    ],
)
def test_known_strings(text: str, ok: bool) -> None:
    grammar = CompiledGrammar.from_lark(JSONISH)
    m = Matcher(grammar, INDEX)
    accepted = all(m.try_advance(TOKENS.index(bytes([b]))) for b in text.encode())
    assert (accepted and m.is_accepting()) == ok


def test_eos_only_when_complete_and_rollback_fork() -> None:
    grammar = CompiledGrammar.from_lark(JSONISH)
    m = Matcher(grammar, INDEX)
    for ch in b'{"a":1':
        assert not m.is_allowed(0)
        m.advance(TOKENS.index(bytes([ch])))
    f = m.fork()
    f.advance(TOKENS.index(b"}"))
    assert f.is_allowed(0) and f.is_accepting()
    assert not m.is_accepting()
    m.rollback(2)
    assert m.tokens == f.tokens[:4]
    with pytest.raises(TokenRejectedError):
        m.advance(0)


def test_overlapping_terminals_keep_both_parses() -> None:
    grammar = CompiledGrammar.from_lark(AMBIGUOUS)
    for text, ok in [
        ('{"a":12}', True),
        ('{"a":"b"}', True),
        ('{"b":12}', False),
        ('{"b":"c"}', True),
    ]:
        m = Matcher(grammar, INDEX)
        accepted = all(m.try_advance(TOKENS.index(bytes([b]))) for b in text.encode())
        assert (accepted and m.is_accepting()) == ok, text


def test_multibyte_tokens_split_utf8() -> None:
    grammar = CompiledGrammar.from_lark(r'start: "\"" /[^"]*/ "\""')
    m = Matcher(grammar, INDEX)
    m.advance(TOKENS.index(b'"'))
    m.advance(TOKENS.index("😀".encode()[:2]))
    # only a continuation byte pair can follow half an emoji
    allowed = {INDEX.token_bytes[t] for t in np.nonzero(m.mask())[0]}
    assert "😀".encode()[2:] in allowed and b'"' not in allowed
    assert all(b and 0x80 <= b[0] <= 0xBF for b in allowed)


def test_forced_bytes() -> None:
    grammar = CompiledGrammar.from_lark(r'start: "{\"name\":" /[0-9]+/ "}"')
    m = Matcher(grammar, INDEX)
    assert m.forced_bytes() == b'{"name":'


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ('start: start "a" | "b"', "left recursion"),
        ('start: a\na: b "x"\nb: a | "y"', "left recursion"),
        ('start: "a"\n%ignore " "', "%ignore"),
        ("start: missing", "missing"),
        ("start: /a(?<=b)/", "lookbehind|unsupported group"),
        ("start: /(a)\\1/", "backreference"),
        ('start: a\na: "x" a', "empty"),
        ("start: /[/", "unterminated|class|Lark"),
    ],
)
def test_grammar_errors_are_typed(text: str, error: str) -> None:
    with pytest.raises(GrammarError, match=error):
        CompiledGrammar.from_lark(text)


def test_regex_errors_name_the_terminal() -> None:
    for text in ("start: WORD\nWORD: /\\bx/", 'start: WORD\nWORD: /\\bx/ "y"'):
        with pytest.raises(RegexError, match="WORD") as info:
            CompiledGrammar.from_lark(text)
        assert str(info.value).count("WORD") == 1, str(info.value)  # named once, not per layer


def _accepts(grammar: CompiledGrammar, text: str) -> bool:
    m = Matcher(grammar, INDEX)
    return all(m.try_advance(TOKENS.index(bytes([b]))) for b in text.encode()) and m.is_accepting()


@pytest.mark.parametrize(
    ("grammar", "yes", "no"),
    [
        # one-literal terminals take the memo keyed by their Lark text; flags are part of it
        ('start: A B\nA: "ab"i\nB: "ab"', ["ABab", "aBab"], ["abAB", "abab "]),
        ('start: A "ab"i\nA: /a+b/', ["aabAB"], ["ab", "aabaB "]),
        # a terminal built from others is not one literal: it goes the AST way
        ('start: C\nC: A "-" A\nA: "x"i', ["x-X", "X-x"], ["x-", "xx"]),
        ('start: A | B\nA: /[0-9]+/\nB: "0"', ["0", "12"], ["", "a"]),
    ],
)
def test_literal_terminals_keep_their_flags_inline_and_named(
    grammar: str, yes: list[str], no: list[str]
) -> None:
    for _ in range(2):  # the second compile reads the memoised literals
        g = CompiledGrammar.from_lark(grammar)
        assert all(_accepts(g, t) for t in yes)
        assert not any(_accepts(g, t) for t in no)


def test_dead_state_raises_instead_of_empty_mask() -> None:
    grammar = CompiledGrammar.from_lark('start: "a"')
    m = Matcher(grammar, INDEX)
    m.advance(TOKENS.index(b"a"))
    m.advance(0)  # EOS
    with pytest.raises(NoValidTokenError):
        m.mask()


@pytest.mark.parametrize("text", ['start: "a"?', 'start: ("a" "b")*', 'start: x?\nx: "a"'])
def test_empty_output_is_complete_when_the_grammar_allows_it(text: str) -> None:
    m = Matcher(CompiledGrammar.from_lark(text), INDEX)
    assert m.is_accepting() and m.is_allowed(0)
    m.advance(TOKENS.index(b"a"))
    assert m.is_accepting() == (text != 'start: ("a" "b")*')


# Regexes over a tiny alphabet, with the constructs the direct (numpy) DFA builders handle:
# sequences, alternations, counted repeats, lookaheads; each is compiled both ways.
_ATOMS = st.sampled_from(["a", "b", "[ab]", "[^a]", "é", "ab", "(?:a|ab)", "b*", "a?"])


def _regex_strategy() -> st.SearchStrategy[str]:
    def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.one_of(
            st.tuples(inner, inner).map(lambda t: t[0] + t[1]),
            st.tuples(inner, inner).map(lambda t: f"(?:{t[0]}|{t[1]})"),
            st.tuples(inner, st.integers(0, 3), st.integers(0, 4)).map(
                lambda t: f"(?:{t[0]}){{{t[1]},{t[1] + t[2]}}}"
            ),
            st.tuples(st.booleans(), inner, inner).map(
                lambda t: f"(?{'!' if t[0] else '='}{t[1]}){t[2]}"
            ),
        )

    return st.recursive(_ATOMS, extend, max_leaves=6)


@given(pattern=_regex_strategy(), data=st.data())
@settings(max_examples=150, deadline=None)
def test_direct_dfa_construction_matches_subset_construction(
    pattern: str, data: st.DataObject
) -> None:
    from sdk.engine import _automata as au
    from sdk.engine import _regex as rx

    node = rx.parse(pattern)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(au, "DIRECT_WEIGHT", 0)  # glue DFAs of parts everywhere possible
        direct = au.compile_node(node)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(au, "DIRECT_WEIGHT", 10**9)  # one NFA, subset construction
        subset = au.compile_node(node)
    sym = au.product(direct, subset, negate_b=True)
    assert sym.is_empty, pattern
    assert au.product(subset, direct, negate_b=True).is_empty, pattern
    s = data.draw(st.text(alphabet="abé", max_size=8))
    assert direct.matches(s.encode()) == subset.matches(s.encode()), (pattern, s)
    if _lookaheads_see_to_the_end(node):
        assert direct.matches(s.encode()) == (re.fullmatch(pattern, s) is not None), (pattern, s)


def _lookaheads_see_to_the_end(node: Any) -> bool:
    """Whether `re` is an oracle for `node`: the dialect scopes a lookahead to the rest of its
    group (docs/internals/grammar-dialect.md), Python lets it see past the group's end, so the
    two agree when every lookahead is an item of the whole regex, with none in its body."""
    from sdk.engine import _regex as rx

    def plain(n: Any) -> bool:
        if isinstance(n, rx.Look):
            return False
        if isinstance(n, (rx.Seq, rx.Alt)):
            return all(plain(i) for i in n.items)
        if isinstance(n, rx.Repeat):
            return plain(n.item)
        return True

    items = node.items if isinstance(node, rx.Seq) else (node,)
    return all(plain(i.body) if isinstance(i, rx.Look) else plain(i) for i in items)


def test_light_items_heavy_together_compile() -> None:
    """A sequence of items each light enough for one NFA but heavy together (a quoted key of
    up to 255 characters) is one NFA too; it used to recurse until "nests too deeply"."""
    dfa = compile_regex('"[0-9a-z]{1,255}"')
    assert dfa.matches(b'"' + b"a" * 255 + b'"')
    assert not dfa.matches(b'"' + b"a" * 256 + b'"') and not dfa.matches(b'""')


@given(text=st.text(max_size=10), ignore_case=st.booleans())
@settings(max_examples=200, deadline=None)
def test_literal_chains_are_the_minimal_dfa(text: str, ignore_case: bool) -> None:
    """Literal terminals (keys, keywords) are built as a chain directly: the very table the
    general construction (subset construction, then minimisation) gives."""
    from sdk.engine import _automata as au
    from sdk.engine import _regex as rx

    try:
        node = rx.literal(text, ignore_case=ignore_case)
    except RegexError:
        reject()  # case folding of a huge class: not a literal
    fast = au.compile_node(node)
    nfa = au.Nfa()
    start, end = nfa.build(node)
    slow = au.minimize(au.determinize(nfa, start, end))
    assert np.array_equal(fast.trans, slow.trans), text
    assert np.array_equal(fast.accepting, slow.accepting), text


@given(
    words=st.lists(st.text(alphabet='ab"é\x00\u20ac', max_size=5), min_size=1, max_size=8),
    tail=st.sampled_from(["", '"', "x*"]),
    data=st.data(),
)
@settings(max_examples=150, deadline=None)
def test_finite_sets_are_built_as_tries_with_the_same_language(
    words: list[str], tail: str, data: st.DataObject
) -> None:
    """Enums and "not one of these keys" lookaheads are built as a trie directly; the
    automaton accepts exactly what the general construction does, in both directions, and
    what Python's `re` matches."""
    from sdk.engine import _automata as au
    from sdk.engine import _regex as rx

    pattern = "(?:" + "|".join(re.escape(w) for w in words) + ")" + tail
    node = rx.parse(pattern)
    fast = au.compile_node(node)
    nfa = au.Nfa()
    start, end = nfa.build(node)
    slow = au.determinize(nfa, start, end)
    assert au.product(fast, slow, negate_b=True).is_empty, pattern
    assert au.product(slow, fast, negate_b=True).is_empty, pattern
    probe = data.draw(st.sampled_from([*words, "", "a", "ab", 'a"', "é€", "x"]))
    for s in (probe, probe + tail[:1]):
        assert fast.matches(s.encode()) == (re.fullmatch(pattern, s) is not None), (pattern, s)
    key = au.compile_node(rx.parse('"(?!' + pattern + '")[a-z"é€\x00]*"'))
    assert key.matches(b'"zz"')


@pytest.mark.parametrize(
    "pattern",
    [
        REGEXES[1],
        r'"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]){0,40}"',
        r'"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]){3,5}"',
        r'"(?!(?:ab|abc)")(?:[^"\\\x00-\x1f]|\\["\\/bfnrt])*"',
        r"[a-z]{0,30}",
        r"(?:[ -~]{2})*",
        r'"(?!(?:name|nickname|id|Create|CreateAdmin)")(?:[^"\\\x00-\x1f]|\\["\\/bfnrt])*"',
        r'[^0-9"][^"]*"',
        r"[a-z]+(?:,[a-z]+)*",  # accepting loops: the shortcut meets boundary events
        r"[ \t\n]*",
        r'"nickname"',  # one string left in every state: walked without chains
        r"true|false|null",
    ],
)
def test_compiled_walks_agree_with_a_plain_python_walk(pattern: str) -> None:
    """The compiled trie walk (with its whole-subtree shortcut for bytes that loop) and the
    compiled row walk give exactly the tokens and boundary events of a byte-by-byte walk."""
    from sdk.engine import _vocab

    vocab = _vocab.vocab_of(INDEX)
    dfa = compile_regex(pattern)
    every = np.arange(len(vocab.ids), dtype=np.int64)
    tb = [INDEX.token_bytes[t] for t in vocab.ids.tolist()]
    for state in range(1, dfa.n_states):
        kept, events = _plain_walk(tb, dfa, state)
        packed, kept_rows, ranges = _vocab.walk_vocabulary(vocab, dfa, state)
        trie_events = _vocab.range_events(vocab, ranges)
        rows, row_events = _vocab.walk(vocab, dfa, state, every, 0)
        if packed is None:  # few kept: their rows, not a bitmask
            assert set(kept_rows.tolist()) == kept and len(kept_rows) <= vocab.packed_len // 4
        else:
            assert len(kept) > vocab.packed_len // 4
            assert (packed == _vocab.pack_rows(vocab, np.asarray(sorted(kept), np.int64))).all()
        assert set(rows.tolist()) == kept, state
        as_set = lambda evs: {(c, r) for c, rows, _ in evs for r in rows.tolist()}  # noqa: E731
        assert as_set(trie_events) == as_set(row_events) == events, state
        # one event per column, columns ascending, rows in the order they were given
        cols = [c for c, _, _ in row_events]
        assert cols == sorted(set(cols)), state
        assert all((np.diff(rows) > 0).all() for _, rows, _ in row_events), state
        _check_suffix_plan(vocab, ranges, events, _vocab.SMALL_EVENT_ROWS)


def _walk_bits(vocab: Any, walk: Any) -> Any:
    """A whole-vocabulary walk's kept tokens as a packed bitmask, whichever way it holds them."""
    from sdk.engine import _vocab

    return walk.packed if walk.packed is not None else _vocab.pack_rows(vocab, walk.accepted)


def _plain_walk(tokens: list[bytes], dfa: Any, state: int) -> tuple[set[int], set[tuple[int, int]]]:
    """Reference: each token byte by byte from `state`; kept rows and (column, row) events."""
    trans, acc = dfa.trans.tolist(), dfa.accepting.tolist()
    kept: set[int] = set()
    events: set[tuple[int, int]] = set()
    for row, data in enumerate(tokens):
        q, ends = state, []
        for k, b in enumerate(data):
            q = trans[q][b]
            if not q:
                events.update((c, row) for c in ends)
                break
            if k < len(data) - 1 and acc[q]:
                ends.append(k + 1)
        else:
            kept.add(row)
    return kept, events


def _check_walks_on(words: list[bytes], pattern: str) -> None:
    """The compiled trie walk of a vocabulary of `words` from every state of `pattern` gives
    exactly the tokens and boundary events of the byte-by-byte reference."""
    from sdk.engine import _vocab

    index = TinyIndex(tuple(words), frozenset())
    vocab = _vocab.vocab_of(index)
    tokens = [words[t] for t in vocab.ids.tolist()]
    dfa = compile_regex(pattern)
    for state in range(1, dfa.n_states):
        kept, events = _plain_walk(tokens, dfa, state)
        packed, kept_rows, ranges = _vocab.walk_vocabulary(vocab, dfa, state)
        got = _vocab.range_events(vocab, ranges)
        if packed is None:
            assert sorted(kept_rows.tolist()) == sorted(kept)
        else:
            assert (packed == _vocab.pack_rows(vocab, np.asarray(sorted(kept), np.int64))).all()
        assert {(c, r) for c, rows, _ in got for r in rows.tolist()} == events
        for max_rows in (2, _vocab.SMALL_EVENT_ROWS):
            _check_suffix_plan(vocab, ranges, events, max_rows)


def _check_suffix_plan(
    vocab: Any, ranges: Any, events: set[tuple[int, int]], max_rows: int
) -> None:
    """The plan of a walk's boundary ranges holds exactly the events of the columns with at
    most `max_rows` tokens, each range filed under the byte its tokens have after the cut."""
    from sdk.engine import _vocab

    plan = _vocab.suffix_plan(vocab, _vocab.Walk(np.zeros(0, np.int32), (), None, ranges), max_rows)
    per_col = Counter(c for c, _ in events)
    got: set[tuple[int, int]] = set()
    firsts = 0
    for b in range(256):
        for c, lo, hi in plan.ranges[plan.offsets[b] : plan.offsets[b + 1]].tolist():
            firsts |= 1 << b
            for row in vocab.trie.order[lo:hi].tolist():
                assert vocab.matrix[row, c] == b
                got.add((c, row))
    assert got == {(c, r) for c, r in events if per_col[c] <= max_rows}
    assert plan.first_bits == firsts and plan.offsets[256] == len(plan.ranges)


@given(
    words=st.lists(
        st.binary(min_size=1, max_size=6).map(
            # NUL, \x01, a quote, é (two bytes: may split) and a byte no UTF-8 text has
            lambda b: b"".join([b"\x00", b"\x01", b'"', "é".encode(), b"\xff"][x % 5] for x in b)
        ),
        min_size=1,
        max_size=40,
    ),
    pattern=st.sampled_from(
        [
            '"[^"]*"',
            "(?:\x00|\x01)+",
            '\x01*"?',
            '[\x00\x01]{1,3}"',
            '"(?!\x00")[^"]*"',
            # one string left from every state past the first: read along its trie path
            '(?:\x00\x01|\x01)\x00\x00"\x01',
        ]
    ),
)
@settings(max_examples=80, deadline=None)
def test_trie_walk_on_random_vocabularies(words: list[bytes], pattern: str) -> None:
    """Duplicates, NUL bytes, tokens that are prefixes of others, multi-byte characters: the
    trie (built by sorting padded rows) walks exactly like the byte-by-byte reference."""
    _check_walks_on(words, pattern)


def test_literal_walks_read_the_whole_path() -> None:
    """A state with one string left is walked along that string's trie path: tokens that are
    prefixes of it at every depth are kept, those going past its end are events, those
    leaving it midway are dropped, from every state of a long key."""
    words = [b'"', b'"n', b"n", b"ni", b"nick", b"nickna", b"nicky", b"nickname", b'nickname"']
    words += [b'nickname":', b'nickname"}', b'ame"', b'e"', b'e",', b"x", b'"nickname"']
    _check_walks_on(words, '"nickname"')


_UTF8_PIECES = [
    c.encode()
    for c in ["a", '"', "\\", "é", "€", "😀", "\u0800", "\ud7ff", "\U00010000", "\U0010ffff"]
] + [
    # pieces of characters, and byte strings no UTF-8 text has (surrogate, overlong, too high)
    b"\xc3",
    b"\xa9",
    b"\xe2\x82",
    b"\xf0\x9f",
    b"\x98\x80",
    b"\xed\xa0\x80",
    b"\xc0\x80",
    b"\xf4\x90\x80\x80",
    b"\xe0\x80\x80",
    b"\xf0\x80\x80\x80",
    b"\xff",
]


@given(
    words=st.lists(
        st.lists(st.sampled_from(_UTF8_PIECES), min_size=1, max_size=5).map(b"".join),
        min_size=1,
        max_size=60,
    ),
    pattern=st.sampled_from(
        [
            '"[^"]*"',
            '[^"]{0,3}"',
            r'(?:[^"\\]|\\.)*',
            "[^a]*",
            "[é€😀a]*",
            "[\u0800-\ud7ff]*",
            ".{1,4}",
            "(?:a|😀)*é?",
            "[^a]{0,2}",
            "(?:é|€|😀){1,2}a?",
        ]
    ),
)
@settings(max_examples=300, deadline=None)
def test_trie_walk_takes_whole_only_well_formed_characters(
    words: list[bytes], pattern: str
) -> None:
    """The walk takes a subtree whole where each multi-byte character steps the lexer like one
    byte: split characters, surrogates, overlong and out-of-range sequences must still be
    walked byte by byte, and give exactly the byte-by-byte reference."""
    _check_walks_on(words, pattern)


def _well_formed_prefix(data: bytes) -> bool:
    """Reference: some completion (up to 3 continuation bytes) decodes strictly."""
    tails = [b""] + [
        bytes(t) for k in (1, 2, 3) for t in itertools.product(b"\x80\x90\xa0", repeat=k)
    ]
    for tail in tails:
        try:
            (data + tail).decode("utf-8")
        except UnicodeDecodeError:
            continue
        return True
    return False


@given(
    words=st.lists(
        st.lists(st.sampled_from(_UTF8_PIECES), min_size=1, max_size=3).map(b"".join),
        min_size=1,
        max_size=6,
    )
)
@settings(max_examples=150, deadline=None)
def test_well_formed_utf8_of_trie_nodes_matches_python_decoding(words: list[bytes]) -> None:
    """A node's flag says every path below it, read from a character boundary, is a prefix
    of well-formed UTF-8: as Python's strict decoder says of each path."""
    _check_utf8_flags(words)


def test_utf8_automaton_is_python_s_strict_decoder() -> None:
    """The automaton's live states are exactly the prefixes of well-formed UTF-8, checked on
    every sequence of bytes at the edges of its ranges."""
    from sdk.engine._trie import UTF8

    edges = b"\x00\x7f\x80\x8f\x90\x9f\xa0\xbf\xc0\xc1\xc2\xdf\xe0\xe1\xec\xed\xee\xef\xf0\xf1\xf3\xf4\xf5\xff"
    seqs = [bytes(t) for k in (1, 2, 3) for t in itertools.product(edges, repeat=k)]
    seqs += [
        bytes([a, *t])
        for a in b"\xf0\xf1\xf3\xf4"
        for t in itertools.product(b"\x80\x8f\x90\xbf\xc0", repeat=3)
    ]
    for data in seqs:
        u = 0
        for b in data:
            u = int(UTF8[u, b]) if u < 8 else 8
        assert (u < 8) == _well_formed_prefix(data), data


def test_well_formed_utf8_of_each_piece_after_a_byte() -> None:
    """Every piece alone below a node: one ill-formed sequence decides the node's flag."""
    for piece in _UTF8_PIECES:
        for more in ([], [b"a"], [b"a\xc3\xa9"]):
            _check_utf8_flags([b"a" + piece, *more])


def _check_utf8_flags(words: list[bytes]) -> None:
    from sdk.engine import _vocab
    from sdk.engine._trie import UTF8

    # a representative prefix for each UTF-8 state: the rest read after it
    lead = {
        0: b"",
        1: b"\xc3",
        2: b"\xe2",
        3: b"\xf1",
        4: b"\xe0",
        5: b"\xed",
        6: b"\xf0",
        7: b"\xf4",
    }
    assert all(UTF8[0, p[0]] == u for u, p in lead.items() if p)
    trie = _vocab.vocab_of(TinyIndex(tuple(words), frozenset())).trie
    path: list[int] = []
    strings: list[bytes] = []
    for j in range(len(trie.byte)):
        del path[trie.depth[j] - 1 :]
        path.append(int(trie.byte[j]))
        strings.append(bytes(path))
    for j, node in enumerate(strings):
        below = [strings[k][len(node) :] for k in range(j + 1, int(trie.skip[j]))]
        for u, prefix in lead.items():
            expect = all(_well_formed_prefix(prefix + b) for b in below)
            assert bool(trie.utf8[j] >> u & 1) == expect, (node, u)
        phase = int(trie.phase[j])
        assert (phase < 8) == _well_formed_prefix(node), node
        if phase < 8:
            # the node's path ends in that state: what may follow is what follows its lead
            for tail in (b"a", b"\x80", b"\x90", b"\xa0", b"\x80\x80", b"\x90\x80\x80"):
                assert _well_formed_prefix(node + tail) == _well_formed_prefix(
                    lead[phase] + tail
                ), (node, tail)


@given(
    words=st.lists(st.text(alphabet='ab"é\x00', max_size=4), min_size=1, max_size=8),
    rest=st.sampled_from(
        ['[a-z"é\x00]*"', r'(?:[^"\\]|\\.)*"', 'ab*"?', "[a-c]{0,3}", "(?:é|a)*b?", "x?"]
    ),
)
@settings(max_examples=120, deadline=None)
def test_excluded_words_built_directly_match_the_product(words: list[str], rest: str) -> None:
    """`(?!w1|w2)rest` over a finite word set is built as the words' trie paired with `rest`;
    it accepts exactly what the general product with the prefix-closed words does."""
    from sdk.engine import _automata as au
    from sdk.engine import _regex as rx

    body = rx.parse("(?:" + "|".join(re.escape(w) for w in words) + ")")
    after = au.table(au.compile_node(rx.parse(rest)))
    fast = au.look_intersection(rx.Look(body, True), rx.parse(rest))
    slow = au.product(after, au.prefix_closed(au.table(au.compile_node(body))), negate_b=True)
    assert au.product(fast, slow, negate_b=True).is_empty, (words, rest)
    assert au.product(slow, fast, negate_b=True).is_empty, (words, rest)
    _assert_trimmed(fast)


@pytest.mark.parametrize(
    "pattern",
    [
        r"(?!ab)(?!b[cd])(?!c)[a-d]{0,4}",
        r"(?!a)(?=[ab])(?!bb)[a-d]*",  # a positive lookahead ends a run
        r"x(?!a)(?!b)[a-dx]{1,3}",
        r"(?![a-c]+d)(?!d)[a-d]{0,4}",  # a word set and a pattern: trie, then product
        r"(?![ab]+c)(?!c+d)[a-d]{0,5}",  # patterns only: one product
        r"(?:x|(?!ab)(?!ba)[abx]*)",  # a run inside a group ends with it
    ],
)
def test_runs_of_negative_lookaheads_match_python(pattern: str) -> None:
    """A run of negative lookaheads is built as one lookahead over their union: every text
    over the alphabet up to 5 characters is matched as Python's `re` matches it."""
    dfa = compile_regex(pattern)
    for n in range(6):
        for chars in itertools.product("abcdx", repeat=n):
            text = "".join(chars)
            want = re.fullmatch(pattern, text) is not None
            assert dfa.matches(text.encode()) == want, (pattern, text)


def test_hundreds_of_pattern_properties_compile_and_route_keys() -> None:
    """An open object's other keys exclude every pattern: one lookahead over their union, not
    a chain nested once per pattern (500 were refused as nesting too deeply)."""
    n = 500
    schema = {
        "type": "object",
        "patternProperties": {f"^p{i}_[a-z]+$": {"type": "integer"} for i in range(n)},
    }
    grammar = CompiledGrammar.from_schema(schema, strict=True)
    for text, ok in [
        ('{"p7_abc":1}', True),
        ('{"p7_abc":"x"}', False),
        ('{"p499_z":2,"other":"x"}', True),
        ('{"p500_z":"x"}', True),  # no pattern: any value
        ('{"p12_":"x"}', True),
        ('{"p12_a":"x"}', False),
    ]:
        m = Matcher(grammar, INDEX)
        try:
            m.advance_bytes(text.encode())
            accepted = m.is_accepting()
        except TokenRejectedError:
            accepted = False
        assert accepted == ok, text


def _assert_trimmed(dfa: Any) -> None:
    """Every state but the dead one is reachable from the start and can reach acceptance: a
    state that cannot would let a mask allow a token with no valid continuation."""
    trans = dfa.trans
    n = dfa.n_states
    reach = {1} if n > 1 else set()
    todo = list(reach)
    while todo:
        s = todo.pop()
        for t in set(trans[s].tolist()) - {0} - reach:
            reach.add(t)
            todo.append(t)
    live = _live_states(trans, dfa.accepting)
    if dfa.is_empty:
        return
    assert reach == live == set(range(1, n)), (sorted(reach), sorted(live), n)


def _live_states(trans: np.ndarray, acc: np.ndarray) -> set[int]:
    """States (not the dead one) from which an accepting state can be reached."""
    n = len(acc)
    live = {s for s in range(1, n) if acc[s]}
    grew = True
    while grew:
        grew = False
        for s in range(1, n):
            if s not in live and live & set(trans[s].tolist()):
                live.add(s)
                grew = True
    return live


@given(
    n=st.integers(1, 12),
    data=st.data(),
)
@settings(max_examples=150, deadline=None)
def test_trim_keeps_exactly_the_reachable_live_states(n: int, data: st.DataObject) -> None:
    """`trim_states` against a plain Python search: reachable from state 1 through states
    that can reach acceptance, and moves into the others cut to the dead state."""
    from sdk.engine._pairs import trim_states

    k = data.draw(st.integers(1, 3))
    cells = data.draw(st.lists(st.integers(0, n - 1), min_size=n * k, max_size=n * k))
    trans = np.asarray(cells, dtype=np.int32).reshape(n, k)
    trans[0] = 0
    acc = np.asarray(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)
    acc[0] = False
    live = _live_states(trans, acc)
    reach: set[int] = set()
    todo = [1] if 1 in live else []
    while todo:
        s = todo.pop()
        if s in reach:
            continue
        reach.add(s)
        todo += [t for t in trans[s].tolist() if t in live]
    expected_trans = np.where(np.isin(trans, sorted(live)), trans, 0)
    expected_trans[0] = 0
    got = trim_states(trans, acc)
    assert set(np.nonzero(got)[0].tolist()) == reach
    assert np.array_equal(trans, expected_trans)


_UNION_PARTS = (r"[a-c]{0,400}", r"(?:ab|c){3,300}x?")


@functools.cache
def _big_union() -> Any:
    from sdk.engine import _automata as au

    da, db = (compile_regex(p) for p in _UNION_PARTS)
    assert da.n_states + db.n_states > au.UNION_PRODUCT_MIN_STATES
    return au.union([da, db])


@given(data=st.data())
@settings(max_examples=60, deadline=None)
def test_big_unions_built_as_products_match_the_alternation(data: st.DataObject) -> None:
    """Unions over 512 states go through the numpy product instead of the NFA: same language."""
    a, b = _UNION_PARTS
    both = _big_union()
    s = data.draw(st.text(alphabet="abcx", max_size=700))
    expected = re.fullmatch(a, s) is not None or re.fullmatch(b, s) is not None
    assert both.matches(s.encode()) == expected


def test_one_line_definitions_cache_builds_the_same_grammar_as_lark() -> None:
    """Definitions parsed line by line (and cached) give what Lark's whole-text load gives;
    text in another layout, or with an error, still goes through Lark whole."""
    from lark.load_grammar import GrammarBuilder

    from sdk.engine import grammar as g

    text = 'start: a b*\na: "x" | NUM\nb.2: "y" a?\nNUM: /[0-9]+/\n'

    def shape(gb: GrammarBuilder) -> list[tuple[str, object, object]]:
        built = gb.build()
        rules = [(str(n), p, t) for n, p, t, _ in built.rule_defs]
        terms = [(str(n), (), t) for n, (t, _) in built.term_defs]
        return rules + terms

    whole = GrammarBuilder()
    whole.load_grammar(text)
    for _ in range(2):  # the second time from the cache
        lines = GrammarBuilder()
        g._load_definitions(lines, text)
        assert shape(lines) == shape(whole)
    assert CompiledGrammar.from_lark(text).positions  # compiles
    with pytest.raises(GrammarError):
        CompiledGrammar.from_lark('start: "x"\nstart: "y"\n')  # defined twice
    with pytest.raises(GrammarError):
        CompiledGrammar.from_lark('start: "x" (\n')  # unbalanced
    multi = 'start: "x"\n     | "y"\n'  # a continuation line: Lark parses it whole
    assert len(CompiledGrammar.from_lark(multi).terminals) >= 2


_LINE_PIECES = [
    " ",
    "a",
    "b_c",
    "X",
    "_Y",
    "Z9",
    "(",
    ")",
    "[",
    "]",
    "|",
    "?",
    "*",
    "+",
    "~",
    "~2",
    "~1..3",
    '"q"',
    '"q"i',
    '"\\""',
    '"\\\\"',
    '"a"..',
    '"z"',
    "/x+/",
    "/a\\/b/i",
    "/[^/]/",
    "//",
    "#",
    "->",
    "{",
    ":",
    ".",
    "..",
    "?a",
    "!",
    "0",
    "\t",
]


@given(
    head=st.sampled_from(["x: ", "X: ", "X.2: ", "x.2: ", "?x: ", "_X: ", "x : "]),
    body=st.lists(st.sampled_from(_LINE_PIECES), max_size=12),
)
@settings(max_examples=400, deadline=None)
def test_one_line_reader_builds_lark_s_trees_or_defers(head: str, body: list[str]) -> None:
    """The fast definition reader either returns exactly the tree Lark's own grammar parser
    builds, or None (the line then goes to Lark)."""
    from sdk.engine._lark_lines import parse_line

    line = head + " ".join(body) if len(body) % 2 else head + "".join(body)
    mine = parse_line(line)
    if mine is not None:
        ref = lark_statement(line)
        assert ref is not None and same_tree(mine, ref), line


def test_one_line_reader_on_dev_schema_grammars() -> None:
    """Every line the schema compiler writes for a sample of real schemas: Lark's tree."""
    import json

    from sdk.engine._lark_lines import parse_line
    from sdk.grammar import compile_schema

    lines: set[str] = set()
    for path in maskbench_sample(40):
        schema = json.loads(path.read_text())["schema"]
        try:
            lines.update(compile_schema(schema, whitespace="flexible").lark.splitlines())
        except Exception:
            continue
    read = 0
    for line in lines:
        mine = parse_line(line)
        if mine is not None:
            read += 1
            assert same_tree(mine, lark_statement(line)), line
    assert read > 0.95 * len(lines)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10**6))
def test_walk_keys_name_a_state_by_its_language(seed: int) -> None:
    """Wide states are keyed by their reachable sub-automaton up to renumbering (their walks
    are shared across DFAs): a renumbered copy gets the same keys, and one changed target or
    one changed acceptance anywhere reachable gives another key."""
    from sdk.engine._dfa import Dfa
    from sdk.engine._vocab import state_key

    rnd = random.Random(seed)
    dfa = compile_regex(r'"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4}){0,6}"')
    assert isinstance(dfa, Dfa)
    n = dfa.n_states
    perm = np.arange(n)
    perm[1:] = 1 + np.asarray(rnd.sample(range(n - 1), n - 1))
    trans = np.zeros_like(dfa.trans)
    trans[perm] = np.where(dfa.trans > 0, perm[dfa.trans], 0)
    acc = np.zeros_like(dfa.accepting)
    acc[perm] = dfa.accepting
    copy = Dfa(trans, acc)
    # wide states reaching few enough states (the others are keyed by DFA and number)
    wide = [q for q in range(1, n) if isinstance(state_key(dfa, q), bytes)]
    assert len(wide) >= 5
    for q in wide:
        assert state_key(dfa, q) == state_key(copy, int(perm[q]))
    q = rnd.choice(wide)
    live = np.flatnonzero(dfa.trans[q])
    b = int(rnd.choice(live))
    fewer = dfa.trans.copy()
    fewer[q, b] = 0  # one byte fewer
    bent = Dfa(fewer, dfa.accepting.copy())
    assert state_key(bent, q) != state_key(dfa, q)
    flipped = Dfa(dfa.trans.copy(), dfa.accepting.copy())
    flipped.accepting[q] = not flipped.accepting[q]
    assert state_key(flipped, q) != state_key(dfa, q)


def test_a_state_with_one_string_left_is_walked_once_by_that_string() -> None:
    """The rest of a key is keyed by its bytes: `word"` is walked once for `"password"` and
    `"sword"` (two DFAs, two grammars' worth of keys), and the walk is the plain one. A state
    with two strings left, or one that may end early, is keyed by its DFA."""
    from sdk.engine import _vocab
    from sdk.engine._vocab import literal_rest, state_key

    vocab = _vocab.vocab_of(INDEX)
    long, short = compile_regex(r'"password"'), compile_regex(r'"sword"')
    assert isinstance(long, Dfa) and isinstance(short, Dfa)

    def after(dfa: Dfa, data: bytes) -> int:
        q = 1
        for b in data:
            q = dfa.move(q, b)
        return q

    q_long, q_short = after(long, b'"pass'), after(short, b'"s')
    assert literal_rest(long, q_long) == literal_rest(short, q_short) == b'word"'
    assert state_key(long, q_long) == state_key(short, q_short)
    assert _vocab.classify(vocab, short, q_short) is _vocab.classify(vocab, long, q_long)
    tokens = [INDEX.token_bytes[t] for t in vocab.ids.tolist()]
    for q in range(1, short.n_states):
        if literal_rest(short, q) is None:
            continue
        walk = _vocab.classify(vocab, short, q)
        kept, events = _plain_walk(tokens, short, q)
        assert (
            _walk_bits(vocab, walk) == _vocab.pack_rows(vocab, np.asarray(sorted(kept), np.int64))
        ).all()
        got = _vocab.range_events(vocab, walk.ranges)
        assert {(c, r) for c, rows, _ in got for r in rows.tolist()} == events
    closing = _vocab.classify(vocab, short, after(short, b'"sword'))  # `"` left
    assert closing.ranges is not None and len(closing.ranges)  # `":` runs past the quote
    either = compile_regex(r'"pass"|"password"')
    assert isinstance(either, Dfa)
    assert literal_rest(either, after(either, b'"pass')) is None  # `"` or `word"`
    assert literal_rest(either, after(either, b'"passw')) == b'ord"'
    maybe = compile_regex(r"ab(?:cd)?")
    assert isinstance(maybe, Dfa)
    assert literal_rest(maybe, after(maybe, b"a")) is None  # `b` and `bcd`


@given(words=st.lists(st.text(alphabet='ab"é', min_size=0, max_size=5), min_size=1, max_size=5))
@settings(max_examples=100, deadline=None)
def test_literal_rest_is_the_one_string_a_state_accepts(words: list[str]) -> None:
    """Every state of a finite language's DFA: `literal_rest` names a string exactly when the
    state accepts that one string and nothing else (the empty string included)."""
    from sdk.engine._vocab import literal_rest

    dfa = compile_regex("(?:" + "|".join(re.escape(w) for w in words) + ")")
    assert isinstance(dfa, Dfa)

    def language(q: int) -> set[bytes]:
        out = {b""} if dfa.accepting[q] else set()
        for b in np.flatnonzero(dfa.row(q)).tolist():
            out |= {bytes([b]) + rest for rest in language(dfa.move(q, b))}
        return out

    for q in range(1, dfa.n_states):
        strings = language(q)
        one = next(iter(strings)) if len(strings) == 1 else None
        assert literal_rest(dfa, q) == (one or None), (words, q, strings)


def test_a_terminals_lexer_rows_are_written_when_the_parse_first_expects_it() -> None:
    """A grammar's big terminals cost nothing until the parse can reach them (a schema with
    many long patterns visits a few): the first mask writes only the first terminals' rows,
    and masks stay those of the brute force as the parse moves on to the others."""
    grammar = CompiledGrammar.from_lark(
        'start: "a" X | "b" Y\nX: /x{0,300}/\nY: /[a-z0-9]{1,300}y/\n'
    )
    index = _oracle.ByteIndex.of([])  # single bytes: no token reaches past one terminal
    m = Matcher(grammar, index)
    rt = m._rt
    x, y = grammar.terminal_names.index("X"), grammar.terminal_names.index("Y")
    n = len(index.token_bytes)
    bits = np.zeros((n + 31) // 32, dtype=np.int32)

    def exact() -> bool:
        m.fill_bitmask(bits)
        allowed = np.array([bool(bits[t >> 5] >> (t & 31) & 1) for t in range(n)])
        return bool((allowed == _oracle.brute_force_mask(m, index)).all())

    assert exact()
    assert not rt._filled[x] and not rt._filled[y]
    for text in ("b", "1", "2", "y"):
        m.advance_bytes(text.encode())
        assert exact(), text
        assert rt._filled[y] and not rt._filled[x]
    assert m.is_accepting()


_NOT_PREFIX_FREE = [
    "a+",
    "a+b*",
    "ab|a",
    "a|ab|abc",
    "(?:ab)+",
    "a+b+",
    "b*a",
    "a(?:ba)*",
    "[ab]+c?",
]


@settings(max_examples=60, deadline=None)
@given(
    item=st.sampled_from(_NOT_PREFIX_FREE),
    lo=st.integers(0, 6),
    span=st.integers(0, 8),
    words=st.lists(st.text("abc", max_size=14), max_size=25),
)
def test_counted_repeats_of_items_that_go_on_are_exact(
    item: str, lo: int, span: int, words: list[str]
) -> None:
    """`(?:X){lo,hi}` where X may go on where the next X could start (a word count) is built
    by a subset construction over (count, X-state) shapes: the language of the Thompson NFA's
    automaton, and the same texts as Python's `re`."""
    from sdk.engine import _automata as au
    from sdk.engine import _regex as rx

    hi = max(1, lo + span)
    node = rx.parse(f"(?:{item}){{{lo},{hi}}}")
    assert isinstance(node, rx.Repeat)
    x = au.compile_node(node.item)
    assert isinstance(x, au.Dfa) and not au._countable(x)
    built = au._counted_sets(x, lo, hi)
    assert built is not None
    nfa = au.Nfa()
    s, e = nfa.build(node)
    want = au.minimize(au.determinize(nfa, s, e))
    for n in range(8):  # every text of up to 7 letters
        for letters in itertools.product(b"abc", repeat=n):
            text = bytes(letters)
            assert built.matches(text) == want.matches(text), text
    assert built.n_states <= 2 * want.n_states + 2  # no blow-up against the minimal one
    pattern = re.compile(f"(?:{item}){{{lo},{hi}}}")
    for w in words:
        assert built.matches(w.encode()) == bool(pattern.fullmatch(w)), w


def test_a_long_word_count_compiles_without_copying_the_item_per_count() -> None:
    """`(?:\\S+\\s+){0,199}\\S+`, a JSON Schema word limit, was a Thompson NFA of 200 copies
    and seconds of subset construction; built count by count it needs none (counted on the
    grammar's work budget, which the old path would have spent many times over)."""
    from sdk.engine._subsets import work_budget

    work_budget.left = 100_000
    try:
        dfa = compile_regex(r"(?:[a-z]+ +){0,499}[a-z]+")
        spent = 100_000 - work_budget.left
    finally:
        del work_budget.left
    assert spent < 10_000, spent
    words = "lorem ipsum " * 200
    assert dfa.matches(words.strip().encode())
    assert not dfa.matches(("w " * 500 + "w").encode())
    assert dfa.matches(("w " * 499 + "w").encode())


def test_a_counted_repeat_whose_subsets_keep_many_pairs_is_left_to_the_nfa_budgets() -> None:
    """`(?:[^\\x00-\\x7f]{2,30}|\\d{3,}){2,20}`: each subset holds many (count, state) pairs;
    the count-by-count construction gives up within its work cap (the NFA path then refuses
    it with a typed error, `test_hardening_schemas`), instead of running for minutes."""
    from sdk.engine import _automata as au
    from sdk.engine import _regex as rx

    node = rx.parse(r"(?:[^\x00-\x7f]{2,30}|\d{3,}){2,20}")
    assert isinstance(node, rx.Repeat) and node.max is not None
    x = au.compile_node(node.item)
    assert isinstance(x, au.Dfa)
    assert au._counted_sets(x, node.min, node.max) is None  # stopped by its work cap


def test_a_parse_deeper_than_the_stack_limit_is_a_typed_error() -> None:
    """Nesting past `Limits.stack_depth` open rules stops with `TooComplexError` at that
    depth (the depth is counted on each interned stack as it is pushed)."""
    from sdk.engine.compiler import default_compiler
    from sdk.errors import TooComplexError

    MAX_STACK_DEPTH = default_compiler().limits.stack_depth

    grammar = CompiledGrammar.from_lark('start: "[" start "]" | "x"')
    m = Matcher(grammar, _oracle.ByteIndex.of([]))
    m.advance_bytes(b"[" * (MAX_STACK_DEPTH - 1))
    inside = m.fork()
    inside.advance_bytes(b"x" + b"]" * (MAX_STACK_DEPTH - 1))
    assert inside.is_accepting()
    m.advance_bytes(b"[")
    with pytest.raises(TooComplexError, match=r"deeper than \d+ \(Limits.stack_depth\)"):
        m.advance_bytes(b"x")


def test_stacks_are_interned_once_per_distinct_stack() -> None:
    """A stack is one int per distinct (stack below, top position): parsing the same nested
    document again, with a fresh matcher, adds no stack, and the masks along the second parse
    are those of the brute force. The table grows with distinct nestings, not with tokens."""
    grammar = CompiledGrammar.from_lark('start: "[" start ("," start)* "]" | "x"')
    index = _oracle.ByteIndex.of([])
    doc = b"[[x,[x]],[[[x]]],x]"
    first = Matcher(grammar, index)
    first.advance_bytes(doc)
    assert first.is_accepting()
    rt = first._rt
    stacks = len(rt._top)
    assert stacks > 5  # nesting four deep went through several stacks
    again = Matcher(grammar, index)
    for b in doc:
        again.advance_bytes(bytes([b]))
        assert np.array_equal(again.mask(), _oracle.brute_force_mask(again, index))
    assert again.is_accepting()
    assert len(rt._top) == stacks


def test_a_call_that_ends_its_rule_pushes_no_return_address() -> None:
    """Optional members in declared order are a chain of rules, each ending in a call of the
    next: a key's stack must not count the members skipped before it. Its masks are then
    shared by every member it may follow (the stacks stay shallow whatever was skipped), and
    they are exactly the brute force's along documents that skip different runs."""
    import json

    names = [f"m{i}" for i in range(30)]
    schema = {"type": "object", "properties": {n: {"type": "integer"} for n in names}}
    grammar = CompiledGrammar.from_schema(schema)
    index = _oracle.ByteIndex.of(['"m2', '9"', "1,", ":5", '"m29":'])
    for picked in ([0, 29], [3, 4, 17], [28], []):
        m = Matcher(grammar, index)
        for b in json.dumps({names[i]: i for i in picked}, separators=(",", ":")).encode():
            m.advance_bytes(bytes([b]))
            assert np.array_equal(m.mask(), _oracle.brute_force_mask(m, index)), picked
        assert m.is_accepting()
    assert max(m._rt._depth) <= 4  # the object's rule, a member's rest rule, a value
    # skipping more members than the stack may be deep is an ordinary document
    from sdk.engine.compiler import default_compiler

    MAX_STACK_DEPTH = default_compiler().limits.stack_depth
    many = {"type": "object", "properties": {f"k{i}": {"type": "integer"} for i in range(1100)}}
    assert len(many["properties"]) > MAX_STACK_DEPTH
    m = Matcher(CompiledGrammar.from_schema(many), index)
    m.advance_bytes(b'{"k0":1,"k1099":2}')
    assert m.is_accepting()


def test_long_tuples_compile_and_their_masks_are_exact() -> None:
    """Tuple items nest, each optional one inside the one before: past 64 of them the rest
    of the tail is a rule of its own (called last: no deeper stack), and a run of required
    items is one flat sequence. 200 optional items compiled to one expression too deep for
    the compilers (refused from 165 on), 1,000 required ones likewise; now both compile and
    the masks along documents stopping before, at and after a rule's border are the brute
    force's."""
    import json

    from sdk.grammar._emit import TUPLE_CHUNK

    n = 200
    optional = {"type": "array", "prefixItems": [{"type": "integer"}] * n}
    grammar = CompiledGrammar.from_schema(optional)
    assert grammar.lark_text.count("_tail") >= n // TUPLE_CHUNK
    index = _oracle.ByteIndex.of(["1,", ",1", "]", "1]"])
    for size in (0, 1, n - 2 * TUPLE_CHUNK - 1, n - TUPLE_CHUNK, n - TUPLE_CHUNK + 1, n):
        m = Matcher(grammar, index)
        doc = json.dumps([1] * size, separators=(",", ":")).encode()
        for k, b in enumerate(doc):
            m.advance_bytes(bytes([b]))
            if k % 7 == 0 or k > len(doc) - 4:  # the brute force is slow: every 7th byte
                assert np.array_equal(m.mask(), _oracle.brute_force_mask(m, index)), size
        assert m.is_accepting(), size
    required = {**optional, "prefixItems": [{"type": "integer"}] * 1000, "minItems": 1000}
    m = Matcher(CompiledGrammar.from_schema(required), index)
    m.advance_bytes(json.dumps([1] * 999, separators=(",", ":")).encode()[:-1])
    assert not m.is_accepting()
    m.advance_bytes(b",1]")
    assert m.is_accepting()


def test_states_are_interned_and_their_memos_hold_no_tracked_objects() -> None:
    """Equal sets of configurations are one state whatever bytes led there, a second parse
    adds no state, and the step memos (ints to ints) are nothing the garbage collector walks:
    tuple keys holding frozensets were most of what full collections walked."""
    import gc

    grammar = CompiledGrammar.from_lark('start: ("ab" | "ba" | "c") "[" start? "]"')
    index = _oracle.ByteIndex.of(["ab", "ba", "c["])
    tid = index.token_bytes.index
    ends = []
    for path in (b"ab[", b"ba[", b"c["):
        m = Matcher(grammar, index)
        m.advance_bytes(path)
        ends.append(m._history[-1])
        assert np.array_equal(m.mask(), _oracle.brute_force_mask(m, index))
    assert ends[0] == ends[1] == ends[2]
    rt = m._rt
    for data in (b"c[", b"]", b"]"):
        m.advance(tid(data))
    assert m.is_accepting()
    states = len(rt._sets)
    again = Matcher(grammar, index)
    for data in (b"ab", b"[", b"c[", b"]", b"]"):
        again.advance(tid(data))
    assert again.is_accepting() and len(rt._sets) == states
    gc.collect()
    assert not gc.is_tracked(rt._step) and not gc.is_tracked(rt._token_step)
    assert rt._step and rt._token_step


def test_a_big_dfa_keeps_one_column_per_byte_class() -> None:
    """A table of thousands of states that tells few bytes apart has a column per class, not
    per byte; its moves by byte are those of the regex, and the masks (trie walks over the
    class table) equal the brute force (runtime steps over it) along a long parse."""
    from sdk.engine._dfa import COMPACT_MIN_STATES, IDENTITY

    dfa = compile_regex("[a-z]{0,1500}x")
    assert isinstance(dfa, Dfa) and dfa.n_states >= COMPACT_MIN_STATES
    assert dfa.classes is not IDENTITY and dfa.n_classes <= 4
    assert dfa.trans.shape == (dfa.n_states, 256)
    assert dfa.matches(b"ab" * 700 + b"x") and not dfa.matches(b"a" * 1501 + b"x")
    assert not dfa.matches(b"aB" + b"x")
    grammar = CompiledGrammar.from_lark("start: /[a-z]{0,1500}x/")
    index = _oracle.ByteIndex.of(["ab", "abcd", "zx", "xa", "Ab"])
    m = Matcher(grammar, index)
    for k, data in enumerate([b"abcd"] * 370 + [b"ab", b"zx"]):
        if k % 37 == 0 or k > 365:
            assert np.array_equal(m.mask(), _oracle.brute_force_mask(m, index)), k
        m.advance(index.token_bytes.index(data))
    assert m.is_accepting()


def test_cached_terminal_tables_keep_one_column_per_byte_class() -> None:
    """A small terminal's table, as cached for reuse (a key, a number), has a column per byte
    class: the table of `"description"` has 15 states and 12 columns, not 256. Its moves by
    byte are those of the table built with one column per byte, and the masks of a grammar
    built on such tables equal the brute force."""
    from sdk.engine import _automata as au
    from sdk.engine import _regex as rx

    key = compile_regex(r'"description"')
    dense = au.compile_node(rx.parse(r'"description"'))
    assert isinstance(key, Dfa) and isinstance(dense, Dfa) and dense.dense
    assert key.n_classes == len(set(b'"description"')) + 1 and not key.dense
    assert np.array_equal(key.trans, dense.trans) and np.array_equal(key.accepting, dense.accepting)
    grammar = CompiledGrammar.from_schema(
        {"type": "object", "properties": {"description": {"type": "integer"}}}
    )
    tables = [t for t in grammar.terminals if isinstance(t, Dfa)]
    assert tables and all(t.n_classes < 64 for t in tables)
    index = _oracle.ByteIndex.of(['{"', "description", '":', "1", "2", "}", '"', "d", " "])
    m = Matcher(grammar, index)
    for data in ['{"', "description", '":', "1", "2", "}"]:
        assert np.array_equal(m.mask(), _oracle.brute_force_mask(m, index)), data
        m.advance(index.token_bytes.index(data.encode()))
    assert m.is_accepting()


def test_a_walk_keeping_few_tokens_holds_rows_and_equal_bitmasks_are_one_array() -> None:
    """A whole-vocabulary walk keeping fewer tokens than its bitmask has bytes holds their
    rows (most walks keep a handful, and a 49k-token bitmask is 6 KB), and walks of
    different automata that keep the same many tokens share one bitmask."""
    from sdk.engine import _vocab

    vocab = _vocab.vocab_of(INDEX)
    few = _vocab.classify(vocab, compile_regex(r'"description"'), 1)
    assert few.packed is None
    assert [INDEX.token_bytes[t] for t in vocab.ids[few.accepted].tolist()] == [b'"']
    assert np.flatnonzero(np.unpackbits(_walk_bits(vocab, few), bitorder="little")).tolist() == [
        INDEX.token_bytes.index(b'"')
    ]
    one, other = compile_regex(r'[^"]*"[a-z]{70}'), compile_regex(r'[^"]*"[a-z]{0,70}')
    w1, w2 = _vocab.classify(vocab, one, 1), _vocab.classify(vocab, other, 1)
    assert w1 is not w2 and w1.packed is not None and w1.packed is w2.packed
    assert w1.ranges is not None and w2.ranges is not None
    assert not np.array_equal(w1.ranges, w2.ranges)  # the walks differ in their events
