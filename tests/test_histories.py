"""Histories in OpenAI's chat format: read with their calls, written back (`to_openai`).

Issue 48: an assistant turn `{"content": None, "tool_calls": [...]}` showed the model an empty
turn, and a tool result without `name` showed `{"name": "", ...}`. The model must see such
calls as it would have written them, and the SDK's own transcripts must still replay byte for
byte, also after a trip through OpenAI's format.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from sdk import Agent, ConfigError, tool
from sdk.backends.openai import OpenAIChatModel
from sdk.backends.test import TestModel, ToolCallScript
from sdk.decoding.formats import HERMES, format_traits, openai_message
from sdk.messages import Message, coerce_messages

TEMPLATES = Path(__file__).parent / "fixtures" / "templates"


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"21 C in {city}"


def _call(call_id: str, name: str, arguments: Any) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def _openai_history(content: str | None = None, arguments: Any = '{"city": "Paris"}') -> list:
    return [
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": content,
            "tool_calls": [_call("call_abc", "get_weather", arguments)],
        },
        {"role": "tool", "tool_call_id": "call_abc", "content": "21 C in Paris"},
    ]


def _sdk_transcript(model: Any, *script: Any) -> list[Message]:
    """A real run's transcript: scripted turns through the real grammar and parser."""
    result = Agent(model(*script), tools=[get_weather]).run_sync("Weather in Paris?")
    return result.all_messages()


def _shown(model: Any, history: list[Any]) -> str:
    """The prompt of the next turn after `history`."""
    m = model("ok")
    Agent(m, tools=[get_weather]).run_sync("And tomorrow?", message_history=history)
    return str(m.prompts[0])


# ---------------------------------------------------------------------- OpenAI histories in


@pytest.mark.parametrize("arguments", ['{"city": "Paris"}', {"city": "Paris"}])
@pytest.mark.parametrize("content", [None, ""])
def test_openai_calls_are_shown_as_the_model_writes_them(
    model: Any, content: str | None, arguments: Any
) -> None:
    shown = _shown(model, _openai_history(content, arguments))
    assert HERMES.render_call("get_weather", {"city": "Paris"}) in shown
    assert "Result of get_weather: 21 C in Paris" in shown
    assert '"name": ""' not in shown
    # exactly what the model is shown after writing that call itself
    sdk = _sdk_transcript(model, ToolCallScript("get_weather", {"city": "Paris"}), "21 C.")
    openai = [*_openai_history(content, arguments), {"role": "assistant", "content": "21 C."}]
    assert _shown(model, openai) == _shown(model, sdk)


def test_text_and_calls_show_the_text_then_the_calls(model: Any) -> None:
    shown = _shown(model, _openai_history("Let me look."))
    call = HERMES.render_call("get_weather", {"city": "Paris"})
    assert f"Let me look.\n{call}" in shown and shown.count(call) == 1


def test_sdk_transcripts_replay_byte_for_byte(model: Any) -> None:
    """A history whose content holds its calls is shown as it is: a run continued from the
    transcript sees the prompt the original run saw."""
    m = model(["Let me look.", ToolCallScript("get_weather", {"city": "Paris"})], "21 C.")
    first = Agent(m, tools=[get_weather]).run_sync("Weather in Paris?")
    history = first.all_messages()[:3]  # user, assistant (text + call), tool
    again = model("21 C.")
    Agent(again, tools=[get_weather]).run_sync(message_history=history)
    assert again.prompts[0] == m.prompts[1]
    assert m.prompts[1].count(HERMES.render_call("get_weather", {"city": "Paris"})) == 1


# ---------------------------------------------------------------------- OpenAI format out


