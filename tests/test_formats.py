"""Call formats of the model families: detection from chat templates, render/parse round trips,
grammar equivalence, byte-split streaming, special-token markers, and reasoning spans.

Templates: SmolLM2's and Gemma-3's as they ship; for the other families, minimal templates in
`tests/fixtures/templates/` written from each family's published format description.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from sdk import Agent, UnexpectedModelBehavior, tool
from sdk._stream import TurnScanner
from sdk.backends.test import TestModel, ToolCallScript
from sdk.backends.transformers import detect_call_format
from sdk.decoding._markers import format_index
from sdk.decoding.call_style import COMPACT, FLEXIBLE, SPACED
from sdk.decoding.formats import FORMATS, HERMES, CallFormat, QwenXmlFormat, get_format
from sdk.decoding.turn_grammar import build_turn_grammar
from sdk.engine.matcher import Matcher
from sdk.errors import ConfigError, MatcherError
from sdk.events import ArgsDelta, CallStarted, StreamEvent
from sdk.tools import as_tool

TEMPLATES = Path(__file__).parent / "fixtures" / "templates"
THINK = ("<think>", "</think>")


@tool
def get_weather(city: str, days: int = 1, units: str = "metric") -> str:
    """Weather forecast for a city."""
    return f"sunny in {city} for {days} days"


@tool
def add(a: int, b: float, tags: list[str] | None = None) -> float:
    """Add two numbers."""
    return a + b


TOOLS = [as_tool(get_weather), as_tool(add)]

_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
_CALL = st.one_of(
    st.builds(
        lambda city, days: ("get_weather", {"city": city, "days": days}),
        _TEXT,
        st.integers(-(10**6), 10**6),
    ),
    st.builds(
        lambda a, b, tags: ("add", {"a": a, "b": b, "tags": tags}),
        st.integers(-(10**9), 10**9),
        st.floats(-1e6, 1e6, allow_nan=False).map(lambda f: round(f, 4)),
        st.lists(_TEXT, max_size=3),
    ),
)


def _variants() -> list[CallFormat]:
    out: list[CallFormat] = []
    for fmt in FORMATS.values():
        out += [fmt, fmt.with_style(COMPACT), fmt.with_reasoning(THINK)]
    return out


VARIANTS = _variants()
IDS = [f"{f.name}-{f.style.name}{'-think' if f.reasoning else ''}" for f in VARIANTS]


def _clean(calls: list[tuple[str, dict[str, Any]]], fmt: CallFormat) -> list[Any]:
    """Calls whose strings hold no format marker (the grammar reserves those raw), and as many
    as the format allows in one turn."""
    texts = [*fmt.reserved, *(t for t in [getattr(fmt, "closer", None)] if t), fmt.opener]

    def ok(call: tuple[str, dict[str, Any]]) -> bool:
        blob = json.dumps(call[1], ensure_ascii=False)
        return not any(t in blob for t in texts)

    kept = [c for c in calls if ok(c)]
    return kept[: 1 if not fmt.parallel else None]


SCHEMAS = {t.name: t.json_schema for t in TOOLS}


def _parse(fmt: CallFormat, text: str) -> list[Any]:
    """`fmt.parse`, with raw-text values typed by the tool's schema (as the agent does)."""
    calls = fmt.parse(text)
    resolve = getattr(fmt, "resolve_arguments", None)
    if resolve is not None:
        calls = [resolve(c, SCHEMAS[c.name]) if c.name in SCHEMAS else c for c in calls]
    return calls


def _stream(fmt: CallFormat, pieces: list[str]) -> list[StreamEvent]:
    """The events of a turn's text fed in `pieces`, scanned as the agent scans it."""
    events: list[StreamEvent] = []
    streamed = isinstance(fmt, type(HERMES))
    scanner = TurnScanner(
        1,
        fmt.opener,
        fmt.closer,
        events.append,
        parse=None if streamed else lambda t: _parse(fmt, t),
        reasoning=fmt.reasoning,
    )
    for piece in pieces:
        scanner.feed(piece)
    scanner.finish()
    return events


