"""`OpenAIChatModel` against a scripted OpenAI-compatible server (`httpx.MockTransport`).

Request shapes per `constraint`, native `tool_calls` through the agent's own validation and
retry path, transport retries, timeouts and HTTP errors as typed errors. No network, no model.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Literal

import httpx
import pytest
from pydantic import BaseModel, Field

from sdk import (
    Agent,
    RetriesExhausted,
    ToolNotOffered,
    TruncationError,
    UnexpectedModelBehavior,
    tool,
)
from sdk.backends.openai import OpenAIChatModel, RemoteModelError, RemoteTimeoutError

# ------------------------------------------------------------------------------ fixtures

CALLS: list[str] = []


@tool
def get_weather(city: str, unit: Literal["celsius", "fahrenheit"] = "celsius") -> str:
    """Get the current temperature in a city.

    Args:
        city: The city name.
        unit: Temperature unit.
    """
    CALLS.append(city)
    return f"21 degrees {unit} in {city}"


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


class City(BaseModel):
    name: str
    population: int = Field(ge=0)


def reply(
    content: str | None = None,
    tool_calls: list[tuple[str, Any]] | None = None,
    finish: str = "stop",
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = [
            {
                "id": f"srv_{i}",
                "type": "function",
                "function": {
                    "name": name,
                    "arguments": args if isinstance(args, str) else json.dumps(args),
                },
            }
            for i, (name, args) in enumerate(tool_calls)
        ]
    return {
        "id": "x",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
    }


class Server:
    """A scripted server: each POST takes the next item (a dict reply, an int status, an
    exception instance to raise, or a callable of the request body)."""

    def __init__(self, *script: Any) -> None:
        self.script = list(script)
        self.bodies: list[dict[str, Any]] = []
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if request.method == "GET":
            return httpx.Response(200, json={"object": "list", "data": [{"id": "served-model"}]})
        body = json.loads(request.content)
        self.bodies.append(body)
        item = self.script.pop(0)
        if isinstance(item, Exception):
            raise item
        if isinstance(item, int):
            return httpx.Response(item, json={"error": {"message": f"status {item}"}})
        if callable(item):
            item = item(body)
        return httpx.Response(200, json=item)

    def model(self, **kwargs: Any) -> OpenAIChatModel:
        transport = httpx.MockTransport(self)
        kwargs.setdefault("backoff", 0.0)
        kwargs.setdefault("model", "m")
        return OpenAIChatModel(
            "http://mock/v1", transport=transport, async_transport=transport, **kwargs
        )


@pytest.fixture(autouse=True)
def _reset() -> None:
    CALLS.clear()


# ------------------------------------------------------------------------------ request shapes


def test_json_schema_mode_sends_native_tools_and_tool_choice() -> None:
    srv = Server(
        reply(tool_calls=[("get_weather", {"city": "Paris"})]),
        reply("It is 21 degrees in Paris."),
    )
    agent = Agent(srv.model(), tools=[get_weather, add], tool_choice="get_weather")
    result = agent.run_sync("Weather in Paris?")
    assert result.output == "It is 21 degrees in Paris."
    first, second = srv.bodies
    assert first["model"] == "m"
    assert [t["function"]["name"] for t in first["tools"]] == ["get_weather", "add"]
    assert first["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert "response_format" not in first and "grammar" not in first
    assert second["tool_choice"] == "auto"  # a named choice applies to the first turn
    # The transcript goes back in the OpenAI shape: calls with JSON-text arguments, results
    # as tool messages carrying the call's id.
    assistant, tool_msg = second["messages"][-2:]
    assert assistant["role"] == "assistant"
    (call,) = assistant["tool_calls"]
    assert json.loads(call["function"]["arguments"]) == {"city": "Paris"}
    assert tool_msg == {
        "role": "tool",
        "content": "21 degrees celsius in Paris",
        "tool_call_id": call["id"],
        "name": "get_weather",
    }
    assert result.tool_calls[0].args is not None
    assert result.usage.prompt_tokens == 22 and result.usage.completion_tokens == 14


def test_required_with_one_tool_is_sent_as_a_named_choice() -> None:
    srv = Server(reply(tool_calls=[("add", {"a": 1, "b": 2})]), reply("3"))
    Agent(srv.model(), tools=[add], tool_choice="required").run_sync("1+2?")
    assert srv.bodies[0]["tool_choice"] == {"type": "function", "function": {"name": "add"}}
    srv = Server(reply(tool_calls=[("add", {"a": 1, "b": 2})]), reply("3"))
    Agent(srv.model(), tools=[add, get_weather], tool_choice="required").run_sync("1+2?")
    assert srv.bodies[0]["tool_choice"] == "required"


def test_typed_output_json_schema_and_json_object() -> None:
    answer = json.dumps({"name": "Paris", "population": 2100000})
    srv = Server(reply(answer))
    result = Agent(srv.model(), output_type=City).run_sync("Biggest French city?")
    assert result.output == City(name="Paris", population=2100000)
    rf = srv.bodies[0]["response_format"]
    assert rf["type"] == "json_schema"
    assert rf["json_schema"]["name"] == "City"
    assert rf["json_schema"]["schema"]["required"] == ["name", "population"]

    srv = Server(reply(answer))
    Agent(srv.model(constraint="json_object"), output_type=City).run_sync("?")
    assert srv.bodies[0]["response_format"]["type"] == "json_object"
    assert srv.bodies[0]["response_format"]["schema"]["title"] == "City"

    srv = Server(reply(answer))
    Agent(srv.model(constraint="none"), output_type=City).run_sync("?")
    assert "response_format" not in srv.bodies[0]


def test_auto_turn_with_output_type_sends_no_response_format() -> None:
    # Forcing JSON on an auto turn would forbid the tool calls; the output is validated
    # client-side instead (and retried like everywhere else).
    srv = Server(reply(json.dumps({"name": "x", "population": 1})))
    Agent(srv.model(), tools=[add], output_type=City).run_sync("?")
    assert "response_format" not in srv.bodies[0]
    assert srv.bodies[0]["tool_choice"] == "auto"


def test_gbnf_mode_sends_the_turn_grammar_and_hermes_prompt() -> None:
    srv = Server(
        reply('<tool_call>\n{"name":"get_weather","arguments":{"city":"Oslo"}}\n</tool_call>'),
        reply("Cold."),
    )
    agent = Agent(srv.model(constraint="gbnf"), tools=[get_weather], tool_choice="auto")
    result = agent.run_sync("Weather in Oslo?")
    assert result.output == "Cold." and CALLS == ["Oslo"]
    first, second = srv.bodies
    assert "tools" not in first and "tool_choice" not in first
    assert first["grammar"].startswith("root ::= start\n")
    assert "<tool_call>" in first["grammar"] and "TEXT-la" in first["grammar"]
    assert "<tools>" in first["messages"][0]["content"]  # tools described in the prompt
    # The call stays Hermes text in the assistant turn; the result is a <tool_response>.
    assert "<tool_call>" in second["messages"][-2]["content"]
    assert second["messages"][-1]["role"] == "user"
    assert second["messages"][-1]["content"].startswith("<tool_response>")


def test_a_grammar_gbnf_cannot_hold_is_sent_looser_and_counted(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The free text's lookahead (no `<tool_call>` inside) made too big for GBNF: the server
    gets the looser text rule, the log and `usage.loosened_turns` say so, and the agent's own
    parse still finds the call (nothing silent)."""
    import sdk.engine.gbnf as gbnf

    monkeypatch.setattr(gbnf, "MAX_LOOKAHEAD_STATES", 2)
    srv = Server(
        reply('<tool_call>\n{"name":"get_weather","arguments":{"city":"Oslo"}}\n</tool_call>'),
        reply("Cold."),
    )
    agent = Agent(srv.model(constraint="gbnf"), tools=[get_weather], tool_choice="auto")
    with caplog.at_level("WARNING", logger="sdk.backends"):
        result = agent.run_sync("Weather in Oslo?")
    assert result.output == "Cold." and CALLS == ["Oslo"]
    assert "TEXT-la" not in srv.bodies[0]["grammar"]  # the lookahead was dropped
    assert result.usage.loosened_turns == 2  # both turns (call, answer) sent the grammar
    assert any("looser than the turn grammar" in r.message for r in caplog.records)
    exact = Server(reply("Hi."))
    plain = Agent(exact.model(constraint="gbnf"), tools=[get_weather], tool_choice="auto")
    monkeypatch.undo()
    assert plain.run_sync("Hi?").usage.loosened_turns == 0