def test_to_openai_gives_the_chat_completions_shape(model: Any) -> None:
    sdk = _sdk_transcript(model, ToolCallScript("get_weather", {"city": "Paris"}), "21 C.")
    user, assistant, result, answer = (openai_message(m, HERMES) for m in sdk)
    assert user == {"role": "user", "content": "Weather in Paris?"}
    assert assistant == {
        "role": "assistant",
        "content": None,
        "tool_calls": [_call(sdk[1].tool_calls[0].id, "get_weather", '{"city": "Paris"}')],
    }
    assert result == {
        "role": "tool",
        "content": "21 C in Paris",
        "tool_call_id": sdk[1].tool_calls[0].id,
        "name": "get_weather",
    }
    assert answer == {"role": "assistant", "content": "21 C."}


@pytest.mark.parametrize(
    "script",
    [
        (ToolCallScript("get_weather", {"city": "Paris"}), "21 C."),
        (["Let me look.", ToolCallScript("get_weather", {"city": "Paris"})], "21 C."),
        (
            [
                ToolCallScript("get_weather", {"city": "Oslo"}),
                ToolCallScript("get_weather", {"city": "Rome"}),
            ],
            ToolCallScript("get_weather", {"city": 'Zürich "Z" </tool_call>'}),
            "Cold.",
        ),
    ],
    ids=["call", "text-then-call", "parallel-and-escapes"],
)
def test_sdk_transcript_round_trips_through_openai_json(model: Any, script: Any) -> None:
    sdk = _sdk_transcript(model, *script)
    stored = json.loads(json.dumps([openai_message(m, HERMES) for m in sdk]))
    back = [Message.from_dict(d) for d in stored]
    assert [m.tool_calls for m in back] == [m.tool_calls for m in sdk]
    assert _shown(model, stored) == _shown(model, sdk)
    texts = [d["content"] for d in stored if d["role"] == "assistant" and d.get("tool_calls")]
    assert all(t is None or "<tool_call>" not in t for t in texts)


def test_text_after_the_calls_stays_raw(model: Any) -> None:
    """A turn the format would not rebuild identically keeps its raw text (and its calls)."""
    sdk = _sdk_transcript(
        model, [ToolCallScript("get_weather", {"city": "Paris"}), "Checking."], "21 C."
    )
    out = openai_message(sdk[1], HERMES)
    assert out["content"] == sdk[1].content and out["tool_calls"]
    assert _shown(model, [openai_message(m, HERMES) for m in sdk]) == _shown(model, sdk)


