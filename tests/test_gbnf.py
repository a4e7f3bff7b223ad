"""GBNF export (`sdk.engine.gbnf`), checked by round trips.

Each grammar G (Lark) is exported to GBNF, the GBNF is parsed back into Lark by the small
independent converter below (`gbnf_to_lark`, written from llama.cpp's GBNF syntax), and the
two grammars must accept exactly the same texts:

- G is judged by the engine (`CompiledGrammar` + `Matcher`), the round-tripped grammar by the
  engine and by Lark's Earley parser;
- texts: the valid and invalid instances of a sample of MaskBench schemas, turn grammars with
  free text / calls / typed outputs, and hypothesis-generated strings for lookahead regexes
  (whose GBNF form is a code-point automaton);
- when llama-cpp-python is installed, llama.cpp's own GBNF parser must load every export.
"""

from __future__ import annotations

import importlib.util
import json
import random
import re
from typing import Any, Literal

import lark
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from sdk.decoding.turn_grammar import build_turn_grammar
from sdk.engine.gbnf import lark_to_gbnf, regex_to_gbnf, to_gbnf
from sdk.engine.grammar import CompiledGrammar
from sdk.engine.matcher import Matcher
from sdk.errors import GrammarError, SDKError, TooComplexError
from sdk.grammar import compile_schema
from sdk.tools import as_tool, tool
from tests._data import maskbench_files

HAVE_LLAMA = importlib.util.find_spec("llama_cpp") is not None

# ------------------------------------------------------------------------------ GBNF -> Lark

_TOKEN = re.compile(
    r"""
    (?P<ws>[ \t\r\n]+|\#[^\n]*)
  | (?P<def>::=)
  | (?P<name>[A-Za-z0-9-]+)
  | (?P<str>"(?:\\.|[^"\\])*")
  | (?P<cls>\[(?:\\.|[^\]\\])*\])
  | (?P<rep>\{\d+(?:,\d*)?\})
  | (?P<op>[()|*+?])
    """,
    re.VERBOSE,
)
_ESC = {"t": "\t", "r": "\r", "n": "\n", "\\": "\\", '"': '"', "[": "[", "]": "]"}


def _decode(body: str) -> list[int]:
    """llama.cpp's `parse_char`: code points of a literal / class body."""
    out, i = [], 0
    while i < len(body):
        c = body[i]
        if c == "\\":
            e = body[i + 1]
            if e in "xuU":
                n = {"x": 2, "u": 4, "U": 8}[e]
                out.append(int(body[i + 2 : i + 2 + n], 16))
                i += 2 + n
                continue
            out.append(ord(_ESC[e]))
            i += 2
            continue
        out.append(ord(c))
        i += 1
    return out


def _rx(cp: int) -> str:
    """A code point inside a Lark regex literal. (Lark evaluates `\\x \\u \\U` escapes
    before the regex engine sees them, so ASCII punctuation is backslash-escaped instead.)"""
    c = chr(cp)
    if c.isascii() and c.isalnum():
        return c
    if 0x20 < cp < 0x7F:
        return "\\" + c
    if cp <= 0xFF:
        return f"\\x{cp:02x}"
    if cp <= 0xFFFF:
        return f"\\u{cp:04x}"
    return f"\\U{cp:08x}"


def _lark_name(name: str) -> str:
    # lowercase / digits kept, "-" -> "__", uppercase X -> "_x": unambiguous and Lark-valid.
    return "g_" + "".join("__" if c == "-" else f"_{c.lower()}" if c.isupper() else c for c in name)


def gbnf_to_lark(text: str) -> str:
    """GBNF text -> Lark text: rules stay rules; literals and classes become regex literals."""
    toks = [(m.lastgroup, m.group()) for m in _TOKEN.finditer(text) if m.lastgroup != "ws"]
    rules: list[tuple[str, list[tuple[str | None, str]]]] = []
    for i, (kind, val) in enumerate(toks):
        if kind == "def":
            continue
        if kind == "name" and i + 1 < len(toks) and toks[i + 1][0] == "def":
            rules.append((val, []))
        else:
            rules[-1][1].append((kind, val))
    out = [f"start: {_lark_name('root')}"]
    for name, body in rules:
        out.append(f"{_lark_name(name)}: {_RuleBody(name, body).parse()}")
    return "\n".join(out) + "\n"


