"""The request bodies `OpenAIChatModel` builds, checked against the servers' own request models
at pinned versions (field names read from their source: `tests/fixtures/server_protocols.json`).
A field a server does not declare is ignored there, so the turn would run unconstrained while
reported as constrained: every top-level field we send must be one the target declares, or be
enforced on the client as well (named below)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
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
    ("sglang", "gbnf", "ebnf"),
    ("sglang", "json_schema", None),
    ("sglang", "none", None),
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
