"""Build the engine's kernels into one extension module: ``python -m sdk.engine._native_build DIR``.

Run by `_native` in a subprocess with ``SDK_KERNELS=build``: importing the kernel modules then
registers every kernel as a numba function, and `numba.pycc` compiles the exported ones (with
the helpers they call) for this machine's CPU. Written to a temporary directory and moved into
place, so a reader never sees half a library.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import types
import warnings
from pathlib import Path
from typing import Any


def _cache_returned_array_types() -> None:
    """pycc's wrappers unpickle `numpy.ndarray` (the type of a returned array) with
    `pickle.loads` on every call, 0.5 us per array returned, where the JIT looks it up in a
    memo. Unpickled once here, into a module global: returning an array then costs 0.1 us."""
    from numba.core import cgutils, pythonapi

    plain = pythonapi.PythonAPI.unserialize
    adapt = pythonapi.PythonAPI.nrt_adapt_ndarray_to_python

    def unserialize_once(self: Any, structptr: Any) -> Any:
        name = structptr.name + ".obj"
        gv = self.module.globals.get(name)
        if gv is None:
            gv = cgutils.add_global_variable(self.module, self.pyobj, name)
            gv.linkage = "internal"
            gv.initializer = self.get_null_object()
        is_new = cgutils.is_null(self.builder, self.builder.load(gv))
        with self.builder.if_then(is_new, likely=False):
            self.builder.store(plain(self, structptr), gv)  # its reference is the global's
        return self.builder.load(gv)

    def adapt_cached(self: Any, aryty: Any, ary: Any, dtypeptr: Any) -> Any:
        self.unserialize = types.MethodType(unserialize_once, self)
        try:
            return adapt(self, aryty, ary, dtypeptr)
        finally:
            del self.unserialize

    pythonapi.PythonAPI.nrt_adapt_ndarray_to_python = adapt_cached  # type: ignore[method-assign]


def build(directory: Path) -> Path:
    from . import _native

    assert _native.mode() == "build", "run with SDK_KERNELS=build"
    _native._ensure_registered()
    import llvmlite.binding as llvm
    from numba.core import codegen

    # the CPU's own features, as the JIT uses: a name alone implies features a virtual
    # machine may not expose (an AVX-512 instruction there is a crash)
    codegen.AOTCPUCodegen._customize_tm_features = (  # type: ignore[method-assign]
        codegen.CPUCodegen._get_host_cpu_features
    )
    _cache_returned_array_types()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pycc's pending deprecation
        from numba.pycc import CC

    directory.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".build-", dir=directory.parent))
    try:
        cc = CC(_native.LIBRARY)
        cc.output_dir = str(tmp)
        cc.target_cpu = llvm.get_host_cpu_name()
        for k in _native._KERNELS:
            if k.signature is not None:
                cc.export(k.symbol, k.signature)(k.fn)
        cc.compile()
        if directory.exists():
            shutil.rmtree(directory)
        os.replace(tmp, directory)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return directory


if __name__ == "__main__":
    build(Path(sys.argv[1]))
