"""Leaf regexes (sdk.grammar._lexemes) checked against Python oracles.

Strings: `re.fullmatch(regex, json_text)` must hold iff the decoded value satisfies the
constraint, for every encoding the dialect allows (json.dumps with ensure_ascii=False, `\\/`,
either hex case in `\\u00XX`) and for none it forbids. Numbers: against int/Decimal arithmetic.
"""

from __future__ import annotations

import ipaddress
import json
import random
import re
import uuid
from datetime import date
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from sdk.errors import SchemaError, UnsupportedSchemaError
from sdk.grammar._ecma_regex import pattern_lengths
from sdk.grammar._lexemes import (
    format_known,
    integer_multiple_of,
    integer_regex,
    number_multiple_regex,
    number_regex,
    string_excluding_regex,
    string_literal_regex,
    string_regex,
)

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# --------------------------------------------------------------------------- helpers

_SHORT = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def encode(s: str, rnd: random.Random | None = None) -> str:
    """A JSON encoding of `s` allowed by the dialect; random variants when `rnd` is given."""
    out = ['"']
    for ch in s:
        if ch in _SHORT:
            out.append(_SHORT[ch])
        elif ord(ch) < 0x20:
            h = f"{ord(ch):04x}"
            out.append("\\u" + (h.upper() if rnd and rnd.random() < 0.5 else h))
        elif ch == "/" and rnd and rnd.random() < 0.5:
            out.append("\\/")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def fm(regex: str, text: str) -> bool:
    return re.fullmatch(regex, text) is not None


def accepts(regex: str, value: str, seed: int = 0) -> bool:
    """Whether all tried encodings of `value` match; asserts they all agree."""
    results = {fm(regex, json.dumps(value, ensure_ascii=False))}
    rnd = random.Random(seed)
    for _ in range(2):
        results.add(fm(regex, encode(value, rnd)))
    assert len(results) == 1, (regex, value)
    return results.pop()


def in_dialect(regex: str) -> None:
    """A valid Python regex, and (when the engine is importable) inside the engine's dialect."""
    re.compile(regex)
    try:
        from sdk.engine._regex import parse
    except ImportError:  # pragma: no cover - the engine is owned by a colleague
        return
    parse(regex)


ALPHABET = st.sampled_from(
    list('aAbz09_-. /\\"\n\r\t\x00\x01\x1f\x7f~') + ["é", "\u2028", "\u00a0", "\U0001f600", "中"]
)
TEXT = st.one_of(st.text(ALPHABET, max_size=12), st.text(max_size=12))


# --------------------------------------------------------------------------- patterns

# (ECMA pattern, equivalent Python pattern used as oracle with re.search)
_NOT_LT = "[^\\n\\r\\u2028\\u2029]"
_ECMA_SPACE = (
    "[\\t\\n\\x0b\\x0c\\r \\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff]"
)
PATTERNS = [
    ("abc", "abc"),
    ("^abc$", "^abc\\Z"),
    ("^a", "^a"),
    ("b$", "b\\Z"),
    ("^[a-z]+$", "^[a-z]+\\Z"),
    ("^\\d{2,3}$", "^[0-9]{2,3}\\Z"),
    ("\\w+@\\w+", "[A-Za-z0-9_]+@[A-Za-z0-9_]+"),
    ("^a|b$", "^a|b\\Z"),
    ("^(a|b)*$", "^(a|b)*\\Z"),
    ("^(?:ab)+?c?$", "^(?:ab)+?c?\\Z"),
    ("x.y", f"x{_NOT_LT}y"),
    ("^.$", f"^{_NOT_LT}\\Z"),
    ("\\s", _ECMA_SPACE),
    ("^\\S*$", f"^[^{_ECMA_SPACE[1:-1]}]*\\Z"),
    ("[^a-z]", "[^a-z]"),
    ('["\\\\/]', '["\\\\/]'),
    ("\\u00e9|\\x41", "\u00e9|A"),
    ("\\ud83d\\ude00", "\U0001f600"),
    ("\\u{1F600}", "\U0001f600"),
    ("[\\u0000-\\u001f]", "[\\x00-\\x1f]"),
    ("\\cJ", "\\n"),
    ("[^]", "[\\s\\S]"),
    ("^[^]{2}$", "^[\\s\\S]{2}\\Z"),
    ("(?<year>\\d{4})-", "(?P<year>[0-9]{4})-"),
    ("^(?=.*\\d)(?=.*[a-z]).{4,}$", f"^(?=.*[0-9])(?=.*[a-z]){_NOT_LT}{{4,}}\\Z"),
    ("^(?!.*\\/\\/)", f"^(?!{_NOT_LT}*//)"),
    ("a(?=b)", "a(?=b)"),
    ("a(?!b)", "a(?!b)"),
    ("^(?=a$|b)", "^(?=a\\Z|b)"),
    ("(^a|b)c", "(^a|b)c"),
    ("^(a$|b)", "^(a\\Z|b)"),
    ("^$", "^\\Z"),
    ("$", "\\Z"),
    ("a{2}b{1,}c{0,2}", "a{2}b{1,}c{0,2}"),
    ("a{,2}", "a\\{,2\\}"),
    ("^[\\d-z]$", "^[0-9\\-z]\\Z"),
    ("^[\\b]$", "^\\x08\\Z"),
    ("\\/\\.\\-", "/\\.\\-"),
    ("^(?:)$", "^\\Z"),
    ("]", "\\]"),
    ("\\0", "\\x00"),
]


