"""The engine's memo tables under one owner and one byte budget.

Compiling and masking memoise a lot: regex ASTs and DFAs, per-vocabulary walks, per-grammar
masks. Every such table is a `BoundedCache`, and all of them answer to
one process-wide budget (`SDK_CACHE_BYTES`, default 256 MiB; `sdk.engine.caches` reads and
sets it). A table also has its own cap, so one kind of entry cannot crowd out the rest. A
table over its cap drops its oldest half; a write that takes the total over the budget drops
the oldest entries of the largest tables until it fits again. Oldest by insertion, not by use:
a hit stays one dict lookup with no bookkeeping, and an entry still in use is back after one
recomputation. Emptying whole tables instead made every cached walk (a JSON string body's
included) recomputed after each overflow; everything cached can be recomputed.

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

__all__ = [
    "REGISTRY",
    "BoundedCache",
    "CacheRegistry",
    "budget",
    "clear_all",
    "lookups",
    "set_budget",
    "usage",
]


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


class CacheRegistry:
    """Every live `BoundedCache`, the running total of their bytes, and the budget."""

    def __init__(self) -> None:
        self.caches: weakref.WeakSet[BoundedCache[object, object]] = weakref.WeakSet()
        self.lock = threading.Lock()
        self.budget = _default_budget()
        # An upper bound on the live bytes: a dead table's bytes stay counted until the
        # next `rebalance` recounts.
        self.total = 0

    def rebalance(self, keep: BoundedCache[object, object] | None = None) -> None:
        """Recount, then drop the oldest entries of the largest tables until the total fits
        with an eighth of the budget to spare (`keep`, the table being written, goes last):
        an overflow is not met again at the next write."""
        with self.lock:
            live = sorted(self.caches, key=lambda c: (c is not keep, c.nbytes))
            total = sum(c.nbytes for c in live)
            goal = self.budget - (self.budget >> 3)
            while total > goal and live:
                victim = live.pop()
                before = victim.nbytes
                victim.evict(max(0, before - (total - goal)))
                total -= before - victim.nbytes
            self.total = total


REGISTRY = CacheRegistry()


class BoundedCache(Generic[K, V]):
    """A dict of at most `cap` bytes of values, counted against the process budget."""

    __slots__ = (
        "__weakref__",
        "_bytes",
        "_data",
        "_lock",
        "_sizes",
        "cap",
        "hits",
        "misses",
        "name",
    )

    def __init__(self, name: str, cap: int) -> None:
        self._data: dict[K, V] = {}
        self._sizes: dict[K, int] = {}  # the bytes of every entry, oldest first
        self._bytes = 0
        self._lock = threading.Lock()  # writers only: a read is one atomic dict lookup
        self.cap = cap
        self.name = name
        self.hits = self.misses = 0  # of `lookup` only: `get` stays one dict lookup
        with REGISTRY.lock:
            REGISTRY.caches.add(self)  # type: ignore[arg-type]

    def get(self, key: K) -> V | None:
        return self._data.get(key)

    def lookup(self, key: K) -> V | None:
        """`get`, counted in `hits` and `misses` (`lookups()`): for tables whose work is
        worth counting, such as schema compiles."""
        value = self._data.get(key)
        if value is None:
            self.misses += 1
        else:
            self.hits += 1
        return value

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def put(self, key: K, value: V, nbytes: int) -> V:
        with self._lock:
            old = self._sizes.pop(key, None)
            if old is not None:  # a race computed it twice: the entry moves to the end
                del self._data[key]
                self._bytes -= old
                REGISTRY.total -= old
            if self._bytes + nbytes > self.cap:
                self._evict((self.cap - nbytes) // 2)  # the oldest half goes
            self._data[key] = value
            self._sizes[key] = nbytes
            self._bytes += nbytes
        REGISTRY.total += nbytes  # racy by design: `rebalance` recounts exactly
        if REGISTRY.total > REGISTRY.budget:
            REGISTRY.rebalance(self)  # type: ignore[arg-type]
        return value

    def clear(self) -> None:
        with self._lock:
            self._evict(0)

    def evict(self, target: int) -> None:
        """Drop the oldest entries until at most `target` bytes are left."""
        with self._lock:
            self._evict(target)

    def _evict(self, target: int) -> None:
        if target <= 0:
            REGISTRY.total -= self._bytes
            self._data.clear()
            self._sizes.clear()
            self._bytes = 0
            return
        over = self._bytes - target
        if over <= 0:
            return
        gone: list[K] = []
        freed = 0
        for key, size in self._sizes.items():  # one pass: popping the front one at a time
            if freed >= over:  # would rescan the deleted slots every time
                break
            gone.append(key)
            freed += size
        data, sizes = self._data, self._sizes
        for key in gone:
            del data[key], sizes[key]
        self._bytes -= freed
        REGISTRY.total -= freed

    def __len__(self) -> int:
        return len(self._data)

    @property
    def nbytes(self) -> int:
        return self._bytes


def _live() -> list[BoundedCache[object, object]]:
    with REGISTRY.lock:
        return list(REGISTRY.caches)


def usage() -> dict[str, tuple[int, int]]:
    """`{table name: (entries, bytes)}` over the live tables (tables of one name, such as the
    per-vocabulary ones, summed)."""
    out: dict[str, tuple[int, int]] = {}
    for c in _live():
        n, b = out.get(c.name, (0, 0))
        out[c.name] = (n + len(c), b + c.nbytes)
    return dict(sorted(out.items()))


def lookups() -> dict[str, tuple[int, int]]:
    """`{table name: (hits, misses)}` of the tables read with `lookup` (summed by name)."""
    out: dict[str, tuple[int, int]] = {}
    for c in _live():
        if c.hits or c.misses:
            h, m = out.get(c.name, (0, 0))
            out[c.name] = (h + c.hits, m + c.misses)
    return dict(sorted(out.items()))


def budget() -> int:
    return REGISTRY.budget


def set_budget(nbytes: int) -> None:
    """The process-wide byte budget of all tables (applied at once)."""
    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 0:
        from sdk.errors import ConfigError

        raise ConfigError(f"cache budget must be a non-negative int of bytes, not {nbytes!r}")
    REGISTRY.budget = nbytes
    REGISTRY.rebalance()


def clear_all() -> None:
    for c in _live():
        c.clear()
    REGISTRY.rebalance()
