"""The run loop's contract with the app: retries keep the failed turn's choice and tools, sync
tools never run on the event loop, and a failed run says what it did.

Scripted models through the real grammar and the real SmolLM2 tokenizer.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from sdk import (
    Agent,
    ConfigError,
    ModelRetry,
    RetriesExhausted,
    RunContext,
    StepLimitExceeded,
    ToolDefinitionError,
    TruncationError,
    tool,
)
from sdk.backends.test import ToolCallScript
from sdk.events import CallValidated, FinalResult, ToolResult


def test_a_failed_call_is_retried_as_a_call_under_required_then_none(model: Any) -> None:
    """`["required", "none"]`: a call that fails validation is retried on a "required" turn
    that shows the tools again; the answer turn comes after the call that ran."""
    ran: list[str] = []

    @tool
    def lookup(city: str) -> str:
        """Look a city up."""
        ran.append(city)
        if city != city.title():
            raise ModelRetry("Use the capitalized city name.")
        return "found"

    m = model(
        ToolCallScript("lookup", {"city": "paris"}),
        ToolCallScript("lookup", {"city": "Paris"}),
        "It was found.",
    )
    agent = Agent(m, tools=[lookup], tool_choice=["required", "none"])
    result = agent.run_sync("Find Paris.")
    assert result.output == "It was found." and ran == ["paris", "Paris"]
    assert [r.tool_choice for r in m.requests] == ["required", "required", "none"]
    assert "<tools>" in m.prompts[1] and "<tools>" not in m.prompts[2]
    assert "Use the capitalized city name." in m.prompts[1]


def test_a_retry_keeps_the_failed_turns_tools(model: Any) -> None:
    """`prepare_tools` chooses the tools of new turns; a retry offers what the failed turn
    offered (here the tool it must call again), whatever the step."""

    @tool
    def pick(n: int) -> str:
        """Pick a number."""
        if n < 0:
            raise ModelRetry("n must be >= 0")
        return "ok"

    def first_turn_only(ctx: Any, tools: list[Any]) -> list[Any]:
        return tools if ctx.step == 1 else []

    m = model(ToolCallScript("pick", {"n": -1}), ToolCallScript("pick", {"n": 1}), "done")
    result = Agent(m, tools=[pick]).run_sync("x", prepare_tools=first_turn_only)
    assert result.output == "done"
    assert [len(r.tools) for r in m.requests] == [1, 1, 0]


def test_sync_tools_run_off_the_event_loop(model: Any) -> None:
    """A blocking sync tool runs in a worker thread: the loop keeps ticking meanwhile, and
    the call's `CallValidated` event arrives before its result."""
    where: list[str] = []

    @tool
    def slow(x: int) -> int:
        """Slow identity."""
        where.append(threading.current_thread().name)
        time.sleep(0.3)
        return x

    async def main() -> tuple[list[Any], int]:
        ticks = 0
        stop = asyncio.Event()

        async def ticker() -> None:
            nonlocal ticks
            while not stop.is_set():
                ticks += 1
                await asyncio.sleep(0.01)

        task = asyncio.create_task(ticker())
        agent = Agent(model(ToolCallScript("slow", {"x": 3}), "3"), tools=[slow])
        events = [e async for e in agent.run_stream("x")]
        stop.set()
        await task
        return events, ticks

    events, ticks = asyncio.run(main())
    assert where and where[0] != threading.main_thread().name
    assert ticks >= 10  # the loop ran while the tool slept 0.3 s
    kinds = [type(e) for e in events if isinstance(e, CallValidated | ToolResult | FinalResult)]
    assert kinds == [CallValidated, ToolResult, FinalResult]


def test_a_failed_run_says_what_it_did(model: Any) -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    calls = [ToolCallScript("add", {"a": 1, "b": 10 * i + 7}) for i in range(3)]
    with pytest.raises(StepLimitExceeded) as info:
        Agent(model(*calls), tools=[add], max_steps=2).run_sync("x")
    err = info.value
    assert [c.result for c in err.tool_calls] == [8, 18]
    assert err.usage is not None and err.usage.steps == 2 and err.usage.completion_tokens > 0


