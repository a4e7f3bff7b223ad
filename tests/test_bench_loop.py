"""`python -m sdk.bench loop`: the call-in-text detector, the tools, and the run loop end to end
on scripted models (the real SmolLM2 tokenizer and turn grammar, no language model)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from sdk.backends.test import FunctionModel, Reply, ToolCallScript
from sdk.bench import _loop_data as loop_data
from sdk.bench import loop
from sdk.bench.loop import Options, Question, Run, looks_like_call

TOOLS = [fn.__name__ for fn in loop.OWN_TOOLS]

# ------------------------------------------------------------------ looks_like_call


@pytest.mark.parametrize(
    "text",
    [
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
        '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}',
        '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Paris"}}]',
        '<function=get_weather>{"city": "Paris"}</function>',
        '```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```',
        'Here you go:\n```\n{"function": "get_time", "args": {"timezone": "UTC"}}\n```',
        '{"name": "get_weather", "arguments": {"city": "Paris"}}',
        '  \n{"name": "anything", "parameters": {}}',
        '[{"name": "get_capital", "arguments": {"country": "Japan"}}, '
        '{"name": "get_weather", "arguments": {"city": "Tokyo"}}]',
        'Sure, I will call the tool: {"name": "get_weather", "arguments": {"city": "Paris"}}',
        '{"type": "function", "function": {"name": "get_weather", "arguments": "{}"}}',
        '{"name": "get_weather", "city": "Paris"}',  # an offered tool's name, flat arguments
        '{"get_weather": {"city": "Paris"}}',
        'get_weather(city="Paris")',
    ],
    ids=[
        "tagged",
        "python-tag",
        "mistral",
        "function-tag",
        "fenced",
        "prose-fenced",
        "bare",
        "bare-ws",
        "list",
        "prose-bare",
        "openai",
        "flat",
        "keyed",
        "pythonic",
    ],  # fmt: skip
)
def test_calls_written_as_text_are_calls(text: str) -> None:
    assert looks_like_call(text, TOOLS)


@pytest.mark.parametrize(
    "text",
    [
        "The weather in Paris is 18 °C and sunny.",
        "",
        'In JSON you would write {"city": "Paris"}, with braces {like these}.',
        "The result is {18 degrees}; sets like {1, 2} are not JSON.",
        '{"temperature": 18, "unit": "celsius", "conditions": "sunny"}',
        '```json\n{"city": "Paris", "population": 2100000}\n```',
        '[{"name": "Paris", "population": 2100000}, {"name": "Rome", "population": 2800000}]',
        "I called get_weather for Paris: it is sunny (18 °C).",
        "A long answer first, then some data at the end of it, well past any short lead-in: "
        '{"name": "get_weather", "arguments": {"city": "Paris"}}',
    ],
    ids=[
        "plain",
        "empty",
        "mentions-json",
        "braces",
        "data-json",
        "fenced-data",
        "data-list",
        "names-a-tool",
        "json-late",
    ],  # fmt: skip
)
def test_answers_are_not_calls(text: str) -> None:
    assert not looks_like_call(text, TOOLS)


# ------------------------------------------------------------------ tools and questions


def test_own_tools_are_deterministic_and_safe() -> None:
    assert loop_data.calculate("(144 / 12) ** 2") == 144
    assert loop_data.calculate("37 * 12 + 5") == 449
    with pytest.raises(ValueError, match="unsupported"):
        loop_data.calculate("__import__('os').system('true')")
    assert loop_data.get_weather("Paris") == loop_data.get_weather("Paris")
    assert loop_data.convert_temperature(21, "C", "F") == 69.8
    assert loop_data.convert_currency(100, "EUR", "USD") == {"amount": 108.0, "currency": "USD"}
    assert loop_data.get_capital("Japan") == "Tokyo"
    with pytest.raises(ValueError, match="unknown currency"):
        loop_data.get_exchange_rate("USD", "XXX")


def test_the_question_set_is_30_single_and_20_two_step(tmp_path: Path) -> None:
    qs = loop.build_questions(None)
    assert [sum(q.kind == k for q in qs) for k in ("single", "two")] == [30, 20]
    assert len({q.id for q in qs}) == 50
    assert set().union(*(q.expected for q in qs)) == set(TOOLS)
    assert all(len(q.expected) == 2 for q in qs if q.kind == "two")
    fn = {
        "name": "geo.area",
        "parameters": {"type": "dict", "properties": {"r": {"type": "float"}}},
    }
    line = {"id": "multiple_0", "question": [[{"role": "user", "content": "Area?"}]]}
    (tmp_path / "BFCL_v4_multiple.jsonl").write_text(json.dumps({**line, "function": [fn]}))
    qs = loop.build_questions(str(tmp_path))
    assert [q.id for q in qs[:4]] == ["weather_paris", "temp_21c", "multiple_0", "eur_usd"]
    assert qs[2].functions == ({**fn, "parameters": {"type": "object", "properties": {
        "r": {"type": "number"}}}},)  # fmt: skip
    assert sum(q.kind == "single" for q in qs) == 30 and len({q.id for q in qs}) == 50


# ------------------------------------------------------------------ the run loop, scripted

ARGS: dict[str, dict[str, Any]] = {
    "get_weather": {"city": "Paris"},
    "convert_temperature": {"value": 21, "from_unit": "C", "to_unit": "F"},
    "convert_currency": {"amount": 100, "from_currency": "EUR", "to_currency": "USD"},
    "get_capital": {"country": "Japan"},
    "search_flights": {"origin": "Paris", "destination": "Rome", "date": "2026-03-01"},
    "get_population": {"city": "Tokyo"},
}


def _since_user(messages: Sequence[Any]) -> int:
    """Tool results since the last user message (the turns this question has had)."""
    n = 0
    for m in reversed(messages):
        if m.role == "user":
            break
        n += m.role == "tool"
    return n


def _oracle(messages: Sequence[Any], request: Any) -> Reply:
    """Calls the question's expected tools one per turn, then answers."""
    prompt = next(m.content for m in reversed(messages) if m.role == "user")
    q = next((q for q in loop.build_questions(None) if q.prompt == prompt), None)
    done = _since_user(messages)
    if q is None or done >= len(q.expected):
        return "Here is your answer."
    return ToolCallScript(q.expected[done], ARGS[q.expected[done]])


