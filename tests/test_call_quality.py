"""Correct calls, not just valid ones: call style, token alignment, the auto decision,
reasoning before a call, and values cut by `max_tokens`.

Everything goes through the public `Agent` with the real SmolLM2 tokenizer (scripted models
pick the tokenizer's own tokens for their script, so any split they do not make comes from the
decoding loop), plus the gate's arithmetic on crafted logits.
"""

from __future__ import annotations

import copy
import math
from typing import Annotated, Any

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from sdk import Agent, TruncationError, tool
from sdk.backends.test import TestModel, ToolCallScript
from sdk.backends.transformers import probe_call_style
from sdk.decoding._gate import PROBE, CallGate, GateRun
from sdk.decoding.call_style import COMPACT, SPACED, CallStyle
from sdk.decoding.formats import HERMES
from tests._templates import HERMES_LIKE


@tool
def compute(a: int, b: float, city: str, tags: list[str]) -> str:
    """Compute something."""
    return "ok"


@tool
def get_weather(city: str) -> str:
    """Weather in a city."""
    return f"sunny in {city}"


# ------------------------------------------------------------------ never a cut value


@pytest.mark.parametrize(
    ("output_type", "script", "max_tokens"),
    [
        (int, "12345", 2),  # "12" is a complete int: still a cut value
        (float, "3.14159", 2),
        (Annotated[str, Field(min_length=1)], '"hello wonderful world"', 3),  # JSON string
        (list[int], "[1, 2, 3]", 4),  # "[1, 2" would be a cut list
    ],
)
def test_cut_typed_output_raises_truncation(
    smollm2_tokenizer: Any, output_type: Any, script: str, max_tokens: int
) -> None:
    agent = Agent(  # cut on every attempt: the retries run out, then TruncationError
        TestModel([script] * 4, tokenizer=smollm2_tokenizer),
        output_type=output_type,
        max_tokens=max_tokens,
    )
    with pytest.raises(TruncationError, match="structured output") as info:
        agent.run_sync("x")
    assert info.value.partial_text and script.startswith(info.value.partial_text)


def test_cut_model_output_and_uncut_values(smollm2_tokenizer: Any) -> None:
    class Point(BaseModel):
        x: int
        y: int

    text = '{"x": 1, "y": 23456}'
    with pytest.raises(TruncationError):
        Agent(
            TestModel([text], tokenizer=smollm2_tokenizer),
            output_type=Point,
            max_tokens=8,
            retries=0,
        ).run_sync("x")
    # The same values with room to finish: the model (EOS) or the grammar ended them.
    assert (
        Agent(TestModel(["12345"], tokenizer=smollm2_tokenizer), output_type=int)
        .run_sync("x")
        .output
        == 12345
    )
    ok = Agent(TestModel([text], tokenizer=smollm2_tokenizer), output_type=Point, max_tokens=64)
    assert ok.run_sync("x").output == Point(x=1, y=23456)


def test_cut_call_raises_even_when_complete_so_far(smollm2_tokenizer: Any) -> None:
    script = ToolCallScript("get_weather", {"city": "Paris"})
    for n in range(1, 80):
        agent = Agent(
            TestModel([script], tokenizer=smollm2_tokenizer),
            tools=[get_weather],
            tool_choice="required",
            max_tokens=n,
        )
        try:
            result = agent.plan_sync("x")
        except TruncationError as exc:
            assert "tool call" in str(exc)
            continue
        assert result.finish_reason == "stop" and result.tool_calls[0].error is None
        break
    else:
        pytest.fail("the call never fit")


# ------------------------------------------------------------------ call style