def test_a_call_cut_by_max_tokens_is_retried_with_feedback(model: Any) -> None:
    """A runaway value is a failed attempt: the model is told it was cut and tries again; the
    cut value never reaches the tool. Once the retries are spent, `TruncationError`."""
    ran: list[str] = []

    @tool
    def lookup(city: str) -> str:
        """Look a city up."""
        ran.append(city)
        return "found"

    long = ToolCallScript("lookup", {"city": "Llanfairpwllgwyngyll" * 4})
    m = model(long, ToolCallScript("lookup", {"city": "Paris"}), "found it")
    result = Agent(m, tools=[lookup], max_tokens=30).run_sync("x")
    assert result.output == "found it" and ran == ["Paris"]
    assert result.usage.retries == 1 and "cut off" in m.prompts[1]
    assert [r.tool_choice for r in m.requests] == ["auto", "auto", "auto"]

    with pytest.raises(TruncationError) as info:
        Agent(model(long, long, long), tools=[lookup], max_tokens=30, retries=2).run_sync("x")
    assert info.value.usage is not None and info.value.usage.retries == 2 and ran == ["Paris"]


def test_a_runaway_value_stops_the_turn_early_and_is_retried(model: Any) -> None:
    """A value stuck repeating one short unit is stopped after `RUNAWAY_TOKENS` tokens, not at
    `max_tokens`: a failed attempt whose feedback names the repetition, then
    `TruncationError` with `runaway` once the retries are spent. A long value that does not
    repeat runs to its end."""
    from sdk.decoding.generate import RUNAWAY_TOKENS

    ran: list[str] = []

    @tool
    def lookup(city: str) -> str:
        """Look a city up."""
        ran.append(city)
        return "found"

    runaway = ToolCallScript("lookup", {"city": "1" + "0" * 400})
    m = model(runaway, ToolCallScript("lookup", {"city": "Paris"}), "found it")
    result = Agent(m, tools=[lookup], max_tokens=600).run_sync("x")
    assert result.output == "found it" and ran == ["Paris"]
    assert "repeated '0' without end" in m.prompts[1] and result.usage.retries == 1
    cut = result.messages[1].content
    assert cut.endswith("0" * 40) and len(m.tokenizer.encode(cut)) < RUNAWAY_TOKENS + 32

    with pytest.raises(TruncationError) as info:
        Agent(model(runaway, runaway), tools=[lookup], max_tokens=600, retries=1).run_sync("x")
    assert info.value.runaway == "0" and "ran away" in str(info.value) and ran == ["Paris"]

    varied = "".join(str(i) for i in range(150))  # digits, but no short unit repeating
    result = Agent(model(ToolCallScript("lookup", {"city": varied}), "ok"), tools=[lookup],
                   max_tokens=600).run_sync("x")  # fmt: skip
    assert ran[-1] == varied and result.usage.retries == 0


def test_runaway_period() -> None:
    from sdk.decoding.generate import RUNAWAY_TOKENS, runaway_period

    assert runaway_period([7] * RUNAWAY_TOKENS) == 1
    assert runaway_period([5, *([1, 2, 3] * RUNAWAY_TOKENS)]) == 3
    assert runaway_period([1] * (RUNAWAY_TOKENS - 1)) == 0  # not long enough yet
    assert runaway_period(list(range(RUNAWAY_TOKENS))) == 0
    assert runaway_period([1, 2, 3, 4, 5] * RUNAWAY_TOKENS) == 0  # a unit longer than 4