class _RuleBody:
    """Recursive descent over one rule's tokens (alternation, sequence, postfix, atoms)."""

    def __init__(self, name: str, body: list[tuple[str | None, str]]) -> None:
        self.name, self.body, self.pos = name, body, 0

    def parse(self) -> str:
        text = self.alts()
        assert self.pos == len(self.body), f"unparsed tail in rule {self.name}"
        return text

    def alts(self) -> str:
        options: list[str] = []
        cur: list[str] = []
        empty = False
        while self.pos < len(self.body) and self.body[self.pos][1] != ")":
            if self.body[self.pos][1] == "|":
                self.pos += 1
                if cur:
                    options.append(" ".join(cur))
                else:
                    empty = True
                cur = []
                continue
            item = self.postfix(self.atom())
            if item:
                cur.append(item)
        if cur:
            options.append(" ".join(cur))
        else:
            empty = True
        if not options:
            return ""
        joined = "(" + " | ".join(options) + ")"
        return joined + "?" if empty else joined

    def atom(self) -> str:
        kind, val = self.body[self.pos]
        self.pos += 1
        if kind == "name":
            return _lark_name(val)
        if kind == "str":
            cps = _decode(val[1:-1])
            return "/" + "".join(_rx(c) for c in cps) + "/" if cps else ""
        if kind == "cls":
            inner = val[1:-1]
            neg = inner.startswith("^")
            items = _class_ranges(inner[1:] if neg else inner)
            body_rx = "".join(_rx(lo) if lo == hi else f"{_rx(lo)}-{_rx(hi)}" for lo, hi in items)
            return "/[" + ("^" if neg else "") + body_rx + "]/"
        if val == "(":
            inner = self.alts()
            assert self.body[self.pos][1] == ")"
            self.pos += 1
            return inner
        raise AssertionError(f"unexpected {val!r} in rule {self.name}")

    def postfix(self, item: str) -> str:
        while self.pos < len(self.body) and (
            self.body[self.pos][0] == "rep" or self.body[self.pos][1] in "*+?"
        ):
            val = self.body[self.pos][1]
            self.pos += 1
            if not item:
                continue
            if val in "*+?":
                item = f"({item}){val}"
                continue
            nums = val[1:-1].split(",")
            lo = int(nums[0])
            if len(nums) == 1:
                item = f"({item}) ~ {lo}" if lo else ""
            elif nums[1] == "":
                item = f"({item})*" if lo == 0 else f"(({item}) ~ {lo} ({item})*)"
            elif int(nums[1]) == 0:
                item = ""
            elif lo:
                item = f"(({item}) ~ {lo}..{nums[1]})"
            else:
                item = f"(({item}) ~ 1..{nums[1]})?"
        return item


def _read_char(raw: str, j: int) -> tuple[int, int]:
    """One (possibly escaped) character of a class body: (code point, next index)."""
    if raw[j] != "\\":
        return ord(raw[j]), j + 1
    n = {"x": 2, "u": 4, "U": 8}.get(raw[j + 1], 0)
    if n:
        return int(raw[j + 2 : j + 2 + n], 16), j + 2 + n
    return ord(_ESC[raw[j + 1]]), j + 2


def _class_ranges(raw: str) -> list[tuple[int, int]]:
    """llama.cpp's class parsing: chars, and `a-b` ranges when a `-` sits between two."""
    out: list[tuple[int, int]] = []
    j = 0
    while j < len(raw):
        lo, j = _read_char(raw, j)
        if j + 1 < len(raw) and raw[j] == "-":
            hi, j = _read_char(raw, j + 1)
            out.append((lo, hi))
        else:
            out.append((lo, lo))
    return out


# ------------------------------------------------------------------------------ oracles


class Judge:
    """Acceptance of a Lark grammar by the engine (bytes fed to a `Matcher`)."""

    def __init__(self, lark_text: str, index: Any) -> None:
        self.grammar = CompiledGrammar.from_lark(lark_text)
        self.index = index

    def __call__(self, text: str) -> bool:
        m = Matcher(self.grammar, self.index)
        try:
            m.advance_bytes(text.encode("utf-8"))
        except SDKError:
            return False
        return m.is_accepting()


def earley(lark_text: str) -> Any:
    parser = lark.Lark(lark_text, parser="earley", lexer="dynamic")

    def accepts(text: str) -> bool:
        try:
            parser.parse(text)
        except lark.exceptions.LarkError:
            return False
        return True

    return accepts


