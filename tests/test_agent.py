"""The agent loop: scripted models through the real grammar, then the real SmolLM2 model."""

from __future__ import annotations

import asyncio
import datetime as dt
import enum
import json
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field, field_validator
from tenacity import stop_after_attempt

from sdk import (
    Agent,
    ModelRetry,
    RetriesExhausted,
    RunContext,
    StepLimitExceeded,
    ToolExecutionError,
    TruncationError,
    UnexpectedModelBehavior,
    tool,
)
from sdk.backends.test import FunctionModel, TestModel, ToolCallScript
from sdk.messages import Message
from sdk.tools import as_tool

# ---------------------------------------------------------------------------------- tools


@tool
def get_weather(city: str, unit: Literal["celsius", "fahrenheit"] = "celsius") -> str:
    """Get the current temperature in a city.

    Args:
        city: The city name.
        unit: Temperature unit.
    """
    return f"21 degrees {unit} in {city}"


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


# ------------------------------------------------------------------- scripted: happy paths


def test_call_then_answer(model: Any) -> None:
    m = model(ToolCallScript("get_weather", {"city": "Paris"}), "It is 21 C in Paris.")
    result = Agent(m, tools=[get_weather]).run_sync("Weather in Paris?")
    assert result.output == "It is 21 C in Paris."
    [call] = result.tool_calls
    assert call.name == "get_weather" and call.args is not None
    assert call.args.city == "Paris" and call.args.unit == "celsius"  # type: ignore[attr-defined]
    assert call.result == "21 degrees celsius in Paris"
    assert [m.role for m in result.messages] == ["user", "assistant", "tool", "assistant"]
    u = result.usage
    assert u.steps == 2 and u.forced_tokens > 0 and u.completion_tokens > u.forced_tokens
    assert u.forward_passes < u.completion_tokens  # fast-forward batches forced tokens
    assert "<tools>" in m.prompts[0] and "get_weather" in m.prompts[0]
    # SmolLM2's template has no tool role: the result in plain words, not in tags
    assert "Result of get_weather: 21 degrees celsius in Paris" in m.prompts[1]
    assert "<tool_response>" not in m.prompts[1]


def test_parallel_calls_and_async_tool(model: Any) -> None:
    @tool
    async def slow_double(x: int) -> int:
        """Double x, slowly."""
        await asyncio.sleep(0.01)
        return 2 * x

    m = model(
        [ToolCallScript("slow_double", {"x": 2}), ToolCallScript("add", {"a": 1, "b": 2})],
        "4 and 3",
    )
    result = Agent(m, tools=[slow_double, add]).run_sync("go")
    assert [c.result for c in result.tool_calls] == [4, 3]
    assert [m.role for m in result.messages].count("tool") == 2


def test_async_run_and_run_sync_inside_a_loop(model: Any) -> None:
    agent = Agent(model(ToolCallScript("add", {"a": 2, "b": 3}), "5"), tools=[add])

    async def main() -> tuple[str, str]:
        first = await agent.run("sum")
        agent2 = Agent(model("ok"), tools=[add])
        second = agent2.run_sync("hi")  # inside a running loop: runs on a private one
        return first.output, second.output

    assert asyncio.run(main()) == ("5", "ok")


def test_deps_reach_tools_through_run_context(model: Any) -> None:
    @tool
    def whoami(ctx: RunContext[dict[str, str]], greeting: str) -> str:
        """Greet the current user."""
        return f"{greeting}, {ctx.deps['user']}"

    m = model(ToolCallScript("whoami", {"greeting": "Hi"}), "done")
    result = Agent(m, tools=[whoami]).run_sync("x", deps={"user": "ada"})
    assert result.tool_calls[0].result == "Hi, ada"


def test_output_type(model: Any) -> None:
    class City(BaseModel):
        name: str
        population: int

    agent = Agent(model('{"name": "Oslo", "population": 700000}'), output_type=City)
    result = agent.run_sync("Oslo?")
    assert result.output == City(name="Oslo", population=700000)
    assert "JSON schema" in (
        result.messages[0].content if result.messages[0].role == "system" else ""
    )

    # with tools: a call first, then the JSON answer
    m = model(ToolCallScript("add", {"a": 1, "b": 1}), '{"name": "Two", "population": 2}')
    assert Agent(m, tools=[add], output_type=City).run_sync("x").output.population == 2