def _turn_text(fmt: CallFormat, calls: list[Any], thought: str = "") -> str:
    text = fmt.render_calls(calls)
    if fmt.reasoning:
        start, end = fmt.reasoning
        text = f"{start}{thought}{end}\n\n{text}"
    return text


# ------------------------------------------------------------------ round trips


@pytest.mark.parametrize("fmt", VARIANTS, ids=IDS)
@settings(max_examples=30, deadline=None)
@given(calls=st.lists(_CALL, min_size=1, max_size=3))
def test_render_then_parse_gives_the_calls_back(fmt: CallFormat, calls: list[Any]) -> None:
    calls = _clean(calls, fmt)
    assume(calls)
    # A fake call inside the reasoning is never parsed.
    fake = fmt.render_calls([("add", {"a": 1, "b": 2.0, "tags": None})])
    parsed = _parse(fmt, _turn_text(fmt, calls, thought=f"maybe {fake}"))
    assert [(p.name, p.arguments, p.error) for p in parsed] == [(n, a, None) for n, a in calls]


@pytest.fixture(scope="module")
def index(smollm2_tokenizer: Any) -> Any:
    from sdk.backends.transformers import index_for

    return index_for(smollm2_tokenizer)


def _accepts(fmt: CallFormat, mode: str, text: str, index: Any, tools: Any = TOOLS) -> bool:
    """Whether the turn grammar over `tools` accepts `text` whole."""
    grammar = build_turn_grammar(tools, mode, fmt=fmt)
    assert grammar.compiled is not None
    m = Matcher(grammar.compiled, index)
    try:
        m.advance_bytes(text.encode())
    except MatcherError:
        return False
    return m.is_accepting()


@pytest.mark.parametrize("fmt", VARIANTS, ids=IDS)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(calls=st.lists(_CALL, min_size=1, max_size=3))
def test_the_grammar_accepts_what_the_renderer_writes(
    fmt: CallFormat, calls: list[Any], index: Any
) -> None:
    calls = _clean(calls, fmt)
    assume(calls)
    text = _turn_text(fmt, calls, thought="let me think")
    for mode in ("required", "auto"):
        assert _accepts(fmt, mode, text, index), (mode, text)
    # ...and not a call in another family's format, nor one of a tool nobody offered.
    other = HERMES if fmt.name != "hermes" else get_format("mistral_args")
    assert not _accepts(fmt, "required", other.render_calls(calls), index)
    unoffered = [(n[:-1], a) for n, a in calls]  # "get_weathe", "ad"
    assert not _accepts(fmt, "required", _turn_text(fmt, unoffered, "hmm"), index)


# ------------------------------------------------------------------ streaming


@pytest.mark.parametrize("fmt", VARIANTS, ids=IDS)
@settings(max_examples=10, deadline=None)
@given(calls=st.lists(_CALL, min_size=1, max_size=2), data=st.data())
def test_a_stream_split_anywhere_gives_the_same_calls(
    fmt: CallFormat, calls: list[Any], data: Any
) -> None:
    calls = _clean(calls, fmt)
    assume(calls)
    fake = fmt.render_calls([("add", {"a": 1, "b": 2.0, "tags": None})])
    text = _turn_text(fmt, calls, thought=f"not {fake} this")
    cuts = sorted(data.draw(st.sets(st.integers(0, len(text)), max_size=8)))
    events = _stream(fmt, [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)])
    names = [e.name for e in events if isinstance(e, CallStarted)]
    assert names == [n for n, _ in calls]
    args: dict[int, str] = {}
    for e in events:
        if isinstance(e, ArgsDelta):
            args[e.index] = args.get(e.index, "") + e.delta
    assert [json.loads(v) for _, v in sorted(args.items())] == [a for _, a in calls]


# ------------------------------------------------------------------ detection


