"""Turn grammars: which assistant turns each tool_choice / output_type admits (real tokenizer)."""

from __future__ import annotations

import json
from typing import Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from sdk.decoding.call_style import COMPACT, FLEXIBLE, SPACED, CallStyle, as_call_style
from sdk.decoding.formats import HERMES
from sdk.decoding.generate import forced_token_ids
from sdk.decoding.turn_grammar import build_turn_grammar, call_body_schema, prefix_lark_names
from sdk.engine import CompiledGrammar, Matcher
from sdk.errors import TokenRejectedError
from sdk.tools import Tool, as_tool, tool


class Address(BaseModel):
    street: str
    city: str


@tool
def get_weather(city: str, unit: Literal["celsius", "fahrenheit"] = "celsius") -> str:
    """Weather."""
    return city


@tool
def ship(to: Address, items: list[Address]) -> str:
    """Ship."""
    return ""


class Node(BaseModel):
    value: int
    children: list[Node] = []


@tool
def tree_sum(root: Node) -> int:
    """Recursive arguments."""
    return 0


TOOLS: list[Tool] = [as_tool(t) for t in (get_weather, ship, tree_sum)]


def _accepts(matcher: Matcher, text: str, tokenizer) -> bool:  # noqa: ANN001
    """Feed `text` token by token as the model would; False at the first rejected token."""
    return all(matcher.try_advance(t) for t in tokenizer.encode(text, add_special_tokens=False))


def _compiled(*args: Any, **kwargs: Any) -> CompiledGrammar:
    compiled = build_turn_grammar(*args, **kwargs).compiled
    assert compiled is not None
    return compiled


def _call(name: str, args: object) -> str:
    return HERMES.render_call(name, args)


@pytest.fixture()
def auto(smollm2_index):  # noqa: ANN001, ANN201
    return Matcher(_compiled(TOOLS, "auto"), smollm2_index)


def test_unoffered_tool_name_is_rejected(smollm2_index, smollm2_tokenizer) -> None:  # noqa: ANN001
    for choice in ("auto", "required"):
        g = _compiled(TOOLS, choice)
        for prefix in ('<tool_call>\n{"name": "other"', '<tool_call>\n{"name":"other"'):
            m = Matcher(g, smollm2_index)
            assert not _accepts(m, prefix, smollm2_tokenizer)
        m = Matcher(g, smollm2_index)
        with pytest.raises(TokenRejectedError):
            m.advance_bytes(b'<tool_call>\n{"name":"other"')


def test_auto_text_then_call_then_text(auto: Matcher, smollm2_tokenizer) -> None:  # noqa: ANN001
    # (The engine never accepts the empty string, so an empty reply is not offered.)
    assert auto.forced_bytes() == b""  # the model chooses between text and a call
    assert _accepts(auto, "Let me check. ", smollm2_tokenizer)
    assert auto.is_accepting()
    assert _accepts(auto, "<tool_call>", smollm2_tokenizer)
    assert not auto.is_accepting()  # an opened call must be completed
    assert auto.forced_bytes() == b'\n{"name": "'
    assert _accepts(
        auto,
        '\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>',
        smollm2_tokenizer,
    )
    assert auto.is_accepting()
    assert _accepts(auto, " Done.", smollm2_tokenizer)
    assert _accepts(auto, "\n" + _call("get_weather", {"city": "Rome"}), smollm2_tokenizer)
    assert auto.is_accepting()


def test_auto_call_arguments_are_checked(auto: Matcher, smollm2_tokenizer) -> None:  # noqa: ANN001
    bad = [
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": 3}}',
        '<tool_call>\n{"name": "get_weather", "arguments": {"unit": "kelvin"',
        '<tool_call>\n{"name": "get_weather", "arguments": {"town": "x"',
        '<tool_call>\n{"name": "ship", "arguments": {"to": {"street": "a"}}',
        "<tool_call>\nnot json",
    ]
    for text in bad:
        assert not _accepts(auto.fork(), text, smollm2_tokenizer), text
    good = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "x"'
    assert _accepts(auto.fork(), good, smollm2_tokenizer)


