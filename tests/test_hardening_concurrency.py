"""Concurrency: one compiled grammar shared by many threads and by the rows of a batch, each
with its own matcher state; results must equal sequential runs exactly. Caches are hammered
from many threads at once, and two agents run side by side.

Every comparison starts from a freshly compiled grammar, so the threads race on cold runtime
caches (masks, steps, expansions) rather than reading warm ones.
"""

from __future__ import annotations

import hashlib
import random
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import torch

from sdk import Agent, tool
from sdk.backends.test import TestModel, ToolCallScript
from sdk.decoding.turn_grammar import build_turn_grammar
from sdk.engine import CompiledGrammar, Matcher, caches
from sdk.engine._cache import BoundedCache
from sdk.engine.batch import allocate_token_bitmask, apply_token_bitmask, fill_next_token_bitmask
from sdk.grammar import compile_schema
from sdk.tools import as_tool

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "tags": {"type": "array", "items": {"enum": ["a", "bb", "ccc"]}, "maxItems": 4},
        "when": {"type": "string", "format": "date"},
        "n": {"type": "integer", "minimum": -5, "maximum": 500},
        "sub": {
            "anyOf": [
                {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]},
                {"type": "null"},
            ]
        },
    },
    "required": ["name", "n"],
    "additionalProperties": False,
}
LARK = compile_schema(SCHEMA).lark
THREADS = 8
STEPS = 60


def _digest(mask: np.ndarray) -> str:
    return hashlib.blake2b(np.packbits(mask).tobytes(), digest_size=8).hexdigest()


def walk(grammar: CompiledGrammar, index: Any, seed: int) -> list[tuple[str, int]]:
    """A seeded random walk: (mask digest, token) at every step, with rollbacks and forks."""
    rng = random.Random(seed)
    m = Matcher(grammar, index)
    trace: list[tuple[str, int]] = []
    for step in range(STEPS):
        mask = m.mask()
        allowed = np.nonzero(mask)[0].tolist()
        tid = rng.choice(allowed)
        trace.append((_digest(mask), tid))
        if tid in index.eos_ids:
            break
        m.advance(tid)
        if step % 17 == 5:  # exercise rollback and fork under concurrency too
            other = m.fork()
            m.rollback(1)
            m.advance(tid)
            assert other.tokens == m.tokens
    return trace


def test_threads_share_one_grammar(smollm2_index: Any) -> None:
    seeds = list(range(THREADS * 2))
    sequential = CompiledGrammar.from_lark(LARK)
    expected = {s: walk(sequential, smollm2_index, s) for s in seeds}
    shared = CompiledGrammar.from_lark(LARK)  # cold caches for the threads
    barrier = threading.Barrier(THREADS)

    def job(seed: int) -> list[tuple[str, int]]:
        if seed < THREADS:
            barrier.wait()  # start together
        return walk(shared, smollm2_index, seed)

    with ThreadPoolExecutor(THREADS) as pool:
        got = dict(zip(seeds, pool.map(job, seeds), strict=True))
    mismatches = [s for s in seeds if got[s] != expected[s]]
    print(
        f"\nthreads: {len(seeds)} walks, {sum(map(len, got.values()))} steps, mismatches {len(mismatches)}"
    )
    assert not mismatches


def test_batched_rows_match_single_matchers(smollm2_index: Any) -> None:
    """Rows of one bitmask / logits batch, each row its own matcher over one shared grammar."""
    index = smollm2_index
    grammar = CompiledGrammar.from_lark(LARK)
    batch = 6
    matchers: list[Matcher | None] = [Matcher(grammar, index) for _ in range(batch)]
    singles = [Matcher(CompiledGrammar.from_lark(LARK), index) for _ in range(batch)]
    gen = torch.Generator().manual_seed(7)
    bitmask = allocate_token_bitmask(batch, index.vocab_size)
    done = [False] * batch
    steps = 0
    for _ in range(STEPS):
        live = [m if not d else None for m, d in zip(matchers, done, strict=True)]
        fill_next_token_bitmask(live, bitmask)
        logits = torch.randn(batch, index.vocab_size, generator=gen)
        single_logits = logits.clone()
        apply_token_bitmask(logits, bitmask)
        for row in range(batch):
            if done[row]:
                assert bool(torch.isfinite(logits[row]).all())  # a None row is unconstrained
                continue
            singles[row].apply_to_logits(single_logits[row])
            assert torch.equal(logits[row], single_logits[row]), f"row {row} differs"
            tid = int(torch.argmax(logits[row]))
            m = matchers[row]
            assert m is not None
            if tid in index.eos_ids:
                done[row] = True
                continue
            m.advance(tid)
            singles[row].advance(tid)
            steps += 1
        if all(done):
            break
    print(f"\nbatched rows: {batch} rows, {steps} row-steps, mismatches 0")
    assert steps > batch