def test_output_validation_is_retried(model: Any) -> None:
    class Even(BaseModel):
        n: int

        @field_validator("n")
        @classmethod
        def even(cls, v: int) -> int:
            if v % 2:
                raise ValueError("n must be even")
            return v

    result = Agent(model('{"n": 3}', '{"n": 4}'), output_type=Even).run_sync("x")
    assert result.output.n == 4 and result.usage.retries == 1
    assert "n must be even" in result.messages[-2].content


def test_continue_from_history(model: Any) -> None:
    m = model(ToolCallScript("add", {"a": 1, "b": 2}), "3", "Then 6.")
    agent = Agent(m, tools=[add])
    first = agent.run_sync("1+2?")
    second = agent.run_sync("Double it?", message_history=first.messages)
    assert second.output == "Then 6."
    assert second.messages[: len(first.messages)] == first.messages
    assert [x.content for x in second.new_messages()] == ["Double it?", "Then 6."]
    assert "1+2?" in m.prompts[-1] and "Double it?" in m.prompts[-1]
    # plain dicts (stored JSON) work too
    dicts = [msg.to_dict() for msg in first.messages]
    assert [Message.from_dict(d) for d in json.loads(json.dumps(dicts))] == first.messages


def test_function_model_sees_the_conversation(smollm2_tokenizer: Any) -> None:
    def reply(messages: list[Message], request: Any) -> Any:
        if messages[-1].role == "tool":
            return f"sum is {messages[-1].content}"
        assert [t.name for t in request.tools] == ["add"]
        return ToolCallScript("add", {"a": 20, "b": 22})

    result = Agent(FunctionModel(reply, tokenizer=smollm2_tokenizer), tools=[add]).run_sync("?")
    assert result.output == "sum is 42"


# ---------------------------------------------------------------- scripted: tool_choice modes


def test_tool_choice_none_never_parses_calls(model: Any) -> None:
    """Under "none" tools are not offered, and a call written as text is no answer either:
    the grammar rules it out (a scripted model that insists is rejected)."""
    text = '<tool_call>\n{"name":"add","arguments":{"a":1,"b":2}}\n</tool_call>'
    m = model(text)
    with pytest.raises(UnexpectedModelBehavior, match="rejected"):
        Agent(m, tools=[add], tool_choice="none").run_sync("x")
    assert "<tools>" not in m.prompts[0]  # tools are not offered
    m = model("3")
    result = Agent(m, tools=[add], tool_choice="none").run_sync("x")
    assert result.output == "3" and result.tool_calls == []


def test_required_rejects_text_and_resets_to_auto(model: Any) -> None:
    with pytest.raises(UnexpectedModelBehavior, match="rejected"):
        Agent(model("Sure, here you go."), tools=[add], tool_choice="required").run_sync("x")
    m = model(ToolCallScript("add", {"a": 1, "b": 1}), "two")
    assert Agent(m, tools=[add], tool_choice="required").run_sync("x").output == "two"


def test_named_tool_choice_and_per_turn_list(model: Any) -> None:
    with pytest.raises(UnexpectedModelBehavior):
        Agent(
            model(ToolCallScript("add", {"a": 1, "b": 1})),
            tools=[add, get_weather],
            tool_choice="get_weather",
        ).run_sync("x")
    # ["required", "none"]: call, then answer without tools in the prompt
    m = model(ToolCallScript("add", {"a": 1, "b": 1}), "2")
    agent = Agent(m, tools=[add], tool_choice=["required", "none"])
    assert agent.run_sync("x").output == "2"
    assert "<tools>" in m.prompts[0] and "<tools>" not in m.prompts[1]
    with pytest.raises(ValueError):
        Agent(m, tools=[add], tool_choice="missing")
    with pytest.raises(ValueError):
        Agent(m, tool_choice="required")


def test_parallel_tool_calls_false(model: Any) -> None:
    two = [ToolCallScript("add", {"a": 1, "b": 1}), ToolCallScript("add", {"a": 2, "b": 2})]
    with pytest.raises(UnexpectedModelBehavior):
        Agent(model(two), tools=[add], parallel_tool_calls=False).run_sync("x")


# ---------------------------------------------------------- scripted: the grammar rejects


