"""The request bodies `OpenAIChatModel` builds, checked against the servers' own request models
at pinned versions (field names read from their source: `tests/fixtures/server_protocols.json`).
A field a server does not declare is ignored there, so the turn would run unconstrained while
reported as constrained: every top-level field we send must be one the target declares, or be
enforced on the client as well (named below)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from sdk import tool
from sdk.backends.openai import OpenAIChatModel
from sdk.decoding import SamplingConfig, TurnRequest
from sdk.decoding.formats import HERMES
from sdk.decoding.turn_grammar import build_turn_grammar
from sdk.messages import Message
from sdk.tools import as_tool

PROTOCOLS = json.loads(
    (Path(__file__).parent / "fixtures" / "server_protocols.json").read_text(encoding="utf-8")
)


@tool
def get_weather(city: str) -> str:
    """Weather in a city."""
    return "sunny"


class Answer(BaseModel):
    text: str


#: (server, constraint, grammar_field) as the remote guide configures each server.
SETUPS = [
    ("vllm", "gbnf", "structured_outputs.grammar"),
    ("vllm", "lark", None),
    ("vllm", "json_schema", None),
    ("vllm", "none", None),
    ("vllm", "structural_tag", None),
    ("sglang", "gbnf", "ebnf"),
    ("sglang", "json_schema", None),
    ("sglang", "none", None),
    ("sglang", "structural_tag", None),
]

#: Fields a target does not declare but the backend also enforces itself: `parse_response`
#: keeps only the first call when `parallel_tool_calls=False`.
CLIENT_ENFORCED = {"parallel_tool_calls"}


def _bodies(model: OpenAIChatModel) -> list[dict[str, Any]]:
    tools = [as_tool(get_weather)]
    schema = Answer.model_json_schema()
    bodies = []
    for choice, output, parallel in [
        ("auto", None, True),
        ("required", None, False),
        ("get_weather", None, True),
        ("none", schema, True),
        ("auto", schema, False),
    ]:
        request = TurnRequest(
            messages=(Message.user("Weather in Paris?"),),
            tools=tools if choice != "none" else [],
            tool_choice=choice,
            output_schema=output,
            fmt=HERMES,
        )
        grammar = build_turn_grammar(tools, choice, output, parallel_tool_calls=parallel)
        bodies.append(
            model.build_request(
                request,
                grammar,
                max_tokens=64,
                sampling=SamplingConfig(temperature=0.7, top_p=0.9, seed=3),
                parallel_tool_calls=parallel,
            )
        )
    return bodies


@pytest.mark.parametrize(("server", "constraint", "field"), SETUPS)
def test_every_field_sent_is_one_the_server_declares(
    server: str, constraint: Any, field: str | None
) -> None:
    declared = set(PROTOCOLS[server]["fields"])
    model = OpenAIChatModel("http://server/v1", "m", constraint=constraint, grammar_field=field)
    seen: set[str] = set()
    for body in _bodies(model):
        seen |= set(body)
    unknown = seen - declared - CLIENT_ENFORCED
    assert not unknown, f"{server} ({PROTOCOLS[server]['commit'][:10]}) ignores {unknown}"
    if constraint in ("gbnf", "lark"):
        top = (field or model.grammar_field).split(".")[0]
        assert top in seen and top in declared  # the grammar goes where the server reads it


def test_the_pinned_models_hold_what_the_guide_relies_on() -> None:
    vllm, sglang = set(PROTOCOLS["vllm"]["fields"]), set(PROTOCOLS["sglang"]["fields"])
    assert {"structured_outputs", "response_format", "tools", "tool_choice"} <= vllm
    assert "guided_grammar" not in vllm  # gone: `grammar_field="guided_grammar"` is for old vLLM
    assert {"ebnf", "regex", "response_format", "tools", "tool_choice"} <= sglang
    assert "parallel_tool_calls" not in sglang  # hence enforced on the client too


def test_parallel_calls_off_is_enforced_on_the_client() -> None:
    """A server that ignores `parallel_tool_calls` may return several calls: only the first is
    kept."""
    model = OpenAIChatModel("http://server/v1", "m", constraint="json_schema")
    tools = [as_tool(get_weather)]
    request = TurnRequest(
        messages=(Message.user("Weather in Paris and Rome?"),),
        tools=tools,
        tool_choice="required",
        fmt=HERMES,
    )
    grammar = build_turn_grammar(tools, "required", None, parallel_tool_calls=False)
    calls = [
        {"id": f"c{i}", "type": "function",
         "function": {"name": "get_weather", "arguments": json.dumps({"city": c})}}
        for i, c in enumerate(("Paris", "Rome"))
    ]  # fmt: skip
    data = {
        "choices": [
            {"message": {"role": "assistant", "content": None, "tool_calls": calls},
             "finish_reason": "tool_calls"}
        ]
    }  # fmt: skip
    out = model.parse_response(data, request, grammar, parallel_tool_calls=False)
    assert out.calls is not None and [c.arguments for c in out.calls] == [{"city": "Paris"}]


# ------------------------------------------------------------------ structural tags


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _tag(choice: str, parallel: bool = True) -> Any:
    from sdk.backends.openai import structural_tag_for

    tools = [as_tool(get_weather), as_tool(add)]
    request = TurnRequest(
        messages=(Message.user("x"),), tools=tools, tool_choice=choice, fmt=HERMES
    )
    grammar = build_turn_grammar(tools, choice, None, parallel_tool_calls=parallel)
    return structural_tag_for(request, grammar, parallel)


def test_structural_tags_follow_the_turns_choice() -> None:
    auto = _tag("auto")
    fmt = auto["format"]
    assert auto["type"] == "structural_tag" and fmt["type"] == "triggered_tags"
    assert fmt["triggers"] == ["<tool_call>"] and not fmt["at_least_one"]
    weather = fmt["tags"][0]
    assert weather["begin"] == '<tool_call>\n{"name": "get_weather", "arguments": '
    assert weather["end"] == "}\n</tool_call>"
    assert weather["content"]["json_schema"]["required"] == ["city"]
    assert _tag("required")["format"]["at_least_one"]
    assert _tag("auto", parallel=False)["format"]["stop_after_first"]
    assert [t["begin"].split('"')[3] for t in _tag("add")["format"]["tags"]] == ["add"]
    assert _tag("none") is None


def test_structural_tag_requests() -> None:
    model = OpenAIChatModel("http://server/v1", "m", constraint="structural_tag")
    bodies = _bodies(model)
    assert all("tools" not in b for b in bodies)  # described in the prompt, parsed from text
    kinds = [b.get("response_format", {}).get("type") for b in bodies]
    assert kinds == ["structural_tag", "structural_tag", "structural_tag", "json_schema",
                     "structural_tag"]  # fmt: skip
    for server in ("vllm", "sglang"):
        assert set().union(*bodies) <= set(PROTOCOLS[server]["fields"]) | CLIENT_ENFORCED


@pytest.mark.skipif(
    importlib.util.find_spec("xgrammar") is None, reason="xgrammar (a benchmark peer) missing"
)
def test_xgrammar_enforces_the_structural_tags_as_the_turn_means() -> None:
    """Compiled by XGrammar's structural-tag API (what vLLM and SGLang run): the format's calls
    pass, free text before a call only in "auto", a bad argument or an unknown tool never."""
    import xgrammar as xgr
    from xgrammar.testing import _is_grammar_accept_string as accepts

    call = HERMES.render_call("get_weather", {"city": "Paris"})
    call2 = HERMES.render_call("add", {"a": 1, "b": 2})
    texts = {
        "call": call, "text+call": "Let me check.\n" + call, "text": "Hello.",
        "bad": HERMES.render_call("add", {"a": "x", "b": 2}),
        "unknown": call.replace("get_weather", "nope"), "two": call + "\n" + call2,
    }  # fmt: skip
    want = {
        ("auto", True): {"call", "text+call", "text", "two"},
        ("auto", False): {"call", "text+call", "text"},
        ("required", True): {"call", "two"},
        ("add", True): set(),
    }
    for (choice, parallel), accepted in want.items():
        grammar = xgr.Grammar.from_structural_tag(json.dumps(_tag(choice, parallel)))
        got = {k for k, t in texts.items() if accepts(grammar, t)}
        assert got == accepted, (choice, parallel)
    only_add = xgr.Grammar.from_structural_tag(json.dumps(_tag("add")))
    assert accepts(only_add, call2) and not accepts(only_add, call)


_UNDECLARED = [
    {"type": "object", "required": ["a"]},
    {"type": "object", "properties": {"p": {"type": "object", "required": ["a", "b"]}}},
    {"type": "object", "required": ["n"], "additionalProperties": {"type": "integer"}},
    {"type": "object", "required": ["x1"], "patternProperties": {"^x": {"type": "string"}}},
    {"type": "object", "required": ["a"], "additionalProperties": False},
    {
        "type": "array",
        "items": {"anyOf": [{"type": "object", "required": ["k"]}, {"type": "null"}]},
    },
]
_INSTANCES = [
    {}, {"a": 1}, {"a": [2], "b": None}, {"p": {"a": 1, "b": 2}}, {"p": {"a": 1}}, {"p": {}},
    {"n": 3}, {"n": "3"}, {"x1": "s"}, {"x1": 1}, [{"k": 1}, None], [{}], [{"j": 1}],
]  # fmt: skip


@pytest.mark.parametrize("schema", _UNDECLARED)
def test_declaring_required_keys_keeps_the_schemas_meaning(schema: dict[str, Any]) -> None:
    """XGrammar reads an object whose `required` keys are not in `properties` as "only `{}`";
    the schemas sent declare them, and every instance keeps its validity."""
    import jsonschema

    from sdk.backends._structural_tag import declare_required

    declared = declare_required(schema)
    assert schema != declared or "additionalProperties" in schema or "patternProperties" in schema
    before = jsonschema.Draft202012Validator(schema)
    after = jsonschema.Draft202012Validator(declared)
    for instance in _INSTANCES:
        assert before.is_valid(instance) == after.is_valid(instance), (schema, instance)


@pytest.mark.skipif(
    importlib.util.find_spec("xgrammar") is None, reason="xgrammar (a benchmark peer) missing"
)
def test_xgrammar_accepts_required_keys_it_would_read_as_forbidden() -> None:
    import xgrammar as xgr
    from xgrammar.testing import _is_grammar_accept_string as accepts

    from sdk.backends._structural_tag import declare_required

    schema = {"type": "object", "properties": {"p": {"type": "object", "required": ["a"]}},
              "required": ["p"]}  # fmt: skip
    call = '{"p": {"a": [2]}}'
    assert not accepts(xgr.Grammar.from_json_schema(json.dumps(schema)), call)  # its reading
    assert accepts(xgr.Grammar.from_json_schema(json.dumps(declare_required(schema))), call)


@pytest.mark.parametrize("schema", _UNDECLARED)
def test_opening_objects_keeps_the_schemas_meaning(schema: dict[str, Any]) -> None:
    """`additionalProperties: true` where a schema has none is the standard's default: every
    instance keeps its validity (XGrammar alone reads the missing keyword as false)."""
    import jsonschema

    from sdk.backends._structural_tag import declare_open_objects

    opened = declare_open_objects(schema)
    before = jsonschema.Draft202012Validator(schema)
    after = jsonschema.Draft202012Validator(opened)
    for instance in [*_INSTANCES, {"p": {"a": 1, "zz": 2}}, {"zz": 1, "a": 1}]:
        assert before.is_valid(instance) == after.is_valid(instance), (schema, instance)
    kept = {"type": "object", "properties": {"a": {}}, "unevaluatedProperties": False}
    assert declare_open_objects(kept) == kept  # an explicit `true` would change it there


@pytest.mark.skipif(
    importlib.util.find_spec("xgrammar") is None, reason="xgrammar (a benchmark peer) missing"
)
def test_xgrammar_takes_undeclared_keys_the_schema_allows() -> None:
    import xgrammar as xgr
    from xgrammar.testing import _is_grammar_accept_string as accepts

    from sdk.backends._structural_tag import declare_open_objects

    schema = {"type": "object", "properties": {"p": {"type": "object"}}, "required": ["p"]}
    reply = '{"p": {"x": 1}, "note": "extra"}'
    assert not accepts(xgr.Grammar.from_json_schema(json.dumps(schema)), reply)  # its reading
    assert accepts(xgr.Grammar.from_json_schema(json.dumps(declare_open_objects(schema))), reply)


def test_the_looser_schema_admits_every_instance_the_schema_does() -> None:
    """What the backend sends after a server refused a typed output's schema: assertions
    dropped (`oneOf` read as `anyOf`), never an instance taken away."""
    import jsonschema

    from sdk.backends._structural_tag import looser_schema

    schema = {
        "type": "object",
        "properties": {
            "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
            "kind": {"oneOf": [{"type": "integer"}, {"type": "number", "minimum": 0}]},
            "name": {"type": "string", "not": {"const": "root"}, "format": "hostname"},
        },
        "required": ["kind"],
    }
    looser = looser_schema(schema)
    assert "oneOf" not in json.dumps(looser) and "uniqueItems" not in json.dumps(looser)
    strict = jsonschema.Draft202012Validator(schema)
    loose = jsonschema.Draft202012Validator(looser)
    instances = [
        {"kind": 1}, {"kind": 2.5}, {"kind": "x"}, {"kind": 1, "tags": ["a", "a"]},
        {"kind": 1, "name": "root"}, {"tags": []}, {"kind": -1.5, "name": "a b"},
    ]  # fmt: skip
    for instance in instances:
        assert loose.is_valid(instance) or not strict.is_valid(instance), instance
    assert loose.is_valid({"kind": 1, "tags": ["a", "a"]})  # it is looser
    kept = {"type": "object", "not": {"required": ["a"]}, "unevaluatedProperties": False}
    assert looser_schema(kept) == kept


_FORMATS = ["HERMES", "QWEN_XML", "PYTHONIC", "MISTRAL_LIST", "MISTRAL_ARGS", "GRANITE",
            "HARMONY", "DEEPSEEK_V3", "LLAMA3_JSON", "FUNCTIONGEMMA"]  # fmt: skip


@pytest.mark.skipif(
    importlib.util.find_spec("xgrammar") is None, reason="xgrammar (a benchmark peer) missing"
)
@pytest.mark.parametrize("name", _FORMATS)
def test_every_formats_calls_pass_its_structural_tag(name: str) -> None:
    """The renderer's calls of every format pass XGrammar's structural-tag API, one and two
    per turn, after free text in "auto"; a bad argument never does."""
    import xgrammar as xgr
    from xgrammar.testing import _is_grammar_accept_string as accepts

    from sdk.backends.openai import structural_tag_for
    from sdk.decoding import formats as F
    from sdk.decoding.formats import format_traits

    fmt = getattr(F, name)
    tools = [as_tool(get_weather), as_tool(add)]
    call = fmt.render_call("get_weather", {"city": "Paris"})
    two = fmt.render_calls([("get_weather", {"city": "Oslo"}), ("add", {"a": 1, "b": 2})])
    bad = fmt.render_call("add", {"a": "x", "b": 2})
    for choice in ("auto", "required"):
        request = TurnRequest(
            messages=(Message.user("x"),), tools=tools, tool_choice=choice, fmt=fmt
        )
        turn = build_turn_grammar(tools, choice, None, fmt)
        grammar = xgr.Grammar.from_structural_tag(json.dumps(structural_tag_for(request, turn)))
        assert accepts(grammar, call), (choice, call)
        assert accepts(grammar, two), (choice, two)
        if choice == "auto":
            assert accepts(grammar, "Let me check.\n" + call) or format_traits(fmt).whole_reply
        if not (choice == "auto" and format_traits(fmt).whole_reply):  # any text, by design
            assert not accepts(grammar, bad), (choice, bad)


@pytest.mark.parametrize("name", _FORMATS)
def test_every_formats_structural_tag_frames_its_calls(name: str) -> None:
    """Without a server engine: each call tag (inside its envelope, where the format has one)
    begins and ends as the renderer's call does, its content a JSON Schema for JSON arguments
    and a grammar otherwise, and the tag is JSON."""
    from sdk.backends.openai import structural_tag_for
    from sdk.decoding import formats as F
    from sdk.decoding.formats import format_traits

    fmt = getattr(F, name)
    tools = [as_tool(get_weather), as_tool(add)]
    request = TurnRequest(messages=(Message.user("x"),), tools=tools, tool_choice="auto", fmt=fmt)
    tag = structural_tag_for(request, build_turn_grammar(tools, "auto", None, fmt))
    assert tag is not None
    json.dumps(tag)
    node = tag["format"]
    pre = post = ""
    if node["type"] == "sequence":  # a reasoning span first (Harmony's analysis channel)
        node = node["elements"][-1]
    if node["type"] == "or":  # calls or any text (a whole-reply format)
        node = node["elements"][0]
    if node["type"] == "triggered_tags":
        assert node["triggers"] == [fmt.opener]
        node = (
            node["tags"][0] if node["tags"][0]["content"]["type"] == "tags_with_separator" else node
        )
    if node["type"] == "tag":  # an envelope of calls
        pre, post, node = node["begin"], node["end"], node["content"]
    weather = next(t for t in node["tags"] if "get_weather" in t["begin"])
    call = fmt.render_call("get_weather", {"city": "Paris"})
    assert call.startswith(pre + weather["begin"]), (call, pre + weather["begin"])
    assert call.endswith(weather["end"] + post), (call, weather["end"] + post)
    json_args = format_traits(fmt).surface == "json" and name != "MISTRAL_LIST"
    assert weather["content"]["type"] == ("json_schema" if json_args else "grammar")


@pytest.mark.skipif(
    importlib.util.find_spec("xgrammar") is None, reason="xgrammar (a benchmark peer) missing"
)
def test_structural_tags_let_a_reasoning_span_come_first() -> None:
    """A reasoning model's span (opened by the reply, or by the prompt) then its call, also
    in "required"; with a reasoning budget, free text before a required call; a call written
    inside the span is no call, so the span alone is no answer to a required turn."""
    import xgrammar as xgr
    from xgrammar.testing import _is_grammar_accept_string as accepts

    from sdk.backends.openai import structural_tag_for

    tools = [as_tool(get_weather), as_tool(add)]
    call = HERMES.render_call("get_weather", {"city": "Paris"})
    think = HERMES.with_reasoning(("<think>", "</think>"))
    for choice in ("required", "auto"):
        request = TurnRequest(
            messages=(Message.user("x"),), tools=tools, tool_choice=choice, fmt=think
        )
        turn = build_turn_grammar(tools, choice, None, think)
        g = xgr.Grammar.from_structural_tag(json.dumps(structural_tag_for(request, turn)))
        assert accepts(g, call) and accepts(g, "<think>hm</think>\n" + call)
        assert accepts(g, "hm, " + call + " is it</think>\n\n" + call)  # opened by the prompt
        assert accepts(g, "<think>only</think>") == (choice == "auto")
    request = TurnRequest(messages=(Message.user("x"),), tools=tools, tool_choice="required")
    free = build_turn_grammar(tools, "required", None, HERMES, reasoning=True)
    assert free.text_first
    g = xgr.Grammar.from_structural_tag(json.dumps(structural_tag_for(request, free)))
    assert accepts(g, "First the city.\n" + call) and not accepts(g, "No call.")


def test_legacy_structural_tags_have_the_shape_older_sglang_takes() -> None:
    """`tag_shape="legacy"`: the response format SGLang's pinned model declares (structures of
    begin, schema and end; triggers); a format whose calls are no single JSON object after
    their trigger is refused with a typed error, never sent half-right."""
    from sdk.decoding import formats as F
    from sdk.errors import ConfigError

    shape = PROTOCOLS["sglang"]["structural_tag"]
    model = OpenAIChatModel(
        "http://server/v1", "m", constraint="structural_tag", tag_shape="legacy"
    )
    tools = [as_tool(get_weather), as_tool(add)]
    for choice in ("auto", "required", "add"):
        request = TurnRequest(messages=(Message.user("x"),), tools=tools, tool_choice=choice)
        body = model.build_request(request, build_turn_grammar(tools, choice), max_tokens=8)
        tag = body["response_format"]
        assert sorted(tag) == sorted(shape["fields"]) and tag["triggers"] == ["<tool_call>"]
        for s in tag["structures"]:
            assert sorted(s) == sorted(shape["structure"]["fields"])
        assert len(tag["structures"]) == (1 if choice == "add" else 2)
    for name in ("QWEN_XML", "MISTRAL_LIST", "PYTHONIC"):
        fmt = getattr(F, name)
        request = TurnRequest(
            messages=(Message.user("x"),), tools=tools, tool_choice="auto", fmt=fmt
        )
        with pytest.raises(ConfigError, match="tag_shape='legacy'"):
            model.build_request(request, build_turn_grammar(tools, "auto", None, fmt), max_tokens=8)
    with pytest.raises(ValueError, match="tag_shape"):
        OpenAIChatModel("http://server/v1", "m", constraint="structural_tag", tag_shape="new")  # type: ignore[arg-type]


@pytest.mark.skipif(
    importlib.util.find_spec("xgrammar") is None, reason="xgrammar (a benchmark peer) missing"
)
def test_xgrammar_reads_legacy_structural_tags_as_one_call_per_trigger() -> None:
    import xgrammar as xgr
    from xgrammar.testing import _is_grammar_accept_string as accepts

    from sdk.backends.openai import legacy_structural_tag

    tag = legacy_structural_tag(_tag("auto"), HERMES)
    items = [xgr.StructuralTagItem(**s) for s in tag["structures"]]
    grammar = xgr.Grammar.from_structural_tag(items, tag["triggers"])
    call = HERMES.render_call("get_weather", {"city": "Paris"})
    assert accepts(grammar, call) and accepts(grammar, "Sure.\n" + call)
    assert not accepts(grammar, HERMES.render_call("add", {"a": "x", "b": 2}))


_SENT = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "pattern": "[a-z]{3}"},
        "tags": {"type": "array", "items": {"type": "string"}, "properties": {"x": {}}},
        "owner": {"$ref": "#/$defs/Person"},
        "either": {"anyOf": [{"properties": {"a": {"type": "integer"}}}, {"type": "null"}]},
        "parts": {"allOf": [{"properties": {"p": {}}}, {"properties": {"q": {}}}]},
    },
    "required": ["name", "id"],
    "$defs": {"Person": {"type": "object", "properties": {"email": {"pattern": "^\\\\S+@"}}}},
}


def _closed_accepts(schema: Any, instance: Any) -> bool:
    """Our matcher over the typed output's grammar, as the agent compiles it."""
    from sdk.grammar import compile_schema
    from tests._oracle import engine_accepts

    lark = compile_schema(schema, whitespace="compact", close_objects=True).lark
    return engine_accepts(lark, json.dumps(instance, separators=(",", ":")))


