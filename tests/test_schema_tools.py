"""Tools from a JSON Schema (MCP, OpenAPI, OpenAI dicts) and an API that refuses mistakes."""

from __future__ import annotations

import asyncio
from typing import Any, Literal

import pytest
from pydantic import BaseModel

from sdk import Agent, ConfigError, Message, ModelRetry, SDKError, Tool, ToolDefinitionError, tool
from sdk.backends.test import TestModel, ToolCallScript
from sdk.errors import ConfigError as ConfigErrorAlias

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "minLength": 2},
                "days": {"type": "integer", "minimum": 1, "maximum": 14},
                "when": {"type": "string", "format": "date"},
                "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
            },
            "required": ["city"],
            "additionalProperties": False,
        },
    },
}


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _model(tok: Any, *script: Any) -> TestModel:
    return TestModel(list(script), tokenizer=tok)


def test_schema_tool_runs_with_keywords(smollm2_tokenizer: Any) -> None:
    seen: list[dict[str, Any]] = []

    def weather(city: str, days: int = 1) -> str:
        seen.append({"city": city, "days": days})
        return f"sunny in {city}"

    t = Tool.from_openai(WEATHER, weather)
    assert t.name == "get_weather" and t.description == "Weather in a city."
    assert t.to_openai()["function"]["parameters"]["properties"]["days"]["maximum"] == 14
    m = _model(smollm2_tokenizer, ToolCallScript("get_weather", {"city": "Oslo", "days": 3}), "ok")
    result = Agent(m, tools=[t]).run_sync("Weather in Oslo for 3 days?")
    assert seen == [{"city": "Oslo", "days": 3}]
    [call] = result.tool_calls
    assert call.args.city == "Oslo" and call.args.model_dump() == {"city": "Oslo", "days": 3}
    assert call.result == "sunny in Oslo"


def test_async_schema_tool(smollm2_tokenizer: Any) -> None:
    async def double(x: int) -> int:
        await asyncio.sleep(0)
        return 2 * x

    t = Tool.from_schema("double", {"properties": {"x": {"type": "integer"}}}, double)
    m = _model(smollm2_tokenizer, ToolCallScript("double", {"x": 4}), "8")
    assert Agent(m, tools=[t]).run_sync("x").tool_calls[0].result == 8


def test_schema_violation_is_feedback_and_retried(smollm2_tokenizer: Any) -> None:
    """`uniqueItems` is left to validation: a repeated tag goes back to the model as feedback
    (never a raw jsonschema exception) and the corrected call runs."""
    t = Tool.from_openai(WEATHER, lambda city, tags=(): f"{city} {tags}")
    script = [
        ToolCallScript("get_weather", {"city": "Oslo", "tags": ["a", "a"]}),
        ToolCallScript("get_weather", {"city": "Oslo", "tags": ["a", "b"]}),
        "done",
    ]
    result = Agent(_model(smollm2_tokenizer, *script), tools=[t]).run_sync("x")
    first, second = result.tool_calls
    assert first.args is None and "tags" in (first.error or "")
    assert "non-unique" in (first.error or "")
    assert second.result == "Oslo ['a', 'b']" and result.usage.retries == 1
    assert "Validation feedback" in result.messages[2].content


def test_openai_dicts_in_tools_are_declared_tools(smollm2_tokenizer: Any) -> None:
    m = _model(smollm2_tokenizer, ToolCallScript("get_weather", {"city": "Oslo"}))
    plan = Agent(m, tools=[WEATHER, WEATHER["function"] | {"name": "other"}]).plan_sync("x")
    assert plan.tool_calls[0].args.city == "Oslo"
    m = _model(smollm2_tokenizer, ToolCallScript("get_weather", {"city": "Oslo"}))
    with pytest.raises(SDKError, match="without a function"):
        Agent(m, tools=[WEATHER]).run_sync("x")


def test_duck_typed_validator_errors_become_feedback(smollm2_tokenizer: Any) -> None:
    class Strict:
        name = "echo"
        json_schema: dict[str, Any] = {"type": "object", "properties": {"s": {"type": "string"}}}
        description = ""

        def to_openai(self) -> dict[str, Any]:
            return Tool.from_schema("echo", self.json_schema).to_openai()

        def validate_args(self, data: Any) -> Any:
            raise LookupError("no such thing")

        def call(self, args: Any, ctx: Any = None) -> Any:
            return "never"

    m = _model(smollm2_tokenizer, ToolCallScript("echo", {"s": "a"}), "ok")
    result = Agent(m, tools=[Strict()], retries=1).run_sync("x")
    assert "LookupError: no such thing" in (result.tool_calls[0].error or "")


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (("bad name!", {}), "name"),
        (("t", {"type": "string"}), "object"),
        (("t", {"type": "object", "properties": {"a": {"type": 12}}}), "invalid JSON Schema"),
        (("t", {"$ref": "#/nowhere"}), "nowhere"),
        (("t", ["not", "a", "schema"]), "JSON Schema object"),
    ],
)
def test_bad_schema_tools_are_refused_at_definition(args: tuple[Any, ...], match: str) -> None:
    with pytest.raises(ToolDefinitionError, match=match):
        Tool.from_schema(*args)
    with pytest.raises(ToolDefinitionError, match="not an OpenAI function"):
        Tool.from_openai({"type": "function"})