@pytest.mark.parametrize(
    "reply",
    [
        ToolCallScript("add", '{"a":1,"b":2}'),  # compact JSON: not the call style
        ToolCallScript("add", '{"a": 1, "b": "two"}'),  # wrong type
        ToolCallScript("add", '{"a": 1}'),  # missing required argument
        ToolCallScript("add", '{"a": 1, "b": 2'),  # unbalanced
        ToolCallScript("subtract", {"a": 1, "b": 2}),  # not offered
        '<tool_call>\n{"name": "add"',  # spaced envelope, truncated
    ],
)
def test_malformed_scripted_calls_are_rejected(model: Any, reply: Any) -> None:
    with pytest.raises(UnexpectedModelBehavior) as info:
        Agent(model(reply), tools=[add]).run_sync("x")
    assert info.value.messages and info.value.messages[-1].content == "x"


def test_script_exhausted(model: Any) -> None:
    with pytest.raises(UnexpectedModelBehavior, match="exhausted"):
        Agent(model(ToolCallScript("add", {"a": 1, "b": 1})), tools=[add]).run_sync("x")


# ------------------------------------------------------------------------ retries and errors


def test_model_retry_then_success(model: Any) -> None:
    seen: list[str] = []

    @tool
    def lookup(city: str) -> str:
        """Look a city up."""
        seen.append(city)
        if city != city.title():
            raise ModelRetry("Use the capitalized city name.")
        return "found"

    m = model(
        ToolCallScript("lookup", {"city": "paris"}),
        ToolCallScript("lookup", {"city": "Paris"}),
        "found it",
    )
    result = Agent(m, tools=[lookup]).run_sync("x")
    assert result.output == "found it" and seen == ["paris", "Paris"]
    assert result.usage.retries == 1
    assert result.tool_calls[0].error == "Use the capitalized city name."
    assert "Use the capitalized city name." in m.prompts[1]


def test_validation_error_is_fed_back(model: Any) -> None:
    class Args(BaseModel):
        when: dt.date

        @field_validator("when")
        @classmethod
        def weekday(cls, v: dt.date) -> dt.date:
            if v.weekday() >= 5:  # a rule no grammar can express: checked after parsing
                raise ValueError("we are closed on weekends")
            return v

    @tool
    def book(args: Args) -> str:
        """Book a day."""
        return str(args.when)

    m = model(
        ToolCallScript("book", {"args": {"when": "2024-03-02"}}),
        ToolCallScript("book", {"args": {"when": "2024-02-28"}}),
        "booked",
    )
    result = Agent(m, tools=[book]).run_sync("x")
    assert result.tool_calls[1].result == "2024-02-28"
    assert "Validation feedback" in m.prompts[1] and "closed on weekends" in m.prompts[1]
    assert result.tool_calls[0].args is None and result.usage.retries == 1


def test_retries_exhausted_keeps_every_attempt(model: Any) -> None:
    @tool
    def never(x: int) -> str:
        """Always refuses."""
        raise ModelRetry(f"no {x}")

    calls = [ToolCallScript("never", {"x": i}) for i in range(5)]
    with pytest.raises(RetriesExhausted) as info:
        Agent(model(*calls), tools=[never], retries=2).run_sync("x")
    err = info.value
    assert [a.error for a in err.attempts] == ["no 0", "no 1", "no 2"]
    assert err.raw_output == '{"x": 2}'
    assert err.messages[0].content == "x"

    with pytest.raises(RetriesExhausted) as info2:
        Agent(model(*calls), tools=[never], retries=stop_after_attempt(2)).run_sync("x")
    assert len(info2.value.attempts) == 2


def test_tool_exceptions_return_or_raise(model: Any) -> None:
    @tool
    def boom() -> str:
        """Explodes."""
        raise RuntimeError("kaput")

    m = model(ToolCallScript("boom", {}), "sorry")
    result = Agent(m, tools=[boom]).run_sync("x")
    assert result.tool_calls[0].error == "RuntimeError: kaput"
    assert "RuntimeError: kaput" in m.prompts[1]
    with pytest.raises(ToolExecutionError) as info:
        Agent(model(ToolCallScript("boom", {})), tools=[boom], tool_errors="raise").run_sync("x")
    assert isinstance(info.value.__cause__, RuntimeError)