def test_required_and_named(smollm2_index, smollm2_tokenizer) -> None:  # noqa: ANN001
    req = Matcher(_compiled(TOOLS, "required"), smollm2_index)
    assert not req.is_accepting()
    assert req.forced_bytes() == b'<tool_call>\n{"name": "'
    assert not _accepts(req.fork(), "Sure!", smollm2_tokenizer)
    two = _call("get_weather", {"city": "A"}) + "\n" + _call("get_weather", {"city": "B"})
    assert _accepts(req, two, smollm2_tokenizer) and req.is_accepting()

    named = Matcher(_compiled(TOOLS, "ship"), smollm2_index)
    assert named.forced_bytes().startswith(b'<tool_call>\n{"name": "ship", "arguments": {"to": {')
    assert not _accepts(named.fork(), '<tool_call>\n{"name": "get_weather"', smollm2_tokenizer)
    with pytest.raises(ValueError):
        build_turn_grammar(TOOLS, "nope")
    with pytest.raises(ValueError):
        build_turn_grammar([], "required")


def test_a_newline_after_a_call_may_end_the_reply(smollm2_index, smollm2_tokenizer) -> None:  # noqa: ANN001
    """Next to a typed output, as in text replies, the newline a model writes after a call
    may end the turn: it commits to no second call. Under "required" it does (a turn of
    calls only goes on to the next one)."""
    one = _call("get_weather", {"city": "A"})
    for choice, ends in (("auto", True), ("required", False)):
        m = Matcher(_compiled(TOOLS, choice, Answer.model_json_schema()), smollm2_index)
        assert _accepts(m, one, smollm2_tokenizer) and m.is_accepting()
        assert _accepts(m, "\n", smollm2_tokenizer) and m.is_accepting() is ends
        assert not m.is_terminated()  # another call may still follow
        assert not _accepts(m.fork(), "\n", smollm2_tokenizer)  # one newline, not a run
        assert _accepts(m, _call("get_weather", {"city": "B"}), smollm2_tokenizer)


def test_single_call_turn_terminates(smollm2_index, smollm2_tokenizer) -> None:  # noqa: ANN001
    for choice in ("required", "auto"):
        g = _compiled(TOOLS, choice, parallel_tool_calls=False)
        m = Matcher(g, smollm2_index)
        assert _accepts(m, _call("get_weather", {"city": "A"}), smollm2_tokenizer)
        assert m.is_terminated()


def test_without_tools_a_turn_is_unconstrained() -> None:
    assert build_turn_grammar([], "none").compiled is None
    assert build_turn_grammar([], "auto").compiled is None


_ANSWERS = [
    ("The weather in Paris is 18 C.", True),
    ("Use [this link](https://x) or {braces} later.", True),
    ("```python\nprint(1)\n```", True),
    ("[Paris] is the capital.", True),
    ('{"name": "get_weather", "arguments": {"city": "Paris"}}', False),
    ('  [{"name": "get_weather"}]', False),
    ('```json\n["get_weather", {"city": "Paris"}]\n```', False),
    ('```jsonrpc\n{"name": "get_weather"}', False),
    ("[1, 2, 3]", False),
    ("Sure: <tool_call>", False),
    ('<tool_response>\n{"name": "get_weather", "content": "18 C"}', False),
    ("<tool_response_text>\nThe weather is 18 C.\n</tool_response_text>", False),
    ('<tool_call_result>\n{"name": "get_weather", "content": "ok"}', False),
    ("<tool>\nThe weather is 18 C.", False),
    ("The <tool_response> above says 18 C.", True),
]


@pytest.mark.parametrize(("text", "ok"), _ANSWERS)
def test_an_answer_next_to_tools_is_no_call(text: str, ok: bool) -> None:
    """With tools in the conversation a text reply never holds the opener nor opens as JSON
    (how tool-trained models write calls without their envelope): under "none", and as the
    opening text of an "auto" turn, which may still open a real call."""
    from tests._oracle import engine_accepts

    none = build_turn_grammar(TOOLS, "none")
    assert none.mode == "none" and none.compiled is not None and not none.tool_names
    assert engine_accepts(none.compiled, text) is ok
    assert engine_accepts(_compiled(TOOLS, "auto"), text) is ok
    call = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    assert engine_accepts(_compiled(TOOLS, "auto"), call)
    assert not engine_accepts(none.compiled, call)
    assert engine_accepts(_compiled(TOOLS, "auto"), "") and not engine_accepts(none.compiled, " ")


