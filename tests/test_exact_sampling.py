"""Exact sampling (`sdk.decoding.exact`): draws from p(y | y in L), checked against an
independent enumeration of the model's distribution over a small grammar, next to the masked
sampler whose distortion it corrects. The model is a stand-in whose logits are a fixed random
function of the tokens so far (no weights needed), over SmolLM2's real vocabulary."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from sdk.decoding.exact import ExactSampler
from sdk.engine.grammar import CompiledGrammar
from sdk.engine.matcher import Matcher
from sdk.grammar import compile_schema


class _Model:
    """Logits: a fixed random function of the path (one forward pass per `feed`)."""

    def __init__(self, vocab: int, bias: dict[int, float] | None = None) -> None:
        self.vocab = vocab
        self.fed: list[int] = []
        self.passes = 0
        self.bias = bias or {}

    def _logits(self) -> np.ndarray:
        rng = np.random.default_rng(hash(tuple(self.fed)) % 2**32)
        out = (rng.standard_normal(self.vocab) * 2.0).astype(np.float32)
        for token, value in self.bias.items():
            out[token] += value
        return out

    def prefill(self) -> np.ndarray:
        self.passes += 1
        return self._logits()

    def feed(self, ids: Sequence[int]) -> np.ndarray:
        self.passes += 1
        self.fed += list(ids)
        return self._logits()

    def rollback(self, n: int) -> None:
        del self.fed[len(self.fed) - n :]


class _RowsModel(_Model):
    """`_Model` that also serves the logits after each fed token in one pass (as both local
    backends do)."""

    def prefill_rows(self, extra: Sequence[int]) -> np.ndarray:
        self.passes += 1
        rows = []
        for i in range(len(extra) + 1):
            self.fed = list(extra[:i])
            rows.append(self._logits())
        return np.stack(rows)

    def feed_rows(self, ids: Sequence[int]) -> np.ndarray:
        self.passes += 1
        rows = []
        for token in ids:
            self.fed.append(token)
            rows.append(self._logits())
        return np.stack(rows)


def _exact(
    model: _Model, matcher: Matcher, eos: frozenset[int], decode: Any, closer: str | None = None
) -> dict[str, float]:
    """p(y | y in L) by brute force: every token path the grammar allows, its probability.
    With `closer`, where only it is left the end token ends the output too (its text, the
    closer written): L' of `ExactSampler(open_end=closer)`."""
    out: Counter[str] = Counter()

    def walk(path: list[int], m: Matcher, logmass: float) -> None:
        if m.is_terminated():
            out[decode(path)] += math.exp(logmass)
            return
        model.fed = list(path)
        logits = model._logits().astype(np.float64)
        logp = logits - np.max(logits)
        logp -= math.log(float(np.exp(logp).sum()))
        if closer is not None and m.forced_bytes().lstrip() == closer.encode():
            end = math.log(sum(math.exp(logp[e]) for e in eos if e < len(logp)))
            out[decode(path) + m.forced_bytes().decode()] += math.exp(logmass + end)
        for token in np.flatnonzero(m.mask()[: model.vocab]).tolist():
            if token in eos:
                out[decode(path)] += math.exp(logmass + logp[token])
                continue
            fork = m.fork()
            fork.advance(token)
            walk([*path, token], fork, logmass + float(logp[token]))

    walk([], matcher.fork(), 0.0)
    total = sum(out.values())
    return {k: v / total for k, v in out.items()}


def _cold(
    model: _Model, matcher: Matcher, eos: frozenset[int], n: int, **options: Any
) -> tuple[list[Any], int]:
    """One draw from each of `n` new samplers (seeds 0..n-1; nothing learned between them)
    and the forward passes they took in all."""
    draws, passes = [], 0
    for i in range(n):
        model.fed = []
        sampler = ExactSampler(model, matcher, eos, rng=np.random.default_rng(i), **options)
        draws.append(sampler.draw())
        passes += sampler.forward_passes
    return draws, passes


