"""Continuous batching (`TransformersModel(max_batch=...)`): concurrent turns share forward
passes and each computes exactly what it would alone, under random interleavings, next to
forced runs, rollbacks, truncation, failures and cancellation; rows are freed when turns end."""

from __future__ import annotations

import asyncio
import os
import random
import threading
import time
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from sdk import Agent, tool
from sdk.backends import _openmp
from sdk.backends._batching import batchable
from sdk.backends.transformers import TransformersModel, _cores
from sdk.decoding.generate import SamplingConfig, TurnCancelled, TurnRequest, generate_turn
from sdk.engine import CompiledGrammar, Matcher
from sdk.messages import Message

_SCHEMAS: list[dict[str, Any] | None] = [
    None,  # free text
    {
        "type": "object",
        "properties": {
            "a": {"type": "integer", "minimum": 0, "maximum": 99},
            "b": {"enum": ["x", "yz", "a longer forced value"]},
        },
        "required": ["a", "b"],
    },
    {"type": "array", "items": {"type": "boolean"}, "maxItems": 3},
]


@pytest.fixture(scope="module")
def tiny(smollm2_tokenizer: Any) -> tuple[Any, Any]:
    """A small random Llama over SmolLM2's real tokenizer, in float64: fast passes, and
    logits far from float32 ties, so "identical" is a fair demand of every interleaving."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(smollm2_tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
    )
    return LlamaForCausalLM(config).double().eval(), smollm2_tokenizer


def _turn(
    backend: TransformersModel,
    k: int,
    schema: dict[str, Any] | None,
    max_tokens: int,
    sampling: SamplingConfig,
    cancel: threading.Event | None = None,
    stop_after: int = 0,
) -> list[int]:
    words = " ".join(f"w{k * 7 + j}" for j in range(k % 5 * 6))
    request = TurnRequest(messages=[Message.user(f"question {k}: {words}")], tools=[])
    matcher = Matcher(CompiledGrammar.from_schema(schema), backend.index) if schema else None

    def progress(ids: list[int]) -> None:
        if stop_after and len(ids) >= stop_after:
            raise RuntimeError("this run fails mid-turn")

    out = generate_turn(
        backend.begin_turn(request),
        matcher,
        backend.index,
        backend.tokenizer,
        max_tokens=max_tokens,
        sampling=sampling,
        on_progress=progress,
        cancel=cancel,
    )
    return out.token_ids


def _concurrently(fns: list[Any], delays: list[float]) -> list[Any]:
    got: list[Any] = [None] * len(fns)

    def work(i: int) -> None:
        time.sleep(delays[i])
        try:
            got[i] = fns[i]()
        except Exception as exc:  # noqa: BLE001 - compared by the test
            got[i] = exc

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(fns))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a batched turn hung"
    return got


@given(seed=st.integers(0, 2**20), n=st.integers(2, 6))
@settings(max_examples=12, deadline=None)
def test_concurrent_turns_are_the_turns_alone(tiny: tuple[Any, Any], seed: int, n: int) -> None:
    """Random schemas, budgets (truncation included), sampling, start times, batch sizes and
    step windows: every turn's tokens are those of the same turn run alone."""
    rnd = random.Random(seed)
    jobs = [
        (
            k + seed % 3,
            rnd.choice(_SCHEMAS),
            rnd.randint(1, 30),
            rnd.choice([SamplingConfig(), SamplingConfig(temperature=0.9, seed=k)]),
        )
        for k in range(n)
    ]
    alone = TransformersModel(*tiny, max_batch=1)
    expected = [_turn(alone, *job) for job in jobs]
    batched = TransformersModel(*tiny, max_batch=rnd.randint(2, 4))
    scheduler = batched.scheduler
    assert scheduler is not None
    scheduler.max_wait_s = rnd.choice([0.0, 0.002, 0.05])
    fns = [lambda job=job: _turn(batched, *job) for job in jobs]
    got = _concurrently(fns, [rnd.random() * 0.05 for _ in jobs])
    assert got == expected
    assert scheduler.idle() and scheduler.stats()["rows"] == 0  # every row left with its turn