def test_the_sent_schema_means_what_the_agent_enforces() -> None:
    """A typed output's JSON Schema as servers get it (`sent_schema`): objects the agent
    closes sent closed (a required member no part declares declared), objects made of parts
    sent open (looser: the agent validates), keywords of a type the node cannot have dropped,
    patterns written as whole-string matches. Checked with `jsonschema` against our own
    matcher under `close_objects`: the same verdicts, but for the open parts' extra members."""
    import jsonschema

    from sdk.backends._sent_schema import sent_schema

    sent = sent_schema(_SENT)
    assert sent["additionalProperties"] is False and sent["properties"]["id"] == {}
    assert "properties" not in sent["properties"]["tags"]
    assert sent["$defs"]["Person"]["additionalProperties"] is False  # referenced alone
    assert sent["properties"]["either"]["anyOf"][0]["additionalProperties"] is False
    assert all(p["additionalProperties"] is True for p in sent["properties"]["parts"]["allOf"])
    assert sent["properties"]["name"]["pattern"] == "^[\\s\\S]*(?:[a-z]{3})[\\s\\S]*$"
    check = jsonschema.Draft202012Validator(sent)

    def made(name: str = "xabcx", **members: Any) -> dict[str, Any]:
        return {"name": name, **members, "id": 1}  # the declared order: `id` comes last

    same = [
        made(), {**made(), "zz": 1}, made("ab"), {"name": "abc"}, made(tags=["t"]),
        made(owner={"email": "a@b"}), made(owner={"email": "a@b", "x": 1}),
        made(owner={"email": " @b"}), made(either={"a": 1}), made(either={"a": 1, "b": 2}),
        made(either=None), made(parts={"p": 1, "q": 2}),
    ]  # fmt: skip
    for instance in same:
        assert check.is_valid(instance) == _closed_accepts(_SENT, instance), instance
    looser = made(parts={"p": 1, "zz": 2})
    assert check.is_valid(looser) and not _closed_accepts(_SENT, looser)