def _with_template(tokenizer: Any, name: str) -> Any:
    tok = copy.copy(tokenizer)
    tok.chat_template = (TEMPLATES / f"{name}.jinja").read_text()
    return tok


@pytest.mark.parametrize(
    ("template", "expected", "reasoning"),
    [
        ("llama3_json", "llama3_json", None),
        ("mistral_v3", "mistral", None),
        ("mistral_v11", "mistral_args", None),
        ("granite", "granite", None),
        ("deepseek_v3", "deepseek_v3", None),
        ("qwen3", "hermes", THINK),
        ("llama_pythonic", "pythonic", None),
        ("qwen3_coder", "qwen_xml", None),
        ("functiongemma", "functiongemma", None),
        ("harmony", "harmony", ("<|channel|>analysis<|message|>", "<|end|><|start|>assistant")),
    ],
)
def test_the_format_is_detected_from_the_chat_template(
    smollm2_tokenizer: Any, template: str, expected: str, reasoning: Any
) -> None:
    tok = _with_template(smollm2_tokenizer, template)
    fmt = detect_call_format(tok)
    assert (fmt.name, fmt.reasoning) == (expected, reasoning)
    agent = Agent(TestModel([], tokenizer=tok), tools=[get_weather])
    assert agent.resolved_format().name == expected


def test_results_show_in_tags_only_to_templates_trained_on_them(smollm2_tokenizer: Any) -> None:
    """A tool-trained template's answer turn (no tools offered) shows results in the
    `<tool_response>` tags it renders itself; a chat template without tools gets plain words
    (tags led SmolLM2 to answer in markup)."""
    from sdk.backends.chat_template import render_prompt
    from sdk.decoding import TurnRequest
    from sdk.messages import Message, ToolCallPart

    call = ToolCallPart(id="c1", name="get_weather", arguments={"city": "Paris"})
    history = [
        Message.user("Weather in Paris?"),
        Message.assistant("", tool_calls=[call]),
        Message.tool("21 C", tool_call_id="c1", name="get_weather"),
        Message.tool("windy", tool_call_id="c2", name="get_wind"),
    ]
    answer = TurnRequest(history, [], tool_choice="none", fmt=HERMES)
    plain = render_prompt(smollm2_tokenizer, answer)
    assert "user\nResult of get_weather: 21 C\nResult of get_wind: windy<|im_end|>" in plain
    assert "<tool_response>" not in plain
    tagged = render_prompt(_with_template(smollm2_tokenizer, "qwen3"), answer)
    assert '<tool_response>\n{"name": "get_weather", "content": "21 C"}\n</tool_response>' in tagged
    assert "Result of" not in tagged


def test_templates_without_tools_get_hermes(smollm2_tokenizer: Any, gemma3_tokenizer: Any) -> None:
    assert detect_call_format(smollm2_tokenizer) is HERMES
    assert detect_call_format(gemma3_tokenizer) is HERMES
    broken = copy.copy(smollm2_tokenizer)
    broken.chat_template = "{{ raise_exception('no tools here') }}"
    assert detect_call_format(broken) is HERMES


def test_a_format_by_name_and_bad_names(smollm2_tokenizer: Any) -> None:
    agent = Agent(TestModel([]), tools=[get_weather], call_format="granite", call_style="compact")
    fmt = agent.resolved_format()
    assert (fmt.name, fmt.style) == ("granite", COMPACT)
    with pytest.raises(ConfigError, match="mistral_args"):
        Agent(TestModel([]), tools=[get_weather], call_format="mistral_v99")
    with pytest.raises(ConfigError):
        Agent(TestModel([]), tools=[get_weather], call_format=42)  # type: ignore[call-overload]


# ------------------------------------------------------------------ agent runs