def test_step_limit(model: Any) -> None:
    calls = [ToolCallScript("add", {"a": 1, "b": 10 * i + 7}) for i in range(3)]
    with pytest.raises(StepLimitExceeded) as info:
        Agent(model(*calls), tools=[add], max_steps=2).run_sync("x")
    assert len([m for m in info.value.messages if m.role == "tool"]) == 2


def test_truncation_inside_a_call(model: Any) -> None:
    m = model(ToolCallScript("get_weather", {"city": "Llanfairpwllgwyngyll" * 3}))
    with pytest.raises(TruncationError) as info:
        Agent(m, tools=[get_weather], max_tokens=20, retries=0).run_sync("x")
    assert info.value.partial_text.startswith('<tool_call>\n{"name": "get_weather"')
    # outside a call, the text is returned with finish_reason="length"
    result = Agent(model("word " * 50), tools=[get_weather], max_tokens=10).run_sync("x")
    assert result.finish_reason == "length" and result.usage.completion_tokens == 10


def test_seeded_sampling_path(model: Any) -> None:
    m = model(ToolCallScript("add", {"a": 1, "b": 2}), "3")
    agent = Agent(m, tools=[add], temperature=0.7, top_p=0.9, seed=1)
    assert agent.run_sync("x").output == "3"  # a one-hot distribution samples its token


def test_bfcl_adapter_and_scoring(model: Any) -> None:
    from sdk.bench.bfcl import RawTool, bfcl_schema, is_correct

    raw = {
        "name": "area.get",
        "description": "Area.",
        "parameters": {
            "type": "dict",
            "properties": {
                "type": {"type": "string"},  # a property called "type" stays a name
                "r": {"type": "float"},
                "dims": {"type": "tuple", "items": {"type": "integer"}},
                "extra": {"type": "any"},
            },
            "required": ["r"],
        },
    }
    schema = bfcl_schema(raw["parameters"])
    assert schema["type"] == "object" and schema["properties"]["r"] == {"type": "number"}
    assert schema["properties"]["type"] == {"type": "string"}
    assert schema["properties"]["dims"]["type"] == "array"
    assert schema["properties"]["extra"] == {}
    t = RawTool.from_bfcl(raw)
    m = model(ToolCallScript("area.get", {"r": 2, "dims": [1, 2]}))
    planned = Agent(m, tools=[t], tool_choice="required").plan_sync("x")
    [call] = planned.tool_calls
    assert call.error is None and call.args is not None and call.args.model_dump()["r"] == 2
    truth = {"area.get": {"r": [2.0], "dims": ["", [1, 2]], "type": [""]}}
    assert is_correct("area.get", {"r": 2, "dims": [1, 2]}, truth)
    assert not is_correct("area.get", {"r": 3}, truth)
    assert not is_correct("area.get", {"r": 2, "bogus": 1}, truth)
    assert not is_correct("other", {"r": 2}, truth)
    nested = {"avg": {"grades": [{"math": [90], "art": ["", 80]}]}}
    assert is_correct("avg", {"grades": {"math": 90}}, nested)
    assert not is_correct("avg", {"grades": {"math": 91}}, nested)


def test_other_tokenizer_without_template(gemma3_tokenizer: Any) -> None:
    """Gemma-3's GGUF tokenizer (262k ids) has no chat template: the built-in one is used."""
    m = TestModel([ToolCallScript("add", {"a": 1, "b": 2}), "3 ✓"], tokenizer=gemma3_tokenizer)
    result = Agent(m, tools=[add], system_prompt="Be brief.").run_sync("1+2?")
    assert result.output == "3 ✓" and result.tool_calls[0].result == 3
    assert m.prompts[1].endswith("<end_of_turn>\n<start_of_turn>model\n")
    assert "Be brief." in m.prompts[0] and "<tools>" in m.prompts[0]


