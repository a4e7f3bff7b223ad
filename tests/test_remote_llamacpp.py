"""The agent against a real OpenAI-compatible server: llama-cpp-python serving SmolLM2 on loopback.

The module fixture starts

    python -m llama_cpp.server --model <SmolLM2-135M-Instruct.Q4_1.gguf> \\
        --host 127.0.0.1 --port <free port> --n_ctx 2048

and stops it by its process id. Skipped (with the reason) when llama-cpp-python[server] is not
installed (its `server` extra, as llama-cpp-python's metadata lists it); `scripts/setup.sh`
builds llama-cpp-python for this CPU and the dev extras add the server's packages.

Every reply the server generated under an exported GBNF grammar is re-checked with the local
engine (`Matcher`) against the same turn grammar: what llama.cpp enforced is what we meant.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any, Literal

import pytest
from packaging.requirements import Requirement
from pydantic import BaseModel, Field

from sdk import Agent, ModelRetry, RunContext, TruncationError, tool
from sdk.backends.openai import OpenAIChatModel
from sdk.engine.matcher import Matcher


def _missing_server_extras() -> list[str]:
    """The distributions of llama-cpp-python's `server` extra that are not installed (read from
    its own metadata, so the skip follows the extra as llama-cpp-python defines it)."""
    try:
        requires = metadata.requires("llama_cpp_python") or []
    except metadata.PackageNotFoundError:
        return ["llama-cpp-python"]
    missing = []
    for line in requires:
        req = Requirement(line)
        if req.marker is None or not req.marker.evaluate({"extra": "server"}):
            continue
        try:
            metadata.distribution(req.name)
        except metadata.PackageNotFoundError:
            missing.append(req.name)
    return missing


# CI sets SDK_REQUIRE_SERVER_TESTS=1: there a missing server is a failure, never a silent skip.
_MISSING = _missing_server_extras()
pytestmark = pytest.mark.skipif(
    bool(_MISSING) and not os.environ.get("SDK_REQUIRE_SERVER_TESTS"),
    reason=f"llama-cpp-python[server] is not installed (missing: {', '.join(_MISSING)}); "
    "bash scripts/setup.sh installs it",
)

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """llama-cpp-python's server with the embedded SmolLM2 on a free loopback port, stopped by
    its process id (the backends bench's `llama_server`)."""
    from sdk.backends.embedded import smollm2_gguf_path
    from sdk.bench.backends import llama_server

    log = tmp_path_factory.mktemp("llama") / "server.log"
    with llama_server(smollm2_gguf_path(), 2048, None, log, {}) as url:
        yield url


def conforms(agent: Agent[Any], choice: str, text: str, index: Any) -> bool:
    """Does `text` (a server reply) complete the turn grammar of `choice`?"""
    grammar = agent._turn_grammar(choice).compiled
    assert grammar is not None
    m = Matcher(grammar, index)
    m.advance_bytes(text.encode("utf-8"))
    return m.is_accepting()


# ------------------------------------------------------------------------------ tools / types

FAKE_WEATHER_C = {"paris": 18.0, "london": 14.5, "tokyo": 24.0}


@tool
def get_weather(city: str, unit: Literal["celsius", "fahrenheit"] = "celsius") -> str:
    """Get the current temperature in a city.

    Args:
        city: The city name, e.g. "Paris".
        unit: The temperature unit to answer in.
    """
    celsius = FAKE_WEATHER_C.get(city.strip().lower(), 20.0)
    value = celsius if unit == "celsius" else celsius * 9 / 5 + 32
    return f"{value:.1f} degrees {unit} in {city}"


class Address(BaseModel):
    street: str
    city: str
    country: str


class Person(BaseModel):
    name: str
    age: int = Field(ge=0, le=150)
    role: Literal["engineer", "doctor", "teacher", "other"]
    address: Address


TEXT = (
    "Maria Garcia is a 34 year old engineer. She lives at 12 Baker Street, London, United Kingdom."
)


# ------------------------------------------------------------------------------ tests


def test_tool_call_result_and_answer_gbnf(server: str, smollm2_index: Any) -> None:
    model = OpenAIChatModel(server, constraint="gbnf")
    agent = Agent(
        model,
        tools=[get_weather],
        tool_choice=["required", "none"],
        parallel_tool_calls=False,
        max_tokens=64,
    )
    result = agent.run_sync("What is the weather like in Tokyo today?")
    (call,) = result.tool_calls
    assert call.ok and call.args is not None
    assert call.result.endswith(f"in {call.args.city}")  # type: ignore[attr-defined]
    assert result.output.strip()
    assert conforms(agent, "required", result.messages[-3].content, smollm2_index)
    print("\n--- transcript (gbnf) ---")
    for m in result.messages:
        print(f"[{m.role}] {m.content}")


def test_typed_output_gbnf(server: str, smollm2_index: Any) -> None:
    agent = Agent(
        OpenAIChatModel(server, constraint="gbnf"),
        output_type=Person,
        system_prompt="Extract the person described by the user.",
        max_tokens=96,
    )
    result = agent.run_sync(TEXT)
    assert isinstance(result.output, Person)
    assert conforms(agent, "auto", result.raw_output, smollm2_index)
    print(f"\nPerson (gbnf): {result.output!r}\nraw: {result.raw_output}")


def test_typed_output_json_object(server: str) -> None:
    """llama-cpp-python's own JSON-Schema constraint (`response_format` json_object+schema)."""
    agent = Agent(
        OpenAIChatModel(server, constraint="json_object"),
        output_type=Person,
        system_prompt="Extract the person described by the user.",
        max_tokens=128,
    )
    result = agent.run_sync(TEXT)
    assert isinstance(result.output, Person)
    print(f"\nPerson (json_object): {result.output!r}")


def test_native_tool_calls(server: str) -> None:
    """`tools` + a named `tool_choice`: the server returns `tool_calls`; the agent validates."""
    agent = Agent(
        OpenAIChatModel(server, constraint="json_object"),
        tools=[get_weather],
        tool_choice=["get_weather", "none"],
        max_tokens=64,
    )
    result = agent.run_sync("What is the weather like in Paris?")
    (call,) = result.tool_calls
    assert call.ok and call.args is not None
    tool_msg = result.messages[-2]
    assert tool_msg.role == "tool" and tool_msg.tool_call_id == call.id


def test_model_retry_goes_back_to_the_model(server: str, smollm2_index: Any) -> None:
    seen: list[str] = []

    @tool
    def lookup_city(ctx: RunContext[None], city: str) -> str:
        """Look up a city in the atlas.

        Args:
            city: The city name.
        """
        seen.append(city)
        if ctx.retry == 0:
            raise ModelRetry("The atlas is warming up: call lookup_city again with the same city.")
        return f"{city}: found"

    agent = Agent(
        OpenAIChatModel(server, constraint="gbnf"),
        tools=[lookup_city],
        tool_choice=["required", "none"],  # the retry keeps "required"
        parallel_tool_calls=False,
        max_tokens=48,
    )
    result = agent.run_sync("Find Paris in the atlas.")
    assert len(seen) == 2
    first, second = result.tool_calls
    assert not first.ok and "warming up" in (first.error or "")
    assert second.ok and second.result.endswith(": found")
    assert result.usage.retries >= 1 and "<tool_call>" not in result.output
    # The feedback reached the model: it is in the transcript sent with the second request.
    feedback = next(m for m in result.messages if m.role == "tool")
    assert "warming up" in feedback.content


def test_plan_sync_and_the_auto_grammar(server: str, smollm2_index: Any) -> None:
    """Auto mode: free text or calls, the free-text part exported as a lookahead automaton."""
    agent = Agent(
        OpenAIChatModel(server, constraint="gbnf"),
        tools=[get_weather],
        max_tokens=40,
    )
    try:
        result = agent.plan_sync("What is the weather like in London? Use the tool.")
    except TruncationError as exc:  # the budget ran out inside a call: still on the grammar
        m = Matcher(agent._turn_grammar("auto").compiled, smollm2_index)  # type: ignore[arg-type]
        m.advance_bytes(exc.partial_text.encode())
        return
    assert conforms(agent, "auto", result.output, smollm2_index)


def test_http_errors_are_typed(server: str) -> None:
    """A wrong endpoint is a 404 from the server: `RemoteModelError`, not retried. (Not an
    unparsable grammar: llama-cpp-python's server process aborts on one.)"""
    from sdk.backends.openai import RemoteModelError

    bad = OpenAIChatModel(server + "/nope", "m", constraint="gbnf", max_retries=3)
    with pytest.raises(RemoteModelError) as info:
        Agent(bad, max_tokens=8).run_sync("hi")
    assert info.value.status_code == 404


@pytest.mark.parametrize(
    ("example", "expect"),
    [
        ("weather.py", "tool call: get_weather("),
        ("extract.py", "type: Person"),
        ("two_tools.py", "answer: Answer("),
    ],
)
def test_examples_run_unchanged(server: str, example: str, expect: str) -> None:
    env = {
        **os.environ,
        "SDK_MODEL_URL": server,
        "SDK_MODEL_CONSTRAINT": "gbnf",
        "HF_HUB_OFFLINE": "1",
    }
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / example)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert expect in proc.stdout, proc.stdout
    print(f"\n$ SDK_MODEL_URL={server} SDK_MODEL_CONSTRAINT=gbnf python examples/{example}")
    print(proc.stdout)


def test_server_reply_shape(server: str) -> None:
    """The raw OpenAI reply the backend parses (documents what llama.cpp sends back)."""
    body = json.dumps(
        {
            "messages": [{"role": "user", "content": "Say hi."}],
            "max_tokens": 4,
            "grammar": 'root ::= "hi"',
        }
    ).encode()
    req = urllib.request.Request(
        server + "/chat/completions", data=body, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=120) as r:
        data = json.load(r)
    assert data["choices"][0]["message"]["content"] == "hi"