def test_default_style_is_the_models_and_shapes_prompt_and_history(
    smollm2_tokenizer: Any,
) -> None:
    m = TestModel(
        [ToolCallScript("get_weather", {"city": "Oslo"}), "done"], tokenizer=smollm2_tokenizer
    )
    agent = Agent(m, tools=[get_weather], tool_choice=["required", "none"])
    assert agent.resolved_format().style == SPACED  # SmolLM2's template writes no calls
    result = agent.run_sync("x")
    assert result.messages[-3].content == (
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>'
    )
    assert '{"name": <function-name>, "arguments": <args-dict>}' in m.prompts[0]
    assert result.messages[-3].content in m.prompts[1]  # the history shows the same layout

    compact = Agent(
        TestModel([ToolCallScript("get_weather", {"city": "Oslo"})], tokenizer=smollm2_tokenizer),
        tools=[get_weather],
        call_style="compact",
    )
    assert compact.resolved_format().style == COMPACT
    assert '"arguments":{"city":"Oslo"}' in compact.plan_sync("x").output


@pytest.mark.parametrize(
    ("seps", "expected"),
    [("(', ', ': ')", SPACED), ("(',', ':')", COMPACT), ("(',', ': ')", None)],
)
def test_probe_reads_the_templates_separators(
    smollm2_tokenizer: Any, seps: str, expected: CallStyle | None
) -> None:
    tok = copy.deepcopy(smollm2_tokenizer)
    tok.chat_template = HERMES_LIKE.replace("SEPS", seps)
    style = probe_call_style(tok)
    assert style == (expected or CallStyle("custom", (",", ": ")))
    agent = Agent(TestModel([], tokenizer=tok), tools=[get_weather])
    assert agent.resolved_format().style == style


def test_probe_falls_back_to_json_dumps(smollm2_tokenizer: Any, gemma3_tokenizer: Any) -> None:
    assert probe_call_style(smollm2_tokenizer) == SPACED  # no tool support in its template
    assert probe_call_style(gemma3_tokenizer) == SPACED  # built-in Gemma turn template
    broken = copy.deepcopy(smollm2_tokenizer)
    broken.chat_template = "{{ raise_exception('no tools here') }}"
    assert probe_call_style(broken) == SPACED


# ------------------------------------------------------------------ token alignment

_VALUES = st.fixed_dictionaries(  # then in declaration order, as the grammar wants
    {
        "a": st.integers(-(10**6), 10**6),
        "b": st.floats(-1e4, 1e4, allow_nan=False).map(lambda f: round(f, 3)),
        "city": st.text(st.sampled_from(list("abcXYZ é-.,'0123456789")), min_size=0, max_size=12),
        "tags": st.lists(st.sampled_from(["x y", " lead", "z", "New York", "-1"]), max_size=3),
    }
).map(lambda d: {k: d[k] for k in ("a", "b", "city", "tags")})


def _generated_ids(tok: Any, args: dict[str, Any], heal: bool) -> tuple[list[int], str]:
    agent = Agent(
        TestModel([ToolCallScript("compute", args)], tokenizer=tok),
        tools=[compute],
        tool_choice="required",
        parallel_tool_calls=False,
        max_tokens=256,
        token_healing=heal,
    )
    result = agent.plan_sync("x")
    assert result.tool_calls[0].error is None
    return list(result.messages[-1].metadata["token_ids"]), result.output


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(args=_VALUES)
def test_forced_and_free_text_tokenize_as_the_tokenizer_would(
    smollm2_tokenizer: Any, args: dict[str, Any]
) -> None:
    """A model that writes its own (canonical) tokens, plus fast-forward: the turn's ids are the
    tokenizer's encoding of the turn's text, as if the model had written all of it."""
    ids, text = _generated_ids(smollm2_tokenizer, args, heal=True)
    assert ids == smollm2_tokenizer.encode(text, add_special_tokens=False)


def test_without_healing_a_forced_space_splits_the_value(smollm2_tokenizer: Any) -> None:
    """The failure healing prevents: `": "` forced whole leaves `-3` where the model writes
    ` -3` (the difference the alignment report counts)."""
    args = {"a": -3, "b": -9.81, "city": "Rome", "tags": []}
    ids, text = _generated_ids(smollm2_tokenizer, args, heal=False)
    canonical = smollm2_tokenizer.encode(text, add_special_tokens=False)
    assert ids != canonical
    pieces = smollm2_tokenizer.convert_ids_to_tokens(ids)
    assert "Ġ-" in smollm2_tokenizer.convert_ids_to_tokens(canonical) and "Ġ-" not in pieces
    healed, _ = _generated_ids(smollm2_tokenizer, args, heal=True)
    assert healed == canonical