def test_a_refused_output_schema_is_sent_looser_and_counted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """llguidance (vLLM's guidance backend) refuses `oneOf`, `not`, `uniqueItems`: the typed
    output's schema goes once more without them, logged and counted, and the reply is still
    validated against the real schema."""

    class Shape(BaseModel):
        kind: int | str  # Pydantic writes `anyOf`; a hand-written schema may say `oneOf`
        tags: list[str] = Field(default_factory=list, json_schema_extra={"uniqueItems": True})

    srv = Server(400, reply('{"kind": 3, "tags": ["a"]}'))
    agent = Agent(srv.model(constraint="json_schema"), output_type=Shape)
    with caplog.at_level("WARNING", logger="sdk.backends"):
        result = agent.run_sync("A shape?")
    assert result.output == Shape(kind=3, tags=["a"])
    first, second = (b["response_format"]["json_schema"]["schema"] for b in srv.bodies)
    assert "uniqueItems" in json.dumps(first) and "uniqueItems" not in json.dumps(second)
    assert result.usage.loosened_turns == 1
    assert any("refused the output's JSON Schema" in r.message for r in caplog.records)


def test_the_looser_schema_a_server_took_is_sent_first_next_time(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """One refusal and one warning per schema: the next run's turn sends the looser schema
    the server took, and still counts it as looser."""

    class Shape(BaseModel):
        tags: list[str] = Field(json_schema_extra={"uniqueItems": True})

    srv = Server(400, reply('{"tags": ["a"]}'), reply('{"tags": ["b"]}'))
    agent = Agent(srv.model(constraint="json_schema"), output_type=Shape)

    def refusals() -> int:
        return sum("refused the output's JSON Schema" in r.message for r in caplog.records)

    with caplog.at_level("WARNING", logger="sdk.backends"):
        first = agent.run_sync("A shape?")
        warned = refusals()
        second = agent.run_sync("Another?")
    assert second.output == Shape(tags=["b"]) and refusals() == warned == 1
    schemas = [b["response_format"]["json_schema"]["schema"] for b in srv.bodies]
    assert "uniqueItems" in json.dumps(schemas[0]) and schemas[1] == schemas[2]
    assert first.usage.loosened_turns == second.usage.loosened_turns == 1


@pytest.mark.parametrize("run", ["sync", "async"])
def test_a_schema_refused_even_looser_is_sent_as_json_alone(
    caplog: pytest.LogCaptureFixture, run: str
) -> None:
    """XGrammar refuses some valid schemas outright (a `false` subschema, an integer bound past
    its limit), llguidance circular references with siblings: after the looser schema is
    refused too, the turn asks for JSON alone (`json_object`), logged and counted; the agent
    validates the reply and retries with feedback. A refusal of that ends the turn with the
    first error."""

    class Shape(BaseModel):
        kind: int
        tags: list[str] = Field(default_factory=list, json_schema_extra={"uniqueItems": True})

    srv = Server(400, 400, reply('{"kind": "x"}'), reply('{"kind": 3}'))
    agent = Agent(srv.model(constraint="json_schema"), output_type=Shape)
    with caplog.at_level("WARNING", logger="sdk.backends"):
        sent = agent.run_sync if run == "sync" else lambda q: asyncio.run(agent.run(q))
        result = sent("A shape?")
    assert result.output == Shape(kind=3)
    kinds = [b["response_format"]["type"] for b in srv.bodies]
    assert kinds == ["json_schema", "json_schema", "json_object", "json_object"]  # remembered
    assert any("JSON alone" in r.message for r in caplog.records)
    assert result.usage.loosened_turns == 2  # the turn and its retry
    with pytest.raises(RemoteModelError) as err:
        Agent(Server(400, 400, 422).model(constraint="json_schema"), output_type=Shape).run_sync(
            "A shape?"
        )
    assert err.value.status_code == 400


def test_grammar_fields_for_vllm_and_sglang() -> None:
    for kwargs, path in [
        ({"constraint": "lark"}, ("structured_outputs", "grammar")),
        ({"constraint": "lark", "grammar_field": "guided_grammar"}, ("guided_grammar",)),
        ({"constraint": "gbnf", "grammar_field": "ebnf"}, ("ebnf",)),
        (
            {"constraint": "gbnf", "grammar_field": "structured_outputs.grammar"},
            ("structured_outputs", "grammar"),
        ),
    ]:
        srv = Server(reply('{"name":"a","population":3}'))
        agent = Agent(srv.model(**kwargs), output_type=City)
        agent.run_sync("?")
        node: Any = srv.bodies[0]
        for key in path:
            node = node[key]
        if kwargs["constraint"] == "lark":  # llguidance's dialect of the turn grammar
            from sdk.engine.lark_guidance import lark_for_guidance

            assert node == lark_for_guidance(agent._turn_grammar("auto").lark or "")
            assert "(?!" not in node
        else:
            assert node.startswith("root ::= ")


def test_no_grammar_when_tool_choice_none_and_free_text() -> None:
    srv = Server(reply("hello"))
    Agent(srv.model(constraint="gbnf"), tools=[add], tool_choice="none").run_sync("hi")
    assert "grammar" not in srv.bodies[0]


def test_sampling_extra_body_headers_and_model_discovery() -> None:
    srv = Server(reply("ok"))
    model = srv.model(model=None, api_key="sk-test", extra_body={"top_k": 5})
    Agent(model, temperature=0.7, top_p=0.9, seed=3, max_tokens=33).run_sync("hi")
    get, post = srv.requests
    assert get.method == "GET" and get.url.path == "/v1/models"
    assert post.url.path == "/v1/chat/completions"
    assert post.headers["authorization"] == "Bearer sk-test"
    body = srv.bodies[0]
    assert body["model"] == "served-model"
    assert (body["temperature"], body["top_p"], body["seed"], body["max_tokens"]) == (
        0.7,
        0.9,
        3,
        33,
    )
    assert body["top_k"] == 5


def test_model_spec_url_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    agent = Agent("http://127.0.0.1:9/v1")
    assert isinstance(agent.model, OpenAIChatModel)
    assert agent.model.base_url == "http://127.0.0.1:9/v1"
    monkeypatch.setenv("SDK_MODEL_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("SDK_MODEL_CONSTRAINT", "gbnf")
    monkeypatch.setenv("SDK_MODEL_NAME", "smol")
    model = Agent().model
    assert isinstance(model, OpenAIChatModel)
    assert (model.constraint, model.model_name, model.grammar_field) == ("gbnf", "smol", "grammar")
    with pytest.raises(ValueError, match="constraint"):
        OpenAIChatModel("http://x/v1", constraint="regex")  # type: ignore[arg-type]


# ------------------------------------------------------------------------------ parse/validate/retry


def test_unknown_tool_is_refused_before_anything_runs() -> None:
    srv = Server(reply(tool_calls=[("delete_everything", {})]))
    agent = Agent(srv.model(constraint="none"), tools=[get_weather])
    with pytest.raises(ToolNotOffered) as info:
        agent.run_sync("?")
    assert info.value.tool_name == "delete_everything"
    assert CALLS == []
    assert info.value.messages  # the transcript rides along


def test_invalid_arguments_are_fed_back_and_retried() -> None:
    srv = Server(
        reply(tool_calls=[("add", {"a": "one", "b": 2})]),
        reply(tool_calls=[("add", '{"a": 1, "b": ')]),  # broken JSON
        reply(tool_calls=[("add", {"a": 1, "b": 2})]),
        reply("3"),
    )
    result = Agent(srv.model(), tools=[add]).run_sync("1+2?")
    assert result.output == "3"
    assert [c.ok for c in result.tool_calls] == [False, False, True]
    assert result.tool_calls[-1].result == 3
    assert result.usage.retries == 2
    feedback = srv.bodies[1]["messages"][-1]
    assert feedback["role"] == "tool" and "Validation feedback" in feedback["content"]
    assert "a: Input should be a valid integer" in feedback["content"]
    assert "could not be parsed" in srv.bodies[2]["messages"][-1]["content"]


def test_invalid_typed_output_is_retried_then_exhausted() -> None:
    srv = Server(
        reply('{"name": "Paris", "population": -1}'),
        reply('{"name": "Paris", "population": 2}'),
    )
    result = Agent(srv.model(), output_type=City).run_sync("?")
    assert result.output.population == 2
    assert "Validation feedback" in srv.bodies[1]["messages"][-1]["content"]

    srv = Server(*[reply('{"name": 1}')] * 3)
    with pytest.raises(RetriesExhausted) as info:
        Agent(srv.model(), output_type=City, retries=2).run_sync("?")
    assert len(info.value.attempts) == 3


def test_parallel_tool_calls_false_keeps_the_first_call() -> None:
    srv = Server(
        reply(tool_calls=[("get_weather", {"city": "A"}), ("get_weather", {"city": "B"})]),
        reply("done"),
    )
    agent = Agent(srv.model(), tools=[get_weather], parallel_tool_calls=False)
    agent.run_sync("?")
    assert CALLS == ["A"]
    assert srv.bodies[0]["parallel_tool_calls"] is False


def test_required_turn_without_calls_is_an_error() -> None:
    """A server that ignores `tool_choice` must not turn a required call into an answer."""
    srv = Server(reply("I would rather chat."))
    agent = Agent(srv.model(), tools=[add, get_weather], tool_choice="required")
    with pytest.raises(UnexpectedModelBehavior, match="no tool call"):
        agent.run_sync("?")


def test_hermes_text_from_a_server_without_a_tool_parser() -> None:
    srv = Server(
        reply('<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 2}}\n</tool_call>'),
        reply("4"),
    )
    result = Agent(srv.model(constraint="none"), tools=[add]).run_sync("2+2?")
    assert result.tool_calls[0].result == 4


def test_length_inside_a_call_or_output_is_truncation() -> None:
    srv = Server(reply(tool_calls=[("add", '{"a": 1')], finish="length"))
    with pytest.raises(TruncationError, match="tool call"):
        Agent(srv.model(), tools=[add], retries=0).run_sync("?")
    srv = Server(reply('{"name": "Par', finish="length"))
    with pytest.raises(TruncationError, match="structured output"):
        Agent(srv.model(), output_type=City, retries=0).run_sync("?")
    srv = Server(reply("<tool_call>\n{", finish="length"))
    with pytest.raises(TruncationError):
        Agent(srv.model(constraint="gbnf"), tools=[add], retries=0).run_sync("?")
    # Free text cut short is an answer, as with local generation.
    srv = Server(reply("Once upon a", finish="length"))
    result = Agent(srv.model(), tools=[add]).run_sync("?")
    assert result.output == "Once upon a" and result.finish_reason == "length"


def test_plan_sync_uses_the_sync_client() -> None:
    srv = Server(reply(tool_calls=[("add", {"a": 1, "b": 2}), ("nope", {})]))
    result = Agent(srv.model(), tools=[add]).plan_sync("?")
    ok, bad = result.tool_calls
    assert ok.args is not None and ok.error is None
    assert bad.error == "tool 'nope' was not offered"


# ------------------------------------------------------------------------------ transport


def test_transport_retries_on_503_429_and_connection_errors() -> None:
    srv = Server(503, 429, httpx.ConnectError("refused"), reply("fine"))
    result = Agent(srv.model(max_retries=3)).run_sync("hi")
    assert result.output == "fine" and len(srv.bodies) == 4


def test_persistent_5xx_raises_remote_model_error() -> None:
    srv = Server(503, 503, 503)
    with pytest.raises(RemoteModelError) as info:
        Agent(srv.model(max_retries=2)).run_sync("hi")
    assert info.value.status_code == 503 and len(srv.bodies) == 3
    assert info.value.messages and info.value.messages[-1].content == "hi"


def test_client_errors_are_not_retried() -> None:
    srv = Server(400)
    with pytest.raises(RemoteModelError, match="HTTP 400") as info:
        Agent(srv.model(max_retries=5)).run_sync("hi")
    assert info.value.status_code == 400 and len(srv.bodies) == 1
    assert "constraint=" not in str(info.value)  # no grammar sent: no grammar hint


def test_a_refused_grammar_names_the_constraint_that_fits() -> None:
    srv = Server(400, 400)  # refused in both dialects: the first refusal is raised
    model = srv.model(constraint="lark")
    with pytest.raises(RemoteModelError, match="send constraint='gbnf' there"):
        Agent(model, tools=[get_weather], tool_choice="required").run_sync("Oslo?")
    assert len(srv.bodies) == 2
    srv = Server(400)  # llama.cpp's `grammar` field: no other dialect to try
    with pytest.raises(RemoteModelError, match="constraint='gbnf' suits llama.cpp"):
        Agent(srv.model(constraint="gbnf"), tools=[get_weather]).run_sync("Oslo?")
    assert len(srv.bodies) == 1


@pytest.mark.parametrize("constraint", ["lark", "gbnf"])
def test_vllm_refusing_one_dialect_gets_the_other(
    constraint: Literal["lark", "gbnf"], caplog: pytest.LogCaptureFixture
) -> None:
    """vLLM's xgrammar backend refuses our Lark, its guidance backend our GBNF; the same
    field takes either, so a refused grammar is sent once in the other dialect, logged, and
    that one is kept for the run's later turns."""
    call = '<tool_call>\n{"name":"get_weather","arguments":{"city":"Oslo"}}\n</tool_call>'
    srv = Server(400, reply(call), reply("Cold."))
    model = srv.model(constraint=constraint, grammar_field="structured_outputs.grammar")
    agent = Agent(model, tools=[get_weather], tool_choice="required")
    with caplog.at_level("WARNING", logger="sdk.backends"):
        result = agent.run_sync("Weather in Oslo?")
    assert result.output == "Cold." and CALLS == ["Oslo"]
    sent = [b["structured_outputs"]["grammar"] for b in srv.bodies if "structured_outputs" in b]
    is_gbnf = ["::=" in text for text in sent]
    assert is_gbnf == ([False, True, True] if constraint == "lark" else [True, False, False])
    assert any("sending" in r.message and "from now on" in r.message for r in caplog.records)


def test_timeouts_become_remote_timeout_error() -> None:
    srv = Server(httpx.ReadTimeout("slow"), httpx.ReadTimeout("slow"))
    with pytest.raises(RemoteTimeoutError, match="timeout=1.5"):
        Agent(srv.model(max_retries=1, timeout=1.5)).run_sync("hi")
    assert len(srv.bodies) == 2
    srv = Server(httpx.ReadTimeout("slow"))
    with pytest.raises(RemoteTimeoutError):  # the sync client too
        Agent(srv.model(max_retries=0)).plan_sync("hi")


def test_a_real_timeout_on_a_silent_socket() -> None:
    """A listening socket that never answers: httpx's own timeout fires."""
    import socket

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)
    try:
        port = sock.getsockname()[1]
        model = OpenAIChatModel(f"http://127.0.0.1:{port}/v1", "m", timeout=0.3, max_retries=0)
        with pytest.raises(RemoteTimeoutError):
            Agent(model).run_sync("hi")
    finally:
        sock.close()


def test_unreadable_replies_are_typed_errors() -> None:
    srv = Server({"unexpected": True})
    with pytest.raises(RemoteModelError, match="unexpected reply shape"):
        Agent(srv.model()).run_sync("hi")


def test_async_run_keeps_the_loop_free() -> None:
    """`Agent.run` awaits the async client: other tasks progress during the request."""
    ticks: list[int] = []

    async def handler(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(0.05)
        return httpx.Response(200, json=reply("done"))

    transport = httpx.MockTransport(handler)
    model = OpenAIChatModel("http://mock/v1", "m", async_transport=transport)

    async def ticker() -> None:
        for i in range(3):
            ticks.append(i)
            await asyncio.sleep(0.01)

    async def main() -> str:
        result, _ = await asyncio.gather(Agent(model).run("hi"), ticker())
        return result.output

    assert asyncio.run(main()) == "done"
    assert ticks == [0, 1, 2]


def test_schema_engine_xgrammar_frees_escapes_in_bounded_strings(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """XGrammar (vLLM's and SGLang's default) takes no escape sequence in a string with
    `maxLength` or `pattern`: told so, the backend sends such strings without those keywords
    where they could hold a character JSON escapes (a pattern that cannot keeps them), logs it
    and counts the turn; the agent still validates the bounds."""

    class Ticket(BaseModel):
        summary: str = Field(max_length=40)
        code: str = Field(pattern="^[A-Z]{3}-[0-9]+$", max_length=12)

    def schema_of(model: OpenAIChatModel) -> tuple[dict[str, Any], int, list[Any]]:
        srv = Server(reply('{"summary": "two\\nlines", "code": "ABC-1"}'))
        model = srv.model(constraint="json_schema", schema_engine=model)  # type: ignore[arg-type]
        with caplog.at_level("WARNING", logger="sdk.backends"):
            result = Agent(model, output_type=Ticket).run_sync("A ticket?")
        assert result.output == Ticket(summary="two\nlines", code="ABC-1")
        sent = srv.bodies[0]["response_format"]["json_schema"]["schema"]["properties"]
        return sent, result.usage.loosened_turns, list(caplog.records)

    sent, loosened, logs = schema_of("xgrammar")  # type: ignore[arg-type]
    assert "maxLength" not in sent["summary"] and sent["code"]["maxLength"] == 12
    assert loosened == 1 and any("sent looser for xgrammar" in r.message for r in logs)
    caplog.clear()
    sent, loosened, logs = schema_of(None)  # type: ignore[arg-type]
    assert sent["summary"]["maxLength"] == 40 and loosened == 0 and not logs
    with pytest.raises(ValueError, match="schema_engine"):
        OpenAIChatModel("http://x/v1", schema_engine="vllm")  # type: ignore[arg-type]
