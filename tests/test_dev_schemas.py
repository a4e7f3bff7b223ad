"""Property tests over real-world schemas (MaskBench dev split) with the real SmolLM2 tokenizer.

Random walks pick any allowed token (random logits under the mask); every completed output must
be JSON, and must validate against the schema (jsonschema) whenever the compiler reports every
keyword as grammar-enforced. EOS must never be allowed before the output is complete.
The default run walks about fifty schemas; `-m slow` walks a few hundred.
"""

from __future__ import annotations

import functools
import json
import random
import zlib
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sdk.engine import CompiledGrammar, Matcher
from sdk.errors import SDKError
from tests._data import maskbench_sample

FAST = maskbench_sample(40)
SLOW = maskbench_sample(7)
EXACT = maskbench_sample(500, 3)
EXACT_MANY = maskbench_sample(25, 5)
MAX_STEPS = 400
CLOSERS = set(b'"]},0123456789el')


def _seed(path: Path) -> int:
    """A seed of the file's name, the same in every process (`hash` of a str is not)."""
    return zlib.crc32(path.stem.encode()) & 0xFFFF


def _grammar(path: Path) -> CompiledGrammar | None:
    schema = json.loads(path.read_text())["schema"]
    try:
        return CompiledGrammar.from_schema(schema)
    except SDKError:
        return None


@functools.cache
def _kinds(index: Any, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Which ids are end tokens and which are one closing byte (built once per index)."""
    is_eos = np.zeros(size, dtype=bool)
    is_eos[list(index.eos_ids)] = True
    is_closer = np.zeros(size, dtype=bool)
    tb = index.token_bytes
    is_closer[[t for t, b in enumerate(tb) if len(b) == 1 and b[0] in CLOSERS]] = True
    return is_eos, is_closer


def walk(grammar: CompiledGrammar, index: Any, rng: random.Random) -> bytes | None:
    """A random walk biased towards closing tokens, so that most walks finish. The choices are
    drawn from boolean arrays: a Python pass over the allowed ids cost 20 ms a step, a hundred
    times the mask itself."""
    m = Matcher(grammar, index)
    tb = index.token_bytes
    is_eos, is_closer = _kinds(index, m.vocab_size)
    out = bytearray()
    for _ in range(MAX_STEPS):
        allowed = np.asarray(m.mask(), dtype=bool)
        assert allowed.any()
        if (allowed & is_eos).any():
            assert m.is_accepting(), f"EOS allowed before completion after {bytes(out)!r}"
            if rng.random() < 0.7:
                return bytes(out)
        normal = allowed & ~is_eos
        if not normal.any():
            return bytes(out)
        closing = normal & is_closer
        pool = closing if closing.any() and rng.random() < 0.6 else normal
        tid = int(rng.choice(np.flatnonzero(pool)))
        m.advance(tid)
        out += tb[tid]
    return None


def check_schema(path: Path, index: Any, seed: int) -> int:
    grammar = _grammar(path)
    if grammar is None:
        return 0
    schema = json.loads(path.read_text())["schema"]
    rng = random.Random(seed)
    done = 0
    for _ in range(2):
        out = walk(grammar, index, rng)
        if out is None:
            continue
        value = json.loads(out.decode("utf-8"))
        if not grammar.validated:
            jsonschema.validate(value, schema, format_checker=jsonschema.FormatChecker())
        done += 1
    return done


@given(seed=st.integers(0, 2**16))
@settings(max_examples=2, deadline=None, suppress_health_check=list(HealthCheck))
def test_random_walks_on_dev_schemas(smollm2_index: Any, seed: int) -> None:
    assert sum(check_schema(p, smollm2_index, seed) for p in FAST) > 0


@pytest.mark.slow
@pytest.mark.parametrize("path", SLOW, ids=[p.stem for p in SLOW])
def test_random_walks_many_schemas(smollm2_index: Any, path: Path) -> None:
    check_schema(path, smollm2_index, seed=_seed(path))


def brute_force_mask(matcher: Matcher, index: Any) -> np.ndarray:
    """The allowed set by definition: every token advanced on its own (no mask machinery)."""
    allowed = np.zeros(matcher.vocab_size, dtype=bool)
    for tid in range(len(index.token_bytes)):
        if tid in index.eos_ids:
            allowed[tid] = matcher.is_accepting()
        elif index.token_bytes[tid]:
            probe = matcher.fork()
            allowed[tid] = probe.try_advance(tid)
    return allowed


def check_exact_masks(path: Path, tokenizer: Any, index: Any, states: int, seed: int) -> int:
    """Masks equal the brute-force allowed set at sampled points of the schema's first valid
    test instance (serialised as MaskBench does: json.dumps defaults), flexible whitespace,
    members in any order (so no valid instance is rejected for its key order)."""
    doc = json.loads(path.read_text())
    try:
        grammar = CompiledGrammar.from_schema(
            doc["schema"], whitespace="flexible", strict=True, member_order="any"
        )
    except SDKError:
        return 0
    valid = [t for t in doc.get("tests") or [] if t.get("valid")]
    if not valid:
        return 0
    text = json.dumps(valid[0]["data"], ensure_ascii=False)
    ids = list(tokenizer.encode(text, add_special_tokens=False))
    rng = random.Random(seed)
    picks = set(rng.sample(range(len(ids)), min(states, len(ids)))) | {0}
    m = Matcher(grammar, index)
    checked = 0
    for pos, tid in enumerate(ids):
        if pos in picks:
            got = m.mask()
            want = brute_force_mask(m, index)
            diff = np.nonzero(got != want)[0][:5].tolist()
            assert not diff, (
                path.name,
                pos,
                [(t, index.token_bytes[t], bool(got[t])) for t in diff],
            )
            checked += 1
        assert m.try_advance(tid), (path.name, "valid instance rejected at token", pos)
    return checked


def test_masks_equal_the_brute_force_allowed_set(
    smollm2_tokenizer: Any, smollm2_index: Any
) -> None:
    """Exactness on the real vocabulary: at sampled states of real instances, the mask is
    exactly the set of tokens that `advance` accepts (every one of the 49,152 tried)."""
    checked = sum(
        check_exact_masks(p, smollm2_tokenizer, smollm2_index, 2, seed=i)
        for i, p in enumerate(EXACT)
    )
    assert checked > 0


@pytest.mark.slow
@pytest.mark.parametrize("path", EXACT_MANY, ids=[p.stem for p in EXACT_MANY])
def test_masks_equal_the_brute_force_allowed_set_many(
    smollm2_tokenizer: Any, smollm2_index: Any, path: Path
) -> None:
    check_exact_masks(path, smollm2_tokenizer, smollm2_index, 6, seed=_seed(path))