def test_failing_and_cancelled_turns_leave_the_others_alone(tiny: tuple[Any, Any]) -> None:
    """One turn raises mid-way, one is cancelled: their rows go, the others are unchanged."""
    greedy = SamplingConfig()
    jobs = [(k, _SCHEMAS[k % 3], 40, greedy) for k in range(4)]
    alone = TransformersModel(*tiny, max_batch=1)
    expected = [_turn(alone, *job) for job in jobs]
    batched = TransformersModel(*tiny, max_batch=8)
    cancel = threading.Event()
    fns = [lambda job=job: _turn(batched, *job) for job in jobs]
    fns.append(lambda: _turn(batched, 9, None, 40, greedy, stop_after=5))
    fns.append(lambda: _turn(batched, 10, None, 10_000, greedy, cancel=cancel))
    timer = threading.Timer(0.3, cancel.set)
    timer.start()
    got = _concurrently(fns, [0.0, 0.01, 0.02, 0.0, 0.0, 0.0])
    timer.cancel()
    assert got[:4] == expected
    assert isinstance(got[4], RuntimeError)
    assert isinstance(got[5], TurnCancelled)
    assert batched.scheduler is not None and batched.scheduler.idle()


def test_rows_and_the_prefix_store_stay_bounded(tiny: tuple[Any, Any]) -> None:
    """Hundreds of turns: the batch empties, the prefix store keeps to its byte budget."""
    batched = TransformersModel(*tiny, max_batch=4)
    scheduler = batched.scheduler
    assert scheduler is not None
    scheduler._store.max_bytes = 1 << 20  # a few entries: eviction runs
    greedy = SamplingConfig()
    for wave in range(40):
        fns = [
            lambda k=k, w=wave: _turn(batched, w * 5 + k, _SCHEMAS[k % 3], 4, greedy)
            for k in range(5)
        ]
        assert all(isinstance(x, list) for x in _concurrently(fns, [0.0] * 5))
    assert scheduler.idle()
    stats = scheduler.stats()
    assert stats["rows"] == 0 and stats["batch_bytes"] == 0
    assert 0 < stats["prefix_bytes"] <= 1 << 20
    assert scheduler.peak_rows == 4  # the fifth turn of a wave waited for a free row


def test_sliding_window_models_run_one_at_a_time(smollm2_tokenizer: Any) -> None:
    """A cache that counts columns (sliding windows) cannot carry masked holes: no batching."""
    from transformers import MistralConfig, MistralForCausalLM

    config = MistralConfig(
        vocab_size=len(smollm2_tokenizer),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        sliding_window=8,
    )
    model = MistralForCausalLM(config)
    assert not batchable(model)
    backend = TransformersModel(model, smollm2_tokenizer)
    assert backend.scheduler is None
    assert _turn(backend, 1, _SCHEMAS[2], 8, SamplingConfig())  # the lock path still works


def test_cancelling_a_run_frees_its_row(tiny: tuple[Any, Any]) -> None:
    """`task.cancel()` on an agent run stops its turn at the next token (no generating to
    max_tokens in an orphaned thread), and the other run finishes as it would alone."""
    batched = TransformersModel(*tiny, max_batch=8)
    long_agent = Agent(batched, max_tokens=100_000)
    short_agent = Agent(batched, max_tokens=30)
    expected = Agent(TransformersModel(*tiny, max_batch=1), max_tokens=30).run_sync("hello")

    async def main() -> Any:
        victim = asyncio.create_task(long_agent.run("tell me everything"))
        other = asyncio.create_task(short_agent.run("hello"))
        await asyncio.sleep(0.3)
        victim.cancel()
        with pytest.raises(asyncio.CancelledError):
            await victim
        return await other

    result = asyncio.run(main())
    assert result.output == expected.output
    scheduler = batched.scheduler
    assert scheduler is not None
    assert scheduler.idle(timeout=10)  # the cancelled turn left at its next token


@tool
def get_weather(city: str) -> str:
    """Get the current temperature in a city.

    Args:
        city: The city name.
    """
    return f"18.0 degrees celsius in {city}"


