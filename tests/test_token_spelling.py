"""Forced text is spelled the way the tokenizer spells it, where the model reads it next.

The grammar forces `": "` and a string's opening quote; healing gives the trailing ` "` back so
the model may merge it with its value, and the model must not be handed splits it never saw:
SmolLM2 put its mass on a lone ` ` after `"sku":` (the start of ` 1`, a number), and, held to a
string, wrote `""` after it, an empty SKU, where the tokenizer's ` "` leads it to `A-100`.
Models whose preferences are given token by token (`tests._prefers`), the real tokenizers, the
real grammar, through `Agent`; and a property: a model that writes the tokenizer's own tokens
is never kept from them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sdk import Agent, tool
from sdk.backends.test import TestModel, ToolCallScript
from tests._prefers import Prefers


@tool
def lookup_stock(sku: str) -> int:
    """Units in stock."""
    return 1


@tool
def set_flag(on: bool) -> str:
    """Set the flag."""
    return "ok"


@tool
def reserve(skus: list[str], units: int) -> str:
    """Reserve units."""
    return "ok"


def _plan(model: Prefers, tool_: Any, decoding: Any = "masked") -> tuple[Any, list[int], str]:
    agent = Agent(model, tools=[tool_], tool_choice="required", max_tokens=64, decoding=decoding)
    result = agent.plan_sync("x")
    call = result.tool_calls[0]
    assert call.error is None, call.error
    return call.args, list(result.messages[-1].metadata["token_ids"]), result.output


def _wants(rules: dict[str, Sequence[str | tuple[str, float]]]) -> Any:
    """Preferences by what the text so far ends with (the longest rule that matches)."""

    def wants(done: bytes) -> Sequence[str | tuple[str, float]]:
        text = done.decode()
        ends = [k for k in rules if text.endswith(k)]
        return rules[max(ends, key=len)] if ends else ["<eos>"]

    return wants


@pytest.mark.parametrize("decoding", ["masked", "best"])
def test_a_string_value_starts_with_the_tokenizers_space_and_quote(
    smollm2_tokenizer: Any, decoding: str
) -> None:
    """Also for the search for the most likely call: the split path is the likelier one here
    (0.73 * 0.73 against 0.27), so only the rule keeps it from the empty SKU."""
    model = Prefers(
        _wants(
            {
                '"sku":': [(" ", 0.0), (' "', -1.0)],  # a number in mind: ` ` then `1`
                '"sku": ': ['""', '"'],  # held to a string after a lone space: empty
                '"sku": "': ["A"],
                '"sku": "A': ['"}'],
                "}}": ["\n"],
                "</tool_call>": ["<eos>"],
            }
        ),
        smollm2_tokenizer,
        floor=-30.0,  # the search scores forced tokens: finite, the same on both paths
    )
    args, ids, text = _plan(model, lookup_stock, decoding)
    assert args.sku == "A"  # not "" (the lone space split ` "`)
    assert ids == smollm2_tokenizer.encode(text, add_special_tokens=False)


def test_a_boolean_is_the_models_choice_among_its_own_tokens(smollm2_tokenizer: Any) -> None:
    """` true` and ` false` are single tokens: a lone ` ` leads only to splits, so the choice
    falls to the model's preference between the two."""
    model = Prefers(
        _wants(
            {
                '"on":': [(" ", 0.0), (" true", -1.0), (" false", -2.0)],
                '"on": ': [("false", 0.0), ("true", -1.0)],
                "true": ["}}"],
                "false": ["}}"],
                "}}": ["\n"],
                "</tool_call>": ["<eos>"],
            }
        ),
        smollm2_tokenizer,
    )
    args, ids, text = _plan(model, set_flag)
    assert args.on is True
    assert ids == smollm2_tokenizer.encode(text, add_special_tokens=False)


def test_a_number_keeps_its_lone_space(smollm2_tokenizer: Any) -> None:
    """SmolLM2 spells ` 12` as ` `, `1`, `2`: the lone space is its own spelling there."""
    model = Prefers(
        _wants(
            {
                '"sku":': [' "'],
                '"sku": "': ["A"],
                '"sku": "A': ['",'],
                '"units":': [" "],
                '"units": ': ["1"],
                '"units": 1': ["2"],
                '"units": 12': ["}}"],
                "}}": ["\n"],
                "</tool_call>": ["<eos>"],
            }
        ),
        smollm2_tokenizer,
    )

    @tool
    def order(sku: str, units: int) -> str:
        """Order units."""
        return "ok"

    args, ids, text = _plan(model, order)
    assert (args.sku, args.units) == ("A", 12)
    assert ids == smollm2_tokenizer.encode(text, add_special_tokens=False)


@pytest.mark.parametrize("decoding", ["masked", "best"])
def test_a_chosen_token_merges_with_the_forced_text_after_it(
    smollm2_tokenizer: Any, decoding: str
) -> None:
    """The model closes the list with `]`; `, "units": ` is forced after it. What it reads next
    is `],` as the tokenizer writes it, not `]` then `,` (the search takes `"],` in its
    place)."""
    model = Prefers(
        _wants(
            {
                '"skus":': [' ["'],
                '"skus": ["': ["A"],
                '"skus": ["A': ['"]', ('"],', -3.0)],
                '"]': [","],
                '"units":': [" "],
                '"units": ': ["5"],
                '"units": 5': ["}}"],
                "}}": ["\n"],
                "</tool_call>": ["<eos>"],
            }
        ),
        smollm2_tokenizer,
        floor=-30.0,
    )
    args, ids, text = _plan(model, reserve, decoding)
    assert (args.skus, args.units) == (["A"], 5)
    pieces = [smollm2_tokenizer.decode([i]) for i in ids]
    assert '"],' in pieces and '"]' not in pieces
    assert ids == smollm2_tokenizer.encode(text, add_special_tokens=False)


@tool
def record(name: str, on: bool, count: int, note: str | None, tags: list[str], score: float) -> str:
    """Record something."""
    return "ok"


_ARGS = st.fixed_dictionaries(
    {
        "name": st.text(st.sampled_from(list('ab X"é-1 ,')), max_size=8),
        "on": st.booleans(),
        "count": st.integers(-1000, 1000),
        "note": st.none() | st.text(st.sampled_from(list("xy ")), max_size=4),
        "tags": st.lists(st.sampled_from(["", "a", " b", "New York", "]"]), max_size=3),
        "score": st.floats(-100, 100, allow_nan=False).map(lambda f: round(f, 2)),
    }
).map(lambda d: {k: d[k] for k in ("name", "on", "count", "note", "tags", "score")})


@pytest.mark.parametrize("which", ["smollm2", "gemma3"])
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(args=_ARGS)
def test_the_tokenizers_own_spelling_is_never_kept_out(
    which: str, args: dict[str, Any], request: pytest.FixtureRequest
) -> None:
    """A model that writes the tokenizer's own tokens for any values: nothing it picks is
    banned, and the turn's ids are the tokenizer's encoding of the turn's text."""
    tok = request.getfixturevalue(f"{which}_tokenizer")
    agent = Agent(
        TestModel([ToolCallScript("record", args)], tokenizer=tok),
        tools=[record],
        tool_choice="required",
        parallel_tool_calls=False,
        max_tokens=256,
    )
    result = agent.plan_sync("x")
    assert result.tool_calls[0].error is None
    assert result.tool_calls[0].args.model_dump() == args
    ids = list(result.messages[-1].metadata["token_ids"])
    assert ids == tok.encode(result.output, add_special_tokens=False)