def test_a_built_in_template_reads_the_vocabulary_once(gemma3_tokenizer: Any) -> None:
    """Choosing the built-in template looks for `<start_of_turn>` in the vocabulary: 262k
    entries as a dict, once per tokenizer, not once per prompt."""
    from sdk.backends.chat_template import render_prompt
    from sdk.decoding import TurnRequest

    class Counting:
        chat_template = None

        def __init__(self) -> None:
            self.reads = 0

        def get_vocab(self) -> dict[str, int]:
            self.reads += 1
            return dict(gemma3_tokenizer.get_vocab())

        def apply_chat_template(self, *args: Any, **kwargs: Any) -> Any:
            return gemma3_tokenizer.apply_chat_template(*args, **kwargs)

    tok = Counting()
    prompts = [render_prompt(tok, TurnRequest([Message.user(q)], [])) for q in ("a", "b", "c")]
    assert tok.reads == 1
    assert all(p.startswith("<bos><start_of_turn>user\n") for p in prompts)


# =============================================================================== real model


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Point(BaseModel):
    x: float
    y: float


class Person(BaseModel):
    name: str
    age: Annotated[int, Field(ge=0, le=150)]


def _f01(city: str) -> None:
    """Look up a city's population."""


def _f02(a: int, b: int) -> None:
    """Multiply two integers."""


def _f03(text: str, upper: bool = False) -> None:
    """Echo text, optionally upper-cased."""


def _f04(color: Color) -> None:
    """Paint the wall a color."""


def _f05(items: Annotated[list[str], Field(max_length=5)]) -> None:
    """Add items to the shopping list."""


def _f06(p: Point) -> None:
    """Plot a point."""


def _f07(when: dt.date) -> None:
    """Schedule a meeting on a date."""


def _f08(level: Literal["low", "medium", "high"]) -> None:
    """Set the alarm level."""


def _f09(person: Person) -> None:
    """Register a person."""


def _f10(amount: float, currency: str = "EUR") -> None:
    """Convert an amount of money."""


def _f11(tags: dict[str, int]) -> None:
    """Count tags."""


def _f12(note: str | None = None) -> None:
    """Save an optional note."""


def _f13(ids: list[int]) -> None:
    """Delete records by id."""


def _f14(query: Annotated[str, Field(max_length=30)]) -> None:
    """Search the web (short query)."""


def _f15(x: int, y: int, z: int = 0) -> None:
    """Move the robot to coordinates."""


def _f16(points: Annotated[list[Point], Field(min_length=2, max_length=3)]) -> None:
    """Draw a polyline (a tiny model loops in unbounded arrays: maxItems stops it)."""


def _f17(enabled: bool) -> None:
    """Turn the lights on or off."""


def _f18(username: Annotated[str, Field(pattern=r"^[a-z]{3,10}$")]) -> None:
    """Create a lowercase user name."""


def _f19(minutes: Annotated[int, Field(ge=1, le=120)]) -> None:
    """Start a timer."""


def _f20(title: str, priority: Literal[1, 2, 3] = 2, done: bool = False) -> None:
    """Create a to-do item."""


class Address(BaseModel):
    street: str
    city: str


def _f21(to: Person, address: Address) -> None:
    """Send a parcel."""


def _f22(temperature: float) -> None:
    """Set the thermostat (degrees celsius)."""


SIGNATURES = [
    (_f01, "city_population", "How many people live in Lyon?"),
    (_f02, "multiply", "What is 6 times 7?"),
    (_f03, "echo", "Shout hello world"),
    (_f04, "paint_wall", "Paint the wall red"),
    (_f05, "add_to_list", "Add milk and eggs to my list"),
    (_f06, "plot_point", "Plot the point (1, 2)"),
    (_f07, "schedule_meeting", "Schedule a meeting on 2025-03-14"),
    (_f08, "set_alarm", "Set the alarm to high"),
    (_f09, "register_person", "Register Ada, aged 36"),
    (_f10, "convert_money", "Convert 20 dollars"),
    (_f11, "count_tags", "Count tags: a appears 2 times"),
    (_f12, "save_note", "Save the note 'buy bread'"),
    (_f13, "delete_records", "Delete records 4 and 5"),
    (_f14, "web_search", "Search for cheap flights"),
    (_f15, "move_robot", "Move to x=1, y=2"),
    (_f16, "draw_polyline", "Draw a line from (0,0) to (1,1)"),
    (_f17, "set_lights", "Turn the lights off"),
    (_f18, "create_user", "Create the user bob"),
    (_f19, "start_timer", "Start a 10 minute timer"),
    (_f20, "create_todo", "Add a to-do: water plants"),
    (_f21, "send_parcel", "Send a parcel to Bob at 1 Main St"),
    (_f22, "set_thermostat", "Set the thermostat to 21.5 degrees"),
]


