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

A compile that took a while (`TRIM_AFTER_S`) then hands the heap it freed back to the system
(glibc's `malloc_trim`; a no-op elsewhere): glibc keeps freed small blocks for reuse, and after
the dev MaskBench run that was 100-300 MB of a 780 MB process (590 MB with the trim; ~0.7 ms a
trim, only after compiles of 20 ms or more).
"""

from __future__ import annotations

import ctypes
import gc
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["MAX_PAUSE_S", "gc_paused", "trim_heap"]

MAX_PAUSE_S = 2.0
#: A compile that ran this long has freed a lot of heap that glibc keeps: give it back.
TRIM_AFTER_S = 0.02


def _malloc_trim() -> Callable[[int], int] | None:
    try:
        libc = ctypes.CDLL(None)
        trim: Callable[[int], int] = libc.malloc_trim
    except (OSError, AttributeError, TypeError):  # not glibc (macOS, musl, Windows)
        return None
    return trim


_trim = _malloc_trim()


def trim_heap() -> None:
    """Hand the heap glibc keeps after freeing back to the system (a no-op elsewhere)."""
    trim = _trim
    if trim is not None:
        trim(0)


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
    start = time.monotonic()
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            last = _depth == 0
            if _paused and (last or time.monotonic() - _since > MAX_PAUSE_S):
                gc.enable()
                _paused = False
        if last and time.monotonic() - start > TRIM_AFTER_S:
            trim_heap()