# ------------------------------------------------------------------ the auto decision


def _logits(index: Any, mass: dict[bytes, float], floor: float = -1e4) -> torch.Tensor:
    """Logits with the given probability mass on the first token spelling each key."""
    logits = torch.full((index.vocab_size,), floor)
    for piece, p in mass.items():
        logits[index.token_bytes.index(piece)] = math.log(p)
    return logits


@pytest.mark.parametrize(
    ("p_open", "fit", "bias", "opens"),
    [
        (0.04, None, 3.0, False),  # no probe: the opener's odds decide
        (0.04, None, 3.5, True),
        (0.5, None, 0.0, False),
        (0.6, None, 0.0, True),
        (0.04, -0.1, 2.75, True),  # probed: the offered names keep most of the mass
        (0.04, -3.0, 2.75, False),  # the model wanted a tool nobody offered
    ],
)
def test_gate_decides_from_the_models_mass(
    smollm2_index: Any, p_open: float, fit: float | None, bias: float, opens: bool
) -> None:
    logits = _logits(smollm2_index, {b"<": p_open, b"Hello": 1 - p_open})
    run = GateRun(CallGate("<tool_call>", "</tool_call>", bias=bias), smollm2_index)
    assert run.steer(logits) == PROBE  # both ways are open: look at the call first
    assert run.settle(logits, fit) is opens
    ((score, opened),) = run.decisions
    expected = math.log(p_open / (1 - p_open)) if fit is None else fit
    assert opened is opens and score == pytest.approx(expected + bias, abs=1e-3)
    lt = smollm2_index.token_bytes.index(b"<")
    assert bool(logits[lt] == -math.inf) is not opens  # "no call" masks the opener


def test_gate_without_a_choice(smollm2_index: Any) -> None:
    only_call = _logits(smollm2_index, {b"<": 1.0}, floor=-math.inf)
    run = GateRun(CallGate("<tool_call>", "</tool_call>", bias=-50.0), smollm2_index)
    assert run.steer(only_call) == b"<tool_call>"  # nothing but a call: open it
    run = GateRun(CallGate("<tool_call>", "</tool_call>", bias=50.0), smollm2_index)
    no_call = _logits(smollm2_index, {b"Hello": 1.0}, floor=-math.inf)
    assert run.steer(no_call) == b""  # no mass on a call
    assert run.decisions == []
    # far below MIN_OPENER_ODDS: not considered, no probe, whatever the bias
    chat = _logits(smollm2_index, {b"<": 1e-4, b"Hello": 1 - 1e-4})
    run = GateRun(CallGate("<tool_call>", "</tool_call>", bias=50.0), smollm2_index)
    assert run.steer(chat) == b"" and run.decisions[0][1] is False
    assert bool(chat[smollm2_index.token_bytes.index(b"<")] == -math.inf)


def test_gate_waits_over_whitespace_and_decides_after_calls(smollm2_index: Any) -> None:
    run = GateRun(CallGate("<tool_call>", "</tool_call>", bias=3.0), smollm2_index)
    assert run.steer(_logits(smollm2_index, {b"\n": 0.7, b"<": 0.2, b"Hello": 0.1})) == b""
    assert run.boundary  # whitespace first: no decision yet
    run.after(b"\n")
    assert run.steer(_logits(smollm2_index, {b"<": 0.2, b"Hello": 0.8})) == PROBE
    assert run.settle(_logits(smollm2_index, {b"<": 0.2, b"Hello": 0.8}), -0.5)
    run.after(b'<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>', 5)
    assert run.boundary and not run.in_call  # a new boundary after the call
    assert run.steer(_logits(smollm2_index, {b"<": 0.01, b"Hello": 0.99})) == PROBE
    assert not run.settle(_logits(smollm2_index, {b"<": 0.01, b"Hello": 0.99}), -5.0)
    run.after(b"Hello")
    assert run.steer(_logits(smollm2_index, {b"<": 0.9, b"Hello": 0.1})) == b""  # mid-text
    assert len(run.decisions) == 2


