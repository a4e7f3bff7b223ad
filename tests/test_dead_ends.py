"""Free text the mask leads into a dead end backs out instead of writing blanks to max_tokens.

A model whose preferences are given token by token (the real SmolLM2 tokenizer, the real turn
grammar, an agent run): it answers a tool result by opening a JSON fence, as Qwen2.5-Coder-0.5B
did in a new-user app, and once `{` is masked it prefers a space to anything else.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from sdk import Agent, tool
from sdk.decoding._retreat import BLANK_RUN, MAX_RETREATS
from tests._prefers import Prefers, Wants


@tool
def lookup_stock(sku: str) -> int:
    """Units in stock."""
    return 1


def _fence_wants(
    answer: Sequence[str], after: Sequence[str | tuple[str, float]] = ("{", " ")
) -> Wants:
    """Opens "```json\n[" and then wants `after` (`{`, a space next); `answer`, token by
    token, is its second choice at the start (then EOS)."""
    fence = ["```", "json", "\n", "["]

    def wants(done: bytes) -> Sequence[str | tuple[str, float]]:
        text = done.decode()
        if not text:
            return [fence[0], answer[0]]
        for i in range(1, len(fence) + 1):
            if text == "".join(fence[:i]):
                return [fence[i]] if i < len(fence) else after
        if text.startswith("".join(fence)):  # after it, blanks at most: `after`
            return after if not text[len("".join(fence)) :].strip() else ["<eos>"]
        for i in range(1, len(answer) + 1):
            if text == "".join(answer[:i]):
                return [answer[i]] if i < len(answer) else ["<eos>"]
        return ["<eos>"]

    return wants


def test_an_answer_that_runs_into_blanks_backs_out_and_answers(smollm2_tokenizer: Any) -> None:
    model = Prefers(_fence_wants(["The", " answer", " is", " one"]), smollm2_tokenizer)
    agent = Agent(model, tools=[lookup_stock], tool_choice="none", max_tokens=400)
    result = agent.run_sync("Check stock of C-300.")
    assert result.output == "The answer is one"
    assert result.finish_reason == "stop" and result.usage.dead_ends == 1
    # it went back once, over the fence and BLANK_RUN blanks, instead of writing to max_tokens
    assert model.rollbacks == [len(["```", "json", "\n", "["]) + BLANK_RUN - 1]
    assert model.passes < 4 + BLANK_RUN + 8


def test_a_dead_end_at_every_start_stops_as_a_runaway(smollm2_tokenizer: Any) -> None:
    """Every way the text may start leads into blanks: it stops after `MAX_RETREATS` tries,
    far before max_tokens, cut ("length") where it stopped making progress."""
    starts = ["```", "[", " [", " ```"]  # JSON may not open an answer: `{` is masked after each

    def wants(done: bytes) -> Sequence[str]:
        text = done.decode()
        if not text:
            return starts
        return ["{", " "]

    model = Prefers(wants, smollm2_tokenizer)
    agent = Agent(model, tools=[lookup_stock], tool_choice="none", max_tokens=1000)
    result = agent.run_sync("Check stock of C-300.")
    assert result.finish_reason == "length"
    assert len(model.rollbacks) == MAX_RETREATS
    assert model.passes <= (MAX_RETREATS + 1) * (BLANK_RUN + 1)
    assert result.output.strip() == starts[MAX_RETREATS].strip()


@pytest.mark.parametrize(
    ("second", "share", "backs_out"),
    [("'", -6.0, True), ("'", -3.0, False), ("<eos>", -6.0, False)],
)
def test_a_step_the_mask_leaves_almost_nothing_is_a_dead_end(
    smollm2_tokenizer: Any, second: str, share: float, backs_out: bool
) -> None:
    """After the fence, `{` is masked and the model's next choice has e^share of its mass
    against 1: under 1 % (`DEAD_SHARE`) more text backs out and answers; at 5 % the text is the
    model's, as it wrote it; an end (EOS) is no dead end, however little the model wanted it
    (a complete answer after which it wanted to call again stays)."""
    after = [("{", 0.0), (second, share)]
    model = Prefers(_fence_wants(["The", " answer"], after), smollm2_tokenizer)
    agent = Agent(model, tools=[lookup_stock], tool_choice="none", max_tokens=400)
    result = agent.run_sync("Check stock of C-300.")
    if backs_out:
        assert result.output == "The answer" and model.rollbacks == [
            len(["```", "json", "\n", "["])
        ]
    else:
        assert result.output == "```json\n[" + ("'" if second == "'" else "")
        assert not model.rollbacks and result.finish_reason == "stop"


@pytest.mark.parametrize("blanks", [BLANK_RUN - 1, 3])
def test_blanks_short_of_a_dead_end_are_the_models_text(
    smollm2_tokenizer: Any, blanks: int
) -> None:
    """Fewer than `BLANK_RUN` blank tokens in a row are left as the model wrote them."""
    words = ["Hi", *[" "] * blanks, "there"]

    def wants(done: bytes) -> Sequence[str]:
        text = done.decode()
        for i in range(len(words)):
            if text == "".join(words[:i]):
                return [words[i]]
        return ["<eos>"]

    model = Prefers(wants, smollm2_tokenizer)
    result = Agent(model, tools=[lookup_stock], tool_choice="none").run_sync("x")
    assert result.output == "".join(words) and not model.rollbacks


@pytest.mark.parametrize("after", [("{", " "), (("{", 0.0), ("'", -6.0))])
def test_a_stream_takes_back_the_text_it_backed_out_of(
    smollm2_tokenizer: Any, after: Sequence[str | tuple[str, float]]
) -> None:
    """Streamed, the dead end's text is withdrawn (`TextWithdrawn`), not a call: the deltas
    rebuild the answer, and the run streams on to its end."""
    from sdk.events import CallDropped, FinalResult, TextDelta, TextWithdrawn

    model = Prefers(_fence_wants(["The", " answer"], after), smollm2_tokenizer)
    agent = Agent(model, tools=[lookup_stock], tool_choice="none", max_tokens=400)
    text, events = "", list(agent.run_stream_sync("Check stock of C-300."))
    for event in events:
        if isinstance(event, TextDelta):
            text += event.text
        elif isinstance(event, TextWithdrawn):
            assert 0 < event.chars <= len(text)
            text = text[: len(text) - event.chars]
    assert any(isinstance(e, TextWithdrawn) for e in events)
    assert not any(isinstance(e, CallDropped) for e in events)
    final = events[-1]
    assert isinstance(final, FinalResult) and final.result.output == text == "The answer"
