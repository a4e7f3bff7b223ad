"""A unit-aware weather tool called by the embedded SmolLM2 model, fully offline.

    python examples/weather.py

The model's call is generated under the turn grammar, so `city` and `unit` always parse and
validate into the tool's arguments model; the tool then runs and the model answers.
"""

from __future__ import annotations

import time
from typing import Literal

from sdk import Agent, tool

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


def main() -> None:
    agent = Agent(
        tools=[get_weather],
        tool_choice=["required", "none"],  # call the tool, then answer from its result
        parallel_tool_calls=False,
        max_tokens=64,
    )
    start = time.perf_counter()
    _ = agent.model  # the embedded model loads on first use; load it now to time separately
    print(f"[model loaded in {time.perf_counter() - start:.1f}s]")
    start = time.perf_counter()
    result = agent.run_sync("What is the weather like in Tokyo today?")
    for call in result.tool_calls:
        print(f"tool call: {call.args!r} -> {call.result!r}")
    print(f"answer: {result.output}")
    u = result.usage
    print(
        f"[{time.perf_counter() - start:.1f}s, {u.steps} steps, {u.completion_tokens} tokens "
        f"({u.forced_tokens} forced), {u.forward_passes} forward passes]"
    )


if __name__ == "__main__":
    main()
