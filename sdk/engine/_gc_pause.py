"""The cyclic garbage collector paused while a grammar compiles.

A compile allocates hundreds of thousands of short-lived containers (IR nodes, NFA edges,
Lark trees) that live long enough to survive two young collections. Each survivor counts
toward the next full collection, which then walks every tracked object in the process
(a loaded tokenizer and torch alone are ~250k): on the dev MaskBench schemas full
collections took 19 s of a 95 s run, 0.5-1 s each, and made the slowest tenth of compiles
twice as slow. With the collector paused, those temporaries are freed by reference counting
before any collection sees them; what the compile keeps is collected as usual afterwards.

The pause is process-wide (that is how `gc` works), nests, and is shared by concurrent
compiles: the collector is re-enabled when the last one ends, and only if it was enabled when
the first began. Compiles that keep overlapping (a server compiling without a gap) do not keep
it off: the first one to end after `MAX_PAUSE_S` re-enables it for the rest. Memory is never
held longer than a compile: reference counting runs throughout.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["MAX_PAUSE_S", "gc_paused"]

MAX_PAUSE_S = 2.0

_lock = threading.Lock()
_depth = 0
_paused = False  # this module turned the collector off, and has not turned it back on
_since = 0.0


@contextmanager
def gc_paused() -> Iterator[None]:
    global _depth, _paused, _since
    with _lock:
        if _depth == 0 and gc.isenabled():
            gc.disable()
            _paused, _since = True, time.monotonic()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _paused and (_depth == 0 or time.monotonic() - _since > MAX_PAUSE_S):
                gc.enable()
                _paused = False