def test_real_model_concurrent_runs_are_the_runs_alone() -> None:
    """SmolLM2 in float32 (packed for oneDNN, as `from_pretrained` loads it), three weather
    runs gathered: the same calls and answers as alone."""
    from sdk.backends.embedded import load_model
    from sdk.backends.transformers import pack_linear_weights

    model, tokenizer = load_model("smollm2")
    pack_linear_weights(model)
    cities = ["Paris", "Tokyo", "Lima"]

    def agent(max_batch: int) -> Agent[str]:
        backend = TransformersModel(model, tokenizer, max_batch=max_batch)
        return Agent(
            backend,
            tools=[get_weather],
            tool_choice=["required", "none"],
            parallel_tool_calls=False,
            max_tokens=48,
        )

    alone = agent(1)
    expected = [alone.run_sync(f"What is the weather in {c}?") for c in cities]
    together = agent(8)

    async def main() -> list[Any]:
        return await asyncio.gather(*(together.run(f"What is the weather in {c}?") for c in cities))

    got = asyncio.run(main())
    assert [r.output for r in got] == [r.output for r in expected]
    assert [[c.args for c in r.tool_calls] for r in got] == [
        [c.args for c in r.tool_calls] for r in expected
    ]


def test_rolled_back_tokens_are_forgotten(tiny: tuple[Any, Any]) -> None:
    """A row's rollback (the call probe taken back, a repeated call cut) hides exactly its
    last tokens, while another row steps beside it."""
    request = TurnRequest(messages=[Message.user("roll back")], tools=[])

    def script(backend: TransformersModel) -> torch.Tensor:
        session = backend.begin_turn(request)
        try:
            session.prefill()
            session.feed([400, 401, 402])
            session.feed([403])
            session.rollback(2)  # type: ignore[union-attr]
            session.feed([404, 405])
            session.rollback(1)  # type: ignore[union-attr]
            return session.feed([406])
        finally:
            session.close()

    expected = script(TransformersModel(*tiny, max_batch=1))
    batched = TransformersModel(*tiny, max_batch=4)
    other = (3, _SCHEMAS[0], 20, SamplingConfig())
    got = _concurrently([lambda: script(batched), lambda: _turn(batched, *other)], [0.0, 0.0])
    assert torch.allclose(got[0], expected, rtol=0, atol=1e-9)
    assert got[1] == _turn(TransformersModel(*tiny, max_batch=1), *other)


def test_a_dropped_model_frees_its_scheduler(tiny: tuple[Any, Any]) -> None:
    """The worker thread ends when idle, so a model nobody holds (and its cached prefixes)
    can be freed; the next turn on a live model starts a new worker."""
    import gc
    import weakref

    from sdk.backends._batching import BatchScheduler

    backend = TransformersModel(*tiny, max_batch=4)
    scheduler = backend.scheduler
    assert scheduler is not None
    scheduler.IDLE_EXIT_S = 0.05
    first = _turn(backend, 1, None, 5, SamplingConfig())
    time.sleep(0.3)  # the worker ended
    assert _turn(backend, 1, None, 5, SamplingConfig()) == first  # a new one serves
    ref = weakref.ref(scheduler)
    del backend, scheduler
    deadline = time.monotonic() + 5
    while ref() is not None and time.monotonic() < deadline:
        gc.collect()
        time.sleep(0.05)
    assert ref() is None
    assert BatchScheduler.IDLE_EXIT_S == 2.0


class _PromptThenFeed:
    """A session without `prefill_with`: the turn runs the prompt, then feeds its start."""

    def __init__(self, session: Any) -> None:
        self._session = session

    def __getattr__(self, name: str) -> Any:
        if name == "prefill_with":
            raise AttributeError(name)
        return getattr(self._session, name)