def test_auto_decision_is_off_with_none_and_scripts_are_unaffected(smollm2_tokenizer: Any) -> None:
    for bias in (None, 0.0, 3.0, -3.0):
        call = Agent(
            TestModel(
                [ToolCallScript("get_weather", {"city": "Oslo"}), "fine"],
                tokenizer=smollm2_tokenizer,
            ),
            tools=[get_weather],
            auto_call_bias=bias,
        ).run_sync("x")
        assert call.tool_calls[0].result == "sunny in Oslo" and call.output == "fine"
    with pytest.raises(ValueError):
        Agent(
            TestModel([], tokenizer=smollm2_tokenizer), tools=[get_weather], auto_call_bias=math.inf
        )
    with pytest.raises(TypeError):
        Agent(
            TestModel([], tokenizer=smollm2_tokenizer),
            tools=[get_weather],
            auto_call_bias="high",  # type: ignore[arg-type]
        )


def test_auto_bias_follows_the_template(smollm2_tokenizer: Any) -> None:
    """A template that renders tools marks a model trained to call: the stricter bias, and the
    whole name followed."""
    from sdk.decoding._gate import DEFAULT_AUTO_CALL_BIAS, TOOL_TRAINED_CALL_BIAS

    def bias(agent: Agent[Any]) -> tuple[float | None, bool]:  # the "auto" turn's gate's
        fmt = agent.resolved_format()  # resolves the backend
        gate = agent._assembly.gate(agent._turn_grammar("auto", fmt), fmt, agent.model.tokenizer)
        assert gate is not None
        return gate.bias, gate.whole_name

    assert bias(Agent(TestModel([], tokenizer=smollm2_tokenizer), tools=[get_weather])) == (
        DEFAULT_AUTO_CALL_BIAS,
        False,  # a generic model's name is read at its first token
    )
    tok = copy.deepcopy(smollm2_tokenizer)
    tok.chat_template = HERMES_LIKE.replace("SEPS", "(', ', ': ')")
    assert bias(Agent(TestModel([], tokenizer=tok), tools=[get_weather])) == (
        TOOL_TRAINED_CALL_BIAS,
        True,
    )
    fixed = Agent(TestModel([], tokenizer=tok), tools=[get_weather], auto_call_bias=1.5)
    assert bias(fixed) == (1.5, True)


# ------------------------------------------------------------------ reasoning before the call


def test_reasoning_span_then_call(smollm2_tokenizer: Any) -> None:
    thought = "The user wants Paris weather, so I call the tool. "
    script = [thought, ToolCallScript("get_weather", {"city": "Paris"})]
    agent = Agent(
        TestModel([script], tokenizer=smollm2_tokenizer),
        tools=[get_weather],
        tool_choice="required",
        reasoning_tokens=64,
    )
    result = agent.plan_sync("x")
    assert result.output.startswith(thought.rstrip())
    [call] = result.tool_calls
    assert call.name == "get_weather" and call.error is None


def test_reasoning_budget_forces_the_call_open(smollm2_tokenizer: Any) -> None:
    """Past the budget the opener is forced: a script that rambles on is overruled right
    after its fifth token (24 bytes of "word word ...")."""
    from sdk import UnexpectedModelBehavior

    agent = Agent(
        TestModel(["word " * 40], tokenizer=smollm2_tokenizer),
        tools=[get_weather],
        tool_choice="required",
        reasoning_tokens=5,
    )
    with pytest.raises(UnexpectedModelBehavior, match="at byte 24 the grammar forced") as info:
        agent.plan_sync("x")
    assert "<tool_call>" in str(info.value)
    with pytest.raises(ValueError):
        Agent(TestModel([], tokenizer=smollm2_tokenizer), tools=[get_weather], reasoning_tokens=-1)


# ------------------------------------------------------------------ repeated calls