def llama_parses(gbnf: str) -> None:
    if HAVE_LLAMA:
        import llama_cpp

        llama_cpp.LlamaGrammar.from_string(gbnf, verbose=False)  # raises on a syntax error


def round_trip(lark_text: str, index: Any) -> tuple[Judge, Judge, str]:
    gbnf = lark_to_gbnf(lark_text)
    llama_parses(gbnf)
    back = gbnf_to_lark(gbnf)
    return Judge(lark_text, index), Judge(back, index), back


# ------------------------------------------------------------------------------ unit tests


def test_literals_classes_and_names() -> None:
    g = lark_to_gbnf(
        'start: a_b | _x "q\\"\\\\\\n"\n'
        "a_b: /[a-c-]+/ A_B?\n"
        '_x: /[^\\x00-\\x1f"\\\\]{2,5}/\n'
        'A_B: "é" | "\\U0001F600"\n'
    )
    assert g.splitlines()[0] == "root ::= start"
    assert "a-b ::= [\\u002Da-c]+ A-B?" in g
    assert 'start ::= a-b | x "q\\"\\\\\\n"' in g
    assert "x ::= [ \\u0021\\u0023-\\[\\]-\\U0010FFFF]{2,5}" in g
    assert 'A-B ::= "\\u00E9" | "\\U0001F600"' in g
    llama_parses(g)


@given(st.integers(0, 0x10FFFF), st.booleans())
def test_escapes_have_a_fixed_length(cp: int, in_class: bool) -> None:
    """No `\\xNN`: XGrammar's EBNF parser (vLLM, SGLang) reads hex digits after `\\x` for as
    long as they come, so `[\\x3CA]` meant U+03CA there and `<`/`A` to llama.cpp. Every
    escape is one that both read to the same length."""
    from sdk.engine.gbnf import _escape_cp

    esc = _escape_cp(cp, in_class=in_class)
    assert not esc.startswith("\\x")
    assert (
        len(esc) == 1
        or esc in ("\\t", "\\n", "\\r", '\\"', "\\\\", "\\[", "\\]")
        or re.fullmatch(r"\\u[0-9A-F]{4}|\\U[0-9A-F]{8}", esc)
    ), esc


def test_a_repeat_of_a_repeat_is_grouped(smollm2_index: Any) -> None:
    """`(x*)*` is written with its group: `x**` is refused by llama.cpp and XGrammar alike (a
    MaskBench URL pattern with `(?:[a-z]|\\/)*` inside a repeat came out so)."""
    lark = 'start: /(?:(?:[a-z]|\\/)*\\.)*x/ ("a"*)*\n'
    g = lark_to_gbnf(lark)
    assert "**" not in g
    assert '(([a-z] | "/")* ".")*' in g and '("a"*)*' in g
    orig, back, _ = round_trip(lark, smollm2_index)
    for text in ["x", "ab/.x", "a.b.xaa", "ab/x", ".x", "xb"]:
        assert back(text) == orig(text), text
    llama_parses(g)


def test_name_collisions_and_root() -> None:
    g = lark_to_gbnf('start: root ROOT\nroot: "a"\nROOT: "b"\n')
    lines = g.splitlines()
    assert lines[0] == "root ::= start"
    assert "start ::= root-2 ROOT" in lines
    llama_parses(g)


def test_compiled_and_schema_grammars_are_accepted() -> None:
    sg = compile_schema({"type": "integer", "minimum": 3})
    assert to_gbnf(sg) == to_gbnf(sg.lark) == to_gbnf(CompiledGrammar.from_lark(sg.lark))
    with pytest.raises(TypeError):
        to_gbnf(3)


def test_lookahead_becomes_an_automaton() -> None:
    g = regex_to_gbnf(r"(?!ab)[ab]{0,3}")
    assert "(?" not in g and "root-la" in g
    llama_parses(g)


def test_errors_are_typed() -> None:
    with pytest.raises(GrammarError, match="invalid Lark"):
        lark_to_gbnf("start: (")
    with pytest.raises(GrammarError, match="no 'start' rule"):
        lark_to_gbnf('other: "a"\n')
    with pytest.raises(GrammarError):  # a regex outside the dialect
        lark_to_gbnf("start: /(?<=a)b/\n")
    with pytest.raises(GrammarError, match="%ignore"):
        lark_to_gbnf('start: "a"\n%ignore " "\n')


