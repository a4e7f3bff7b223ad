"""Tokenizer index speed: build from scratch vs load from the disk cache, per tokenizer.

    python -m sdk.bench index [--tokenizer gemma3] [--repeats 3]

Each phase runs in a freshly spawned process, so the in-process caches cannot help it and the
numbers are what a new worker pays:

- ``build``: `TokenizerIndex.from_hf` with an empty cache directory (reads the vocabulary,
  decodes every token to bytes, writes the cache file);
- ``load``: the same call again, the file now present (read + validate the fingerprint);
- ``arrays``: `TokenizerIndex.warm_up` on the loaded index: the engine's per-vocabulary
  arrays and its compiled kernels loaded (one small grammar compiled and walked), paid once per
  process, on the first grammar when not up front;
- ``llguidance``: `llguidance.hf.from_tokenizer` on the same tokenizer, for a ratio.

The tokenizer's own load from its GGUF file (the same for every engine) is excluded; it is
cached on disk by the backends after the first conversion.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import sys
import tempfile


def _phase(tokenizer: str, phase: str, cache: str) -> dict[str, float]:
    """One measurement, run in a freshly spawned process (nothing cached in memory)."""
    import time

    from sdk.bench.maskbench import load_tokenizer
    from sdk.engine.tokenizer import TokenizerIndex

    tok = load_tokenizer(tokenizer)
    out: dict[str, float] = {}
    if phase == "llguidance":
        import llguidance.hf

        t = time.perf_counter()
        llguidance.hf.from_tokenizer(tok)
        out["s"] = time.perf_counter() - t
        return out
    t = time.perf_counter()
    index = TokenizerIndex.from_hf(tok, cache_dir=cache)
    out["s"] = time.perf_counter() - t
    if phase == "load":
        t = time.perf_counter()
        index.warm_up()
        out["arrays_s"] = time.perf_counter() - t
    out["tokens"] = index.vocab_size
    return out


def _run(tokenizer: str, phase: str, cache: str) -> dict[str, float]:
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(_phase, (tokenizer, phase, cache))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sdk.bench index", description=__doc__)
    ap.add_argument("--tokenizer", default="gemma3", help="smollm2, gemma3 or a path")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-peer", action="store_true", help="skip llguidance")
    args = ap.parse_args(argv)
    rows: dict[str, list[float]] = {"build": [], "load": [], "arrays": [], "llguidance": []}
    tokens = 0
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory() as cache:
            built = _run(args.tokenizer, "build", cache)
            loaded = _run(args.tokenizer, "load", cache)
        tokens = int(built["tokens"])
        rows["build"].append(built["s"])
        rows["load"].append(loaded["s"])
        rows["arrays"].append(loaded["arrays_s"])
        if not args.no_peer:
            rows["llguidance"].append(_run(args.tokenizer, "llguidance", "")["s"])
    print(f"tokenizer {args.tokenizer}: {tokens} tokens, median of {args.repeats} fresh processes")
    med = {k: statistics.median(v) for k, v in rows.items() if v}
    for k, v in med.items():
        print(f"  {k:<11} {v:8.3f} s")
    if "llguidance" in med:
        print(f"  ours load / llguidance init: {med['load'] / med['llguidance']:.2f}")
    print(
        "BENCH_JSON "
        + json.dumps(
            {"bench": "index", "tokenizer": args.tokenizer, "tokens": tokens, "median_s": med}
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
