#!/usr/bin/env bash
# Prints the CMAKE_ARGS that scripts/setup.sh builds llama-cpp-python with on this CPU.
#
# llama.cpp's CPU features are named one by one from what the CPU lists: AVX-512 and its
# VBMI/VNNI/BF16 extensions where present, the AVX2 set (x86-64-v3, ggml's defaults with
# GGML_NATIVE=OFF) otherwise, SSE where even that is missing. Never GGML_NATIVE (-march=native:
# that build segfaults in llama_decode on a Xeon with AMX) and never AMX. The multimodal library
# is not built (the SDK does not use it; a minute less). Measurements: docs/performance.md.
# SDK_CPUINFO and SDK_MACHINE stand in for /proc/cpuinfo and `uname -m` (tests).
set -euo pipefail
args="-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF"
case "${SDK_MACHINE:-$(uname -m)}" in x86_64 | amd64) ;; *) echo "$args"; exit 0 ;; esac
flags=" $(grep -m1 '^flags' "${SDK_CPUINFO:-/proc/cpuinfo}" 2>/dev/null | cut -d: -f2 || true) "
has() { for f in "$@"; do [[ $flags == *" $f "* ]] || return 1; done; }
if has avx avx2 fma f16c bmi2; then
  if has avx512f avx512cd avx512vl avx512dq avx512bw; then
    args+=" -DGGML_AVX512=ON"
    if has avx512vbmi; then args+=" -DGGML_AVX512_VBMI=ON"; fi
    if has avx512_vnni; then args+=" -DGGML_AVX512_VNNI=ON"; fi
    if has avx512_bf16; then args+=" -DGGML_AVX512_BF16=ON"; fi
  fi
else
  if ! has avx; then args+=" -DGGML_AVX=OFF"; fi
  args+=" -DGGML_AVX2=OFF -DGGML_FMA=OFF -DGGML_F16C=OFF -DGGML_BMI2=OFF"
  if ! has sse4_2; then args+=" -DGGML_SSE42=OFF"; fi
fi
echo "$args"
