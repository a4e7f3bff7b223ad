"""A two-tool, multi-step agent on the embedded SmolLM2 model, offline.

    python examples/two_tools.py

Step 1 looks up an exchange rate, step 2 converts the amount with it, step 3 answers with a
typed `Answer`. Each call is generated under the turn grammar, so both tools always receive
valid, typed arguments; `tool_choice` gives one choice per turn (a 135M model needs the
nudge: left to "auto" it rarely calls anything).
"""

from __future__ import annotations

import time

from pydantic import BaseModel

from sdk import Agent, tool

RATES = {("EUR", "USD"): 1.08, ("USD", "EUR"): 0.93, ("GBP", "EUR"): 1.17}


@tool
def get_exchange_rate(base: str, quote: str) -> float:
    """Get the exchange rate from one currency to another.

    Args:
        base: ISO code of the currency to convert from, e.g. "EUR".
        quote: ISO code of the currency to convert to, e.g. "USD".
    """
    return RATES.get((base.upper(), quote.upper()), 1.0)


@tool
def convert(rate: float, amount: float) -> float:
    """Multiply an amount by an exchange rate.

    Args:
        rate: The exchange rate returned by get_exchange_rate.
        amount: The amount of money the user wants to convert.
    """
    return round(amount * rate, 2)


class Answer(BaseModel):
    amount: float
    currency: str


def main() -> None:
    agent = Agent(
        tools=[get_exchange_rate, convert],
        output_type=Answer,  # the final turn is typed JSON, validated into Answer
        tool_choice=["get_exchange_rate", "convert", "none"],
        parallel_tool_calls=False,
        max_tokens=64,
    )
    start = time.perf_counter()
    _ = agent.model  # the embedded model loads on first use; load it now to time separately
    print(f"[model loaded in {time.perf_counter() - start:.1f}s]")
    start = time.perf_counter()
    # (Phrasing and parameter order matter to a 135M model: with `amount` first, or asked
    # "Convert 250 EUR to USD.", it copies the rate into `amount`. The calls stay valid.)
    result = agent.run_sync("I have 250 EUR. How much is 250 EUR in USD?")
    for call in result.tool_calls:
        print(f"step {call.step}: {call.args!r} -> {call.result!r}")
    print(f"answer: {result.output!r}")
    u = result.usage
    print(
        f"[{time.perf_counter() - start:.1f}s, {u.steps} steps, {u.completion_tokens} tokens "
        f"({u.forced_tokens} forced), {u.forward_passes} forward passes, "
        f"{u.cached_prompt_tokens}/{u.prompt_tokens} prompt tokens from the KV cache]"
    )


if __name__ == "__main__":
    main()
