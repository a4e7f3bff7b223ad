"""MaskBench harness: outcome classification, the JSON report, and the CLI dispatcher.

The in-process tests use a fake engine so the classification rules are checked without any
optional dependency; one end-to-end test runs the real CLI with llguidance in a worker.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sdk.bench import _stats
from sdk.bench.__main__ import main as bench_main
from sdk.bench._peers import CompileFailed
from sdk.bench.maskbench import run_schema, select_files


class FakeAdapter:
    """Accepts exactly the token sequence `[1, 2, 3]`; EOS once all three were consumed."""

    name = "fake"
    eos_ids = [0]

    def __init__(self, sleep_s: float = 0.0, boom_at: int | None = None) -> None:
        self.sleep_s = sleep_s
        self.boom_at = boom_at

    def compile(self, schema: Any) -> Any:
        if schema == "bad":
            raise CompileFailed("nope")
        return schema

    def new_matcher(self, state: Any) -> Any:
        return {"pos": 0}

    def mask(self, m: Any) -> Any:
        time.sleep(self.sleep_s)
        if self.boom_at is not None and m["pos"] == self.boom_at:
            raise KeyError("boom")
        out = np.zeros(5, dtype=bool)
        if m["pos"] < 3:
            out[m["pos"] + 1] = True
        return out

    def allowed(self, m: Any, mask: Any, token_id: int) -> bool:
        return bool(mask[token_id])

    def advance(self, m: Any, token_id: int) -> bool:
        m["pos"] += 1
        return True

    def accepting(self, m: Any) -> bool:
        return bool(m["pos"] == 3)


def test_run_schema_classifies_outcomes() -> None:
    tests = [
        (True, [1, 2, 3]),   # valid, accepted
        (False, [1, 3]),     # invalid, rejected at token 1
        (False, [1, 2]),     # invalid, not accepting at the end
        (True, [1, 2]),      # "valid" but incomplete: a validation error
        (False, [1, 2, 3]),  # "invalid" but accepted: an invalidation error
    ]
    res, tbm = run_schema(FakeAdapter(), "ok", tests, timeout_s=10)
    assert res["status"] == "fail"
    assert (res["validation_errors"], res["invalidation_errors"]) == (1, 1)
    assert [f["kind"] for f in res["failures"]] == ["validation", "invalidation"]
    assert res["failures"][0]["reason"] == "not_accepting"
    # one mask per replayed token plus the final EOS check of fully consumed tests
    assert res["n_masks"] == tbm.size == (4 + 2 + 3 + 3 + 4)
    assert res["ttfm_ms"] is not None and res["ttfm_ms"] >= res["compile_ms"]


def test_run_schema_compile_error_crash_and_timeout() -> None:
    res, _ = run_schema(FakeAdapter(), "bad", [(True, [1])], timeout_s=10)
    assert res["status"] == "compile_error" and "nope" in res["error"]
    res, _ = run_schema(FakeAdapter(boom_at=1), "ok", [(True, [1, 2, 3])], timeout_s=10)
    assert (res["status"], res["exc_type"]) == ("crash", "KeyError")
    res, _ = run_schema(FakeAdapter(sleep_s=0.02), "ok", [(True, [1, 2, 3])] * 20, timeout_s=0.1)
    assert res["status"] == "timeout"


def test_stats_summary_and_ratios() -> None:
    base = {"status": "pass", "validation_errors": 0, "invalidation_errors": 0,
            "exc_type": None, "n_tests": 1, "wall_s": 0.1}
    results = [{**base, "ttfm_ms": 2.0}, {**base, "status": "crash", "exc_type": "KeyError",
                                          "ttfm_ms": None}]
    s = _stats.summarize_engine(results, [np.array([1.0, 3.0])], 100.0, 50.0)
    assert s["passing"] == 1 and s["crashes"] == {"count": 1, "types": {"KeyError": 1}}
    assert s["tbm_us"]["p50"] == 2.0 and s["ttfm_ms"]["p50"] == 2.0
    peer = {**s, "tbm_us": {**s["tbm_us"], "p50": 4.0}}
    r = _stats.ratios({"ours": s, "llguidance": peer})
    assert r["ours/llguidance"]["tbm_p50"] == 0.5
    assert "llguidance" in _stats.format_table({"ours": s, "llguidance": peer}, r)


def test_dispatcher_usage(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench_main([]) == 2
    assert "maskbench" in capsys.readouterr().out
    assert bench_main(["nope"]) == 2


def _write(tmp: Path, name: str, schema: Any, tests: list[tuple[bool, Any]]) -> None:
    doc = {"schema": schema, "tests": [{"valid": v, "data": d} for v, d in tests]}
    (tmp / name).write_text(json.dumps(doc), encoding="utf-8")


def test_maskbench_cli_with_llguidance(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("llguidance")
    _write(tmp_path, "a_int.json", {"type": "integer"}, [(True, 42), (False, "x")])
    _write(tmp_path, "b_obj.json",
           {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
           [(True, {"name": "bo"}), (False, {})])
    # The second test's flag is deliberately wrong: "blue" is not in the enum.
    _write(tmp_path, "c_enum.json", {"enum": ["red", "green"]}, [(True, "red"), (True, "blue")])
    details = tmp_path / "details.jsonl"
    bench_main(["maskbench", str(tmp_path), "--engines", "llguidance", "--quiet",
                "--json-out", str(details)])
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("BENCH_JSON ")]
    assert len(lines) == 1
    report = json.loads(lines[0][len("BENCH_JSON "):])
    e = report["engines"]["llguidance"]
    assert report["files"] == 3 and e["available"]
    assert (e["schemas"], e["passing"], e["compile_errors"]) == (3, 2, 0)
    assert e["validation_errors"] == {"tests": 1, "schemas": 1}
    assert e["invalidation_errors"] == {"tests": 0, "schemas": 0}
    assert e["crashes"]["count"] == 0 and e["timeouts"] == 0
    assert e["tests"] == 6 and e["masks"] > 0 and e["tbm_us"]["p50"] > 0
    rows = [json.loads(ln) for ln in details.read_text(encoding="utf-8").splitlines()]
    by_file = {r["file"]: r for r in rows}
    assert by_file["c_enum.json"]["status"] == "fail"
    assert by_file["c_enum.json"]["failures"][0]["test"] == 1
    assert [p.name for p in select_files(str(tmp_path), "enum", None)] == ["c_enum.json"]


def test_e2e_summary_ratios_and_table() -> None:
    """The e2e report's arithmetic, on hand-made rows (the model run itself is a benchmark)."""
    import argparse

    from sdk.bench.e2e import Row, format_table, summarize

    rows = [
        Row("ours", "q1", seconds=1.0, tokens=40, forward_passes=8, forced_tokens=30,
            mask_s=0.05, parsed=True, valid=True),
        Row("ours-no-ff", "q1", seconds=4.0, tokens=40, forward_passes=41),
        Row("unconstrained", "q1", seconds=8.0, tokens=80, forward_passes=80),
        Row("ours", "q2", seconds=3.0, tokens=20, forward_passes=6, forced_tokens=10,
            parsed=True, valid=False),
        Row("ours-no-ff", "q2", seconds=3.5, tokens=20, forward_passes=21),
        Row("unconstrained", "q2", seconds=2.0, tokens=20, forward_passes=20),
    ]
    s = summarize(rows, ["ours", "ours-no-ff", "unconstrained"])
    assert s["ours"]["wall_p50_s"] == 2.0
    assert s["ours"]["forward_passes_per_call"] == 7.0
    assert s["ours"]["passes_saved_per_call"] == 24.0  # 31 - 7
    assert s["ours"]["calls_no_slower_than_unconstrained"] == 0.5
    # q1: 1 / (40 * 8/80) = 0.25; q2: 3 / (20 * 2/20) = 1.5 → median 0.875
    assert s["ours"]["wall_ratio_vs_unconstrained_same_tokens_p50"] == 0.875
    assert s["ours"]["valid"] == 0.5 and s["ours"]["parsed"] == 1.0
    assert s["ours"]["mask_share"] == round(0.05 / 4.0, 4)
    table = format_table(s, argparse.Namespace(n=2, offset=0, model="m", max_tokens=9))
    assert "24.0 forward passes saved per call" in table
    assert table.splitlines()[2].startswith("ours ")