# ------------------------------------------------------------------------------ round trips


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet="<tool_cal>x\né€😀", max_size=24))
def test_free_text_lookahead_round_trip(smollm2_index: Any, text: str) -> None:
    """The auto-mode TEXT terminal: any non-empty text without the call opener."""
    turn = _TURN_GRAMMARS["text"]
    expected = bool(text) and "<tool_call>" not in text
    assert turn[0](text) == expected
    assert turn[1](text) == expected


LOOKAHEADS = [
    r'"(?!(?:a|bc)")[^"]*"',  # any key but a, bc (the schema compiler's form)
    r'"(?=[a-c]*")(?:[^"]{2,4})"',  # content in both languages
    r'"(?=(?:x|é)+")[^"0-9]*"',
]


@pytest.mark.parametrize("pattern", LOOKAHEADS)
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=st.text(alphabet='abcxé"1😀', max_size=7))
def test_lookahead_regex_round_trip(smollm2_index: Any, pattern: str, body: str) -> None:
    key = ("re", pattern)
    if key not in _TURN_GRAMMARS:
        lark_text = "start: /" + pattern.replace("/", "\\/") + "/\n"
        _TURN_GRAMMARS[key] = round_trip(lark_text, smollm2_index)[:2]
    orig, back = _TURN_GRAMMARS[key]
    text = '"' + body
    expected = re.fullmatch(pattern, text) is not None  # Python's own lookahead semantics
    assert orig(text) == expected
    assert back(text) == expected


_TURN_GRAMMARS: dict[Any, Any] = {}


@pytest.fixture(autouse=True, scope="module")
def _text_grammar(smollm2_index: Any) -> None:
    from sdk.decoding.formats import HERMES
    from sdk.decoding.turn_grammar import _text_regex

    lark_text = f"start: TEXT\nTEXT: {_text_regex(HERMES)}\n"
    _TURN_GRAMMARS["text"] = round_trip(lark_text, smollm2_index)[:2]


@tool
def get_weather(city: str, unit: Literal["celsius", "fahrenheit"] = "celsius") -> str:
    """Weather."""
    return city


@tool
def add(a: int, b: int) -> int:
    """Add."""
    return a + b


class Person(BaseModel):
    name: str
    age: int


def _turn_samples() -> list[str]:
    # the default call style (json.dumps spacing); one compact sample must be rejected
    call = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>'
    call2 = '<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": -2}}\n</tool_call>'
    person = '{"name": "Ann", "age": 30}'
    return [
        "",
        "Hello there.",
        "é😀 < tool_call >",
        call,
        call2,
        f"{call}\n{call2}",
        f"Let me check.{call}",
        f"Let me check.{call}Done.",
        f"x{call}y{call2}z",
        "<tool_call>\n{}\n</tool_call>",
        '<tool_call>\n{"name": "nope", "arguments": {}}\n</tool_call>',
        '<tool_call>\n{"name": "add", "arguments": {"a": 1}}\n</tool_call>',
        '<tool_call>\n{"name":"add","arguments":{"a":1,"b":2}}\n</tool_call>',
        call[:-1],
        f"{call}<tool_call>",
        person,
        person[:-1],
        '{"name": "Ann", "age": "30"}',
        f"{person}{call}",
    ]


@pytest.mark.parametrize(
    ("choice", "output", "parallel"),
    [
        ("auto", None, True),
        ("auto", None, False),
        ("required", None, True),
        ("add", None, True),
        ("auto", Person, True),
        ("none", Person, True),
    ],
)
def test_turn_grammar_round_trip(
    smollm2_index: Any, choice: str, output: type[BaseModel] | None, parallel: bool
) -> None:
    tools = [as_tool(get_weather), as_tool(add)]
    schema = output.model_json_schema() if output else None
    turn = build_turn_grammar(tools, choice, schema, parallel_tool_calls=parallel)
    assert turn.lark is not None
    orig, back, back_lark = round_trip(turn.lark, smollm2_index)
    oracle = earley(back_lark)
    accepted = 0
    for text in _turn_samples():
        expected = orig(text)
        accepted += expected
        assert back(text) == expected, (choice, text)
        assert oracle(text) == expected, (choice, text)
    assert accepted >= 1


# MaskBench: valid and invalid instances of a deterministic sample of schemas.
_FILES = [str(p) for p in maskbench_files()]


