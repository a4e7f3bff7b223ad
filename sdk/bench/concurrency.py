"""`python -m sdk.bench concurrency`: concurrent runs on one local model, batched against one
at a time, in the same process and run.

Each run asks for the weather in a city (tool call under `["required", "none"]`, then an
answer), all runs of a wave gathered with asyncio. Both modes share the model's weights: one
`TransformersModel` with `max_batch=1` (turns take turns behind a lock) and one batching up to
the largest wave. Printed per wave size: wall time, calls per second, per-run latency
p50/p95, the speed-up, whether every run's output is identical in both modes, and the KV
memory a row adds. `--soak N` then runs N more runs in waves and reports memory before and
after (it must not grow with N). `--backend llama.cpp`: the same with two `LlamaCppModel`s over
the one GGUF (`max_batch=1` and the largest wave; each its own context and KV cells;
`--reproducible` for logits that do not depend on the cache's history).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import sys
import time
from typing import Any, Literal

from sdk import Agent, tool

CITIES = [
    "Paris", "London", "Tokyo", "Berlin", "Madrid", "Rome", "Oslo", "Lima",
    "Cairo", "Delhi", "Seoul", "Quito", "Dakar", "Hanoi", "Perth", "Riga",
]  # fmt: skip

_TEMPS = {"paris": 18.0, "london": 14.5, "tokyo": 24.0}


@tool
def get_weather(city: str, unit: Literal["celsius", "fahrenheit"] = "celsius") -> str:
    """Get the current temperature in a city.

    Args:
        city: The city name, e.g. "Paris".
        unit: The temperature unit to answer in.
    """
    celsius = _TEMPS.get(city.strip().lower(), 20.0)
    value = celsius if unit == "celsius" else celsius * 9 / 5 + 32
    return f"{value:.1f} degrees {unit} in {city}"


def _agent(model: Any, max_tokens: int) -> Agent[str]:
    return Agent(
        model=model,
        tools=[get_weather],
        tool_choice=["required", "none"],
        parallel_tool_calls=False,
        max_tokens=max_tokens,
    )


async def _wave(agent: Agent[str], n: int, offset: int = 0) -> tuple[float, list[float], list[str]]:
    start = time.perf_counter()

    async def one(city: str) -> tuple[float, str]:
        result = await agent.run(f"What is the weather in {city}?")
        return time.perf_counter() - start, str(result.output)

    got = await asyncio.gather(*(one(CITIES[(offset + k) % len(CITIES)]) for k in range(n)))
    return time.perf_counter() - start, [t for t, _ in got], [o for _, o in got]


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _current_rss_mb() -> float:
    try:
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[1])
    except OSError:
        return float("nan")
    return pages * resource.getpagesize() / 2**20


def plot(path: str, rows: list[dict[str, Any]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    colors = {"one-at-a-time": "#868e96", "batched": "#2b8a3e"}
    for mode, color in colors.items():
        mine = [r for r in rows if r["mode"] == mode]
        runs = [r["runs"] for r in mine]
        axes[0].plot(runs, [r["calls_per_s"] for r in mine], "o-", color=color, label=mode)
        axes[1].plot(runs, [r["p50_s"] for r in mine], "o-", color=color, label=f"{mode} p50")
        axes[1].plot(runs, [r["p95_s"] for r in mine], "o--", color=color, label=f"{mode} p95")
    axes[0].set_title("throughput (calls per second)", fontsize=10)
    axes[1].set_title("latency of a run (seconds)", fontsize=10)
    sizes = sorted({r["runs"] for r in rows})
    for ax in axes:
        ax.set_xlabel("concurrent runs")
        ax.set_xscale("log", base=2)
        ax.set_xticks(sizes, [str(n) for n in sizes])
        ax.legend(fontsize=8)
    fig.suptitle(
        "Concurrent weather runs, SmolLM2-135M on 2 CPU cores (python -m sdk.bench concurrency)",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m sdk.bench concurrency", description=__doc__)
    ap.add_argument("--runs", default="1,2,4,8", help="wave sizes (concurrent runs)")
    ap.add_argument("--model", default="smollm2", help="a model spec (default: embedded)")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--soak", type=int, default=0, help="then N more batched runs (memory)")
    ap.add_argument("--json-out", default=None, help="write the rows as JSON lines")
    ap.add_argument("--plot", default=None, help="write a PNG (calls/s and latency per wave)")
    ap.add_argument(
        "--backend",
        default="transformers",
        choices=("transformers", "llama.cpp"),
        help="the local backend (llama.cpp: two contexts over one mmapped GGUF)",
    )
    ap.add_argument(
        "--reproducible",
        action="store_true",
        help="llama.cpp: LlamaCppModel(reproducible=True), logits free of the cache's history",
    )
    return ap.parse_args(argv)


def _models(args: argparse.Namespace, sizes: list[int]) -> tuple[Any, Any] | None:
    """The one-at-a-time model and the batching one over the same weights (None, said on
    stdout, when this model's cache cannot be batched)."""
    if args.backend == "llama.cpp":
        from sdk.backends.llamacpp import LlamaCppModel

        same = args.reproducible
        base: Any = LlamaCppModel(args.model, max_batch=1, reproducible=same)
        batched: Any = LlamaCppModel(args.model, max_batch=max(sizes), reproducible=same)
    else:
        from sdk.backends.transformers import TransformersModel

        base = TransformersModel.from_pretrained(args.model, max_batch=1)
        batched = TransformersModel(base.model, base.tokenizer, max_batch=max(sizes))
        if batched.scheduler is None:
            print(
                "this model's cache cannot be batched (sliding-window layers): nothing to compare"
            )
            return None
    return base, batched


def _compare(modes: dict[str, Agent[str]], sizes: list[int]) -> list[dict[str, Any]]:
    """One wave of each size in each mode, a row printed per mode and wave, then the speed-up
    and how many outputs the two modes share."""
    rows: list[dict[str, Any]] = []
    single = 0.0
    print(f"{'mode':<14} {'runs':>4} {'wall s':>7} {'calls/s':>8} {'p50 s':>6} {'p95 s':>6}")
    for n in sizes:
        outputs: dict[str, list[str]] = {}
        for mode, agent in modes.items():
            wall, lat, outs = asyncio.run(_wave(agent, n))
            outputs[mode] = outs
            row: dict[str, Any] = {
                "mode": mode,
                "runs": n,
                "wall_s": round(wall, 3),
                "calls_per_s": round(n / wall, 3),
                "p50_s": round(statistics.median(lat), 3),
                "p95_s": round(_pct(lat, 0.95), 3),
            }
            rows.append(row)
            if n == 1 and mode == "one-at-a-time":
                single = float(row["p50_s"])
            print(
                f"{mode:<14} {n:>4} {wall:>7.2f} {n / wall:>8.3f} {row['p50_s']:>6.2f} "
                f"{row['p95_s']:>6.2f}"
            )
        seq, bat = rows[-2], rows[-1]
        same = sum(
            a == b for a, b in zip(outputs["one-at-a-time"], outputs["batched"], strict=True)
        )
        bat["speedup"] = round(seq["wall_s"] / bat["wall_s"], 2)
        bat["identical"] = f"{same}/{n}"
        lat_ratio = f", p50 {bat['p50_s'] / single:.2f}x a lone run" if single else ""
        print(f"  -> throughput {bat['speedup']:.2f}x{lat_ratio}; identical outputs {same}/{n}")
    return rows


def _soak(args: argparse.Namespace, agent: Agent[str], sched: Any, wave: int) -> None:
    """`--soak N`: N more batched runs in waves, memory printed as they go (it must not grow)."""
    before = _current_rss_mb()
    done = 0
    t0 = time.perf_counter()
    while done < args.soak:
        n = min(wave, args.soak - done)
        asyncio.run(_wave(agent, n, offset=done))
        done += n
        if done % (wave * 10) == 0 or done == args.soak:
            sched.idle()  # closed rows are dropped by the scheduler's thread
            print(f"  soak {done:>5} runs: RSS {_current_rss_mb():.0f} MiB, {sched.stats()}")
    print(
        f"soak: {args.soak} runs in {time.perf_counter() - t0:.0f}s; RSS {before:.0f} -> "
        f"{_current_rss_mb():.0f} MiB (peak {_rss_mb():.0f} MiB)"
    )


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    sizes = [int(x) for x in args.runs.split(",") if x.strip()]
    models = _models(args, sizes)
    if models is None:
        return 1
    base, batched = models
    modes = {
        "one-at-a-time": _agent(base, args.max_tokens),
        "batched": _agent(batched, args.max_tokens),
    }
    for agent in modes.values():  # load, compile the grammars, fill the prefix caches
        asyncio.run(_wave(agent, 1))

    rows = _compare(modes, sizes)
    sched = getattr(batched, "scheduler", None)
    if sched is None:  # llama.cpp: its KV cache is allocated once (n_ctx cells)
        _finish(args, rows)
        return 0
    per_row = sched.peak_bytes / max(1, sched.peak_rows)
    print(
        f"KV memory: peak {sched.peak_bytes / 2**20:.0f} MiB over {sched.peak_rows} rows "
        f"({per_row / 2**20:.1f} MiB a row at {sched.peak_columns} columns); prefix store "
        f"{sched.stats()['prefix_bytes'] / 2**20:.0f} MiB; steps {sched.steps}, "
        f"{sched.rows_stepped / max(1, sched.steps):.2f} rows a pass"
    )
    if args.soak:
        _soak(args, modes["batched"], sched, max(sizes))
    _finish(args, rows)
    return 0


def _finish(args: argparse.Namespace, rows: list[dict[str, Any]]) -> None:
    if args.plot:
        plot(args.plot, rows)
    if args.json_out:
        with open(args.json_out, "w") as f:
            for row in rows:
                f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    sys.exit(main())