@pytest.mark.parametrize(("ecma", "py"), PATTERNS)
def test_pattern_regex_is_dialect(ecma: str, py: str) -> None:
    in_dialect(string_regex(pattern=ecma))


@pytest.mark.parametrize(("ecma", "py"), PATTERNS)
@settings(max_examples=40, deadline=None)
@given(s=TEXT)
@example(s="")
@example(s="abc")
@example(s="a")
@example(s="ab1c")
@example(s="b\n")
@example(s="\U0001f600")
@example(s="\u2028//")  # ECMA's `.` stops at U+2028; Python's does not
def test_pattern_matches_oracle(ecma: str, py: str, s: str) -> None:
    regex = string_regex(pattern=ecma)
    assert accepts(regex, s) == bool(re.search(py, s)), (ecma, s)


@SETTINGS
@given(s=TEXT, lo=st.integers(0, 6), span=st.one_of(st.none(), st.integers(0, 6)))
def test_length_counts_code_points(s: str, lo: int, span: int | None) -> None:
    hi = None if span is None else lo + span
    regex = string_regex(min_length=lo, max_length=hi)
    assert accepts(regex, s) == (lo <= len(s) and (hi is None or len(s) <= hi))


@SETTINGS
@given(s=TEXT, lo=st.integers(0, 4), hi=st.integers(0, 8))
def test_length_and_pattern_intersect(s: str, lo: int, hi: int) -> None:
    regex = string_regex(pattern="^[a-z]|\\d", min_length=lo, max_length=hi)
    in_dialect(regex)
    expected = lo <= len(s) <= hi and bool(re.search("^[a-z]|[0-9]", s))
    assert accepts(regex, s) == expected


@pytest.mark.parametrize(("ecma", "py"), PATTERNS)
@settings(max_examples=30, deadline=None)
@given(s=TEXT, lo=st.integers(0, 5), span=st.one_of(st.none(), st.integers(0, 5)))
@example(s="abc", lo=3, span=0)
@example(s="ab", lo=3, span=None)
@example(s="", lo=1, span=None)
def test_pattern_and_lengths_intersect_exactly(
    ecma: str, py: str, s: str, lo: int, span: int | None
) -> None:
    """Lengths the pattern implies are dropped (`pattern_lengths`), the others intersected:
    either way the language is exactly both constraints."""
    hi = None if span is None else lo + span
    regex = string_regex(pattern=ecma, min_length=lo, max_length=hi)
    in_dialect(regex)
    expected = lo <= len(s) and (hi is None or len(s) <= hi) and bool(re.search(py, s))
    assert accepts(regex, s) == expected, (ecma, s, lo, hi)


@pytest.mark.parametrize(("ecma", "py"), PATTERNS)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_pattern_lengths_bound_every_match(ecma: str, py: str, data: st.DataObject) -> None:
    """Every string the pattern matches is within `pattern_lengths`: the strings are drawn
    to match (`from_regex` of the Python twin), so every case reaches the check."""
    lo, hi = pattern_lengths(ecma)
    s = data.draw(st.from_regex(py))
    assert re.search(py, s)
    assert lo <= len(s) and (hi is None or len(s) <= hi), (ecma, s, lo, hi)