def _maskbench(
    index: Any, n: int, seed: int, earley_grammar: int = 12_000, earley_text: int = 300
) -> dict[str, Any]:
    """Round-trip `n` sampled schemas: the engine judges every instance under both grammars,
    Earley (on the round-tripped grammar) the smaller ones, each schema with a time guard."""
    import signal

    class _Slow(Exception):
        pass

    def alarm(*_: Any) -> None:
        raise _Slow

    stats = dict.fromkeys(
        ["schemas", "instances", "valid", "earley", "mismatches", "too_complex", "skipped"], 0
    )
    bad: list[str] = []
    old = signal.signal(signal.SIGALRM, alarm)
    try:
        for path in random.Random(seed).sample(_FILES, min(n, len(_FILES))):
            with open(path) as f:
                case = json.load(f)
            try:
                sg = compile_schema(case["schema"], whitespace="compact")
                orig, back, back_lark = round_trip(sg.lark, index)
            except TooComplexError:
                stats["too_complex"] += 1  # a typed refusal, never a silent approximation
                continue
            except SDKError:
                stats["skipped"] += 1  # outside what the compiler/engine supports
                continue
            stats["schemas"] += 1
            oracle = earley(back_lark) if len(back_lark) < earley_grammar else None
            for t in case["tests"]:
                text = json.dumps(t["data"], ensure_ascii=False, separators=(",", ":"))
                stats["instances"] += 1
                expected = orig(text)
                stats["valid"] += expected
                if back(text) != expected:
                    bad.append(f"{path}: engine {text[:80]}")
                if oracle is not None and len(text) < earley_text:
                    signal.setitimer(signal.ITIMER_REAL, 5.0)
                    try:
                        got = oracle(text)
                    except _Slow:
                        continue
                    finally:
                        signal.setitimer(signal.ITIMER_REAL, 0)
                    stats["earley"] += 1
                    if got != expected:
                        bad.append(f"{path}: earley {text[:80]}")
    finally:
        signal.signal(signal.SIGALRM, old)
    stats["mismatches"] = len(bad)
    stats["examples"] = bad[:5]
    print(f"\nGBNF round trip over MaskBench: {stats}")
    return stats


def test_maskbench_round_trip(smollm2_index: Any) -> None:
    stats = _maskbench(smollm2_index, 40, seed=7)
    assert stats["schemas"] >= 30 and stats["instances"] >= 60
    assert stats["mismatches"] == 0, stats["examples"]


@pytest.mark.slow
def test_maskbench_round_trip_large(smollm2_index: Any) -> None:
    # Engine only: Lark's Earley parser takes minutes and gigabytes on some of these grammars
    # (the default-run test above also has Earley judge the small ones).
    stats = _maskbench(smollm2_index, 200, seed=11, earley_grammar=0)
    assert stats["mismatches"] == 0, stats["examples"]


# ------------------------------------------------------------------------------ server limits


def _llama_judge() -> Any:
    """llama.cpp's own GBNF sampler over the embedded model's vocabulary: accepts(text)."""
    import ctypes
    import math

    from sdk.backends.embedded import load_tokenizer, resolve_gguf
    from sdk.backends.llamacpp import _lib

    lib = _lib()
    params = lib.llama_model_default_params()
    params.vocab_only = True
    model = lib.llama_model_load_from_file(str(resolve_gguf("smollm2")).encode(), params)
    vocab = lib.llama_model_get_vocab(model)
    eos = int(lib.llama_vocab_eos(vocab))
    tok = load_tokenizer("smollm2")

    def allowed(sampler: Any, token: int) -> bool:
        data = (lib.llama_token_data * 1)()
        data[0].id, data[0].logit, data[0].p = token, 0.0, 0.0
        arr = lib.llama_token_data_array(data, 1, -1, False)
        lib.llama_sampler_apply(sampler, ctypes.byref(arr))
        return not math.isinf(data[0].logit)

    def judge(gbnf: str) -> Any:
        sampler = lib.llama_sampler_init_grammar(vocab, gbnf.encode(), b"root")
        assert sampler, f"llama.cpp refused:\n{gbnf[:2000]}"

        def accepts(text: str) -> bool:
            lib.llama_sampler_reset(sampler)
            for token in tok(text, add_special_tokens=False)["input_ids"]:
                if not allowed(sampler, token):
                    return False
                lib.llama_sampler_accept(sampler, token)
            return allowed(sampler, eos)

        return accepts

    return judge