# ------------------------------------------------------------------ mistakes are refused


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"max_tokens": 0}, "max_tokens"),
        ({"max_tokens": -5}, "max_tokens"),
        ({"max_tokens": 1.5}, "max_tokens"),
        ({"max_steps": 0}, "max_steps"),
        ({"temperature": -0.1}, "temperature"),
        ({"temperature": float("nan")}, "temperature"),
        ({"top_p": 0}, "top_p"),
        ({"seed": "7"}, "seed"),
        ({"tools": add}, r"tools=\[add\]"),
        ({"tools": "add"}, "list of tools"),
        ({"tool_choice": {"type": "function"}}, "OpenAI form"),
        ({"tool_choice": 3}, "tool_choice"),
        ({"tool_choice": "nope"}, "neither a mode"),
        ({"retries": -1}, "retries"),
        ({"tool_errors": "ignore"}, "tool_errors"),
        ({"call_style": "wide"}, "call_style"),
    ],
)
def test_bad_settings_are_config_errors(
    smollm2_tokenizer: Any, kwargs: dict[str, Any], match: str
) -> None:
    kwargs.setdefault("tools", [add])
    with pytest.raises(ConfigError, match=match) as info:
        Agent(_model(smollm2_tokenizer, "x"), **kwargs)
    assert isinstance(info.value, SDKError) and isinstance(info.value, ValueError)
    assert ConfigError is ConfigErrorAlias


def test_openai_tool_choice_dict_names_a_tool(smollm2_tokenizer: Any) -> None:
    m = _model(smollm2_tokenizer, ToolCallScript("add", {"a": 1, "b": 2}), "3")
    agent = Agent(m, tools=[add], tool_choice={"type": "function", "function": {"name": "add"}})
    assert agent.run_sync("1+2").tool_calls[0].result == 3


@pytest.mark.parametrize("history", [["hello"], "hello", [{"role": "robot", "content": "x"}], [3]])
def test_bad_history_is_a_config_error(smollm2_tokenizer: Any, history: Any) -> None:
    with pytest.raises(ConfigError, match="message"):
        Agent(_model(smollm2_tokenizer, "x")).run_sync("hi", message_history=history)


def test_literal_output_type(smollm2_tokenizer: Any) -> None:
    agent = Agent(
        _model(smollm2_tokenizer, '"positive"'), output_type=Literal["positive", "negative"]
    )
    assert agent.run_sync("Great!").output == "positive"


# ------------------------------------------------------------------ continuing a conversation


class Ticket(BaseModel):
    title: str


class Invoice(BaseModel):
    total: int


def test_continued_history_shows_the_current_agent(smollm2_tokenizer: Any) -> None:
    m1 = _model(smollm2_tokenizer, ToolCallScript("add", {"a": 1, "b": 2}), '{"title": "t"}')
    r1 = Agent(m1, tools=[add], output_type=Ticket, system_prompt="You write tickets.").run_sync(
        "a"
    )
    m2 = _model(smollm2_tokenizer, ToolCallScript("add", {"a": 3, "b": 4}), '{"total": 7}')
    agent2 = Agent(m2, tools=[add], output_type=Invoice, system_prompt="You write invoices.")
    r2 = agent2.run_sync("b", message_history=r1.messages)
    system = r2.messages[0]
    assert system.role == "system" and "invoices" in system.content
    assert "tickets" not in system.content and "title" not in system.content
    assert sum(msg.role == "system" for msg in r2.messages) == 1
    assert "invoices" in m2.prompts[0] and "tickets" not in m2.prompts[0]
    ids = [c.id for c in r1.tool_calls + r2.tool_calls]
    assert len(set(ids)) == len(ids) == 2
    # A system message the user wrote is kept; the agent's instructions follow it.
    mine = [Message.system("Be terse."), Message.user("hi")]
    m3 = _model(smollm2_tokenizer, '{"total": 1}')
    r3 = Agent(m3, output_type=Invoice, system_prompt="You write invoices.").run_sync(
        message_history=mine
    )
    assert r3.messages[0].content.startswith("Be terse.") and "invoices" in r3.messages[0].content