def test_implied_lengths_cost_no_lookahead() -> None:
    """`minLength: 1` beside a pattern that needs a character, or a `maxLength` an anchored
    pattern cannot reach, adds no intersection (a product automaton) to the grammar."""
    plain = string_regex(pattern="^[a-z]{2,10}$")
    assert string_regex(pattern="^[a-z]{2,10}$", min_length=2, max_length=10) == plain
    assert string_regex(pattern="^[a-z]{2,10}$", min_length=1, max_length=64) == plain
    assert string_regex(pattern="^(?:\\S+\\s+){0,9}\\S+$", min_length=1).count("(?=") == 0
    assert string_regex(pattern="^[a-z]{2,10}$", min_length=3) != plain
    assert string_regex(pattern="^[a-z]{2,10}$", max_length=9) != plain
    assert string_regex(pattern="[a-z]{2,10}", max_length=64) != string_regex(pattern="[a-z]{2,10}")
    assert pattern_lengths("^(a|bc)?$") == (0, 2)
    assert pattern_lengths("^a|b$") == (1, None)  # a branch without `$` may go on


def test_parsed_patterns_share_their_character_nodes() -> None:
    """A character set is one node wherever it is spelled: the caches keep parsed trees, and
    a node per character made every kept pattern hundreds of objects for the collector."""
    from sdk._regex_ast import Chars, Seq
    from sdk.engine._regex import parse
    from sdk.grammar._ecma_regex import parse as parse_ecma

    def leaves(node: object) -> list[Chars]:
        if isinstance(node, Chars):
            return [node]
        items = node.items if isinstance(node, Seq) else ()
        return [leaf for item in items for leaf in leaves(item)]

    ours = leaves(parse("ab[0-9]ab[0-9]"))
    assert [leaf.ranges for leaf in ours] == [((97, 97),), ((98, 98),), ((48, 57),)] * 2
    assert all(a is b for a, b in zip(ours[:3], ours[3:], strict=True))
    ecma = leaves(parse_ecma("ab[0-9]"))
    assert all(a is b for a, b in zip(ours[:3], ecma, strict=True))


def test_unconstrained_string_accepts_any_u_escape() -> None:
    regex = string_regex()
    in_dialect(regex)
    for text in ['""', '"a\\u0041\\ud83d\\ude00"', '"\\/\\"é"', '"\\u00e9"']:
        assert fm(regex, text)
    for text in ['"\x01"', '"\\x"', '"\\u12"', '"a', '"\\"']:
        assert not fm(regex, text)


def test_contradictory_lengths_match_nothing() -> None:
    regex = string_regex(min_length=3, max_length=2)
    assert not any(fm(regex, json.dumps(s)) for s in ["", "ab", "abc"])


def test_large_length_bounds_stay_small() -> None:
    regex = string_regex(min_length=10, max_length=100_000)
    assert len(regex) < 200
    assert fm(regex, json.dumps("x" * 1000))
    assert not fm(regex, json.dumps("x" * 9))


def test_gratuitous_escapes_and_raw_controls_rejected() -> None:
    regex = string_regex(max_length=5)
    assert fm(regex, '"a\\/\\u001F"')
    assert not fm(regex, '"\\u0041"')  # printable char as \u escape
    assert not fm(regex, '"\\u000a"')  # \n has a short escape
    assert not fm(regex, '"\x01"')  # raw control character
    assert not fm(regex, '"a"b"')
    assert not fm(regex, '"a\\"')


INVALID = [
    "(",
    "a)",
    "[a",
    "*a",
    "a**",
    "[z-a]",
    "a{3,1}",
    "(?<1a>x)",
    "\\",
    "a|*",
    "^*",
    "\\u{110000}",
]
UNSUPPORTED = [
    "(a)\\1",
    "\\k<x>(?<x>a)",
    "(?<=a)b",
    "(?<!a)b",
    "\\bword",
    "\\Bx",
    "\\p{L}",
    "(?i:a)",
    "(?=a)*",
    "a(?:b(?=c))+",
    "a^b",
    "(a$)+",
    "\\q",
    "\\01",
]


@pytest.mark.parametrize("pattern", INVALID)
def test_invalid_pattern_raises_schema_error(pattern: str) -> None:
    with pytest.raises(SchemaError) as info:
        string_regex(pattern=pattern, pointer="/properties/x/pattern")
    assert not isinstance(info.value, UnsupportedSchemaError)
    assert info.value.pointer == "/properties/x/pattern"


@pytest.mark.parametrize("pattern", UNSUPPORTED)
def test_unsupported_pattern_raises_unsupported(pattern: str) -> None:
    with pytest.raises(UnsupportedSchemaError) as info:
        string_regex(pattern=pattern, pointer="/p")
    assert info.value.keyword == "pattern"
    assert info.value.pointer == "/p"