@pytest.mark.parametrize(
    ("pattern", "kept"),
    [("abc", False), ("^ab", False), ("c$", False), ("^a|b", True), ("a|b", False),
     ("^abc$", True), ("(^a)b", True), ("[$^]x", False), ("\\^a", False), ("", False)],
)  # fmt: skip
def test_patterns_are_sent_as_whole_string_matches(pattern: str, kept: bool) -> None:
    """XGrammar and llama.cpp match `pattern` against the whole string; the standard
    searches. Sent anchored as what it means, or as it is where anchors sit elsewhere."""
    import re

    from sdk.backends._sent_schema import full_match

    sent = full_match(pattern)
    assert (sent == pattern) == kept
    for text in ["", "a", "b", "abc", "xabc", "abcx", "^a", "x$x", "c", "ba", "a\nb"]:
        want = re.search(pattern, text) is not None
        got = re.fullmatch(sent, text) is not None if not kept else want
        assert got == want, (pattern, sent, text)


_PIECES = ["a", "b", "ab", ".", "^", "$", "|", "(", ")", "[ab]", "[^a]", "*", "?", "+",
           "\\^", "\\$", "[$^]", "(?:", "\\d", "{2}"]  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=6), st.lists(st.sampled_from("ab1^$\n"),
       max_size=5))  # fmt: skip