def test_the_sdk_logger_reports_compiles_turns_calls_and_retries(
    smollm2_tokenizer: Any, caplog: pytest.LogCaptureFixture
) -> None:
    @tool
    def positive(n: int) -> int:
        """Echo a positive number."""
        if n < 0:
            raise ModelRetry("n must be positive")
        return n

    caplog.set_level("DEBUG", logger="sdk")
    script = [ToolCallScript("positive", {"n": -1}), ToolCallScript("positive", {"n": 1}), "1"]
    Agent(_model(smollm2_tokenizer, *script), tools=[positive], retries=2).run_sync("1")
    text = "\n".join(f"{r.name} {r.getMessage()}" for r in caplog.records)
    assert "sdk.grammar turn grammar:" in text
    assert "sdk.agent turn 1 (auto):" in text and "forced" in text
    assert 'sdk.agent call call_1_0: positive({"n": -1})' in text
    assert "sdk.agent retry (positive): n must be positive" in text


# ------------------------------------------------------------------ per-run settings


def test_per_run_settings_override_the_agents(smollm2_tokenizer: Any) -> None:
    from sdk import TruncationError

    agent = Agent(_model(smollm2_tokenizer, "12345", "12345"), output_type=int, retries=0)
    with pytest.raises(TruncationError, match="max_tokens=2"):
        agent.run_sync("x", settings={"max_tokens": 2})
    assert agent.run_sync("x").output == 12345  # the agent's own setting again
    for bad, match in (
        ({"max_tokens": 0}, "max_tokens"),
        ({"temperature": -1}, "temperature"),
        ({"top_k": 3}, "unknown"),
    ):
        with pytest.raises(ConfigError, match=match):
            agent.run_sync("x", settings=bad)


def test_usage_limits_stop_the_run(smollm2_tokenizer: Any) -> None:
    from sdk import UsageLimitExceeded, UsageLimits

    def script() -> TestModel:
        calls = [ToolCallScript("add", {"a": 1, "b": 2}), ToolCallScript("add", {"a": 3, "b": 4})]
        return _model(smollm2_tokenizer, calls, ToolCallScript("add", {"a": 5, "b": 6}), "done")

    with pytest.raises(UsageLimitExceeded, match="tool_calls") as info:
        Agent(script(), tools=[add]).run_sync("x", usage_limits=UsageLimits(tool_calls=2))
    assert [m.role for m in info.value.messages].count("tool") == 2  # two ran, the third not
    with pytest.raises(UsageLimitExceeded, match="output_tokens"):
        Agent(script(), tools=[add]).run_sync("x", usage_limits=UsageLimits(output_tokens=10))
    ok = Agent(script(), tools=[add]).run_sync("x", usage_limits=UsageLimits(tool_calls=3))
    assert ok.output == "done"
    with pytest.raises(ConfigError, match="tool_calls"):
        UsageLimits(tool_calls=-1)


def test_prepare_tools_per_turn(smollm2_tokenizer: Any) -> None:
    """Turn 1 offers only `add`; a `mul` call cannot even be written then. Turn 2 offers
    `mul` only, under a per-run description."""
    import dataclasses

    @tool
    def mul(a: int, b: int) -> int:
        """Multiply two integers."""
        return a * b

    seen: list[tuple[int, list[str]]] = []

    def prepare(ctx: Any, tools: list[Any]) -> list[Any]:
        keep = ["add"] if ctx.step == 1 else ["mul"]
        seen.append((ctx.step, [t.name for t in tools]))
        return [
            dataclasses.replace(t, description=f"step {ctx.step}") for t in tools if t.name in keep
        ]

    model = _model(
        smollm2_tokenizer,
        ToolCallScript("add", {"a": 1, "b": 2}),
        ToolCallScript("mul", {"a": 3, "b": 4}),
        "12",
    )
    result = Agent(model, tools=[add, mul]).run_sync("x", prepare_tools=prepare)
    assert [c.result for c in result.tool_calls] == [3, 12]
    assert seen[0] == (1, ["add", "mul"])
    assert '"mul"' not in model.prompts[0] and "step 2" in model.prompts[1]
    blocked = _model(smollm2_tokenizer, ToolCallScript("mul", {"a": 3, "b": 4}))
    with pytest.raises(Exception, match="grammar"):
        Agent(blocked, tools=[add, mul]).run_sync("x", prepare_tools=prepare)
    with pytest.raises(ConfigError, match="only the agent's own tools"):
        Agent(_model(smollm2_tokenizer, "x"), tools=[add]).run_sync(
            "x", prepare_tools=lambda ctx, tools: [mul]
        )