# --------------------------------------------------------------------------- literals / exclusion


@SETTINGS
@given(value=TEXT, other=TEXT)
def test_literal(value: str, other: str) -> None:
    regex = string_literal_regex(value)
    in_dialect(regex)
    assert accepts(regex, value)
    assert accepts(regex, other) == (other == value)


@SETTINGS
@given(excluded=st.lists(TEXT, max_size=4), s=TEXT)
def test_excluding(excluded: list[str], s: str) -> None:
    regex = string_excluding_regex(excluded)
    in_dialect(regex)
    assert accepts(regex, s) == (s not in excluded)
    for e in excluded:
        assert not accepts(regex, e)


def test_lone_surrogates() -> None:
    with pytest.raises(UnsupportedSchemaError):
        string_literal_regex("a\ud800")
    assert fm(string_excluding_regex(["\ud800", "x"]), '"y"')


@SETTINGS
@given(s=TEXT)
@example(s="ab")
@example(s="a")
@example(s="x_1")
def test_excluding_with_pattern(s: str) -> None:
    regex = string_excluding_regex(["ab", "a/b"], pattern="^[a-z_]")
    assert accepts(regex, s) == (s not in ("ab", "a/b") and bool(re.match("[a-z_]", s)))


# --------------------------------------------------------------------------- formats

VALID = {
    "date": ["2024-02-29", "2000-02-29", "1999-12-31", "0001-01-01", "2023-04-30"],
    "time": ["23:59:60Z", "00:00:00z", "12:34:56.789+05:30", "01:02:03-23:59"],
    "date-time": ["2024-01-01T00:00:00Z", "1985-04-12t23:20:50.52z", "1996-12-19T16:39:57-08:00"],
    "duration": [
        "P1Y",
        "P1Y2M3DT4H5M6S",
        "PT1H",
        "PT1M",
        "PT1S",
        "P3W",
        "P1M2D",
        "PT1H30M",
        "P1DT2S",
    ],
    "email": [
        "a@b",
        "first.last@example.com",
        "x+y@sub.example.org",
        '"quoted str"@x.com',
        "u@[127.0.0.1]",
        "u@[IPv6:::1]",
        "o'brien@a-b.c",
    ],
    "hostname": ["example.com", "a", "xn--bcher-kva.example", "1.2.3", "a-b.c", "a" * 63],
    "ipv4": ["0.0.0.0", "255.255.255.255", "192.168.1.10"],
    "ipv6": [
        "::",
        "::1",
        "1::",
        "fe80::1",
        "2001:db8::8a2e:370:7334",
        "1:2:3:4:5:6:7:8",
        "::ffff:192.0.2.128",
        "1:2:3:4:5:6:1.2.3.4",
        "1::2:3",
        "ABCD:ef01::",
    ],
    "uuid": ["123e4567-e89b-12d3-a456-426614174000", "ABCDEF01-2345-6789-abcd-ef0123456789"],
    "uri": [
        "http://example.com",
        "https://u:p@h.com:80/a/b?q=1#f",
        "urn:isbn:123",
        "mailto:a@b",
        "file:///etc/passwd",
        "http://[::1]:8080/",
        "x:",
        "a+b-c.d:%20",
        "http://[v1.x]/",
    ],
    "uri-reference": ["/a/b", "a/b", "?q", "#frag", "", "//host/p", "http://x/y", "../x"],
    "iri": ["http://例え.jp/パス", "http://x/?\ue000"],
    "iri-reference": ["パス/x", "#é"],
    "json-pointer": ["", "/", "/a~0b/c~1d", "/0/ /\n"],
    "relative-json-pointer": ["0", "1#", "12/a/b", "0/"],
}
INVALID_FORMAT = {
    "date": [
        "2023-02-29",
        "1900-02-29",
        "2024-13-01",
        "2024-04-31",
        "2024-1-01",
        "24-01-01",
        "2024-00-10",
        "2024-01-00",
        "2024-01-01T",
    ],
    "time": [
        "24:00:00Z",
        "23:60:00Z",
        "23:59:61Z",
        "12:00:00",
        "12:00:00+24:00",
        "12:00:00.Z",
        "1:00:00Z",
    ],
    "date-time": ["2024-01-01 00:00:00Z", "2024-01-01T00:00:00", "2024-01-01"],
    "duration": ["P", "PT", "P1H", "PT1D", "P1W2D", "P1D2M", "1Y", "P1.5Y", "p1y", "P1YT"],
    "email": ["", "a", "@b", "a@", "a..b@c", ".a@b", "a@b..c", "a@-b", "a b@c", "a@b_c"],
    "hostname": ["", "-a", "a-", "a..b", "a.", "a" * 64, "a_b", ".".join(["a" * 50] * 5) + "x"],
    "ipv4": ["256.0.0.0", "01.2.3.4", "1.2.3", "1.2.3.4.5", "1.2.3.-1", " 1.2.3.4"],
    "ipv6": [
        ":::",
        "1:2:3:4:5:6:7:8:9",
        "1::2::3",
        "12345::",
        "::1%eth0",
        "1:2:3:4:5:6:7:1.2.3.4",
        "g::",
        ":1::",
    ],
    "uuid": [
        "123e4567e89b12d3a456426614174000",
        "123e4567-e89b-12d3-a456-42661417400",
        "{123e4567-e89b-12d3-a456-426614174000}",
    ],
    "uri": ["/a/b", "1http://x", "http://x y", "http://[::1", "http://x/%zz", "", "a b:c", "é:x"],
    "uri-reference": ["a b", "%", "http://x/\\", "1:x/é"],
    "iri": ["パス", "http://x y"],
    "iri-reference": ["a b", "#\ue000"],
    "json-pointer": ["a", "/~", "/~2", "#/a"],
    "relative-json-pointer": ["", "01", "-1", "/a", "1a", "0##"],
}