@pytest.mark.parametrize("max_batch", [1, 4])
def test_the_forced_start_goes_in_with_the_prompt(tiny: tuple[Any, Any], max_batch: int) -> None:
    """A turn whose start is forced (`{"answer": "`) runs it in the prompt's pass: the same
    tokens as prompt-then-feed, one forward pass fewer, alone or as a batch row."""
    backend = TransformersModel(*tiny, max_batch=max_batch)
    schema = {
        "type": "object",
        "properties": {"answer": {"type": "string"}},
        "required": ["answer"],
        "additionalProperties": False,
    }
    request = TurnRequest(messages=[Message.user("say something")], tools=[])
    outs = []
    for wrap in (lambda s: s, _PromptThenFeed):
        matcher = Matcher(CompiledGrammar.from_schema(schema), backend.index)
        outs.append(
            generate_turn(
                wrap(backend.begin_turn(request)),
                matcher,
                backend.index,
                backend.tokenizer,
                max_tokens=12,
            )
        )
    joined, apart = outs
    assert joined.token_ids == apart.token_ids
    assert backend.index.decode_bytes(joined.token_ids).startswith(b'{"answer":"')
    assert joined.usage.forward_passes == apart.usage.forward_passes - 1
    assert joined.usage.forced_tokens == apart.usage.forced_tokens > 0


# ---------------------------------------------------------------- OpenMP thread pools


def _os_threads() -> set[str]:
    """The process's thread ids: sets, not counts, so that another test's thread ending in
    the same window (a batching thread winding down) cannot hide a new one."""
    return set(os.listdir("/proc/self/task"))


def _one_ends(tids: set[str], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while tids <= _os_threads():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def _in_thread(fn: Any) -> Any:
    """`fn()` in a fresh thread (a fresh OpenMP pool of its own), re-raising what it raised."""
    got: list[Any] = []

    def work() -> None:
        try:
            got.append(fn())
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            got.append(exc)

    t = threading.Thread(target=work)
    t.start()
    t.join(timeout=120)
    if isinstance(got[0], BaseException):
        raise got[0]
    return got[0]


_needs_gomp = pytest.mark.skipif(
    not os.path.isdir("/proc/self/task") or not _openmp._libgomp() or _cores() < 2,
    reason="libgomp's pools (Linux, torch's wheels) on 2 or more cores",
)


@_needs_gomp
def test_release_pool_frees_the_workers_a_parallel_region_left() -> None:
    """libgomp keeps a thread's pool after a parallel region; handing it back ends its worker
    (pools that outnumber the cores make every pool sleep between regions: `_openmp`)."""

    def work() -> tuple[set[str], bool]:
        before = _os_threads()
        torch.set_num_threads(2)
        torch.ones(4_000_000).add_(1).sum()  # parallel regions: workers join this thread
        workers = _os_threads() - before  # the pool's worker (torch may start others)
        assert _openmp.release_pool()
        return workers, _one_ends(workers)

    workers, released = _in_thread(work)
    assert workers
    assert released


@_needs_gomp
def test_turn_threads_leave_no_pool_behind(
    tiny: tuple[Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batched turn masks its row on one thread and gives its count back; a turn run alone
    (its prefill on every core) hands the pool it made back when it closes, in its thread."""
    request = TurnRequest(messages=[Message.user("a question of a few words")], tools=[])

    def batched_turn() -> tuple[int, int, int]:
        torch.set_num_threads(2)
        session = TransformersModel(*tiny, max_batch=2).begin_turn(request)
        during = torch.get_num_threads()
        elsewhere = _in_thread(torch.get_num_threads)  # a thread starting meanwhile
        session.prefill()
        session.close()
        return during, elsewhere, torch.get_num_threads()

    assert _in_thread(batched_turn) == (1, 2, 2)

    released: list[int] = []
    monkeypatch.setattr(
        "sdk.backends.transformers.release_pool", lambda: released.append(threading.get_ident())
    )

    def turn_alone() -> tuple[int, int, bool]:
        session = TransformersModel(*tiny, max_batch=1).begin_turn(request)
        session.prefill()  # over 4 tokens: every core, a pool in this thread
        before = len(released)
        session.close()
        return before, len(released), released[-1] == threading.get_ident()

    assert _in_thread(turn_alone) == (1, 2, True)  # the model's loader, then the turn
