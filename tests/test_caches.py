"""The engine's memo tables (`sdk.engine.caches`): one byte budget over all of them, and masks
that do not depend on what is cached."""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from sdk.engine import caches
from sdk.engine.grammar import CompiledGrammar
from sdk.engine.matcher import Matcher
from sdk.errors import ConfigError

SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "pattern": "^[A-Z][a-z]+$", "maxLength": 12},
        "days": {"type": "integer", "minimum": 1, "maximum": 14},
        "unit": {"enum": ["celsius", "fahrenheit"]},
    },
    "required": ["city", "days"],
}
VALUE = json.dumps({"city": "Oslo", "days": 3, "unit": "celsius"}, separators=(",", ":"))


@pytest.fixture
def restore_budget() -> Iterator[None]:
    before = caches.budget()
    yield
    caches.set_budget(before)


def _masks(index: Any, schema: dict[str, Any] | CompiledGrammar) -> list[np.ndarray]:
    """The packed mask before each token of VALUE, and after the last."""
    grammar = schema if isinstance(schema, CompiledGrammar) else CompiledGrammar.from_schema(schema)
    m = Matcher(grammar, index)
    out = [m.packed_mask().copy()]
    for tid in index_tokens(index, VALUE):
        m.advance(tid)
        out.append(m.packed_mask().copy())
    return out


def index_tokens(index: Any, text: str) -> list[int]:
    """Greedy longest-match tokenization over the index's own bytes (no tokenizer needed)."""
    by_bytes = {b: i for i, b in enumerate(index.token_bytes) if b and i not in index.special_ids}
    data, ids, at = text.encode(), [], 0
    while at < len(data):
        for end in range(len(data), at, -1):
            tid = by_bytes.get(data[at:end])
            if tid is not None:
                ids.append(tid)
                at = end
                break
        else:
            raise AssertionError(f"no token for {data[at:]!r}")
    return ids


def test_tables_are_reported_and_cleared(smollm2_index: Any) -> None:
    grammar = CompiledGrammar.from_schema(SCHEMA)  # its tables live as long as it does
    _masks(smollm2_index, grammar)
    used = caches.usage()
    assert {"regex DFAs", "masks by lexer state", "vocabulary walks"} <= used.keys()
    assert sum(b for _, b in used.values()) > 0
    caches.clear()
    assert all(n == 0 and b == 0 for n, b in caches.usage().values())


def test_a_dropped_grammar_frees_its_tables_at_once(smollm2_index: Any) -> None:
    """Without waiting for a garbage collection: a grammar and its per-vocabulary tables
    must not form a reference cycle."""
    kind = "masks by lexer state"
    before = caches.usage().get(kind, (0, 0))
    gc.disable()
    try:
        grammar = CompiledGrammar.from_schema(SCHEMA)
        _masks(smollm2_index, grammar)
        assert caches.usage()[kind][0] > before[0]
        del grammar
        assert caches.usage().get(kind, (0, 0)) == before
    finally:
        gc.enable()


def test_the_budget_bounds_all_tables_together(smollm2_index: Any, restore_budget: None) -> None:
    caches.clear()
    caches.set_budget(256 << 10)
    schema = dict(SCHEMA, properties=dict(SCHEMA["properties"], note={"type": "string"}))
    _masks(smollm2_index, schema)
    assert sum(b for _, b in caches.usage().values()) <= 256 << 10


def test_grammar_runtimes_memos_answer_to_the_budget(
    smollm2_index: Any, restore_budget: None
) -> None:
    """A runtime's memo dicts live as long as its grammar, outside the tables: when a new
    grammar's runtime is made, the oldest ones' memos are emptied until all fit their share
    of the budget, and masks come out the same after."""
    from sdk.engine._owner import OWNER

    def memo(grammar: CompiledGrammar) -> int:
        return sum(rt.memo_entries() for rt in OWNER.runtimes[grammar].values())

    first = CompiledGrammar.from_schema(SCHEMA)
    masks = _masks(smollm2_index, first)
    filled = memo(first)
    assert filled > 0
    caches.set_budget(filled * 400 // 2)  # room for half of the first grammar's memos
    second = CompiledGrammar.from_schema(dict(SCHEMA, required=["city"]))
    Matcher(second, smollm2_index)
    assert memo(first) == 0
    again = _masks(smollm2_index, first)
    assert all(np.array_equal(a, b) for a, b in zip(again, masks, strict=True))
    caches.set_budget(1 << 30)
    third = CompiledGrammar.from_schema(dict(SCHEMA, required=["days"]))
    Matcher(third, smollm2_index)
    assert memo(first) > 0  # within the budget: kept


def test_a_full_table_drops_its_oldest_entries_not_all(restore_budget: None) -> None:
    """Over its cap a table keeps its newest half; over the budget the largest table drops
    its oldest entries until the total fits with room to spare. Emptying a whole table made
    every entry still in use (a string body's walk) recomputed after each overflow."""
    from sdk.engine._cache import BoundedCache

    caches.clear()
    table: BoundedCache[int, int] = BoundedCache("test table", 10 << 20)
    for k in range(10):
        table.put(k, k, 1 << 20)
    table.put(10, 10, 1 << 20)  # over the cap: the oldest half goes
    kept = [k for k in range(11) if table.get(k) is not None]
    assert kept == [6, 7, 8, 9, 10] and table.nbytes == 5 << 20
    caches.set_budget(4 << 20)  # down to 3.5 MiB: the two oldest go
    assert [k for k in range(11) if table.get(k) is not None] == [8, 9, 10]
    assert sum(b for _, b in caches.usage().values()) == 3 << 20
    table.put(5, 5, 1 << 20)  # written again, as the newest: the total fits
    assert [k for k in range(11) if table.get(k) is not None] == [5, 8, 9, 10]


def test_masks_do_not_depend_on_the_budget(smollm2_index: Any, restore_budget: None) -> None:
    """Every table emptied at every write (budget 0) gives the same masks as a warm run: a
    cached value is only ever a shortcut."""
    caches.clear()
    warm = _masks(smollm2_index, SCHEMA)
    caches.set_budget(0)
    cold = _masks(smollm2_index, SCHEMA)
    assert len(cold) == len(warm)
    for a, b in zip(warm, cold, strict=True):
        assert np.array_equal(a, b)
    assert sum(b for _, b in caches.usage().values()) == 0


@pytest.mark.parametrize("bad", [-1, 1.5, True, "1GB"])
def test_a_bad_budget_is_a_config_error(bad: Any) -> None:
    with pytest.raises(ConfigError, match="cache budget"):
        caches.set_budget(bad)
