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
Other OpenMP runtimes (Intel's, LLVM's) are left alone: their pause acts on the whole process.
"""

from __future__ import annotations

import ctypes
import functools
import os

__all__ = ["cores", "one_thread", "release_pool", "restore_threads"]

_PAUSE_SOFT = 1  # omp_pause_soft: free the threads, keep what is cheap to keep


def cores() -> int:
    """The cores this process may run on (a container's CPU set, not the host's count)."""
    affinity = getattr(os, "sched_getaffinity", None)
    if affinity is not None:
        try:
            return max(1, len(affinity(0)))
        except OSError:
            pass
    return os.cpu_count() or 2


@functools.cache
def _libgomp() -> tuple[ctypes.CDLL, ...]:
    """Every libgomp this process has loaded (none is loaded here: RTLD_NOLOAD), looked up
    once torch is imported, which is when the functions below are called."""
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split(None, 5)[-1].strip() for line in f if "libgomp" in line}
    except OSError:  # not Linux
        return ()
    found = []
    for path in sorted(p for p in paths if os.path.basename(p).startswith("libgomp")):
        try:
            lib = ctypes.CDLL(path, mode=os.RTLD_NOLOAD)
            lib.omp_pause_resource_all.argtypes = [ctypes.c_int]
            lib.omp_pause_resource_all.restype = ctypes.c_int
            lib.omp_set_num_threads.argtypes = [ctypes.c_int]
        except (OSError, AttributeError):  # gone, or an OpenMP before 5.0
            continue
        found.append(lib)
    return tuple(found)


def release_pool() -> bool:
    """Free the calling thread's OpenMP worker threads, if it has any (libgomp frees only this
    thread's pool; a later parallel region in this thread makes a new one). False where no
    libgomp is loaded."""
    return any(lib.omp_pause_resource_all(_PAUSE_SOFT) == 0 for lib in _libgomp())


def one_thread() -> int:
    """Run this thread's torch work on one thread (no parallel region, so no pool) and free
    the pool it has; the count to give `restore_threads` afterwards, 0 if nothing changed.

    Only this thread's OpenMP setting changes: `torch.set_num_threads` would also change the
    count that threads starting meanwhile (the batching thread, threads of your own) take.
    Nothing to do where torch was never imported (llama.cpp's turns work on NumPy rows)."""
    import sys

    torch = sys.modules.get("torch")
    if torch is None:
        return 0
    libs = _libgomp()
    if not libs:
        return 0
    old = torch.get_num_threads()  # torch sets a new thread's count on its first call
    if old > 1:
        for lib in libs:
            lib.omp_set_num_threads(1)
    release_pool()
    return old if old > 1 else 0


def restore_threads(old: int) -> None:
    """Undo `one_thread` in the same thread."""
    if old > 1:
        for lib in _libgomp():
            lib.omp_set_num_threads(old)
