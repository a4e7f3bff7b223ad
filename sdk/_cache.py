"""The engine's memo tables under one owner and one byte budget.

Compiling and masking memoise a lot: regex ASTs and DFAs, per-vocabulary walks, per-grammar
masks. Every such table is a `BoundedCache`, and all of them answer to
one process-wide budget (`SDK_CACHE_BYTES`, default 256 MiB; `sdk.engine.caches` reads and
sets it). A table also has its own cap, so one kind of entry cannot crowd out the rest. When a
write takes the total over the budget, the largest tables are emptied until it fits again.
Emptying wholesale (not LRU bookkeeping) keeps a hit one dict lookup; everything cached can
be recomputed.

Objects that live and die with something else (a tokenizer's index, a grammar's parse
tables) are not memo tables and are not counted: they go with their owner.
"""

from __future__ import annotations

import os
import threading
import weakref
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")

__all__ = ["BoundedCache", "budget", "clear_all", "set_budget", "usage"]


#: 256 MiB: on the MaskBench dev run (2,034 grammars in one process) peak RSS was 793 MB with
#: it and 891 MB with 1 GiB, with the same mask and compile times (SmolLM2 and Gemma-3).
DEFAULT_BUDGET = 256 << 20


def _default_budget() -> int:
    raw = os.environ.get("SDK_CACHE_BYTES", "")
    try:
        value = int(raw) if raw else DEFAULT_BUDGET
    except ValueError:
        value = DEFAULT_BUDGET
    return max(value, 0)


class _Owner:
    """Every live `BoundedCache`, the running total of their bytes, and the budget."""

    def __init__(self) -> None:
        self.caches: weakref.WeakSet[BoundedCache[object, object]] = weakref.WeakSet()
        self.lock = threading.Lock()
        self.budget = _default_budget()
        # An upper bound on the live bytes: a dead table's bytes stay counted until the
        # next `rebalance` recounts.
        self.total = 0

    def rebalance(self, keep: BoundedCache[object, object] | None = None) -> None:
        """Recount, then empty the largest tables until the total fits (`keep`, the table
        being written, goes last)."""
        with self.lock:
            live = sorted(self.caches, key=lambda c: (c is not keep, c.nbytes))
            total = sum(c.nbytes for c in live)
            while total > self.budget and live:
                victim = live.pop()
                total -= victim.nbytes
                victim.clear()
            self.total = total


_owner = _Owner()


class BoundedCache(Generic[K, V]):
    """A dict of at most `cap` bytes of values, counted against the process budget."""

    __slots__ = ("__weakref__", "_bytes", "_data", "_lock", "cap", "name")

    def __init__(self, name: str, cap: int) -> None:
        self._data: dict[K, V] = {}
        self._bytes = 0
        self._lock = threading.Lock()  # writers only: a read is one atomic dict lookup
        self.cap = cap
        self.name = name
        with _owner.lock:
            _owner.caches.add(self)  # type: ignore[arg-type]

    def get(self, key: K) -> V | None:
        return self._data.get(key)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def put(self, key: K, value: V, nbytes: int) -> V:
        with self._lock:
            if self._bytes + nbytes > self.cap:
                self._clear()
            self._data[key] = value
            self._bytes += nbytes
        _owner.total += nbytes  # racy by design: `rebalance` recounts exactly
        if _owner.total > _owner.budget:
            _owner.rebalance(self)  # type: ignore[arg-type]
        return value

    def clear(self) -> None:
        with self._lock:
            self._clear()

    def _clear(self) -> None:
        _owner.total -= self._bytes
        self._data.clear()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._data)

    @property
    def nbytes(self) -> int:
        return self._bytes


def _live() -> list[BoundedCache[object, object]]:
    with _owner.lock:
        return list(_owner.caches)


def usage() -> dict[str, tuple[int, int]]:
    """`{table name: (entries, bytes)}` over the live tables (tables of one name, such as the
    per-vocabulary ones, summed)."""
    out: dict[str, tuple[int, int]] = {}
    for c in _live():
        n, b = out.get(c.name, (0, 0))
        out[c.name] = (n + len(c), b + c.nbytes)
    return dict(sorted(out.items()))


def budget() -> int:
    return _owner.budget


def set_budget(nbytes: int) -> None:
    """The process-wide byte budget of all tables (applied at once)."""
    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 0:
        from sdk.errors import ConfigError

        raise ConfigError(f"cache budget must be a non-negative int of bytes, not {nbytes!r}")
    _owner.budget = nbytes
    _owner.rebalance()


def clear_all() -> None:
    for c in _live():
        c.clear()
    _owner.rebalance()