def test_an_answer_that_runs_away_stops_early_as_a_length_finish(model: Any) -> None:
    """Free text that repeats one phrase token for token is stopped after
    `TEXT_RUNAWAY_TOKENS` tokens, reported as "length", not written to `max_tokens`; prose
    that repeats words but not a whole unit, and a short repetition, run to their end."""
    from sdk.decoding.generate import TEXT_RUNAWAY_TOKENS

    @tool
    def reserve(sku: str) -> str:
        """Reserve one unit."""
        return "reserved"

    loop = "Done: <a href='/shop?" + "&qid=A-100" * 150
    for choice in ("auto", "none"):
        result = Agent(model(loop), tools=[reserve], tool_choice=choice, max_tokens=1000).run_sync(
            "Reserve A-100."
        )
        assert result.finish_reason == "length" and loop.startswith(result.output)
        assert result.output.count("&qid=A-100") >= 8
        assert result.usage.completion_tokens < TEXT_RUNAWAY_TOKENS + 24  # not 1,000

    line = 'Then: {"sku": "B-200", "qty": 5, "note": "reserve it for the customer"}\n'
    result = Agent(model("Sure.\n" + line * 40), tools=[reserve], tool_choice="none",
                   max_tokens=1500).run_sync("Reserve B-200.")  # fmt: skip
    assert result.finish_reason == "length" and 7 <= result.output.count(line) <= 9

    rows = "".join(f"| {i} | item {i} | {i * 3} |\n" for i in range(60))
    table = "| n | name | price |\n|---|---|---|\n" + rows
    short = "Ha! " * 20 + "That is a good one."
    for text in (table, short):
        result = Agent(model(text), tools=[reserve], max_tokens=2000).run_sync("List them.")
        assert result.output == text and result.finish_reason == "stop"


def test_text_runaway_period() -> None:
    from sdk.decoding.generate import text_runaway_period

    assert text_runaway_period([7] * 128) == 1
    assert text_runaway_period([7] * 127) == 0  # not long enough yet
    unit = list(range(40))
    assert text_runaway_period([9, *unit * 8]) == 40
    assert text_runaway_period([9, *unit * 7]) == 0  # seven copies: not yet
    assert text_runaway_period(list(range(100, 300))) == 0
    assert text_runaway_period(list(range(70)) * 8) == 0  # a unit longer than 64 tokens


def test_tool_exceptions_draw_on_the_retry_budget(model: Any) -> None:
    """A tool that raises (under the default `tool_errors="return"`) is a failed attempt: the
    model sees the error and may try again, within the tool's `retries`."""
    calls: list[int] = []

    @tool
    def fetch(n: int) -> str:
        """Fetch a page."""
        calls.append(n)
        if n < 3:
            raise ConnectionError(f"page {n} timed out")
        return "page"

    m = model(ToolCallScript("fetch", {"n": 1}), ToolCallScript("fetch", {"n": 3}), "done")
    result = Agent(m, tools=[fetch]).run_sync("x")
    assert result.output == "done" and result.usage.retries == 1
    assert result.tool_calls[0].error == "ConnectionError: page 1 timed out"

    m = model(*(ToolCallScript("fetch", {"n": n}) for n in (0, 1, 2)), "never")
    with pytest.raises(RetriesExhausted) as info:
        Agent(m, tools=[fetch], retries=1).run_sync("x")
    assert [a.error for a in info.value.attempts] == [
        "Error: ConnectionError: page 0 timed out",
        "Error: ConnectionError: page 1 timed out",
    ]
    assert calls[-2:] == [0, 1]


def test_the_same_call_after_it_failed_is_a_loop(model: Any) -> None:
    """The very call that failed, sent again, would fail again: the turn is answered instead
    and the tool does not run twice (Qwen2.5-Coder-0.5B sent one failing conversion seven
    times until `max_steps`)."""
    ran: list[str] = []

    @tool
    def convert(amount: float, currency: str) -> str:
        """Convert an amount to USD."""
        ran.append(currency)
        raise ValueError(f"unknown currency {currency!r}")

    bad = ToolCallScript("convert", {"amount": 23, "currency": "celsius"})
    m = model(bad, bad, "I could not convert it.")
    result = Agent(m, tools=[convert]).run_sync("23 celsius in USD?")
    assert result.output == "I could not convert it." and ran == ["celsius"]
    assert result.usage.repeated_calls == 1