@pytest.mark.skipif(not HAVE_LLAMA, reason="llama-cpp-python is not installed")
@pytest.mark.parametrize("lo,hi", [(0, 2500), (2100, 4100), (1500, 3000), (2001, 2001), (0, None)])
def test_long_repeats_are_exact_in_llama_cpp(lo: int, hi: int | None) -> None:
    """llama.cpp refuses `x{m,}` past 2,000 and reads `x{m,n}` with n past it as `x{m,}`
    (silently looser): counts are written as blocks, and llama.cpp enforces them exactly."""
    count = f"{lo}," if hi is None else f"{lo},{hi}"
    lark_text = f"start: /a{{{count}}}b/\n" if hi is not None else "start: /a{2500,}b/\n"
    low, high = (2500, None) if hi is None else (lo, hi)
    gbnf = lark_to_gbnf(lark_text)
    assert all(int(n) <= 2000 for n in re.findall(r"\d+", "".join(re.findall(r"\{[\d,]+\}", gbnf))))
    accepts = _llama_judge()(gbnf)
    top = high if high is not None else low + 10
    for n in sorted(
        {max(low - 1, 0), low, (low + top) // 2, top - 1, top, top + 1, 999, 1000, 2000}
    ):
        want = low <= n and (high is None or n <= high)
        assert accepts("a" * n + "b") == want, n


@pytest.mark.skipif(not HAVE_LLAMA, reason="llama-cpp-python is not installed")
def test_shapes_llama_cpp_refused_now_load_with_the_same_language(smollm2_index: Any) -> None:
    """A long repeat of a group (a JSON string with maxLength 1024: llama.cpp multiplies the
    group's sub-rules by the count) and a star over an item that may be empty (left recursion
    to llama.cpp) were refused there; both export now, and mean what they meant."""
    judge = _llama_judge()
    string = 'start: /"(?:[^"\\\\]|\\\\["\\\\nt]){0,1024}"/\n'
    accepts = judge(lark_to_gbnf(string))
    orig, back, _ = round_trip(string, smollm2_index)
    for text in ['""', '"a\\\\n"', '"' + "x" * 1024 + '"', '"' + "x" * 1025 + '"', '"\\\\q"']:
        assert accepts(text) == orig(text) == back(text), text[:20]
    nullable = "start: /a(|b[cd]+)*e(x?y?)*(z?)+/\n"
    accepts = judge(lark_to_gbnf(nullable))
    orig, back, _ = round_trip(nullable, smollm2_index)
    for text in ["ae", "abccbde", "aexyyxzz", "abe", "aeyz", "a", "aexz", "aebc", "abcdexz"]:
        assert accepts(text) == orig(text) == back(text), text


def test_a_lookahead_that_admits_nothing_is_pruned(smollm2_index: Any) -> None:
    lark_text = 'start: A | "x" B | "y"\nA: /(?!a)a/\nB: A "q"\n'
    assert lark_to_gbnf(lark_text) == 'root ::= start\nstart ::= "y"\n'
    orig, back, _ = round_trip(lark_text, smollm2_index)
    for text in ["y", "x", "a", "xaq", ""]:
        assert orig(text) == back(text), text
    with pytest.raises(GrammarError, match="admits no text"):
        lark_to_gbnf('start: A "x"\nA: /(?!a)a/\n')
    with pytest.raises(GrammarError, match="admits no text"):
        regex_to_gbnf("(?!a)a")


def test_a_lookahead_too_big_is_refused_or_loosened_by_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from sdk.engine import gbnf

    monkeypatch.setattr(gbnf, "MAX_LOOKAHEAD_STATES", 2)
    lark_text = 'start: "<" WORD ">"\nWORD: /(?!ab)[ab]{0,3}/\n'
    with pytest.raises(TooComplexError, match="WORD needs"):
        lark_to_gbnf(lark_text)
    export = gbnf.export_gbnf(lark_text, loosen=True)
    assert len(export.loosened) == 1 and export.loosened[0].startswith("WORD: a lookahead")
    assert "WORD ::= [ab]{0,3}" in export.text  # the looser rule: `ab` is the agent's to refuse
    assert gbnf.export_gbnf('start: "a"\n', loosen=True).loosened == ()