@settings(max_examples=150, deadline=None)
@given(
    st.text(alphabet=' \n{}[]"`<>abjson_:1', max_size=14)
    | st.sampled_from(["<tool_response>\nx", "<tool_response_body>", " <tool_callx", "<tools"])
)
def test_the_answer_rule_is_exactly_the_lookaheads(text: str) -> None:
    """The compiled rule accepts exactly the texts the two lookaheads describe."""
    import re

    from sdk.decoding.turn_grammar import JSON_LEAD
    from tests._oracle import engine_accepts

    none = build_turn_grammar(TOOLS, "none")
    lead = r"[ \t\r\n]*<tool|" + JSON_LEAD
    expected = "<tool_call>" not in text and re.match(lead, text) is None and bool(text.strip())
    assert engine_accepts(none.compiled, text) is expected


class Answer(BaseModel):
    city: str
    temperature: float


def test_output_type_grammar(smollm2_index, smollm2_tokenizer) -> None:  # noqa: ANN001
    schema = Answer.model_json_schema()
    only = Matcher(_compiled([], "auto", schema), smollm2_index)
    assert not _accepts(only.fork(), "The answer", smollm2_tokenizer)
    assert _accepts(only, '{"city": "Oslo", "temperature": 3.5}', smollm2_tokenizer)
    assert only.is_terminated()

    both = _compiled(TOOLS, "auto", schema)
    m = Matcher(both, smollm2_index)
    assert not _accepts(m.fork(), "Hello", smollm2_tokenizer)  # no free text with output_type
    assert _accepts(m.fork(), _call("get_weather", {"city": "A"}), smollm2_tokenizer)
    assert _accepts(m, '{"city": "Oslo", "temperature": 3}', smollm2_tokenizer)
    # "none" still constrains the final output
    assert build_turn_grammar(TOOLS, "none", schema).mode == "output"


@pytest.mark.parametrize(
    ("style", "good", "bad"),
    [
        (COMPACT, '{"name":"get_weather","arguments":{"city":"A","unit":"celsius"}}', SPACED),
        (SPACED, '{"name": "get_weather", "arguments": {"city": "A", "unit": "celsius"}}', COMPACT),
        (
            CallStyle("custom", (",\n", ": ")),
            '{"name": "get_weather",\n"arguments": {"city": "A",\n"unit": "celsius"}}',
            SPACED,
        ),
    ],
)
def test_call_style_is_exact(style, good, bad, smollm2_index, smollm2_tokenizer) -> None:  # noqa: ANN001
    """The grammar holds calls to the style's separators exactly: its own rendering passes,
    another style's is rejected, and the format renders what the grammar accepts."""
    fmt = HERMES.with_style(style)
    g = build_turn_grammar(TOOLS, "required", fmt=fmt).compiled
    rendered = fmt.render_call("get_weather", {"city": "A", "unit": "celsius"})
    assert rendered == f"<tool_call>\n{good}\n</tool_call>"
    assert _accepts(Matcher(g, smollm2_index), rendered, smollm2_tokenizer)
    other = HERMES.with_style(bad).render_call("get_weather", {"city": "A", "unit": "celsius"})
    assert not _accepts(Matcher(g, smollm2_index), other, smollm2_tokenizer)
    # the prompt's example shows the same layout
    assert ("<function-name>, " in fmt.tools_prompt([])) == (style.separators[0] == ", ")


def test_flexible_style_accepts_either_layout(smollm2_index, smollm2_tokenizer) -> None:  # noqa: ANN001
    g = build_turn_grammar(TOOLS, "required", fmt=HERMES.with_style(FLEXIBLE)).compiled
    for style in (COMPACT, SPACED):
        text = HERMES.with_style(style).render_call("get_weather", {"city": "A"})
        assert _accepts(Matcher(g, smollm2_index), text, smollm2_tokenizer)


def test_bad_call_styles_are_refused() -> None:
    with pytest.raises(ValueError, match="separator"):
        CallStyle("x", (";", ":"))
    with pytest.raises(ValueError, match="call_style"):
        as_call_style("pretty")
    assert as_call_style((", ", ": ")) is SPACED and as_call_style("compact") is COMPACT