@pytest.mark.parametrize("fn,name,prompt", SIGNATURES, ids=[n for _, n, _ in SIGNATURES])
def test_real_model_calls_always_validate(smollm2: Any, fn: Any, name: str, prompt: str) -> None:
    """Whatever the model writes inside a call parses into the tool's arguments model."""
    t = tool(name=name)(fn)
    agent = Agent(
        smollm2, tools=[t], tool_choice="required", parallel_tool_calls=False, max_tokens=160
    )
    result = agent.plan_sync(prompt)
    [call] = result.tool_calls
    assert call.error is None, (call.raw, call.error)
    assert isinstance(call.args, as_tool(t).args_model)


def test_real_model_weather_run(smollm2: Any) -> None:
    agent = Agent(
        smollm2,
        tools=[get_weather, add],
        tool_choice=["required", "none"],
        parallel_tool_calls=False,
        max_tokens=48,
    )
    result = agent.run_sync("What is the weather in Paris?")
    [call] = result.tool_calls
    assert call.name == "get_weather" and call.result is not None
    assert isinstance(result.output, str) and result.output
    assert result.usage.steps == 2 and result.usage.forced_tokens > 0


def test_real_model_auto_and_none(smollm2: Any) -> None:
    agent = Agent(smollm2, tools=[add], max_tokens=12)
    auto = agent.plan_sync("Say hi.")
    assert all(c.error is None for c in auto.tool_calls)  # whatever it chose is valid
    again = agent.plan_sync("Say hi.")  # same prompt: all but one prompt token from the cache
    assert again.usage.cached_prompt_tokens == again.usage.prompt_tokens - 1
    assert again.output == auto.output  # a reused KV cache decodes exactly like a fresh one
    none = Agent(smollm2, tools=[add], tool_choice="none", max_tokens=12).run_sync("Say hi.")
    assert none.tool_calls == [] and none.usage.forced_tokens == 0


def test_real_model_retry_path(smollm2: Any) -> None:
    attempts: list[int] = []

    @tool
    def set_volume(level: int) -> str:
        """Set the speaker volume."""
        attempts.append(level)
        if len(attempts) == 1:
            raise ModelRetry("That volume is not allowed, pick another level.")
        return "ok"

    agent = Agent(
        smollm2,
        tools=[set_volume],
        tool_choice=["required", "none"],  # the retry keeps "required"
        parallel_tool_calls=False,
        max_tokens=32,
    )
    result = agent.run_sync("Set the volume to 5")
    assert len(attempts) == 2 and result.usage.retries >= 1
    assert result.tool_calls[0].error and result.tool_calls[1].result == "ok"
    assert "<tool_call>" not in result.output


def test_real_model_truncation(smollm2: Any) -> None:
    agent = Agent(smollm2, tools=[get_weather], tool_choice="required", max_tokens=3)
    with pytest.raises(TruncationError, match="inside a tool call") as info:
        agent.run_sync("Weather in Paris?")
    assert "<tool_call>".startswith(info.value.partial_text)


def test_real_model_async_tool_and_history(smollm2: Any) -> None:
    @tool
    async def fetch_price(item: str) -> str:
        """Fetch the price of an item."""
        await asyncio.sleep(0)
        return f"{item}: 3 euros"

    agent = Agent(
        smollm2,
        tools=[fetch_price],
        tool_choice=["required", "none"],
        parallel_tool_calls=False,
        max_tokens=48,
    )
    first = asyncio.run(agent.run("How much is bread?"))
    assert first.tool_calls[0].result.endswith("3 euros")
    again = Agent(smollm2, max_tokens=16).run_sync("Thanks!", message_history=first.messages)
    assert again.messages[: len(first.messages)] == first.messages
    assert again.usage.cached_prompt_tokens > 0  # the KV cache of the last turn was reused


@pytest.mark.slow
def test_real_model_output_type(smollm2: Any) -> None:
    class Contact(BaseModel):
        name: str
        email: str

    agent = Agent(smollm2, output_type=Contact, max_tokens=48)
    result = agent.run_sync("Extract the contact: Ada Lovelace, ada@example.com")
    assert isinstance(result.output, Contact)
