"""Prefill and decode speed of llama-cpp-python builds, side by side in one run.

Which CMake flags `scripts/setup.sh` gives llama.cpp was chosen with this script: each build
lives in its own virtual environment, and every round runs every build once (interleaved, so a
noisy stretch of the machine hits them all), then the medians are printed.

    python scripts/bench_llama_cpp_build.py MODEL.gguf [MODEL.gguf ...] \\
        --python avx512=/tmp/venv-avx512/bin/python --python v3=/tmp/venv-v3/bin/python

With no `--python`, the interpreter running the script is measured alone. The numbers:
prefill tokens per second over a prompt of `--prompt-tokens` tokens (one `llama_decode` of the
whole batch, like a turn's prompt), and the median milliseconds of one decode step (one token,
logits out), both on `--threads` threads.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

_CHILD = r"""
import json, sys, time
import llama_cpp
path, n_prompt, n_decode, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
t0 = time.perf_counter()
llm = llama_cpp.Llama(path, n_ctx=2048, n_batch=1024,
                      n_threads=threads, n_threads_batch=threads, verbose=False)
load = time.perf_counter() - t0
text = "The quick brown fox jumps over the lazy dog. " * (n_prompt // 4)
ids = llm.tokenize(text.encode(), add_bos=True)[:n_prompt]
llm.eval(ids[:8]); llm.reset()  # warm the threads and the allocator
t0 = time.perf_counter(); llm.eval(ids); prefill = time.perf_counter() - t0
steps = []
for i in range(n_decode):  # a step costs the same whatever the token: the prompt's again
    t0 = time.perf_counter(); llm.eval([ids[i]]); steps.append(time.perf_counter() - t0)
steps.sort()
print(json.dumps({"load_s": load, "prefill_tok_s": len(ids) / prefill,
                  "decode_ms": 1000 * steps[len(steps) // 2]}))
"""


def _one(python: str, model: Path, args: argparse.Namespace) -> dict[str, float]:
    cmd = [python, "-c", _CHILD, str(model), str(args.prompt_tokens), str(args.decode_tokens)]
    done = subprocess.run([*cmd, str(args.threads)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return {"error": float(done.returncode)}  # a crash (negative: the signal) is a result
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("models", nargs="+", type=Path, help="GGUF files")
    p.add_argument("--python", action="append", default=[], help="NAME=PATH to an interpreter")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--prompt-tokens", type=int, default=555)
    p.add_argument("--decode-tokens", type=int, default=48)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args(argv)
    builds = dict(s.split("=", 1) for s in args.python) or {"this": sys.executable}
    rows: dict[tuple[str, str], list[dict[str, float]]] = {}
    for _ in range(args.rounds):
        for model in args.models:
            for name, python in builds.items():
                rows.setdefault((model.name, name), []).append(_one(python, model, args))
    print(f"{'model':44} {'build':10} {'prefill tok/s':>14} {'decode ms':>10} {'load s':>7}")
    for (model_name, name), runs in rows.items():
        if any("error" in r for r in runs):
            codes = sorted({int(r["error"]) for r in runs if "error" in r})
            print(f"{model_name:44} {name:10} crashed (exit {codes})")
            continue

        def med(key: str, runs: list[dict[str, float]] = runs) -> float:
            return statistics.median(r[key] for r in runs)

        print(
            f"{model_name:44} {name:10} {med('prefill_tok_s'):14.1f} {med('decode_ms'):10.2f} "
            f"{med('load_s'):7.2f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