@pytest.mark.parametrize("fmt", sorted(VALID))
def test_formats(fmt: str) -> None:
    assert format_known(fmt)
    regex = string_regex(fmt=fmt)
    in_dialect(regex)
    for v in VALID[fmt]:
        assert accepts(regex, v), (fmt, v)
    for v in INVALID_FORMAT[fmt]:
        assert not accepts(regex, v), (fmt, v)


def test_unknown_formats() -> None:
    for fmt in ["regex", "idn-hostname", "uri-template", "color", "made-up"]:
        assert not format_known(fmt)
        with pytest.raises(UnsupportedSchemaError) as info:
            string_regex(fmt=fmt, pointer="/f")
        assert info.value.keyword == "format"


def test_format_with_length_and_pattern() -> None:
    regex = string_regex(fmt="ipv4", pattern="^10\\.", max_length=8)
    assert accepts(regex, "10.0.0.1")
    assert not accepts(regex, "10.0.0.10")  # too long
    assert not accepts(regex, "11.0.0.1")


def _python_check(fmt: str, v: str) -> bool:
    try:
        if fmt == "ipv4":
            ipaddress.IPv4Address(v)
        elif fmt == "ipv6":
            return not ipaddress.IPv6Address(v).scope_id
        elif fmt == "uuid":
            uuid.UUID(v)
            return all(v[i] == "-" for i in (8, 13, 18, 23)) and len(v) == 36
        elif fmt == "date":
            date.fromisoformat(v)
            return bool(re.fullmatch(r"\d{4}-\d{2}-\d{2}", v, re.ASCII))
        return True
    except ValueError:
        return False


_HEXISH = st.text(st.sampled_from(list("0123456789abcdefABCDEF:.-")), max_size=40)


@pytest.mark.parametrize("fmt", ["ipv4", "ipv6", "uuid", "date"])
@SETTINGS
@given(data=st.data())
def test_formats_agree_with_python(fmt: str, data: st.DataObject) -> None:
    gen = {
        "ipv4": st.builds(
            lambda a: ".".join(map(str, a)), st.lists(st.integers(0, 300), min_size=3, max_size=5)
        ),
        "ipv6": st.one_of(
            st.ip_addresses(v=6).map(str), _HEXISH, st.ip_addresses(v=6).map(lambda a: a.exploded)
        ),
        "uuid": st.one_of(st.uuids().map(str), _HEXISH),
        "date": st.one_of(st.dates().map(str), st.from_regex(r"\A[0-9]{4}-[0-9]{2}-[0-9]{2}\Z")),
    }[fmt]
    v = data.draw(gen)
    assume(not (fmt == "date" and v.startswith("0000")))  # RFC 3339 allows year 0, Python not
    assert accepts(string_regex(fmt=fmt), v) == _python_check(fmt, v), v