@pytest.mark.parametrize("name", list(FORMATS))
@pytest.mark.parametrize("style", [SPACED, FLEXIBLE], ids=["spaced", "flexible"])
def test_agent_runs_through_each_format(smollm2_tokenizer: Any, name: str, style: Any) -> None:
    fmt = get_format(name)
    calls = [ToolCallScript("get_weather", {"city": "Paris", "days": 2})]
    if fmt.parallel:
        calls.append(ToolCallScript("add", {"a": 1, "b": 2.5}))
    done = getattr(fmt, "text_prefix", "") + "Done."  # harmony answers in its final channel
    model = TestModel([calls, done], tokenizer=smollm2_tokenizer)
    agent = Agent(model, tools=[get_weather, add], call_format=name, call_style=style)
    result = agent.run_sync("Weather in Paris, and 1 + 2.5?")
    assert [(c.name, c.result) for c in result.tool_calls] == [
        ("get_weather", "sunny in Paris for 2 days"),
        *([("add", 3.5)] if fmt.parallel else []),
    ]
    assert result.output == "Done."


def test_marker_tokens_are_matched_as_the_model_writes_them(smollm2_tokenizer: Any) -> None:
    """Mistral's `[TOOL_CALLS]`/`[ARGS]` are control tokens: the model writes each as ONE token,
    and the grammar must accept exactly that token (not only the text spelled in pieces)."""
    tok = copy.deepcopy(smollm2_tokenizer)
    tok.add_special_tokens({"additional_special_tokens": ["[TOOL_CALLS]", "[ARGS]"]})
    tok.chat_template = (TEMPLATES / "mistral_v11.jinja").read_text()
    marker = tok.convert_tokens_to_ids("[TOOL_CALLS]")
    model = TestModel([ToolCallScript("get_weather", {"city": "Oslo"}), "ok"], tokenizer=tok)
    agent = Agent(model, tools=[get_weather])
    result = agent.run_sync("Weather in Oslo?")
    assert agent.resolved_format().name == "mistral_args"
    assert result.tool_calls[0].result == "sunny in Oslo for 1 days"
    ids = next(m for m in result.messages if m.role == "assistant").metadata["token_ids"]
    assert marker in ids  # written as the control token
    index = format_index(model.index, tok, agent.resolved_format())
    assert index.token_bytes[marker] == b"[TOOL_CALLS]"
    assert model.index.token_bytes[marker] == b""  # the base index is untouched


# ------------------------------------------------------------------ reasoning


def test_calls_inside_the_reasoning_never_run(smollm2_tokenizer: Any) -> None:
    tok = _with_template(smollm2_tokenizer, "qwen3")
    fake = HERMES.render_call("add", {"a": 40, "b": 2})
    script = [
        [
            f"<think>\nI could write {fake} but no.\n</think>\n",
            ToolCallScript("add", {"a": 1, "b": 2}),
        ],
        "<think>\nIt returned 3.\n</think>\n\nThe sum is 3.",
    ]
    agent = Agent(TestModel(script, tokenizer=tok), tools=[get_weather, add])
    result = agent.run_sync("1 + 2?")
    assert [(c.name, c.result) for c in result.tool_calls] == [("add", 3.0)]
    assert result.output == "The sum is 3."
    assert result.reasoning == "<think>\nIt returned 3.\n</think>"
    first = next(m for m in result.messages if m.role == "assistant")
    assert "I could write" in first.content  # the history keeps the reasoning


def test_required_means_a_call_after_the_reasoning(smollm2_tokenizer: Any) -> None:
    tok = _with_template(smollm2_tokenizer, "qwen3")
    script = ["<think>\nNo tool needed.\n</think>\n\nHello!"]
    agent = Agent(TestModel(script, tokenizer=tok), tools=[add], tool_choice="required")
    with pytest.raises(UnexpectedModelBehavior):
        agent.run_sync("hi")


def test_the_reasoning_budget_forces_its_end(index: Any) -> None:
    """Past the budget the gate answers with the end marker (the loop forces it); inside the
    reasoning it never sees a call opener."""
    import torch

    from sdk.decoding._gate import CallGate, GateRun

    gate = GateRun(
        CallGate("<tool_call>", "</tool_call>", bias=0.0, reasoning=THINK, reasoning_budget=3),
        index,
    )
    logits = torch.zeros(index.vocab_size)
    for piece in (b"<think>", b" a <tool_call>"):
        gate.after(piece)
        assert gate.steer(logits) == b"" and not gate.in_call
    gate.after(b" b")
    assert gate.steer(logits) == b"</think>"
    gate.after(b"</think>\n")
    assert not gate.thinking and gate.boundary  # the call decision comes now
    gate.after(b"<tool_call>")
    assert gate.in_call


