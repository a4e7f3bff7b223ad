"""`scripts/llama_cpp_flags.sh`: the llama.cpp build flags setup derives from a CPU's features.

A native build (`-march=native`) segfaults in `llama_decode` on CPUs with AMX, and a build with
features the CPU lacks dies with SIGILL: the flags must name exactly what the CPU has, never
`GGML_NATIVE` and never AMX. The CPUs below are given as `/proc/cpuinfo` flag lines.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "llama_cpp_flags.sh"

BASE = "fpu sse sse2 ssse3 sse4_1"
V3 = f"{BASE} sse4_2 avx avx2 fma f16c bmi1 bmi2"
SKYLAKE_X = f"{V3} avx512f avx512cd avx512vl avx512dq avx512bw"
SAPPHIRE_RAPIDS = f"{SKYLAKE_X} avx512vbmi avx512_vnni avx512_bf16 avx512_fp16 avx_vnni amx_tile amx_int8 amx_bf16"


def _flags(tmp_path: Path, cpu_flags: str | None, machine: str = "x86_64") -> set[str]:
    env = dict(os.environ, SDK_MACHINE=machine)
    if cpu_flags is None:
        env["SDK_CPUINFO"] = str(tmp_path / "missing")
    else:
        cpuinfo = tmp_path / "cpuinfo"
        cpuinfo.write_text(f"processor\t: 0\nflags\t\t: {cpu_flags}\n")
        env["SDK_CPUINFO"] = str(cpuinfo)
    out = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, check=True)
    return set(out.stdout.split())


@pytest.mark.parametrize(
    ("cpu", "expected"),
    [
        (
            SAPPHIRE_RAPIDS,
            {
                "-DGGML_AVX512=ON",
                "-DGGML_AVX512_VBMI=ON",
                "-DGGML_AVX512_VNNI=ON",
                "-DGGML_AVX512_BF16=ON",
            },
        ),
        (SKYLAKE_X, {"-DGGML_AVX512=ON"}),
        (V3, set()),  # GGML_NATIVE=OFF alone: ggml's AVX2/FMA/F16C/BMI2 defaults
        (
            f"{BASE} sse4_2 avx",
            {"-DGGML_AVX2=OFF", "-DGGML_FMA=OFF", "-DGGML_F16C=OFF", "-DGGML_BMI2=OFF"},
        ),
        (
            BASE,
            {
                "-DGGML_AVX=OFF",
                "-DGGML_AVX2=OFF",
                "-DGGML_FMA=OFF",
                "-DGGML_F16C=OFF",
                "-DGGML_BMI2=OFF",
                "-DGGML_SSE42=OFF",
            },
        ),
    ],
    ids=["sapphire-rapids", "skylake-x", "x86-64-v3", "avx-only", "sse"],
)
def test_flags_name_what_the_cpu_has(tmp_path: Path, cpu: str, expected: set[str]) -> None:
    flags = _flags(tmp_path, cpu)
    assert {"-DGGML_NATIVE=OFF", "-DLLAVA_BUILD=OFF"} <= flags
    assert flags - {"-DGGML_NATIVE=OFF", "-DLLAVA_BUILD=OFF"} == expected
    assert not any("AMX" in f for f in flags)


def test_no_cpu_information_builds_for_sse(tmp_path: Path) -> None:
    """Without /proc/cpuinfo nothing is assumed: the SSE build (AVX and up off)."""
    flags = _flags(tmp_path, None)
    assert "-DGGML_AVX=OFF" in flags and "-DGGML_AVX2=OFF" in flags


def test_other_architectures_get_the_portable_build(tmp_path: Path) -> None:
    assert _flags(tmp_path, SAPPHIRE_RAPIDS, machine="aarch64") == {
        "-DGGML_NATIVE=OFF",
        "-DLLAVA_BUILD=OFF",
    }