def test_bitmask_layout(smollm2_index: Any) -> None:
    grammar = CompiledGrammar.from_lark(LARK)
    m = Matcher(grammar, smollm2_index)
    bitmask = allocate_token_bitmask(2, smollm2_index.vocab_size)
    fill_next_token_bitmask([m, None], bitmask)
    bits = np.unpackbits(bitmask.view(np.uint8), axis=-1, bitorder="little").astype(bool)
    assert (bits[0, : smollm2_index.vocab_size] == m.mask()).all()
    assert bits[1].all()
    one = torch.zeros(smollm2_index.vocab_size)
    apply_token_bitmask(one, bitmask[:1])
    assert (torch.isfinite(one).numpy() == m.mask()).all()


def test_caches_under_thread_contention() -> None:
    """Turn-grammar cache, regex/AST caches and BoundedCache eviction from many threads."""
    cache: BoundedCache[int, int] = BoundedCache("test table", cap=64)
    errors: list[BaseException] = []

    def hammer(seed: int) -> None:
        rng = random.Random(seed)
        try:
            for _ in range(5000):
                k = rng.randrange(100)
                got = cache.get(k)
                assert got is None or got == k * k
                cache.put(k, k * k, rng.randrange(1, 9))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    def owner() -> None:
        """Tables come and go, and the owner is asked for its totals, all the while."""
        try:
            for i in range(2000):
                BoundedCache(f"short-lived {i % 7}", cap=64).put(i, i, 1)
                caches.usage()
                if i % 500 == 0:
                    caches.clear()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=hammer, args=(s,)) for s in range(8)]
    threads.append(threading.Thread(target=owner))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert cache.nbytes <= cache.cap + 8

    @tool
    def ping(host: str, count: int = 1) -> str:
        """Ping a host."""
        return host

    tools = [as_tool(ping)]
    schemas = [
        {**SCHEMA, "properties": {**SCHEMA["properties"], f"k{i}": {"type": "integer"}}}
        for i in range(4)
    ]

    def build(i: int) -> tuple[str, str]:
        turn = build_turn_grammar(tools, "required")
        g = CompiledGrammar.from_schema(schemas[i % 4])
        return turn.lark or "", g.lark_text

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(build, range(32)))
    assert len({r[0] for r in results}) == 1
    assert len({r[1] for r in results}) == 4


# ------------------------------------------------------------------ agents side by side


@tool
def get_weather(city: str) -> str:
    """Weather in a city."""
    return f"sunny in {city}"


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _run_weather(tok: Any, i: int) -> tuple[str, list[Any]]:
    model = TestModel(
        [ToolCallScript("get_weather", {"city": f"C{i}"}), f"done {i}"], tokenizer=tok
    )
    r = Agent(model, tools=[get_weather]).run_sync("weather?")
    return r.output, [c.result for c in r.tool_calls]


def _run_add(tok: Any, i: int) -> tuple[str, list[Any]]:
    model = TestModel([ToolCallScript("add", {"a": i, "b": 2 * i}), f"sum {3 * i}"], tokenizer=tok)
    r = Agent(model, tools=[add, get_weather], tool_choice="required").run_sync("add")
    return r.output, [c.result for c in r.tool_calls]


def test_two_agents_in_threads(smollm2_tokenizer: Any) -> None:
    jobs = [(_run_weather if i % 2 else _run_add, i) for i in range(12)]
    expected = [fn(smollm2_tokenizer, i) for fn, i in jobs]
    with ThreadPoolExecutor(6) as pool:
        got = list(pool.map(lambda job: job[0](smollm2_tokenizer, job[1]), jobs))
    print(
        f"\nagents in threads: {len(jobs)} runs, mismatches {sum(a != b for a, b in zip(got, expected, strict=True))}"
    )
    assert got == expected
