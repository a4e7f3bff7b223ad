"""Results computed once per object (a tokenizer, its index) and dropped with it."""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

V = TypeVar("V")

__all__ = ["per_object"]


def per_object(fn: Callable[[Any], V]) -> Callable[[Any], V]:
    """Memoize a one-argument function on its argument, held weakly. Objects that cannot be
    weakly referenced (or hashed) are computed each time rather than kept alive."""
    table: weakref.WeakKeyDictionary[Any, V] = weakref.WeakKeyDictionary()
    lock = threading.Lock()

    @functools.wraps(fn)
    def get(obj: Any) -> V:
        try:
            with lock:
                return table[obj]
        except KeyError:
            pass
        except TypeError:
            return fn(obj)
        value = fn(obj)
        with lock:
            return table.setdefault(obj, value)

    return get