def test_a_sent_pattern_matches_whole_strings_as_the_pattern_searches(
    pieces: list[str], chars: list[str]
) -> None:
    """Property: wherever `full_match` rewrites a pattern, matching the whole string with the
    rewrite accepts exactly the strings the pattern's search finds (Python's `re`, which
    agrees with ECMA on these pieces); where it cannot, it leaves the pattern as it is."""
    import re

    from sdk.backends._sent_schema import full_match

    pattern = "".join(pieces)
    try:
        re.compile(pattern)
    except re.error:
        return
    sent = full_match(pattern)
    if sent == pattern and not pattern.startswith("^[\\s\\S]*"):
        return  # kept as it is (anchors elsewhere, or already whole)
    text = "".join(chars)
    assume(not text.endswith("\n"))  # Python's `$` also matches before a final newline; ECMA's not
    assert (re.fullmatch(sent, text) is not None) == (re.search(pattern, text) is not None), (
        pattern,
        sent,
        text,
    )


@pytest.mark.skipif(
    importlib.util.find_spec("xgrammar") is None, reason="xgrammar (a benchmark peer) missing"
)
def test_xgrammar_reads_the_sent_schema_as_the_agent_does() -> None:
    import xgrammar as xgr
    from xgrammar.testing import _is_grammar_accept_string as accepts

    from sdk.backends._sent_schema import sent_schema

    def reads(schema: Any, text: str) -> tuple[bool, bool]:
        raw = xgr.Grammar.from_json_schema(json.dumps(schema))
        sent = xgr.Grammar.from_json_schema(json.dumps(sent_schema(schema)))
        return bool(accepts(raw, text)), bool(accepts(sent, text))

    arr = {"type": "object", "properties": {"items": {"type": "array", "properties": {"n": {}}}}}
    assert reads(arr, '{"items": [1]}') == (False, True)  # object keywords read on an array
    pat = {"type": "object", "properties": {"id": {"type": "string", "pattern": "[0-9]{2}"}}}
    assert reads(pat, '{"id": "a12b"}') == (False, True)  # searched, as the standard says
    assert reads(pat, '{"id": "a1b"}') == (False, False)
    assert reads(pat, '{"id": "12", "x": 1}') == (False, False)  # closed, as the agent reads it