# ------------------------------------------------------------------ the Python surface


@tool
def configure(name: str, verbose: bool = False, limit: int | None = None) -> str:
    """Configure something."""
    return f"{name} {verbose} {limit}"


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ('[configure(name="a/b", verbose=True, limit=None)]', True),
        ('[configure(name="é\\n\\u00e9", limit=3)]', True),
        ('[configure(name="a\\/b")]', False),  # Python reads `\\/` as two characters
        ('[configure(name="\\ud83d\\ude00")]', False),  # two lone surrogates in Python
        ('[configure(name="x", verbose=true)]', False),  # JSON's literal is not Python's
        ('[configure(verbose=True, name="x")]', False),  # declaration order
        ("[configure(name='x')]", False),  # double quotes only (for now)
    ],
)
def test_pythonic_values_mean_the_same_in_python(text: str, ok: bool, index: Any) -> None:
    import ast

    fmt = get_format("pythonic")
    assert _accepts(fmt, "required", text, index, [as_tool(configure)]) == ok
    if ok:  # what Python reads is what the grammar meant
        call = fmt.parse(text)[0]
        node = ast.parse(text, mode="eval").body
        assert isinstance(node, ast.List)
        first = node.elts[0]
        assert isinstance(first, ast.Call)
        assert call.arguments == {k.arg: ast.literal_eval(k.value) for k in first.keywords}