def _run(tokenizer: Any, fn: Callable[[list[Any], Any], Reply], q: Question, **kw: Any) -> Run:
    options = Options(FunctionModel(fn, tokenizer=tokenizer), warm_up=False, **kw)
    (run,) = loop.run_questions([q], options, log=False)
    return run


def test_a_call_then_an_answer(smollm2_tokenizer: Any) -> None:
    q = loop.build_questions(None, 0, 1)[0]  # get_capital, then get_weather
    run = _run(smollm2_tokenizer, _oracle, q)
    assert (run.ending, run.output, run.is_call) == ("answer", "Here is your answer.", False)
    assert (run.steps, run.executions, run.repeated, run.expected_ran) == (3, 2, False, True)
    assert run.within_3 and not run.max_tokens and run.executed == ["get_capital", "get_weather"]


def test_a_model_repeating_its_call(smollm2_tokenizer: Any) -> None:
    """The agent answers a repeated call from the first result (the tool runs once), then
    allows no call: the scripted call written as text is either returned (and counted as a
    call) or refused by the turn's grammar (a scripted model cannot write anything else)."""
    q = loop.build_questions(None, 1, 0)[0]
    run = _run(
        smollm2_tokenizer, lambda m, r: ToolCallScript("get_weather", ARGS["get_weather"]), q
    )
    assert (run.executions, run.repeated, run.max_one_tool) == (1, False, 1)
    assert (run.ending == "answer") == run.is_call and run.ending in ("answer", "retries")
    assert not run.within_3


def test_a_model_that_never_stops_calling(smollm2_tokenizer: Any) -> None:
    q = loop.build_questions(None, 1, 0)[0]

    def new_city(messages: Sequence[Any], request: Any) -> Reply:
        return ToolCallScript("get_weather", {"city": f"City{_since_user(messages)}"})

    run = _run(smollm2_tokenizer, new_city, q, max_steps=4)
    assert (run.ending, run.steps, run.executions, run.max_one_tool) == ("step_limit", 4, 4, 4)
    assert not run.within_3 and "StepLimitExceeded" in run.error


def test_a_bare_call_as_the_final_answer(smollm2_tokenizer: Any) -> None:
    """Returned as the answer, it counts as a call; refused by the turn grammar, as retries."""
    q = loop.build_questions(None, 1, 0)[0]
    bare = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
    run = _run(smollm2_tokenizer, lambda m, r: bare, q)
    assert (run.ending == "answer") == run.is_call and run.ending in ("answer", "retries")
    assert (run.within_3, run.executions, run.expected_ran) == (False, 0, False)
    result = SimpleNamespace(  # the same answer from a run that returned it, measured alone
        output=bare, finish_reason="stop", usage=SimpleNamespace(steps=1, retries=0),
        new_messages=lambda: [],
    )  # fmt: skip
    run = loop.measure(q, result, [], 0.1, TOOLS)
    assert (run.ending, run.is_call, run.within_3, run.steps) == ("answer", True, False, 1)
    plain = loop.measure(q, SimpleNamespace(**{**vars(result), "output": "Sunny."}), [], 0.1, TOOLS)
    s = loop.summarize([run, plain])
    assert (s["answered"], s["answer_is_call"], s["within_3"]) == (1.0, 0.5, 0.5)


