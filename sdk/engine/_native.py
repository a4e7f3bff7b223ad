"""The engine's compiled loops, built ahead of time into one extension module.

The loops (trie walks, product BFS, level sets) are written for numba. Compiled just in time,
they cost every process numba's import and LLVM: ~85 MB of resident memory per process, a
quarter of a worker's setup, for a dozen kernels. So they are compiled once per machine into
a plain extension module (`numba.pycc`, in a subprocess: the serving process never imports
numba) and cached under `default_cache_dir() / "kernels"` (or `$SDK_KERNELS_DIR`), keyed by
the kernels' source and the toolchain. Where that build cannot run (no C compiler), they fall
back to numba's JIT with a warning.

`SDK_KERNELS=jit` forces the JIT. An ahead-of-time function trusts its argument types (a
wrong dtype reads memory as another type), so every call checks each array's dtype, rank and
layout against the declared signature first: a mismatch is a `TypeError`, never a crash.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.machinery
import importlib.util
import logging
import os
import platform
import re
import shutil
import subprocess
import sys
import threading
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

import numpy as np

from sdk.engine._paths import default_cache_dir
from sdk.errors import ConfigError

__all__ = ["kernel", "load", "mode"]

_log = logging.getLogger("sdk.engine")

F = TypeVar("F", bound=Callable[..., Any])

#: The modules that define kernels: all are imported before the library is built or loaded.
KERNEL_MODULES = (
    "sdk.engine._trie",
    "sdk.engine._chains",
    "sdk.engine._row_walks",
    "sdk.engine._dfa_kernels",
    "sdk.engine._pairs",
    "sdk.engine._length_product",
)
#: Name of the built extension module (its `PyInit_` symbol): one per process.
LIBRARY = "_sdk_kernels"

_MODE = os.environ.get("SDK_KERNELS", "aot").strip().lower()
if _MODE not in ("aot", "jit", "build"):
    raise ConfigError(f"SDK_KERNELS must be 'aot' or 'jit', not {_MODE!r}")


class _Kernel:
    """One decorated function: its Python source, and its signature if called from Python."""

    def __init__(self, fn: Callable[..., Any], signature: str | None, inline: bool) -> None:
        self.fn = fn
        self.signature = signature
        self.inline = inline
        self.symbol = f"{fn.__module__.rsplit('.', 1)[-1].lstrip('_')}__{fn.__name__}"

    def jit(self) -> Any:
        from numba import njit

        opts: dict[str, Any] = {"cache": True, "nogil": True}
        if self.inline:
            opts["inline"] = "always"
        return njit(**opts)(self.fn)


_KERNELS: list[_Kernel] = []


def mode() -> str:
    """How kernels run in this process: "aot" (the built library), "jit" (numba, asked for or
    fallen back to) or "build"."""
    return _MODE


def load() -> str:
    """Load (building if need be) the kernels now rather than on first use, e.g. before
    timing a first mask; returns `mode()`."""
    if _MODE == "aot":
        _ensure()
    return _MODE


def kernel(signature: str | None = None, *, inline: bool = False) -> Callable[[F], F]:
    """Declare a compiled loop. `signature` (numba's argument types, e.g. ``"(i4[::1], i8)"``)
    for one called from Python; none for a helper only other kernels call. A kernel calls
    helpers only, never another kernel with a signature (that one is a Python function here)."""

    def wrap(fn: F) -> F:
        k = _Kernel(fn, signature, inline)
        _KERNELS.append(k)
        if _MODE != "aot":
            return k.jit()
        if signature is None:
            return fn  # compiled into its callers; never called from Python here
        return _checked(k)  # type: ignore[return-value]

    return wrap


# ------------------------------------------------------------------ argument checks

_DTYPES = {
    "b1": np.dtype(np.bool_),
    "i1": np.dtype(np.int8),
    "u1": np.dtype(np.uint8),
    "i4": np.dtype(np.int32),
    "i8": np.dtype(np.int64),
    "u8": np.dtype(np.uint64),
}


_LAYOUTS = {"::1": (1, "C"), ":, ::1": (2, "C"), "::1, :": (2, "F")}


def _arg_specs(signature: str) -> tuple[tuple[np.dtype[Any], int, str] | None, ...]:
    """Per argument of ``"(i4[::1], u8[:, ::1], i8)"``: (dtype, rank, "C"/"F") for an array,
    None for a scalar. Arrays are contiguous vectors or tables (what the checks can verify in
    one compare); anything else is refused here, when the kernel is declared."""
    inner = signature.strip()
    if not (inner.startswith("(") and inner.endswith(")")):
        raise ValueError(f"a kernel signature is a tuple of argument types: {signature!r}")
    specs: list[tuple[np.dtype[Any], int, str] | None] = []
    for part in re.findall(r"[^,\[\]]+(?:\[[^\]]*\])?", inner[1:-1]):
        part = part.strip()
        if not part:
            continue
        if "[" not in part:
            specs.append(None)
            continue
        name, dims = part[:-1].split("[", 1)
        shape = _LAYOUTS.get(" ".join(dims.split()))
        if shape is None or name.strip() not in _DTYPES:
            raise ValueError(f"unsupported kernel argument type {part!r} in {signature!r}")
        specs.append((_DTYPES[name.strip()], *shape))
    return tuple(specs)


def _checked(k: _Kernel) -> Callable[..., Any]:
    """`k`'s built function behind checks of every array argument (loaded on first call).

    The check is generated per signature, unrolled (a loop over argument specs cost 0.3 us
    an array, more than many kernels): a vector's dtype (by identity first) and its strides
    in one tuple compare (rank and contiguity), a table's dtype, rank and contiguity flag.
    What fails goes through the full check, which admits what is only unusual (a
    one-element view with odd strides) and raises on what is wrong."""
    assert k.signature is not None
    specs = _arg_specs(k.signature)
    name = f"{k.fn.__module__}.{k.fn.__name__}"
    params = ", ".join(f"a{i}" for i in range(len(specs)))
    ns: dict[str, Any] = {"_check_all": functools.partial(_check_all, name, specs)}
    tests = []
    for i, spec in enumerate(specs):
        if spec is None:
            continue
        dt, rank, layout = spec
        ns[f"D{i}"] = dt
        if rank == 1:
            ns[f"S{i}"] = (dt.itemsize,)
            tests.append(f"a{i}.dtype is not D{i} and a{i}.dtype != D{i} or a{i}.strides != S{i}")
        else:
            flag = "c_contiguous" if layout == "C" else "f_contiguous"
            tests.append(
                f"a{i}.dtype is not D{i} and a{i}.dtype != D{i} or a{i}.ndim != {rank}"
                f" or not a{i}.flags.{flag}"
            )
    body = [f"def {k.fn.__name__}({params}, /):"]
    if tests:
        body += [
            "    try:",
            "        if " + " or ".join(f"({t})" for t in tests) + ":",
            f"            _check_all(({params},))",
            "    except AttributeError:",
            f"        _check_all(({params},))",
        ]
    body.append(f"    return fn({params})")

    def first_call(*args: Any) -> Any:
        ns["fn"] = target = _resolve(k)
        return target(*args)

    ns["fn"] = first_call
    exec("\n".join(body), ns)  # noqa: S102 - our own text, from the declared signature
    call: Callable[..., Any] = ns[k.fn.__name__]
    call.__qualname__ = k.fn.__qualname__
    call.__module__ = k.fn.__module__
    call.__doc__ = k.fn.__doc__
    call.__wrapped__ = k.fn  # type: ignore[attr-defined]
    return call


def _check_all(name: str, specs: tuple[Any, ...], args: tuple[Any, ...]) -> None:
    for i, spec in enumerate(specs):
        if spec is not None:
            _full_check(name, i, args[i], spec)


def _full_check(name: str, i: int, a: Any, spec: tuple[np.dtype[Any], int, str]) -> None:
    dt, rank, layout = spec
    if (
        isinstance(a, np.ndarray)
        and a.dtype == dt
        and a.ndim == rank
        and (a.flags.c_contiguous if layout == "C" else a.flags.f_contiguous)
    ):
        return
    got = f"an array of {a.dtype}, rank {a.ndim}" if isinstance(a, np.ndarray) else type(a).__name__
    order = "C" if layout == "C" else "Fortran"
    raise TypeError(
        f"{name}: argument {i} must be a {order}-ordered {dt} array of rank {rank}, got {got}"
    )


# ------------------------------------------------------------------ the library

_lock = threading.Lock()
_library: ModuleType | None = None
_fallback: dict[str, Any] | None = None


def _ensure() -> None:
    """The built library loaded (built first if missing), or numba's JIT where it cannot be."""
    global _library, _fallback, _MODE
    with _lock:
        if _library is not None or _fallback is not None:
            return
        try:
            _library = _load_or_build()
        except Exception as e:  # no compiler, no setuptools, a failed build
            _MODE = "jit"
            warnings.warn(
                f"the engine's compiled kernels are unavailable ({e}); using numba's JIT "
                "(about 85 MB more memory per process)",
                RuntimeWarning,
                stacklevel=4,
            )
            _fallback = _jit_all()


def _resolve(k: _Kernel) -> Callable[..., Any]:
    _ensure()
    if _library is not None:
        return getattr(_library, k.symbol)
    assert _fallback is not None
    return _fallback[k.symbol]


def _jit_all() -> dict[str, Any]:
    """numba's JIT for every kernel, helpers rebound in every kernel module that holds them
    (`_pairs` imports a helper of `_length_product`: rebound only where it was defined, the
    fallback failed to type `trim_states`, and every compile on a machine without a C compiler
    with it)."""
    out: dict[str, Any] = {}
    for k in _KERNELS:
        out[k.symbol] = dispatcher = k.jit()
        if k.signature is None:
            for name in KERNEL_MODULES:
                module = sys.modules[name]
                if getattr(module, k.fn.__name__, None) is k.fn:
                    setattr(module, k.fn.__name__, dispatcher)
    return out


def _ensure_registered() -> None:
    for name in KERNEL_MODULES:
        importlib.import_module(name)


def _cpu_fingerprint() -> str:
    """The CPU's model and feature flags (what the library is compiled for)."""
    h = hashlib.sha256(platform.processor().encode())
    with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="utf-8") as f:
        for line in f:
            if line.startswith(("model name", "flags")):
                h.update(line.encode())
            elif not line.strip():
                break  # the first processor's block
    return h.hexdigest()[:12]


