"""The BFCL bench's report: per category, mode and style, the shares and times of the
outcomes (`sdk.bench.bfcl.Outcome`), as tables and a plot."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from ._stats import pyplot_or_note


def summarize(outcomes: Sequence[Any]) -> dict[str, dict[str, dict[str, Any]]]:
    """category -> "mode/style" -> aggregated numbers (shares in [0, 1])."""
    groups: dict[tuple[str, str], list[Any]] = {}
    for o in outcomes:
        groups.setdefault((o.category, f"{o.mode}/{o.style}"), []).append(o)
    report: dict[str, dict[str, dict[str, Any]]] = {}
    for (category, key), rs in groups.items():
        n = len(rs)

        def share(flag: str, rs: list[Any] = rs, n: int = n) -> float:
            return round(sum(bool(getattr(r, flag)) for r in rs) / n, 3)

        checked = [r for r in rs if r.calls_checked is not None]
        n_checked = sum(r.calls_checked or 0 for r in checked)
        s: dict[str, Any] = {
            "mode": rs[0].mode,
            "style": rs[0].style,
            "n": n,
            "parsed": share("parsed"),
            "valid": share("valid"),
            "correct": share("correct"),
            "called": share("called"),
            "no_call": round(1 - share("called"), 3),
            "truncated": sum(r.truncated for r in rs),
            "calls_lost": sum(r.calls_lost for r in rs),
            "calls_lost_whitespace": sum(r.calls_lost for r in rs if r.whitespace_run),
            "errors": sum(r.error is not None for r in rs),
            "reused": sum(r.reused_from is not None for r in rs),
            "s_per_question": round(statistics.fmean(r.seconds for r in rs), 3),
            "tokens_per_question": round(statistics.fmean(r.tokens for r in rs), 1),
            "calls_checked": n_checked if checked else None,
            "noncanonical": (
                round(sum(r.calls_noncanonical or 0 for r in checked) / n_checked, 3)
                if n_checked
                else None
            ),
        }
        if category == "parallel":
            s["count_ok"] = share("count_ok")
            s["all_correct"] = share("all_correct")
        report.setdefault(category, {})[key] = s
    return report


_COLUMNS: dict[str, list[tuple[str, str]]] = {
    "multiple": [
        ("parsed", "parsed"),
        ("valid", "valid"),
        ("correct", "correct"),
        ("called", "called"),
    ],
    "parallel": [
        ("parsed", "parsed"),
        ("valid", "valid"),
        ("count_ok", "count"),
        ("all_correct", "all ok"),
        ("called", "called"),
    ],
    "irrelevance": [("no_call", "no call"), ("parsed", "parsed"), ("valid", "valid")],
}
_COLUMNS["missing"] = _COLUMNS["irrelevance"]
HEADLINE = {
    "multiple": "correct",
    "parallel": "all calls correct",
    "irrelevance": "no call",
    "missing": "no call",
}


def _cell(value: Any, pct: bool, missing: str = "n/a") -> str:
    if value is None:
        return missing
    return f"{100 * value:.0f}%" if pct else f"{value}"


def format_tables(report: Mapping[str, Mapping[str, Mapping[str, Any]]], header: str) -> str:
    """One table per category; shares as percentages."""
    lines = [header]
    for category, rows in report.items():
        cols = _COLUMNS.get(category, _COLUMNS["multiple"])
        lines.append(f"\n{category}")
        lines.append(
            f"{'mode':<14}{'style':<10}{'n':>4}"
            + "".join(f"{title:>9}" for _, title in cols)
            + f"{'lost':>8}{'s/q':>8}{'tok/q':>8}{'noncanon':>10}"
        )
        for s in rows.values():
            lost = f"{s['calls_lost']}/{s['calls_lost_whitespace']}"
            style = f"{s['style']}*" if s["reused"] else s["style"]
            lines.append(
                f"{s['mode']:<14}{style:<10}{s['n']:>4}"
                + "".join(f"{_cell(s.get(key), True):>9}" for key, _ in cols)
                + f"{lost:>8}{s['s_per_question']:>8.2f}{s['tokens_per_question']:>8.1f}"
                + f"{_cell(s['noncanonical'], True, '-' if s['calls_checked'] == 0 else 'n/a'):>10}"
            )
    lines.append(
        "\nlost: calls lost to max_tokens running out inside a call / of those, in turns "
        "ending in a whitespace run; noncanon: calls whose token ids differ from the "
        "tokenizer's encoding of their text (-: no calls; n/a: ids not reported); style*: "
        "runs shared with an earlier style (same prompt and separators)"
    )
    return "\n".join(lines)


def plot(path: str, report: Mapping[str, Mapping[str, Mapping[str, Any]]], title: str) -> bool:
    """Grouped bars of each category's headline share per mode × style; False (and a note
    on stderr) when matplotlib is not installed."""
    plt = pyplot_or_note("bfcl", path)
    if plt is None:
        return False
    categories = list(report)
    series: list[str] = []
    for rows in report.values():
        series += [k for k in rows if k not in series]
    width = 0.8 / max(len(series), 1)
    fig, ax = plt.subplots(figsize=(max(7.0, 2.5 + 0.35 * len(series) * len(categories)), 4))
    for k, key in enumerate(series):
        xs = [i + (k - (len(series) - 1) / 2) * width for i in range(len(categories))]
        vals = [100 * report[c][key]["correct"] if key in report[c] else 0.0 for c in categories]
        bars = ax.bar(xs, vals, width, label=key)
        ax.bar_label(bars, fmt="%.0f", fontsize=7)
    ax.set_xticks(range(len(categories)))
    ax.set_xticklabels([f"{c}\n({HEADLINE.get(c, 'correct')})" for c in categories])
    ax.set_ylabel("% of questions")
    ax.set_ylim(0, 105)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True