def test_remote_model_gets_calls_once(model: Any) -> None:
    """A local transcript sent to an OpenAI-compatible server: the calls go as `tool_calls`,
    not also as the Hermes text the local model wrote."""
    sdk = _sdk_transcript(model, ToolCallScript("get_weather", {"city": "Paris"}), "21 C.")
    bodies: list[dict[str, Any]] = []

    def serve(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        message = {"role": "assistant", "content": "Sunny."}
        return httpx.Response(200, json={"choices": [{"message": message}]})

    mock = httpx.MockTransport(serve)
    remote = OpenAIChatModel("http://mock/v1", "m", transport=mock, async_transport=mock)
    Agent(remote, tools=[get_weather]).run_sync("Tomorrow?", message_history=sdk)
    assistant = bodies[0]["messages"][1]
    assert assistant["content"] == "" and "<tool_call>" not in json.dumps(bodies[0])
    assert assistant["tool_calls"][0]["function"]["arguments"] == '{"city": "Paris"}'


@pytest.mark.parametrize(
    "template",
    [
        "deepseek_v3",
        "functiongemma",
        "granite",
        "harmony",
        "llama3_json",
        "llama_pythonic",
        "mistral_v11",
        "mistral_v3",
        "qwen3",
        "qwen3_coder",
    ],
)
def test_every_format_reads_and_writes_openai_histories(
    smollm2_tokenizer: Any, template: str
) -> None:
    """Templates that render tools (each family's call format): an OpenAI-format history
    shows the model what its own transcript shows, and `to_openai(fmt)` round-trips it."""
    tok = copy.copy(smollm2_tokenizer)
    tok.chat_template = (TEMPLATES / f"{template}.jinja").read_text()
    fmt = Agent(TestModel([], tokenizer=tok), tools=[get_weather]).resolved_format()
    answer = format_traits(fmt).text_prefix + "21 C."
    m = TestModel([ToolCallScript("get_weather", {"city": "Paris"}), answer], tokenizer=tok)
    sdk = Agent(m, tools=[get_weather]).run_sync("Weather in Paris?").all_messages()

    def shown(history: list[Any]) -> str:
        nxt = TestModel([format_traits(fmt).text_prefix + "ok"], tokenizer=tok)
        Agent(nxt, tools=[get_weather]).run_sync("And tomorrow?", message_history=history)
        return str(nxt.prompts[0])

    call_id = sdk[1].tool_calls[0].id
    imported = _openai_history()
    imported[1]["tool_calls"][0]["id"] = imported[2]["tool_call_id"] = call_id
    imported.append({"role": "assistant", "content": answer})
    stored = json.loads(json.dumps([openai_message(msg, fmt) for msg in sdk]))
    assert stored[1]["content"] is None
    assert shown(imported) == shown(stored) == shown(sdk)


# ---------------------------------------------------------------------- validation


def test_tool_message_takes_the_name_of_its_call() -> None:
    history = coerce_messages(_openai_history())
    assert history[2] == Message.tool("21 C in Paris", tool_call_id="call_abc", name="get_weather")


def test_tool_message_without_name_or_matching_call(model: Any) -> None:
    history = _openai_history()
    history[2]["tool_call_id"] = "call_nope"
    with pytest.raises(ConfigError, match=r"message_history\[2\].*'call_nope'"):
        Agent(model("x"), tools=[get_weather]).run_sync("?", message_history=history)
    with pytest.raises(ConfigError, match=r"message_history\[0\]: a tool message"):
        coerce_messages([{"role": "tool", "content": "x"}])


@pytest.mark.parametrize(
    ("entry", "field"),
    [
        ({"role": "assistant", "tool_calls": [{"function": {"arguments": "{}"}}]}, "name"),
        (
            {"role": "assistant", "tool_calls": [_call("c", "f", "[1, 2]")]},
            r"tool_calls\[0\]\.function\.arguments: expected a JSON object",
        ),
        (
            {"role": "assistant", "tool_calls": [_call("c", "f", "{oops")]},
            r"tool_calls\[0\]\.function\.arguments: not valid JSON",
        ),
        ({"role": "assistant", "tool_calls": [_call("c", "f", 5)]}, r"arguments: expected"),
        ({"role": "assistant", "tool_calls": ["f()"]}, r"tool_calls\[0\]: expected a call"),
        ({"role": "assistant", "tool_calls": {"id": "c"}}, r"tool_calls: expected a list"),
        (
            {"role": "assistant", "tool_calls": [{"type": "custom", "custom": {}}]},
            r"tool_calls\[0\]\.type",
        ),
        ({"role": "user", "content": "x", "tool_calls": [_call("c", "f", "{}")]}, "tool_calls"),
        ({"role": "function", "name": "f", "content": "x"}, r"role: .*'function'.*use 'tool'"),
        ({"content": "x"}, r"role: unknown message role None"),
        (
            {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]},
            r"content\[0\]: a 'image_url' part",
        ),
        ({"role": "user", "content": 5}, r"content: expected a string"),
        ({"role": "tool", "content": "x", "tool_call_id": 7}, r"tool_call_id: expected"),
    ],
)
def test_bad_dicts_name_the_entry_and_field(model: Any, entry: dict[str, Any], field: str) -> None:
    history = [{"role": "user", "content": "hi"}, entry]
    with pytest.raises(ConfigError, match=r"message_history\[1\]\.[^ ]*" + field):
        Agent(model("x"), tools=[get_weather]).run_sync("?", message_history=history)


def test_developer_role_and_text_parts() -> None:
    history = coerce_messages(
        [
            {"role": "developer", "content": "Be brief."},
            {
                "role": "user",
                "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
            },
        ]
    )
    assert history == [Message.system("Be brief."), Message.user("a\nb")]
    with pytest.raises(ConfigError, match=r"^message\.role"):
        Message.from_dict({"role": "robot", "content": "x"})