def _library_dir() -> Path:
    env = os.environ.get("SDK_KERNELS_DIR")
    if env:
        return Path(env).expanduser()
    return default_cache_dir() / "kernels"


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """One builder per machine at a time (other processes wait, then load its result)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as f:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX: builds may race, os.replace wins
            yield
            return
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _load_or_build() -> ModuleType:
    directory = _library_dir() / library_key()
    with _file_lock(directory.parent / ".lock"):
        found = _find(directory)
        if found is None:
            for stale in directory.parent.glob(".build-*"):  # a builder killed midway
                shutil.rmtree(stale, ignore_errors=True)
            _build(directory)
            found = _find(directory)
            if found is None:
                raise RuntimeError(f"the kernel build wrote no library into {directory}")
    return _import(found)


def library_key() -> str:
    """What the built library depends on: the kernel modules' source, this file, the
    toolchain's versions and the CPU it is compiled for (numba's version read from its
    metadata: the serving process never imports it)."""
    from importlib.metadata import version

    _ensure_registered()
    h = hashlib.sha256()
    for name in KERNEL_MODULES:
        h.update(Path(sys.modules[name].__file__ or "").read_bytes())
    here = Path(__file__)
    h.update(here.read_bytes())
    h.update(here.with_name("_native_build.py").read_bytes())
    h.update(
        repr(
            (version("numba"), np.__version__, sys.version, platform.machine(), _cpu_fingerprint())
        ).encode()
    )
    return h.hexdigest()[:20]


def _find(directory: Path) -> Path | None:
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        p = directory / (LIBRARY + suffix)
        if p.is_file():
            return p
    return None


def _build(directory: Path) -> None:
    """Compile every kernel into `directory` in a subprocess (numba and LLVM stay there)."""
    _log.info("compiling the engine's kernels into %s (once per machine)", directory)
    # the builder imports this very package, wherever it was imported from here
    root = str(Path(__file__).resolve().parents[2])
    path = os.environ.get("PYTHONPATH")
    env = dict(
        os.environ, SDK_KERNELS="build", PYTHONPATH=root + (os.pathsep + path if path else "")
    )
    proc = subprocess.run(
        [sys.executable, "-m", "sdk.engine._native_build", str(directory)],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if proc.returncode != 0:
        tail = [line for line in (proc.stderr or proc.stdout).splitlines() if line.strip()][-2:]
        raise RuntimeError("kernel build failed: " + " | ".join(tail))


def _import(path: Path) -> ModuleType:
    loader = importlib.machinery.ExtensionFileLoader(LIBRARY, str(path))
    spec = importlib.util.spec_from_file_location(LIBRARY, path, loader=loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module
