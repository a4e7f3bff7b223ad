"""A memo table with a byte budget: caches must stay bounded across thousands of grammars."""

from __future__ import annotations

import threading
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class BoundedCache(Generic[K, V]):
    """A dict that empties itself when the values it holds exceed `budget` bytes.

    Clearing wholesale (rather than LRU bookkeeping) keeps the hit path a single dict lookup;
    everything cached here can be recomputed.
    """

    __slots__ = ("_data", "_bytes", "_lock", "budget")

    def __init__(self, budget: int) -> None:
        self._data: dict[K, V] = {}
        self._bytes = 0
        self._lock = threading.Lock()  # writers only: a read is one atomic dict lookup
        self.budget = budget

    def get(self, key: K) -> V | None:
        return self._data.get(key)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def put(self, key: K, value: V, nbytes: int) -> V:
        with self._lock:
            if self._bytes + nbytes > self.budget:
                self._data.clear()
                self._bytes = 0
            self._data[key] = value
            self._bytes += nbytes
        return value

    def __len__(self) -> int:
        return len(self._data)

    @property
    def nbytes(self) -> int:
        return self._bytes