def test_a_repeated_call_is_not_run_again_and_the_next_turn_answers(model: Any) -> None:
    """A turn of nothing but repeats has got nowhere: it is answered instead, in the same
    step, without tools ("none"), and the repeat never runs nor enters the transcript: the
    C -> F -> C loop ends after two executions."""
    ran: list[tuple[float, str]] = []

    @tool
    def convert(value: float, unit: str) -> str:
        """Convert a temperature to the other unit."""
        ran.append((value, unit))
        return "69.8 F" if unit == "C" else "21.0 C"

    m = model(
        ToolCallScript("convert", {"value": 21, "unit": "C"}),
        ToolCallScript("convert", {"value": 69.8, "unit": "F"}),
        ToolCallScript("convert", {"value": 21.0, "unit": "C"}),  # 21.0 == 21: a repeat
        "21 C is 69.8 F.",
    )
    result = Agent(m, tools=[convert], tool_choice=["required"]).run_sync("21 C in F?")
    assert ran == [(21.0, "C"), (69.8, "F")]
    assert result.output == "21 C is 69.8 F." and result.usage.repeated_calls == 1
    assert [r.tool_choice for r in m.requests] == ["required", "required", "required", "none"]
    assert len(result.tool_calls) == 2 and result.usage.steps == 3
    assert [msg.role for msg in result.messages[-3:]] == ["assistant", "tool", "assistant"]
    assert m.prompts[3].count("<tool_call>") == 2  # the repeat is not in the answer's prompt


def test_a_call_fed_its_own_result_is_a_loop(model: Any) -> None:
    """Feeding a tool its own output with otherwise the same arguments (`convert(22.68, C ->
    F)` after `convert(21, C -> F)` gave 22.68) asks for nothing new: answered instead. A new
    value the results do not hold is a new call, and runs."""
    ran: list[float] = []

    @tool
    def convert(amount: float, source: str, target: str) -> dict[str, float]:
        """Convert an amount."""
        ran.append(amount)
        return {"amount": round(amount * 1.08, 2)}

    m = model(
        ToolCallScript("convert", {"amount": 21, "source": "C", "target": "F"}),
        ToolCallScript("convert", {"amount": 30, "source": "C", "target": "F"}),  # new
        ToolCallScript("convert", {"amount": 32.4, "source": "C", "target": "F"}),  # fed back
        "22.68 F",
    )
    result = Agent(m, tools=[convert]).run_sync("21 C and 30 C in F?")
    assert ran == [21, 30] and result.output == "22.68 F"
    assert result.usage.repeated_calls == 1


def test_a_repeatable_tool_runs_again(model: Any) -> None:
    rolls = iter([3, 5])

    @tool(repeatable=True)
    def roll() -> int:
        """Roll a die."""
        return next(rolls)

    m = model(ToolCallScript("roll", {}), ToolCallScript("roll", {}), "3 then 5")
    result = Agent(m, tools=[roll]).run_sync("Roll twice.")
    assert [c.result for c in result.tool_calls] == [3, 5] and result.usage.repeated_calls == 0