def test_pythonic_refuses_arguments_that_cannot_be_keywords() -> None:
    from sdk import Tool
    from sdk.errors import SchemaError

    odd = Tool.from_schema(
        "odd",
        {"type": "object", "properties": {"not-an-identifier": {"type": "string"}}},
        lambda **kw: "x",
    )
    with pytest.raises(SchemaError, match="not a Python identifier"):
        build_turn_grammar([odd], "required", fmt=get_format("pythonic"))
    loose = Tool.from_schema(
        "loose",
        {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": True},
        lambda **kw: "x",
    )
    with pytest.raises(SchemaError, match="keyword arguments"):
        build_turn_grammar([loose], "required", fmt=get_format("pythonic"))


def test_a_text_reply_with_brackets_is_text_in_pythonic(smollm2_tokenizer: Any) -> None:
    model = TestModel(['See [1] and [get_weather(city="x")].'], tokenizer=smollm2_tokenizer)
    agent = Agent(model, tools=[get_weather], call_format="pythonic")
    result = agent.run_sync("hi")
    assert result.tool_calls == [] and result.output.startswith("See [1]")


# ------------------------------------------------------------------ XML parameters


@pytest.mark.parametrize(
    ("schema", "raw"),
    [
        ({"type": "string"}, True),
        ({"type": "string", "maxLength": 3}, True),
        ({"enum": ["c", "f"]}, True),
        ({"anyOf": [{"type": "string"}, {"type": "null"}]}, True),
        ({"$ref": "#/$defs/Unit"}, True),
        ({"type": "integer"}, False),
        ({"anyOf": [{"type": "string"}, {"type": "integer"}]}, False),
        ({"type": "array", "items": {"type": "string"}}, False),
    ],
)
def test_xml_string_parameters_are_raw_text(schema: Any, raw: bool, index: Any) -> None:
    """The grammar writes a parameter raw exactly where `resolve_arguments` reads it raw."""
    from sdk import Tool

    args = {
        "type": "object",
        "properties": {"v": schema},
        "required": ["v"],
        "$defs": {"Unit": {"type": "string", "enum": ["c", "f"]}},
    }
    t = Tool.from_schema("t", args, lambda **kw: "x")
    fmt = get_format("qwen_xml")
    word = "<tool_call>\n<function=t>\n<parameter=v>\nc\n</parameter>\n</function>\n</tool_call>"
    assert _accepts(fmt, "required", word, index, [t]) == raw  # a bare word is raw text
    call = fmt.parse(
        "<tool_call>\n<function=t>\n<parameter=v>\n12\n</parameter>\n</function>\n</tool_call>"
    )[0]
    assert isinstance(fmt, QwenXmlFormat)
    typed = fmt.resolve_arguments(call, args).arguments["v"]
    assert typed == ("12" if raw else 12)


def test_xml_raw_text_cannot_end_the_parameter_early(index: Any) -> None:
    fmt = get_format("qwen_xml")
    cases = (("Paris\n</param", True), ("a\n</parameter>b", False), ("x</tool_call>", False))
    for city, ok in cases:
        text = fmt.render_call("get_weather", {"city": city})
        assert _accepts(fmt, "required", text, index, [as_tool(get_weather)]) == ok, city


def test_a_prompt_that_opens_the_reasoning_starts_the_turn_inside_it(
    smollm2_tokenizer: Any,
) -> None:
    """DeepSeek-R1 distills: the generation prompt ends with `<think>\\n`. A call written in the
    reasoning is not a call: not parsed, and not taken for an earlier call the real one would
    repeat (a repeat is cut)."""
    tok = _with_template(smollm2_tokenizer, "r1_distill")
    assert detect_call_format(tok).reasoning == THINK
    fake = HERMES.render_call("add", {"a": 1, "b": 2})
    script = [
        [f"I could write {fake} here.\n</think>\n", ToolCallScript("add", {"a": 1, "b": 2})],
        "It is 3.\n</think>\n\nThe sum is 3.",
    ]
    agent = Agent(TestModel(script, tokenizer=tok), tools=[add])
    result = agent.run_sync("1 + 2?")
    assert [(c.name, c.result) for c in result.tool_calls] == [("add", 3.0)]
    assert result.usage.repeated_calls == 0  # the real call was not cut as a repeat
    first = next(m for m in result.messages if m.role == "assistant")
    assert first.content.endswith(HERMES.render_call("add", {"a": 1, "b": 2}))
    assert result.output == "The sum is 3."
    assert result.reasoning == "It is 3.\n</think>"


def test_a_stream_of_a_prompt_opened_reasoning_shows_no_fake_call(smollm2_tokenizer: Any) -> None:
    tok = _with_template(smollm2_tokenizer, "r1_distill")
    fake = HERMES.render_call("add", {"a": 40, "b": 2})
    script = [
        [f"Not {fake}.\n</think>\n", ToolCallScript("add", {"a": 1, "b": 2})],
        "Done.\n</think>\n\n3",
    ]
    agent = Agent(TestModel(script, tokenizer=tok), tools=[add])
    events = list(agent.run_stream_sync("1 + 2?"))
    started = [e for e in events if isinstance(e, CallStarted)]
    partial = [e.partial for e in events if isinstance(e, ArgsDelta)]
    assert [e.name for e in started] == ["add"]
    assert partial[-1] == {"a": 1, "b": 2}


# ------------------------------------------------------------------ FunctionGemma


def test_functiongemma_strings_hold_its_syntax_and_refuse_its_delimiter(index: Any) -> None:
    fmt = get_format("functiongemma")
    tools = [as_tool(get_weather)]
    tricky = {"city": 'Paris, "TX" {x:1} [a]', "days": 2}
    text = fmt.render_call("get_weather", tricky)
    assert text == (
        '<start_function_call>call:get_weather{city:<escape>Paris, "TX" {x:1} [a]<escape>,'
        "days:2}<end_function_call>"
    )
    assert _accepts(fmt, "required", text, index, tools)
    assert fmt.parse(text)[0].arguments == tricky
    bad = fmt.render_call("get_weather", {"city": "a<escape>b"})
    assert not _accepts(fmt, "required", bad, index, tools)


def test_functiongemma_refuses_keys_it_cannot_write_bare() -> None:
    from sdk import Tool
    from sdk.errors import SchemaError

    for schema in (
        {"type": "object", "properties": {"a b": {"type": "string"}}},
        {"type": "object", "additionalProperties": {"type": "integer"}},
    ):
        t = Tool.from_schema("t", schema, lambda **kw: "x")
        with pytest.raises(SchemaError):
            build_turn_grammar([t], "required", fmt=get_format("functiongemma"))


# ------------------------------------------------------------------ harmony (gpt-oss)


def test_harmony_history_goes_back_in_the_templates_shape(smollm2_tokenizer: Any) -> None:
    tok = _with_template(smollm2_tokenizer, "harmony")
    script = [
        "<|channel|>analysis<|message|>Need add.<|end|><|start|>assistant"
        '<|channel|>commentary to=functions.add <|constrain|>json<|message|>{"a": 1, "b": 2}',
        "<|channel|>final<|message|>It is 3.",
    ]
    model = TestModel(script, tokenizer=tok)
    agent = Agent(model, tools=[add])
    result = agent.run_sync("1 + 2?")
    assert agent.resolved_format().name == "harmony"
    assert [(c.name, c.result) for c in result.tool_calls] == [("add", 3.0)]
    assert result.output == "It is 3."
    second = model.prompts[1]
    assert "<|start|>assistant<|channel|>analysis<|message|>Need add.<|end|>" in second
    assert '<|constrain|>json<|message|>{"a": 1, "b": 2}<|call|>' in second
    assert second.count("<|channel|>commentary to=functions.add") == 1
    assert second.endswith("<|start|>assistant")


def test_harmony_text_replies_open_the_final_channel(smollm2_tokenizer: Any) -> None:
    tok = _with_template(smollm2_tokenizer, "harmony")
    with pytest.raises(UnexpectedModelBehavior):  # text outside a channel is not a reply
        Agent(TestModel(["Hello"], tokenizer=tok), tools=[add]).run_sync("hi")
    ok = Agent(TestModel(["<|channel|>final<|message|>Hello"], tokenizer=tok), tools=[add])
    assert ok.run_sync("hi").output == "Hello"


@pytest.mark.parametrize("name", ["hermes", "qwen_xml"])
def test_a_call_holding_the_reasoning_end_marker_is_still_a_call(name: str) -> None:
    """Only a turn that opens with the start marker reasons: an argument that happens to hold
    `</think>` neither hides its call (parsed whole) nor the calls around it (streamed)."""
    fmt = get_format(name).with_reasoning(THINK)
    calls = [("get_weather", {"city": "</think>", "days": 1})]
    assert [(c.name, c.arguments) for c in _parse(fmt, fmt.render_calls(calls))] == calls
    events = _stream(fmt, list(_turn_text(fmt, calls, thought="hmm")))  # a character at a time
    assert [e.name for e in events if isinstance(e, CallStarted)] == ["get_weather"]


def test_an_unknown_call_rendering_falls_back_to_hermes_with_a_warning(
    smollm2_tokenizer: Any, caplog: pytest.LogCaptureFixture
) -> None:
    tok = copy.copy(smollm2_tokenizer)
    tok.chat_template = (
        "{% for m in messages %}{{ m.role }}: {{ m.content }}"
        "{% for c in m.tool_calls or [] %}CALL {{ c.function.name }} "
        "{{ c.function.arguments | tojson }}{% endfor %}\n{% endfor %}"
        "{% if tools %}{{ tools | tojson }}{% endif %}"
    )
    with caplog.at_level("WARNING", logger="sdk.agent"):
        assert detect_call_format(tok) is HERMES
    assert "does not recognise" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="sdk.agent"):
        detect_call_format(_with_template(smollm2_tokenizer, "granite"))
        detect_call_format(smollm2_tokenizer)  # no calls rendered at all: nothing to say
    assert "does not recognise" not in caplog.text