def test_hostname_length_limit() -> None:
    regex = string_regex(fmt="hostname")
    name = ".".join(["a" * 63] * 3) + "." + "b" * 61  # 253 chars
    assert len(name) == 253 and accepts(regex, name)
    assert not accepts(regex, name + "b")


# --------------------------------------------------------------------------- integers

BOUND = st.one_of(st.none(), st.integers(-1200, 1200), st.integers(-(10**30), 10**30))


@SETTINGS
@given(lo=BOUND, hi=BOUND, n=st.one_of(st.integers(-1300, 1300), st.integers(-(10**31), 10**31)))
def test_integer_range(lo: int | None, hi: int | None, n: int) -> None:
    regex = integer_regex(minimum=lo, maximum=hi)
    in_dialect(regex)
    expected = (lo is None or n >= lo) and (hi is None or n <= hi)
    assert fm(regex, str(n)) == expected, (lo, hi, n)
    for bound in (lo, hi):
        if bound is not None:
            for m in (bound - 1, bound, bound + 1):
                assert fm(regex, str(m)) == ((lo is None or m >= lo) and (hi is None or m <= hi))


def test_integer_noncanonical_rejected() -> None:
    for regex in (integer_regex(), integer_regex(minimum=-5, maximum=5)):
        assert fm(regex, "0") and fm(regex, "-1")
        for text in ("-0", "01", "+1", "1.0", "1e0", "", "-"):
            assert not fm(regex, text)


@SETTINGS
@given(
    m=st.sampled_from([1, 2, 3, 4, 5, 7, 8, 10, 16, 20, 25, 100, 125, 1000]),
    lo=st.one_of(st.none(), st.integers(-3000, 3000)),
    span=st.one_of(st.none(), st.integers(0, 6000)),
    n=st.integers(-10000, 10000),
)
def test_integer_multiple_of(m: int, lo: int | None, span: int | None, n: int) -> None:
    hi = None if lo is None or span is None else lo + span
    try:
        regex = integer_regex(minimum=lo, maximum=hi, multiple_of=m)
    except UnsupportedSchemaError:
        assert m in (3, 7) and (lo is None or hi is None)
        return
    in_dialect(regex)
    expected = n % m == 0 and (lo is None or n >= lo) and (hi is None or n <= hi)
    assert fm(regex, str(n)) == expected, (m, lo, hi, n)


_STEPS = [0.01, 0.05, 0.25, 0.5, 1.0, 2.5, 0.125, 10, 20, 0.2, 12.5, 0.001, 1, 0.04, 50, 0.3, 7]
_DECIMAL_TEXT = st.builds(
    lambda sign, whole, frac: sign + whole + frac,
    st.sampled_from(["", "-"]),
    st.one_of(st.just("0"), st.integers(1, 10**6).map(str)),
    st.one_of(st.just(""), st.text(alphabet="0123456789", min_size=1, max_size=6).map(".".__add__)),
)


@SETTINGS
@example(step=0.01, bounds=(None, None), exclusive=False, text="599.995")
@example(step=0.01, bounds=(None, None), exclusive=False, text="599.990")
@example(step=1.0, bounds=(0, None), exclusive=False, text="-0.00")
@given(
    step=st.sampled_from(_STEPS),
    bounds=st.sampled_from(
        [
            (None, None),
            (0, None),
            (None, 0),
            (0, 0),
            (-5, 5.5),
            (0.01, 9.99),
            (-100, -3),
            (2.5, 2.5),
        ]
    ),
    exclusive=st.booleans(),
    text=_DECIMAL_TEXT,
)
def test_number_multiple_of_is_exact_on_plain_decimals(
    step: float, bounds: tuple[float | None, float | None], exclusive: bool, text: str
) -> None:
    """A decimal step (a multiple of 0.01 is what a price is): every plain spelling of every
    multiple within the bounds, and nothing else; refused only where no regex is exact."""
    lo, hi = bounds
    kwargs: dict[str, Any] = {"minimum": lo, "maximum": hi}
    if exclusive and lo is not None and hi is not None and lo != hi:
        kwargs.update(exclusive_minimum=True, exclusive_maximum=True)
    try:
        regex = number_multiple_regex(step, **kwargs)
    except UnsupportedSchemaError as exc:
        assert exc.keyword == "multipleOf"
        many = lo is not None and hi is not None and (hi - lo) / step > 4000
        assert step in (0.3, 7) or many, (step, bounds)
        return
    in_dialect(regex)
    value, unit = Decimal(text), Decimal(repr(step))
    dec = lambda b: Decimal(repr(b))  # noqa: E731
    expected = value % unit == 0
    if lo is not None:
        expected &= value > dec(lo) if kwargs.get("exclusive_minimum") else value >= dec(lo)
    if hi is not None:
        expected &= value < dec(hi) if kwargs.get("exclusive_maximum") else value <= dec(hi)
    assert fm(regex, text) == expected, (step, bounds, text)