# ------------------------------------------------------------------ bad input, early and typed


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"model": "gpt-4o"}, "not a local model"),
        ({"model": 123}, "expected None"),
        ({"system_prompt": 5}, "system_prompt=5"),
        ({"output_type": 123}, "output_type=123"),
    ],
    ids=["hosted-name", "not-a-backend", "system-prompt", "output-type"],
)
def test_bad_agent_arguments_fail_at_construction(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        Agent(**kwargs)


@pytest.mark.parametrize("prompt", [123, "", "   "])
def test_a_bad_prompt_fails_before_any_turn(model: Any, prompt: Any) -> None:
    m = model("never")
    with pytest.raises(ConfigError, match="prompt="):
        Agent(m).run_sync(prompt)
    assert m.requests == []


def test_generator_functions_are_no_tools() -> None:
    def numbers() -> Any:
        yield 1

    async def stream() -> Any:
        yield 1

    for fn in (numbers, stream):
        with pytest.raises(ToolDefinitionError, match="generator"):
            tool(fn)


# ------------------------------------------------------------------ override


def test_override_puts_a_model_under_an_agent_for_a_block(model: Any) -> None:
    """An app's module-level agent, tested with a scripted model: `override(model=...)` holds
    inside the block (run_sync from a running loop and streams included) and nowhere else."""
    import asyncio

    agent = Agent(model("from the agent's own model"))
    with agent.override(model=model("scripted", "scripted")):
        assert agent.run_sync("x").output == "scripted"
        with agent.override(model=model("inner", "inner again")):
            assert agent.run_sync("x").output == "inner"

            async def inside_a_loop() -> str:
                return agent.run_sync("x").output  # runs in a thread of its own

            assert asyncio.run(inside_a_loop()) == "inner again"
        assert agent.run_sync("x").output == "scripted"
    assert agent.run_sync("x").output == "from the agent's own model"
    with pytest.raises(ConfigError, match="not a local model"), agent.override(model="gpt-4o"):
        pass


def test_a_repeatable_tool_may_be_fed_its_own_results(model: Any) -> None:
    """Pagination: the next page's token comes from the last result; marked `repeatable`,
    the tool runs again (unmarked, the same call would be taken for a loop)."""
    pages = {"": {"items": [1, 2], "next": "p2"}, "p2": {"items": [3], "next": ""}}
    seen: list[str] = []

    @tool(repeatable=True)
    def list_items(page_token: str = "") -> dict[str, Any]:
        """List items, a page at a time."""
        seen.append(page_token)
        return pages[page_token]

    m = model(
        ToolCallScript("list_items", {"page_token": ""}),
        ToolCallScript("list_items", {"page_token": "p2"}),
        "1, 2, 3",
    )
    assert Agent(m, tools=[list_items]).run_sync("List all items.").output == "1, 2, 3"
    assert seen == ["", "p2"]


def test_a_call_written_as_text_is_taken_as_the_call_it_names(model: Any) -> None:
    """An answer that is a call in disguise never comes back as the output: naming an
    offered tool, that tool is called under the grammar (same step); naming none, the turn
    is answered without tools."""

    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    m = model(
        'Sure.\nname: add\narguments: {"a": 2, "b": 3}',  # untagged, unquoted: past the grammar
        ToolCallScript("add", {"a": 2, "b": 3}),
        "5",
    )
    result = Agent(m, tools=[add]).run_sync("2 + 3?")
    assert result.output == "5" and result.tool_calls[0].result == 5
    assert [r.tool_choice for r in m.requests] == ["auto", "add", "auto"]
    assert result.usage.steps == 2 and "name: add" not in str(result.messages)

    # one call written as text is generated again as one call, never more (a small model
    # given the tool and room for more wrote eight calls for one)
    m = model(
        'Sure.\nname: add\narguments: {"a": 2, "b": 3}',
        [ToolCallScript("add", {"a": 2, "b": 3}), ToolCallScript("add", {"a": 4, "b": 5})],
        "5",
    )
    result = Agent(m, tools=[add]).run_sync("2 + 3?")
    assert [c.result for c in result.tool_calls] == [5] and result.output == "5"

    m = model('Here: "name": "cat_joke", "arguments": {}', "A cat joke.")
    result = Agent(m, tools=[add]).run_sync("Tell me a cat joke.")
    assert result.output == "A cat joke." and [r.tool_choice for r in m.requests] == [
        "auto",
        "none",
    ]


def test_a_tool_sees_the_turn_its_call_was_made_in(model: Any) -> None:
    steps: list[int] = []

    @tool
    def note(ctx: RunContext[None], text: str) -> str:
        """Take a note."""
        steps.append(ctx.step)
        return "noted"

    m = model(ToolCallScript("note", {"text": "a"}), ToolCallScript("note", {"text": "b"}), "ok")
    Agent(m, tools=[note]).run_sync("Note a, then b.")
    assert steps == [1, 2]