@pytest.mark.parametrize("tool_choice", ["required", "auto"])
def test_a_repeated_call_ends_the_turn(smollm2_tokenizer: Any, tool_choice: str) -> None:
    """A model writing the same call again is looping: the repeat is cut away and the turn
    ends after the call before it (a half-written separator included); the tool runs once."""
    paris, rome = {"city": "Paris"}, {"city": "Rome"}
    loop = [
        ToolCallScript("get_weather", paris),
        ToolCallScript("get_weather", rome),
        ToolCallScript("get_weather", paris),
        ToolCallScript("get_weather", rome),
    ]
    model = TestModel([loop, "Sunny."], tokenizer=smollm2_tokenizer)
    agent = Agent(model, tools=[get_weather], tool_choice=tool_choice, auto_call_bias=None)
    result = agent.run_sync("Weather in Paris and Rome?")
    assert [c.args.city for c in result.tool_calls] == ["Paris", "Rome"]  # type: ignore[attr-defined]
    turn = result.messages[1]
    assert turn.content.endswith("</tool_call>") and turn.content.count("<tool_call>") == 2
    assert len(turn.metadata["token_ids"]) == len(smollm2_tokenizer.encode(turn.content))

    kept = Agent(
        TestModel([loop, "Sunny."], tokenizer=smollm2_tokenizer),
        tools=[get_weather],
        tool_choice=tool_choice,
        auto_call_bias=None,
        drop_repeated_calls=False,
    ).run_sync("Weather in Paris and Rome?")
    assert len(kept.tool_calls) == 4


def test_distinct_calls_are_all_kept(smollm2_tokenizer: Any) -> None:
    calls = [ToolCallScript("get_weather", {"city": c}) for c in ("Paris", "Rome", "Paris ")]
    model = TestModel([calls, "Sunny."], tokenizer=smollm2_tokenizer)
    result = Agent(model, tools=[get_weather], tool_choice="required").run_sync("x")
    assert len(result.tool_calls) == 3


def test_a_runaway_later_call_is_dropped_and_the_complete_ones_kept(
    smollm2_tokenizer: Any,
) -> None:
    """A value that runs away in the third call stops the turn there (not at `max_tokens`):
    that call is dropped like a cut one, the two before it stand."""
    calls = [ToolCallScript("get_weather", {"city": c}) for c in ("Paris", "Rome", "1" + "0" * 300)]
    plan = Agent(
        TestModel([calls], tokenizer=smollm2_tokenizer),
        tools=[get_weather],
        tool_choice="required",
        max_tokens=1000,
    ).plan_sync("Weather in Paris, Rome and nowhere?")
    assert [c.args.city for c in plan.tool_calls] == ["Paris", "Rome"]
    assert plan.usage.cut_calls == 1 and plan.usage.forward_passes < 200, plan.usage


def test_max_tokens_inside_a_later_call_keeps_the_complete_ones(smollm2_tokenizer: Any) -> None:
    """The cut call is dropped (never a cut value); the calls the model finished stand."""
    calls = [ToolCallScript("get_weather", {"city": c}) for c in ("Paris", "Rome", "Lisbon")]
    text = "\n".join(HERMES.render_call("get_weather", {"city": c}) for c in ("Paris", "Rome"))
    budget = len(smollm2_tokenizer.encode(text)) + 6  # runs out inside the third call
    agent = Agent(
        TestModel([calls], tokenizer=smollm2_tokenizer),
        tools=[get_weather],
        tool_choice="required",
        max_tokens=budget,
    )
    plan = agent.plan_sync("Weather in Paris, Rome and Lisbon?")
    assert [c.args.city for c in plan.tool_calls] == ["Paris", "Rome"]
    assert plan.finish_reason == "length" and plan.usage.cut_calls == 1
    assert plan.output == text
    # With nothing complete before the cut, it is a TruncationError as always.
    single = Agent(
        TestModel([calls[0]], tokenizer=smollm2_tokenizer),
        tools=[get_weather],
        tool_choice="required",
        max_tokens=8,
    )
    with pytest.raises(TruncationError, match="tool call"):
        single.plan_sync("Weather in Paris?")
