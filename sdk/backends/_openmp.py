"""Keep GNU OpenMP's thread pools few: one thread that runs the model's passes, the others
single-threaded or without a pool.

libgomp (the OpenMP runtime of torch's Linux wheels) gives every thread that ran a parallel
region a pool of worker threads of its own, for as long as that thread lives. Between regions
the workers spin, so the next region starts at once, unless all pools together hold more
threads than the machine has cores: then every worker goes to sleep after 1,000 spins and every
region (a forward pass has hundreds) pays a futex wake-up. A model loaded in the main thread,
turn threads that each mask a row of logits with 2 threads, and the batching thread made 10
pools on 2 cores: a batched 8-row decode step of SmolLM2 took 75-85 ms instead of 37-50 ms.

So a thread done with heavy torch work hands its pool back (`release_pool`), and a thread that
only touches one row's tensors runs them on one thread (`one_thread`), which needs no pool.
Other OpenMP runtimes (Intel's, LLVM's) do not throttle like this and are left alone: LLVM's
pause is process-wide.
"""

from __future__ import annotations

import ctypes
import functools
import os
from collections.abc import Callable

__all__ = ["one_thread", "release_pool", "restore_threads"]

_PAUSE_SOFT = 1  # omp_pause_soft: free the threads, keep what is cheap to keep


@functools.cache
def _pause_functions() -> tuple[Callable[[int], int], ...]:
    """`omp_pause_resource_all` of every libgomp this process has loaded (none is loaded here:
    RTLD_NOLOAD). Looked up once torch is imported, which is when it is called."""
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split(None, 5)[-1].strip() for line in f if "libgomp" in line}
    except OSError:  # not Linux
        return ()
    found = []
    for path in sorted(p for p in paths if os.path.basename(p).startswith("libgomp")):
        try:
            lib = ctypes.CDLL(path, mode=os.RTLD_NOLOAD)
            fn = lib.omp_pause_resource_all
        except (OSError, AttributeError):  # gone, or an OpenMP before 5.0
            continue
        fn.argtypes = [ctypes.c_int]
        fn.restype = ctypes.c_int
        found.append(fn)
    return tuple(found)


def release_pool() -> bool:
    """Free the calling thread's OpenMP worker threads, if it has any (libgomp frees only this
    thread's pool; a later parallel region in this thread makes a new one). False where no
    libgomp is loaded."""
    return any(fn(_PAUSE_SOFT) == 0 for fn in _pause_functions())


def one_thread() -> int:
    """Run this thread's torch work on one thread (no pool: nothing to spin or throttle); the
    count to give `restore_threads` afterwards."""
    import torch

    old = torch.get_num_threads()
    if old > 1:
        torch.set_num_threads(1)
    release_pool()
    return old


def restore_threads(old: int) -> None:
    """Undo `one_thread` in the same thread."""
    import torch

    if old > 1 and torch.get_num_threads() != old:
        torch.set_num_threads(old)