def _tv(a: dict[str, float], b: dict[str, float]) -> float:
    return 0.5 * sum(abs(a.get(k, 0.0) - b.get(k, 0.0)) for k in set(a) | set(b))


@pytest.fixture
def setup(smollm2_index: Any) -> tuple[_Model, Matcher, Any]:
    schema = {"enum": ["ab", "b", "abc", "ba"]}
    grammar = CompiledGrammar.from_lark(compile_schema(schema).lark)
    index = smollm2_index
    ids = {index.decode_bytes([i]): i for i in range(index.vocab_size)}
    # The model likes `"a` but, after it, mostly tokens the grammar refuses: the masked
    # sampler renormalizes that away and over-weights the "a..." values.
    model = _Model(index.vocab_size, bias={ids[b'"']: 4.0, ids[b"a"]: 3.0})
    return model, Matcher(grammar, index), index


def test_draws_follow_the_model_restricted_to_the_grammar(setup: Any) -> None:
    model, matcher, index = setup

    def decode(path: Sequence[int]) -> str:
        return index.decode_bytes([t for t in path if t not in index.eos_ids]).decode()

    want = _exact(model, matcher, index.eos_ids, decode)
    model.fed = []
    sampler = ExactSampler(
        model, matcher, index.eos_ids, temperature=1.0, rng=np.random.default_rng(7)
    )
    n = 3000
    exact = Counter(decode(sampler.draw().tokens) for _ in range(n))
    masked = Counter(decode(sampler.masked_draw().tokens) for _ in range(n))
    got = {k: v / n for k, v in exact.items()}
    baseline = {k: v / n for k, v in masked.items()}
    assert _tv(got, want) < 0.03, (got, want)
    assert _tv(baseline, want) > 0.1, (baseline, want)  # the distortion this corrects
    found, cut = sampler.enumerate(0.0)
    total = sum(found.values())
    enumerated: Counter[str] = Counter()
    for path, mass in found.items():
        enumerated[decode(path)] += mass / total
    assert _tv(dict(enumerated), want) < 1e-9 and cut == 0.0


def test_the_trie_learns_and_visited_prefixes_cost_nothing(setup: Any) -> None:
    model, matcher, index = setup
    sampler = ExactSampler(model, matcher, index.eos_ids, rng=np.random.default_rng(1))
    first = [sampler.draw() for _ in range(50)]
    passes = model.passes
    later = [sampler.draw() for _ in range(200)]
    assert sum(d.passes for d in first) + 1 == passes  # +1: the prefill
    assert sum(d.attempts for d in later) / 200 < sum(d.attempts for d in first) / 50
    assert all(d.passes == 0 for d in later[-50:])  # all known by then


def test_bad_arguments_are_refused(setup: Any) -> None:
    model, matcher, index = setup
    with pytest.raises(ValueError, match="temperature"):
        ExactSampler(model, matcher, index.eos_ids, temperature=0.0)


def test_a_cold_trie_draws_exactly_too(setup: Any) -> None:
    """Each draw from a new sampler (nothing learned): what the correction for prefixes met
    for the first time must get right on its own (without it, a cold draw is the masked
    sampler's)."""
    model, matcher, index = setup

    def decode(path: Sequence[int]) -> str:
        return index.decode_bytes([t for t in path if t not in index.eos_ids]).decode()

    want = _exact(model, matcher, index.eos_ids, decode)
    rng = np.random.default_rng(3)
    n = 400
    got: Counter[str] = Counter()
    for _ in range(n):
        model.fed = []
        sampler = ExactSampler(model, matcher, index.eos_ids, rng=rng)
        got[decode(sampler.draw().tokens)] += 1
    assert _tv({k: v / n for k, v in got.items()}, want) < 0.06, (got, want)


