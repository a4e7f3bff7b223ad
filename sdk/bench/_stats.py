"""Aggregation, table and plot for MaskBench results.

Kept apart from the runner so the numbers (percentiles, ratios) can be unit-tested and reused
by a future end-to-end benchmark without spawning workers.
"""

from __future__ import annotations

import resource
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

STATUSES = ("pass", "fail", "compile_error", "crash", "timeout")


def percentiles(values: Sequence[float] | np.ndarray, qs: Iterable[int]) -> dict[str, float | None]:
    """`{"p50": ..}` for each q; None when there is nothing to summarise (keeps JSON honest)."""
    arr = np.asarray(values, dtype=np.float64)
    out: dict[str, float | None] = {}
    for q in qs:
        out[f"p{q}"] = round(float(np.percentile(arr, q)), 3) if arr.size else None
    return out


def summarize_engine(
    results: list[dict[str, Any]],
    tbm_us: list[np.ndarray],
    peak_rss_mb: float | None,
    setup_rss_mb: float | None,
) -> dict[str, Any]:
    """Fold one engine's per-schema results into the counts and latency summary we report."""
    status = Counter(r["status"] for r in results)
    val_tests = sum(r["validation_errors"] for r in results)
    inval_tests = sum(r["invalidation_errors"] for r in results)
    crash_types = Counter(r["exc_type"] or "?" for r in results if r["status"] == "crash")
    ttfm = [r["ttfm_ms"] for r in results if r["ttfm_ms"] is not None]
    tbm = np.concatenate(tbm_us) if tbm_us else np.empty(0)
    return {
        "available": True,
        "schemas": len(results),
        "passing": status["pass"],
        "failing": status["fail"],
        "compile_errors": status["compile_error"],
        "validation_errors": {
            "tests": val_tests,
            "schemas": sum(1 for r in results if r["validation_errors"]),
        },
        "invalidation_errors": {
            "tests": inval_tests,
            "schemas": sum(1 for r in results if r["invalidation_errors"]),
        },
        "crashes": {"count": status["crash"], "types": dict(crash_types.most_common())},
        "timeouts": status["timeout"],
        "tests": sum(r["n_tests"] for r in results),
        "masks": int(tbm.size),
        "tbm_us": {
            **percentiles(tbm, (50, 90, 99)),
            "mean": round(float(tbm.mean()), 3) if tbm.size else None,
            "max": round(float(tbm.max()), 3) if tbm.size else None,
        },
        "ttfm_ms": {
            **percentiles(ttfm, (50, 99)),
            "mean": round(float(np.mean(ttfm)), 3) if ttfm else None,
        },
        "peak_rss_mb": peak_rss_mb,
        "setup_rss_mb": setup_rss_mb,
        "rss_trace_mb": rss_trace(results),
        "busy_s": round(sum(r["wall_s"] for r in results), 3),
        # full garbage collections during the schemas (pauses the engine does not choose)
        "gc_full": sum(r.get("gc_full", 0) for r in results),
        "gc_full_s": round(sum(r.get("gc_full_s", 0.0) for r in results), 3),
    }


def rss_trace(results: list[dict[str, Any]], points: int = 4) -> list[float | None]:
    """Worker RSS after 1/points, 2/points, ... of the schemas: flat when caches are bounded."""
    rss = [r.get("rss_now_mb") for r in results]
    if not rss:
        return []
    picks = [max(0, round(len(rss) * k / points) - 1) for k in range(1, points + 1)]
    return [rss[i] for i in picks]


def ratios(engines: dict[str, dict[str, Any]], ours: str = "ours") -> dict[str, dict[str, Any]]:
    """ours/peer for TBM p50/p99 and TTFM p50/p99 (<1 means ours is faster), per peer that ran."""
    out: dict[str, dict[str, Any]] = {}
    mine = engines.get(ours)
    if not mine or not mine.get("available"):
        return out
    for peer, theirs in engines.items():
        if peer == ours or not theirs.get("available"):
            continue
        entry: dict[str, Any] = {}
        for metric, q in (
            ("tbm_us", "p50"),
            ("tbm_us", "p99"),
            ("ttfm_ms", "p50"),
            ("ttfm_ms", "p99"),
        ):
            a, b = mine[metric][q], theirs[metric][q]
            key = f"{metric.split('_')[0]}_{q}"
            entry[key] = round(a / b, 3) if a is not None and b else None
        out[f"{ours}/{peer}"] = entry
    return out


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.1f}" if abs(v) >= 10 else f"{v:.2f}"
    return str(v)