def test_number_multiple_of_refusals_name_the_keyword() -> None:
    with pytest.raises(UnsupportedSchemaError, match="multipleOf 0.3"):
        number_multiple_regex(0.3)
    with pytest.raises(UnsupportedSchemaError, match="one-sided"):
        number_multiple_regex(0.01, minimum=1)
    with pytest.raises(UnsupportedSchemaError, match="4096"):
        number_multiple_regex(0.001, minimum=0, maximum=100)


@pytest.mark.parametrize(
    ("step", "divisor"), [(0.5, 1), (1.0, 1), (2.5, 5), (0.04, 1), (0.3, 3), (12, 12), (1.5, 3)]
)
def test_integer_multiple_of_a_decimal_step(step: float, divisor: int) -> None:
    """n is a multiple of c·10^-k iff it is one of c / gcd(c, 10^k)."""
    assert integer_multiple_of(step) == divisor
    for n in range(-40, 41):
        assert (Decimal(n) % Decimal(repr(step)) == 0) == (n % divisor == 0)


def test_integer_multiple_of_unsupported() -> None:
    with pytest.raises(UnsupportedSchemaError) as info:
        integer_regex(multiple_of=3)
    assert info.value.keyword == "multipleOf"
    assert fm(integer_regex(multiple_of=3, minimum=0, maximum=30), "27")


def test_integer_float_and_empty_bounds() -> None:
    regex = integer_regex(minimum=1.5, maximum=3.9)
    assert [n for n in range(-5, 10) if fm(regex, str(n))] == [2, 3]
    never = integer_regex(minimum=5, maximum=4)
    assert not any(fm(never, str(n)) for n in range(-10, 10))


# --------------------------------------------------------------------------- numbers

DEC_BOUND = st.one_of(
    st.none(),
    st.decimals(min_value=-100, max_value=100, places=2).map(lambda d: d.normalize()),
    st.integers(-100, 100),
)


def _number_text(draw_int: int, frac: str, neg: bool) -> str:
    text = str(draw_int) + ("." + frac if frac else "")
    return ("-" if neg else "") + text


@SETTINGS
@given(
    lo=DEC_BOUND,
    hi=DEC_BOUND,
    xlo=st.booleans(),
    xhi=st.booleans(),
    i=st.integers(0, 120),
    frac=st.text(st.sampled_from("0123459"), max_size=4),
    neg=st.booleans(),
)
def test_number_range(
    lo: Decimal | int | None,
    hi: Decimal | int | None,
    xlo: bool,
    xhi: bool,
    i: int,
    frac: str,
    neg: bool,
) -> None:
    lo_v = None if lo is None else (float(lo) if isinstance(lo, Decimal) else lo)
    hi_v = None if hi is None else (float(hi) if isinstance(hi, Decimal) else hi)
    regex = number_regex(minimum=lo_v, maximum=hi_v, exclusive_minimum=xlo, exclusive_maximum=xhi)
    in_dialect(regex)
    texts = [_number_text(i, frac, neg)]
    for b in (lo, hi):  # values at and around the bounds
        if b is not None:
            d = Decimal(b)
            texts += [_fmt(d), _fmt(d + Decimal("0.001")), _fmt(d - Decimal("0.001"))]
            if "." in _fmt(d):
                texts.append(_fmt(d) + "0")
    for text in texts:
        if text.startswith("-") and Decimal(text) == 0:
            continue  # "-0..." is non-canonical; checked separately
        v = Decimal(text)
        ok = (lo is None or (v > Decimal(lo) if xlo else v >= Decimal(lo))) and (
            hi is None or (v < Decimal(hi) if xhi else v <= Decimal(hi))
        )
        assert fm(regex, text) == ok, (lo, hi, xlo, xhi, text, regex)


def _fmt(d: Decimal) -> str:
    text = format(d, "f")
    return text


def test_number_exclusive_zero() -> None:
    regex = number_regex(minimum=0, exclusive_minimum=True)
    assert fm(regex, "0.0001") and fm(regex, "12.5") and fm(regex, "1") and fm(regex, "1e2")
    for text in ("0", "0.000", "0e5", "-0.5", "-0", "-1e-6", "01", "1."):
        assert not fm(regex, text)