def test_a_bfcl_function_runs_as_a_recorded_stub(smollm2_tokenizer: Any) -> None:
    schema = {"type": "object", "properties": {"r": {"type": "number"}}, "required": ["r"]}
    fn = {"name": "geo.area", "description": "Area of a circle.", "parameters": schema}
    q = Question("multiple_0", "single", "Area of r=2?", ("geo.area",), (fn,))

    def script(messages: Sequence[Any], request: Any) -> Reply:
        return ToolCallScript("geo.area", {"r": 2}) if not _since_user(messages) else "12.57"

    run = _run(smollm2_tokenizer, script, q)
    assert (run.ending, run.executed, run.expected_ran, run.output) == (
        "answer", ["geo.area"], True, "12.57"
    )  # fmt: skip


# ------------------------------------------------------------------ summary and CLI


def test_arguments_are_compared_as_canonical_json() -> None:
    assert loop.canonical({"v": 69.8, "n": 21.0, "t": (1, "a")}) == {
        "v": 69.8,
        "n": 21,
        "t": [1, "a"],
    }
    loop.RECORDER.take()
    loop.recorded(loop_data.get_weather)("Paris")
    loop.recorded(loop_data.get_weather)(city="Paris", unit="celsius")  # the same execution
    (first, second) = loop.RECORDER.take()
    assert first == second == ("get_weather", '{"city": "Paris", "unit": "celsius"}')


def test_repeats_and_endings_are_counted() -> None:
    q = Question("q", "single", "?", ("get_weather",))
    call = ("get_weather", '{"city": "Paris"}')
    again = loop.measure(q, RuntimeError("boom"), [call, call], 1.0, TOOLS)
    assert (again.repeated, again.executions, again.ending) == (True, 2, "error:RuntimeError")
    from sdk.errors import RetriesExhausted, StepLimitExceeded, TruncationError

    assert loop.ending_of(StepLimitExceeded("x")) == "step_limit"
    assert loop.ending_of(TruncationError("x", partial_text="")) == "truncation"
    assert loop.ending_of(TruncationError("x", partial_text="", runaway="0")) == "runaway"
    assert loop.ending_of(RetriesExhausted("x", attempts=[])) == "retries"
    cut = loop.measure(q, TruncationError("x", partial_text="{"), [], 2.0, TOOLS)
    s = loop.summarize([again, cut])
    assert (s["n"], s["answered"], s["repeated"], s["max_tokens"]) == (2, 0.0, 0.5, 0.5)
    assert (s["executions_mean"], s["executions_max"], s["seconds_median"]) == (1.0, 2, 1.5)
    assert s["endings"] == {"error:RuntimeError": 1, "truncation": 1}


def test_cli_prints_the_table_and_bench_json(
    smollm2_tokenizer: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "runs.jsonl"
    argv = ["--n-single", "2", "--n-two", "1", "--json", "--jsonl", str(out)]
    assert loop.main(argv, model=FunctionModel(_oracle, tokenizer=smollm2_tokenizer)) == 0
    stdout = capsys.readouterr().out
    assert "single-tool (n=2)" in stdout and "real answer within 3 steps" in stdout
    (line,) = [x for x in stdout.splitlines() if x.startswith("BENCH_JSON ")]
    bench = json.loads(line.removeprefix("BENCH_JSON "))
    (tree,) = bench["trees"].values()
    assert (tree["single"]["n"], tree["two"]["n"], tree["all"]["within_3"]) == (2, 1, 1.0)
    assert tree["all"]["expected_ran"] == 1.0 and tree["all"]["repeated"] == 0.0
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["id"] for r in rows] == ["weather_paris", "temp_21c", "weather_cap_jp"]


def test_format_table_puts_trees_side_by_side() -> None:
    q = Question("q", "two", "?", ())
    ok = loop.measure(q, RuntimeError(), [], 0.5, TOOLS)
    s = loop.summarize_groups([ok])
    text = loop.format_table([("abc1234*", s), ("def5678", s)], "header")
    assert "abc1234*" in text and "def5678" in text and "two-step (n=1)" in text
    assert "other endings: abc1234*=error:RuntimeError:1" in text


def test_a_tree_runs_in_its_own_process() -> None:
    """The baseline path: this file by path, `PYTHONPATH` naming the tree, which the worker
    must have imported (no question here, so no model loads)."""
    assert loop.run_worker(loop.tree_root(), [], Options("smollm2", warm_up=False), "x") == []
    from sdk.bench.__main__ import COMMANDS

    assert "loop" in COMMANDS