def format_table(engines: dict[str, dict[str, Any]], ratio: dict[str, dict[str, Any]]) -> str:
    """A fixed-width side-by-side table, one column per engine, for humans."""
    names = list(engines)
    rows: list[tuple[str, list[str]]] = []

    def row(label: str, get: Any) -> None:
        cells = []
        for n in names:
            e = engines[n]
            cells.append(_fmt(get(e)) if e.get("available") else "n/a")
        rows.append((label, cells))

    row("schemas", lambda e: e["schemas"])
    row("passing", lambda e: e["passing"])
    row("compile errors", lambda e: e["compile_errors"])
    row("validation err (tests)", lambda e: e["validation_errors"]["tests"])
    row("validation err (schemas)", lambda e: e["validation_errors"]["schemas"])
    row("invalidation err (tests)", lambda e: e["invalidation_errors"]["tests"])
    row("invalidation err (schemas)", lambda e: e["invalidation_errors"]["schemas"])
    row("crashes", lambda e: e["crashes"]["count"])
    row("timeouts", lambda e: e["timeouts"])
    row("tests", lambda e: e["tests"])
    row("masks", lambda e: e["masks"])
    for q in ("p50", "p90", "p99", "max"):
        row(f"TBM {q} (us)", lambda e, q=q: e["tbm_us"][q])
    for q in ("p50", "p99"):
        row(f"TTFM {q} (ms)", lambda e, q=q: e["ttfm_ms"][q])
    row("peak RSS (MB)", lambda e: e["peak_rss_mb"])
    row("RSS after setup (MB)", lambda e: e["setup_rss_mb"])
    row(
        "RSS at 25/50/75/100% (MB)",
        lambda e: "/".join(f"{x:.0f}" if x else "?" for x in e.get("rss_trace_mb") or []) or None,
    )
    row("busy (s)", lambda e: e["busy_s"])
    row("full GCs (count, s)", lambda e: f"{e.get('gc_full', 0)}, {e.get('gc_full_s', 0.0):.2f}")
    row("worker restarts", lambda e: e.get("worker_restarts", 0))

    width = max(len(label) for label, _ in rows) + 2
    col = max([12, *(len(n) + 2 for n in names), *(len(c) + 2 for _, cs in rows for c in cs)])
    lines = ["".ljust(width) + "".join(n.rjust(col) for n in names)]
    lines += [label.ljust(width) + "".join(c.rjust(col) for c in cells) for label, cells in rows]
    for n in names:
        e = engines[n]
        if not e.get("available"):
            lines.append(f"{n}: unavailable ({e.get('reason', '?')})")
        elif e["crashes"]["types"]:
            lines.append(f"{n} crash types: {e['crashes']['types']}")
    for pair, vals in ratio.items():
        lines.append(f"{pair}: " + ", ".join(f"{k}={_fmt(v)}" for k, v in vals.items()))
    return "\n".join(lines)


def pyplot_or_note(bench: str, path: str) -> Any:
    """matplotlib's pyplot on the Agg backend, or None after a note on stderr when matplotlib
    (the `bench` extra) is not installed: a bench's numbers never need it."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"{bench}: matplotlib is not installed; no plot written to {path}", file=sys.stderr)
        return None
    return plt


def plot(
    path: str, tbm_by_engine: dict[str, np.ndarray], ttfm_by_engine: dict[str, list[float]]
) -> None:
    """TBM (and TTFM) distributions per engine on log axes; matplotlib is imported lazily."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    for name, tbm in tbm_by_engine.items():
        if tbm.size:
            xs = np.sort(tbm)
            ax1.plot(xs, np.arange(1, xs.size + 1) / xs.size, label=f"{name} (n={xs.size})")
    ax1.set_xscale("log")
    ax1.set_xlabel("time between masks (µs)")
    ax1.set_ylabel("fraction of masks ≤ x")
    ax1.set_title("TBM (mask + advance), CDF")
    ax1.grid(True, which="both", alpha=0.3)
    ax1.legend()
    for name, ttfm in ttfm_by_engine.items():
        if ttfm:
            xs = np.sort(np.asarray(ttfm))
            ax2.plot(xs, np.arange(1, xs.size + 1) / xs.size, label=f"{name} (n={xs.size})")
    ax2.set_xscale("log")
    ax2.set_xlabel("time to first mask (ms)")
    ax2.set_title("TTFM (compile + first mask), CDF")
    ax2.grid(True, which="both", alpha=0.3)
    ax2.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def peak_rss_mb(pid: int | str = "self") -> float | None:
    """A process's peak resident set (`VmHWM`: per process image, so a worker's own, not its
    parent's as `ru_maxrss` after exec may be); for this process `ru_maxrss` where no /proc."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024.0, 1)
    except OSError:
        pass
    if pid != "self":
        return None
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1)