@SETTINGS
@given(
    side=st.sampled_from(["minimum", "maximum", "both"]),
    exclusive=st.booleans(),
    neg=st.booleans(),
    i=st.sampled_from(["0", "1", "25"]),
    frac=st.sampled_from(["", ".0", ".000", ".5", ".0010"]),
    exp=st.sampled_from(["", "e0", "e-6", "E+2", "e10", "E-0"]),
)
def test_number_bounds_at_zero_accept_every_spelling(
    side: str, exclusive: bool, neg: bool, i: str, frac: str, exp: str
) -> None:
    """`minimum: 0` and the like: exponents and `-0` are exact too (the sign decides)."""
    lo = 0 if side in ("minimum", "both") else None
    hi = 0 if side in ("maximum", "both") else None
    xlo, xhi = exclusive and lo is not None, exclusive and hi is not None and side != "both"
    regex = number_regex(minimum=lo, maximum=hi, exclusive_minimum=xlo, exclusive_maximum=xhi)
    in_dialect(regex)
    text = ("-" if neg else "") + i + frac + exp
    v = Decimal(text)
    ok = (lo is None or (v > 0 if xlo else v >= 0)) and (hi is None or (v < 0 if xhi else v <= 0))
    assert fm(regex, text) == ok, (side, exclusive, text, regex)


@SETTINGS
@example(bounds=(1, None), exclusive=False, text="1e+16")
@example(bounds=(None, 1), exclusive=False, text="1.5e-07")
@example(bounds=(0.001, 0.002), exclusive=True, text="2E-3")
@given(
    bounds=st.sampled_from(
        [(1, None), (None, 1), (0.5, 2), (1e-5, 1e5), (-3, 7.25), (-1e10, -1e-3), (100, 100)]
        + [(1.5, None), (None, -2.5), (0.001, 0.002), (12345, 1e20), (-5, None)]
    ),
    exclusive=st.booleans(),
    text=st.builds(
        lambda sign, digit, frac, e, esign, zeros, x: f"{sign}{digit}{frac}{e}{esign}{zeros}{x}",
        st.sampled_from(["", "-"]),
        st.integers(1, 9),
        st.one_of(st.just(""), st.text("0123456789", min_size=1, max_size=4).map(".".__add__)),
        st.sampled_from("eE"),
        st.sampled_from(["", "+", "-"]),
        st.sampled_from(["", "0", "00"]),
        st.integers(0, 25),
    ),
)
def test_number_bounds_accept_scientific_notation(
    bounds: tuple[float | None, float | None], exclusive: bool, text: str
) -> None:
    """`1e+16`, `1.5e-07`: what json.dumps writes for big and small floats is in range
    exactly when its value is, under any bounds (one digit before the point)."""
    lo, hi = bounds
    kwargs: dict[str, Any] = {"minimum": lo, "maximum": hi}
    if exclusive:
        kwargs.update(exclusive_minimum=lo is not None, exclusive_maximum=hi is not None)
    regex = number_regex(**kwargs)
    in_dialect(regex)
    value = Decimal(text)
    dec = lambda b: Decimal(repr(b))  # noqa: E731
    ok = (lo is None or (value > dec(lo) if exclusive else value >= dec(lo))) and (
        hi is None or (value < dec(hi) if exclusive else value <= dec(hi))
    )
    assert fm(regex, text) == ok, (bounds, exclusive, text)


def test_number_unbounded_is_full_json_syntax() -> None:
    regex = number_regex()
    for text in ("0", "-0", "1e5", "-1.5E-3", "2.0e+10"):
        assert fm(regex, text)
    for text in ("01", "+1", ".5", "1.", "1e", "NaN"):
        assert not fm(regex, text)


def test_number_large_and_empty() -> None:
    regex = number_regex(minimum=-1e300, maximum=1e300)
    assert fm(regex, "1" + "0" * 300) and not fm(regex, "1" + "0" * 300 + ".1")
    never = number_regex(minimum=1, maximum=1, exclusive_maximum=True)
    assert not fm(never, "1")
    assert fm(number_regex(minimum=1, maximum=1), "1.000")
    with pytest.raises(SchemaError):
        number_regex(minimum=float("nan"))
    with pytest.raises(UnsupportedSchemaError):
        integer_regex(maximum=10**1000)
    assert fm(number_regex(minimum=5e-324, exclusive_minimum=True), "1")