def test_the_faithful_bench_on_the_embedded_model() -> None:
    """`python -m sdk.bench faithful` on one schema: the exact draws' distance from the
    enumerated p(y | y in L) is small, and the masked sampler's on a schema where prefixes
    differ in how much of their mass the grammar allows (`1` may end or go on to `10`)."""
    pytest.importorskip("llama_cpp")
    from sdk.backends.local import coerce_model
    from sdk.bench import faithful

    model = coerce_model("smollm2")
    case = next(c for c in faithful.SCHEMAS if c.name == "pick_1_10")
    row = faithful.run_case(model, case, n=600, temperature=1.0, seed=0, cold=5)
    assert row["values"] == 10 and row["cut_mass"] < 1e-6
    assert row["tv_exact"] < 0.08 and row["tv_masked"] > 0.3, row
    assert row["cold_exact_attempts"] >= 1.0 and row["cold_masked_passes"] >= 1.0
    assert "pick_1_10" in faithful.format_table([row])


# ------------------------------------------------------------------------------ in the agent


def test_agent_exact_decoding_settings_are_checked() -> None:
    from sdk import Agent, ConfigError

    with pytest.raises(ConfigError, match="temperature > 0"):
        Agent(decoding="exact")
    with pytest.raises(ConfigError, match="top_p=1"):
        Agent(decoding="exact", temperature=1.0, top_p=0.9)
    with pytest.raises(ConfigError, match="'masked', 'exact' or 'best'"):
        Agent(decoding="beam", temperature=1.0)  # type: ignore[arg-type]
    agent = Agent(temperature=0.0)
    with pytest.raises(ConfigError, match="temperature > 0"):
        agent.run_sync("hi", settings={"decoding": "exact"})


def test_agent_exact_decoding_on_the_embedded_model() -> None:
    """A typed output and a required call are drawn exactly (`usage.exact_attempts`); the
    answer turn after the call is masked as usual; a server cannot do it."""
    pytest.importorskip("llama_cpp")
    from typing import Literal

    from sdk import Agent, ConfigError, tool
    from sdk.backends.openai import OpenAIChatModel

    unit = Literal["celsius", "fahrenheit", "kelvin"]
    typed = Agent(output_type=unit, decoding="exact", temperature=1.0)
    for seed in range(3):
        result = typed.run_sync("Name a temperature unit.", settings={"seed": seed})
        assert result.output in ("celsius", "fahrenheit", "kelvin")
        assert result.usage.exact_attempts >= 1
    masked = Agent(output_type=unit, temperature=1.0).run_sync("Name a temperature unit.")
    assert masked.usage.exact_attempts == 0

    @tool
    def set_unit(unit: Literal["celsius", "fahrenheit"]) -> str:
        """Set the display unit.

        Args:
            unit: The unit.
        """
        return f"set to {unit}"

    calls = Agent(
        tools=[set_unit], tool_choice=["required", "none"], decoding="exact", temperature=1.0
    )
    result = calls.run_sync("Show temperatures in Fahrenheit.", settings={"seed": 1})
    assert result.tool_calls and result.tool_calls[0].name == "set_unit"
    assert result.usage.exact_attempts >= 1 and isinstance(result.output, str)
    remote = Agent(OpenAIChatModel("http://127.0.0.1:9/v1", "m"), decoding="exact", temperature=1.0)
    with pytest.raises(ConfigError, match="needs a local model"):
        remote.run_sync("hi")