@pytest.mark.skipif(
    importlib.util.find_spec("xgrammar") is None, reason="xgrammar (a benchmark peer) missing"
)
def test_xgrammar_told_takes_the_escapes_a_bounded_string_allows() -> None:
    import xgrammar as xgr
    from xgrammar.testing import _is_grammar_accept_string as accepts

    from sdk.backends.openai import sent_schema

    schema = {"type": "object", "properties": {"trace": {"type": "string", "maxLength": 200},
              "id": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 8}}}  # fmt: skip
    dropped: list[str] = []
    told = sent_schema(schema, "xgrammar", dropped)
    assert dropped == ["/properties/trace: maxLength"]
    named = {"type": "object", "properties": {"pattern": {"type": "string"}}}  # a member's name
    assert sent_schema(named, "xgrammar")["properties"] == named["properties"]
    reply = '{"trace": "at a\\n  at b \\"x\\"", "id": "abc"}'
    assert not accepts(xgr.Grammar.from_json_schema(json.dumps(sent_schema(schema))), reply)
    assert accepts(xgr.Grammar.from_json_schema(json.dumps(told)), reply)
    # the kept pattern still holds there (its bounds XGrammar ignores beside a pattern)
    assert not accepts(xgr.Grammar.from_json_schema(json.dumps(told)), '{"id": "ABC"}')