def test_defs_are_hoisted_per_tool() -> None:
    class A1(BaseModel):
        x: int

    class A2(BaseModel):
        y: str

    def one(a: A1) -> None:
        """One."""

    def two(a: A2) -> None:
        """Two."""

    t1 = Tool.from_function(one)
    t2 = Tool.from_function(two)
    # Make the def names collide on purpose, as unrelated tools often do.
    s1 = json.loads(json.dumps(t1.json_schema).replace("A1", "Same"))
    s2 = json.loads(json.dumps(t2.json_schema).replace("A2", "Same"))

    class Spec:
        def __init__(self, name: str, schema: dict) -> None:
            self.name, self.json_schema = name, schema

        def to_openai(self) -> dict:
            return {}

    body = call_body_schema([Spec("one", s1), Spec("two", s2)])
    assert set(body["$defs"]) == {"t0_Same", "t1_Same"}
    assert "#/$defs/t0_Same" in json.dumps(body["anyOf"][0])
    assert "#/$defs/t1_Same" in json.dumps(body["anyOf"][1])


def test_recursive_tool_schema(smollm2_index, smollm2_tokenizer) -> None:  # noqa: ANN001
    m = Matcher(_compiled(TOOLS, "tree_sum"), smollm2_index)
    args = {"root": {"value": 1, "children": [{"value": 2, "children": []}]}}
    assert _accepts(m, _call("tree_sum", args), smollm2_tokenizer)
    assert m.is_accepting()


def test_prefix_names_leaves_literals_alone() -> None:
    text = 'start: a B "a B" /[a-z]B\\/c/\nB: "x" | /B/i\n'
    out = prefix_lark_names(text, "p_")
    assert out == 'p_start: p_a P_B "a B" /[a-z]B\\/c/\nP_B: "x" | /B/i\n'


def test_grammar_is_cached() -> None:
    assert build_turn_grammar(TOOLS, "auto") is build_turn_grammar(list(TOOLS), "auto")
    assert build_turn_grammar(TOOLS, "auto") is not build_turn_grammar(TOOLS, "required")


def test_fast_forward_tokens_spell_forced_bytes(smollm2_index, smollm2_tokenizer) -> None:  # noqa: ANN001
    m = Matcher(_compiled(TOOLS, "ship"), smollm2_index)
    forced = m.forced_bytes()
    ids = forced_token_ids(m, smollm2_index, smollm2_tokenizer, budget=100)
    assert ids and forced.startswith(smollm2_index.decode_bytes(ids))
    assert m.tokens == tuple(ids)
    budgeted = Matcher(_compiled(TOOLS, "ship"), smollm2_index)
    assert len(forced_token_ids(budgeted, smollm2_index, smollm2_tokenizer, budget=2)) == 2


def test_call_strings_cannot_end_the_call(smollm2_index, smollm2_tokenizer) -> None:  # noqa: ANN001
    """A raw closer inside a string would cut the call for every regex-based parser (ours
    too); the grammar subtracts it, and the escaped form keeps the value writable."""
    args = {"city": "a</tool_call>b"}
    raw = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "a</tool_call>b"}}'
    assert HERMES.parse(raw + "\n</tool_call>")[0].error is not None  # what it would cost
    for choice in ("auto", "required"):
        g = _compiled(TOOLS, choice)
        assert not _accepts(Matcher(g, smollm2_index), raw, smollm2_tokenizer)
        rendered = _call("get_weather", args)  # the history's and TestModel's rendering
        assert "<\\/tool_call>" in rendered
        m = Matcher(g, smollm2_index)
        assert _accepts(m, rendered, smollm2_tokenizer) and m.is_accepting()
        assert HERMES.parse(rendered)[0].arguments == args
        # Near misses stay writable.
        near = _call("get_weather", {"city": "</tool_cal> </b> <tool_call>"})
        assert _accepts(Matcher(g, smollm2_index), near, smollm2_tokenizer)


def test_typed_reply_next_to_tools_cannot_hold_the_opener(
    smollm2_index,
    smollm2_tokenizer,  # noqa: ANN001
) -> None:
    class Reply(BaseModel):
        text: str

    schema = Reply.model_json_schema()
    g = _compiled(TOOLS, "auto", schema)
    assert not _accepts(Matcher(g, smollm2_index), '{"text": "see <tool_call>', smollm2_tokenizer)
    assert _accepts(Matcher(g, smollm2_index), '{"text": "see <\\/tool_call>"}', smollm2_tokenizer)
    # Without tools nothing is parsed for calls, so nothing is reserved.
    alone = _compiled([], "none", schema)
    assert _accepts(Matcher(alone, smollm2_index), '{"text": "<tool_call>"}', smollm2_tokenizer)