def test_forced_runs_open_in_one_pass_and_draws_stay_exact(
    smollm2_index: Any, smollm2_tokenizer: Any
) -> None:
    """With `forced`, the forced text after a new prefix is opened in the same pass: draws
    stay exact over every spelling, cold or warm, for fewer forward passes."""
    index = smollm2_index
    # fixed text around a choice: forced runs on both sides (no free whitespace)
    grammar = CompiledGrammar.from_lark('start: "{\\"k\\": " V "}"\nV: "1" | "22" | "true"\n')
    matcher = Matcher(grammar, index)
    # the model leans toward the outputs' own tokens, so a new trie keeps a draw in a few
    # attempts (the acceptance of draws on a new trie is what a forced run could get wrong)
    texts = ['{"k": 1}', '{"k": 22}', '{"k": true}']
    lean = {t: 14.0 for x in texts for t in smollm2_tokenizer.encode(x, add_special_tokens=False)}
    # ... and toward `3` everywhere, which the grammar never allows: each node of a forced run
    # rejects much of the mass (what a walk that opens a run must be kept by)
    lean[smollm2_tokenizer.encode("3", add_special_tokens=False)[0]] = 14.0
    model = _RowsModel(index.vocab_size, bias=lean)

    def decode(path: Sequence[int]) -> str:
        return index.decode_bytes([t for t in path if t not in index.eos_ids]).decode()

    want = _exact(model, matcher, index.eos_ids, decode)
    assert set(want) == set(texts)
    forced = (index, smollm2_tokenizer)
    model.fed = []
    sampler = ExactSampler(
        model, matcher, index.eos_ids, rng=np.random.default_rng(11), forced=forced
    )
    n = 1000
    got = Counter(decode(sampler.draw().tokens) for _ in range(n))
    assert _tv({k: v / n for k, v in got.items()}, want) < 0.05, (got, want)
    draws, with_forced = _cold(model, matcher, index.eos_ids, 200, forced=forced)
    cold = Counter(decode(d.tokens) for d in draws)
    passes = {True: with_forced, False: _cold(model, matcher, index.eos_ids, 200)[1]}
    assert _tv({k: v / 200 for k, v in cold.items()}, want) < 0.1, (cold, want)
    assert passes[True] < 0.75 * passes[False], passes


def test_a_call_may_leave_its_closer_to_the_end_token(
    smollm2_index: Any, smollm2_tokenizer: Any
) -> None:
    """A model that ends its turn right after a call's JSON, giving the closer almost
    nothing (Qwen2.5-Coder-0.5B: about e^-23), had each new call drawn rejected at its very
    end. With `open_end` the end token there stands for the closer: draws follow the model
    over the grammar's outputs and those that leave the closer out, the closer is written
    in the output, and they cost fewer passes."""
    index = smollm2_index
    closer = "</a>"  # (short: the brute force below walks every spelling)
    grammar = CompiledGrammar.from_lark(
        'start: "{\\"k\\": " V "}\\n</a>"\nV: "1" | "22" | "true"\n'
    )
    matcher = Matcher(grammar, index)
    encode = smollm2_tokenizer.encode
    texts = ['{"k": 1}', '{"k": 22}', '{"k": true}']
    lean = {t: 12.0 for x in texts for t in encode(x, add_special_tokens=False)}
    for eos in index.eos_ids:  # the end wherever it may come: right after the JSON
        lean[eos] = 16.0
    forced = (index, smollm2_tokenizer)
    model = _RowsModel(index.vocab_size, bias=lean)

    def decode(path: Sequence[int]) -> str:
        return index.decode_bytes([t for t in path if t not in index.eos_ids]).decode()

    target = _exact(model, matcher, index.eos_ids, decode, closer)
    assert set(target) == {f"{t}\n{closer}" for t in texts}
    model.fed = []
    sampler = ExactSampler(
        model,
        matcher,
        index.eos_ids,
        rng=np.random.default_rng(2),
        forced=forced,
        open_end=closer,
    )
    n = 400
    got = Counter(decode(sampler.draw().tokens) for _ in range(n))
    assert _tv({k: v / n for k, v in got.items()}, target) < 0.06, (got, target)
    passes = {}
    for open_end in (closer, None):
        draws, passes[open_end is not None] = _cold(
            model, matcher, index.eos_ids, 20, forced=forced, open_end=open_end
        )
        assert all(decode(d.tokens).endswith(closer) for d in draws)
    assert passes[True] < 0.5 * passes[False], passes  # without it most are rejected at the end
