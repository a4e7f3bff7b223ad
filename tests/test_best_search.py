"""The best-call search (`sdk.decoding.best`): its dive is the masked greedy turn, its result
is never less likely than greedy's, and with the budget to finish it is the most likely valid
output, checked against brute-force enumeration. The model is a stand-in whose logits are a
fixed random function of the tokens so far (no weights needed), over SmolLM2's real
vocabulary; one test runs the embedded model through the agent."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sdk.decoding.best import BestSearch, best_turn, sequence_logprob
from sdk.decoding.generate import SamplingConfig, generate_turn
from sdk.engine.grammar import CompiledGrammar
from sdk.engine.matcher import Matcher
from sdk.grammar import compile_schema


class _Model:
    """A session whose logits are a fixed random function of the path (`salt` picks the
    function); `rows=True` also serves the logits after each fed token in one pass."""

    def __init__(
        self, vocab: int, salt: int = 0, bias: dict[tuple[int, ...], dict[int, float]] | None = None
    ) -> None:
        self.vocab = vocab
        self.salt = salt
        self.bias = bias or {}
        self.fed: list[int] = []
        self.passes = 0
        self.prompt_ids = [1, 2, 3]
        self.cached_tokens = 0

    def logits_at(self, path: Sequence[int]) -> np.ndarray:
        rng = np.random.default_rng((hash(tuple(path)) + self.salt) % 2**32)
        out = (rng.standard_normal(self.vocab) * 2.0).astype(np.float32)
        for token, value in self.bias.get(tuple(path), {}).items():
            out[token] += value
        return out

    def logprob(self, path: Sequence[int], token: int) -> float:
        x = self.logits_at(path).astype(np.float64)
        return float(x[token] - np.max(x) - math.log(float(np.exp(x - np.max(x)).sum())))

    def prefill(self) -> np.ndarray:
        self.passes += 1
        self.fed = []
        return self.logits_at([])

    def prefill_with(self, extra: Sequence[int]) -> np.ndarray:
        self.prefill()
        self.fed = list(extra)
        return self.logits_at(self.fed)

    def feed(self, ids: Sequence[int]) -> np.ndarray:
        self.passes += 1
        self.fed += list(ids)
        return self.logits_at(self.fed)

    def rollback(self, n: int) -> None:
        del self.fed[len(self.fed) - n :]

    def close(self) -> None:
        pass


class _RowsModel(_Model):
    def prefill_rows(self, extra: Sequence[int]) -> np.ndarray:
        self.passes += 1
        self.fed = list(extra)
        return np.stack([self.logits_at(extra[:i]) for i in range(len(extra) + 1)])

    def feed_rows(self, ids: Sequence[int]) -> np.ndarray:
        self.passes += 1
        start = len(self.fed)
        self.fed += list(ids)
        return np.stack([self.logits_at(self.fed[: start + i + 1]) for i in range(len(ids))])


def _matcher(schema: Any, index: Any) -> Matcher:
    return Matcher(CompiledGrammar.from_lark(compile_schema(schema).lark), index)


def _most_likely(model: _Model, matcher: Matcher, eos: frozenset[int]) -> tuple[float, list]:
    """Brute force: the most likely complete token path the grammar allows (the end token
    counted where it is sampled, not after a path nothing but it can follow)."""
    best: tuple[float, list[int]] = (-math.inf, [])

    def walk(path: list[int], m: Matcher, score: float) -> None:
        nonlocal best
        if m.is_terminated():
            best = max(best, (score, path))
            return
        x = model.logits_at(path).astype(np.float64)
        lp = x - np.max(x) - math.log(float(np.exp(x - np.max(x)).sum()))
        for token in np.flatnonzero(m.mask()[: model.vocab]).tolist():
            if token in eos:
                best = max(best, (score + float(lp[token]), path))
                continue
            fork = m.fork()
            fork.advance(token)
            walk([*path, token], fork, score + float(lp[token]))

    walk([], matcher.fork(), 0.0)
    return best


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hi=st.integers(1, 40), salt=st.integers(0, 2**16), rows=st.booleans())
def test_the_search_finds_the_most_likely_output(
    smollm2_index: Any, smollm2_tokenizer: Any, hi: int, salt: int, rows: bool
) -> None:
    """With the budget to finish, the search proves its result the most likely valid output,
    the one brute force finds; it is never less likely than the greedy dive."""
    index = smollm2_index
    matcher = _matcher({"type": "integer", "minimum": 0, "maximum": hi}, index)
    model = (_RowsModel if rows else _Model)(index.vocab_size, salt)
    want, want_path = _most_likely(model, matcher, index.eos_ids)
    search = BestSearch(model, matcher, index, smollm2_tokenizer, width=10_000)
    found = search.run(budget=math.inf)
    assert found.complete and found.proven
    assert found.logprob == pytest.approx(want, abs=1e-9)
    assert list(found.tokens) == want_path
    assert found.logprob >= found.greedy_logprob


@pytest.mark.parametrize("rows", [False, True])
def test_the_dive_is_the_masked_greedy_turn(
    smollm2_index: Any, smollm2_tokenizer: Any, rows: bool
) -> None:
    """Forced text, healing and all: with no budget the search returns exactly the tokens
    of a masked greedy turn, and scores them as the model does."""
    index = smollm2_index
    schema = {
        "type": "object",
        "properties": {"unit": {"enum": ["celsius", "fahrenheit"]}, "n": {"type": "integer"}},
        "required": ["unit", "n"],
    }
    for salt in range(4):
        model = (_RowsModel if rows else _Model)(index.vocab_size, salt)
        greedy = generate_turn(
            model,
            _matcher(schema, index),
            index,
            smollm2_tokenizer,
            max_tokens=40,
            sampling=SamplingConfig(),
        )
        found = BestSearch(
            model, _matcher(schema, index), index, smollm2_tokenizer, max_tokens=40
        ).run(budget=0)
        assert list(found.tokens) == greedy.token_ids
        if found.complete:
            path = list(found.tokens)
            score = sum(model.logprob(path[:i], t) for i, t in enumerate(path))
            if not _matcher_after(schema, index, path).is_terminated():
                score += max(model.logprob(path, e) for e in index.eos_ids)
            assert found.greedy_logprob == pytest.approx(score, abs=1e-6)
        longer = BestSearch(
            model, _matcher(schema, index), index, smollm2_tokenizer, max_tokens=40
        ).run(budget=500)
        assert longer.logprob >= found.logprob


def _matcher_after(schema: Any, index: Any, path: Sequence[int]) -> Matcher:
    m = _matcher(schema, index)
    for t in path:
        m.advance(t)
    return m


def test_the_search_beats_greedy_where_greedy_is_lured(
    smollm2_index: Any, smollm2_tokenizer: Any
) -> None:
    """The model likes `1` first, then digits the grammar refuses (15: above 10): greedy
    writes `1...`, the search finds the value the model puts more mass on."""
    index = smollm2_index
    ids = {index.decode_bytes([i]): i for i in range(index.vocab_size)}
    schema = {"type": "integer", "minimum": 1, "maximum": 10}
    one, four, five = ids[b"1"], ids[b"4"], ids[b"5"]
    bias = {(): {one: 16.0, four: 12.0}, (one,): {five: 20.0}}
    model = _Model(index.vocab_size, 3, bias=bias)
    found = BestSearch(model, _matcher(schema, index), index, smollm2_tokenizer).run(math.inf)
    text = index.decode_bytes(list(found.tokens)).decode()
    want = _most_likely(model, _matcher(schema, index), index.eos_ids)
    assert found.proven and found.logprob == pytest.approx(want[0])
    dive = index.decode_bytes(
        list(BestSearch(model, _matcher(schema, index), index, smollm2_tokenizer).run(0).tokens)
    ).decode()
    assert dive.startswith("1") and text == "4"
    assert found.logprob > found.greedy_logprob


def test_best_turn_cuts_a_repeated_call_and_scores_what_it_keeps(
    smollm2_index: Any, smollm2_tokenizer: Any
) -> None:
    from sdk.decoding._gate import CallGate

    index = smollm2_index
    grammar = CompiledGrammar.from_lark('start: "<a>{\\"x\\": 1}</a>\\n<a>{\\"x\\":1}</a>"\n')
    model = _RowsModel(index.vocab_size, 0)
    gate = CallGate("<a>", "</a>", drop_repeats=True, keep_complete_calls=True)
    out = best_turn(model, Matcher(grammar, index), index, smollm2_tokenizer, 64, gate=gate)
    assert out.text == '<a>{"x": 1}</a>' and out.dropped == "repeat"  # the same call, cut
    assert out.logprob == pytest.approx(sequence_logprob(model, out.token_ids), abs=1e-6)
    kept = best_turn(model, Matcher(grammar, index), index, smollm2_tokenizer, 64)
    assert kept.text.count("<a>") == 2 and not kept.dropped


def test_sequence_logprob_sums_the_model_log_probabilities(smollm2_index: Any) -> None:
    model = _RowsModel(smollm2_index.vocab_size, 5)
    for path in ([10, 20, 30], list(range(100, 180))):  # the long one in several passes
        want = sum(model.logprob(path[:i], t) for i, t in enumerate(path))
        assert sequence_logprob(model, path) == pytest.approx(want, abs=1e-9)
        plain = _Model(smollm2_index.vocab_size, 5)
        assert sequence_logprob(plain, path) == pytest.approx(want, abs=1e-9)
    assert model.passes == 4  # 3 tokens: one pass; 80 tokens: three
    assert sequence_logprob(model, []) == 0.0


# ------------------------------------------------------------------------------ real models


def test_llama_rows_are_the_logits_of_each_position() -> None:
    """`feed_rows`/`prefill_rows` on llama.cpp: the last row is `feed`'s logits and every row
    picks the token the model would pick there fed one at a time."""
    pytest.importorskip("llama_cpp")
    from sdk.backends.local import coerce_model
    from sdk.decoding.generate import TurnRequest
    from sdk.messages import Message

    model = coerce_model("smollm2")
    ids = model.tokenizer.encode(" the cat sat on the mat", add_special_tokens=False)
    request = TurnRequest(messages=[Message.user("Say something.")], tools=[])
    session = model.begin_turn(request)
    try:
        start = session.prefill_rows(ids[:2])
        assert start.shape == (3, model.n_vocab)
        rows = session.feed_rows(ids[2:])
        assert rows.shape == (len(ids) - 2, model.n_vocab)
        session.rollback(1)
        last = session.feed(ids[-1:])
        assert np.allclose(rows[-1], last, atol=0.6)
        session.rollback(len(ids) - 2)
        for i, token in enumerate(ids[2:]):
            one = session.feed([token])
            assert int(np.argmax(one)) == int(np.argmax(rows[i]))
    finally:
        session.close()


@pytest.mark.parametrize("max_batch", [1, 8])
def test_transformers_rows_are_the_logits_of_each_position(smollm2: Any, max_batch: int) -> None:
    """`feed_rows`/`prefill_rows` on transformers, one turn at a time and batched: every row
    is the logits a one-token feed gets there."""
    from sdk.backends.transformers import TransformersModel
    from sdk.decoding.generate import TurnRequest
    from sdk.messages import Message

    model = TransformersModel(smollm2.model, smollm2.tokenizer, max_batch=max_batch)
    ids = model.tokenizer.encode(" the cat sat on the mat", add_special_tokens=False)
    request = TurnRequest(messages=[Message.user("Say something.")], tools=[])
    session = model.begin_turn(request)
    try:
        start = session.prefill_rows(ids[:2])
        rows = session.feed_rows(ids[2:])
        assert tuple(start.shape)[0] == 3 and tuple(rows.shape)[0] == len(ids) - 2
        session.rollback(len(ids) - 2)
        for i, token in enumerate(ids[2:]):
            one = session.feed([token])
            assert np.allclose(np.asarray(one), np.asarray(rows[i]), atol=2e-3)
    finally:
        session.close()
    # again, with the prompt and those tokens cached: the rows are still computed
    again = model.begin_turn(request)
    try:
        assert np.allclose(np.asarray(again.prefill_rows(ids[:2])), np.asarray(start), atol=2e-3)
    finally:
        again.close()


def test_agent_best_decoding_on_the_embedded_model() -> None:
    """`decoding="best"`: a required call and a typed output come back valid, with their
    log-probability, never below the masked greedy turn's; a server cannot do it."""
    pytest.importorskip("llama_cpp")
    from typing import Literal

    from sdk import Agent, ConfigError, tool
    from sdk.backends.openai import OpenAIChatModel

    @tool
    def get_weather(city: str, unit: Literal["celsius", "fahrenheit"] = "celsius") -> str:
        """Get the weather for a city.

        Args:
            city: The city.
            unit: The unit.
        """
        return "sunny"

    question = "What's the weather in Paris in fahrenheit?"
    best = Agent(tools=[get_weather], tool_choice="required", decoding="best")
    result = best.plan_sync(question)
    assert result.tool_calls and result.tool_calls[0].name == "get_weather"
    assert result.tool_calls[0].error is None
    logprob = result.messages[-1].metadata["logprob"]
    greedy = Agent(tools=[get_weather], tool_choice="required").plan_sync(question)
    assert "logprob" not in greedy.messages[-1].metadata
    if greedy.messages[-1].metadata["token_ids"] == result.messages[-1].metadata["token_ids"]:
        assert result.output == greedy.output
    assert math.isfinite(logprob) and logprob < 0

    typed = Agent(output_type=int, decoding="best").run_sync("Pick a number from 1 to 10.")
    assert isinstance(typed.output, int) and typed.messages[-1].metadata["logprob"] < 0
    remote = Agent(OpenAIChatModel("http://127.0.0.1:9/v1", "m"), decoding="best")
    with pytest.raises(ConfigError, match="needs a local model"):
        remote.run_sync("hi")
