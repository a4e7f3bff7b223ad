"""`python -m sdk.bench backends`: the summary, ratios, table and report on hand-made rows, the
arguments, and the failures that need no model (no backend is loaded here)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from sdk.bench import backends
from sdk.bench.__main__ import USAGE
from sdk.bench.__main__ import main as bench_main
from sdk.bench.backends import Row
from sdk.bench.bfcl import Outcome


def _rows(backend: str, seconds: list[float], **kw: Any) -> list[dict[str, Any]]:
    out = []
    for i, s in enumerate(seconds):
        row = Row(backend, f"multiple_{i}", seconds=s, tokens=10, prompt_tokens=100,
                  generation_s=s / 2, parsed=True, valid=i > 0, correct=i == 2, **kw)  # fmt: skip
        out.append(vars(row))
    return out


RESULTS: dict[str, Any] = {
    "llama.cpp": {
        "load_s": 1.0,
        "peak_rss_mb": 500.0,
        "rows": _rows("llama.cpp", [1.0, 2.0, 6.0], cached_prompt_tokens=25, forward_passes=4),
    },
    "transformers": {
        "load_s": 4.0,
        "peak_rss_mb": 1500.0,
        "rows": _rows("transformers", [2.0, 4.0, 9.0], cached_prompt_tokens=25, forward_passes=4),
    },
    "server": {"load_s": 2.0, "peak_rss_mb": 600.0, "rows": _rows("server", [1.0, 1.0, 1.0])},
}


def test_summary_counts_times_and_shares() -> None:
    s = backends.summarize(RESULTS["llama.cpp"])
    assert s["n"] == 3 and (s["s_per_call_median"], s["s_per_call_mean"]) == (2.0, 3.0)
    assert s["tokens_per_s"] == round(30 / 4.5, 1)  # all tokens over all generation seconds
    assert s["prompt_reused"] == 0.25 and s["prompt_tokens_mean"] == 100
    assert (s["correct"], s["parsed"], s["valid"], s["errors"]) == (1, 3, 2, 0)
    assert s["forward_passes_mean"] == 4 and s["load_s"] == 1.0 and s["peak_rss_mb"] == 500.0
    server = backends.summarize(RESULTS["server"])
    assert server["forward_passes_mean"] is None and server["prompt_reused"] == 0.0
    assert server["mask_s_mean"] is None and s["mask_s_mean"] is None  # none reported
    empty = backends.summarize({"rows": []})
    assert empty["s_per_call_median"] is None and empty["tokens_per_s"] is None


def test_ratios_are_the_first_backend_over_each_other() -> None:
    summaries = {k: backends.summarize(v) for k, v in RESULTS.items()}
    r = backends.ratios(summaries)
    assert list(r) == ["llama.cpp/transformers", "llama.cpp/server"]
    assert r["llama.cpp/transformers"]["s_per_call_median"] == 0.5
    assert r["llama.cpp/transformers"]["peak_rss_mb"] == round(500 / 1500, 3)
    assert r["llama.cpp/server"]["s_per_call_median"] == 2.0
    summaries["server"]["load_s"] = None
    assert backends.ratios(summaries)["llama.cpp/server"]["load_s"] is None
    assert backends.ratios({}) == {} and backends.ratios({"a": summaries["server"]}) == {}


def test_table_lists_backends_ratios_and_failures() -> None:
    summaries = {k: backends.summarize(v) for k, v in RESULTS.items()}
    table = backends.format_table(
        summaries, backends.ratios(summaries), "HEADER", {"gone": "worker exited with 1"}
    )
    lines = table.splitlines()
    assert lines[0] == "HEADER"
    assert lines[2].split() == ["llama.cpp", "transformers", "server"]
    correct = next(ln for ln in lines if ln.strip().startswith("correct"))
    assert correct.split()[1:] == ["1/3", "1/3", "1/3"]
    passes = next(ln for ln in lines if "forward passes" in ln)
    assert passes.split()[-1] == "-"  # the server reports none
    assert "25%" in next(ln for ln in lines if "reused" in ln)
    assert "llama.cpp/transformers" in table and "gone: failed: worker exited with 1" in table


def test_rows_come_from_the_bfcl_outcome_and_usage() -> None:
    out = Outcome("multiple", "multiple_7", "required", "auto", parsed=True, valid=True)
    out.seconds, out.tokens, out.forward_passes = 0.123456, 12, 5
    usage = SimpleNamespace(
        prompt_tokens=300, cached_prompt_tokens=40, generation_time_s=0.1, mask_time_s=0.02
    )
    row = backends.make_row("llama.cpp", out, usage)
    assert row.mask_s == 0.02
    assert (row.id, row.seconds, row.tokens, row.prompt_tokens) == ("multiple_7", 0.1235, 12, 300)
    assert (row.cached_prompt_tokens, row.generation_s, row.valid, row.correct) == (
        40,
        0.1,
        True,
        False,
    )
    none = backends.make_row("server", out, None)  # a turn that raised without a usage
    assert (none.prompt_tokens, none.cached_prompt_tokens, none.generation_s) == (0, 0, 0.0)


def test_arguments() -> None:
    a = backends.parse_args([])
    assert a.backends == ["llama.cpp", "transformers", "server"]
    assert (a.n, a.offset, a.model, a.max_tokens, a.threads, a.n_ctx) == (
        50,
        0,
        "smollm2",
        256,
        None,
        4096,
    )
    a = backends.parse_args(["--backends", "server, llama.cpp", "--threads", "2", "--json"])
    assert (a.backends, a.threads, a.json) == (["server", "llama.cpp"], 2, True)
    for bad in ("vllm", "server,server", ","):
        with pytest.raises(SystemExit):
            backends.parse_args(["--backends", bad])
    cmd = backends.server_command(Path("/m.gguf"), 8123, 4096, 2)
    assert cmd[1:3] == ["-m", "llama_cpp.server"] and "--n_threads_batch" in cmd
    assert "--n_threads" not in backends.server_command(Path("/m.gguf"), 8123, 4096, None)


def test_missing_data_stops_before_any_worker(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def no_worker(spec: Any) -> Any:
        raise AssertionError("a worker started")

    monkeypatch.setattr(backends, "run_worker", no_worker)
    monkeypatch.delenv("SDK_BFCL_DIR", raising=False)
    assert "backends" in USAGE
    with pytest.raises(SystemExit, match="--data DIR"):
        bench_main(["backends", "--n", "1"])
    with pytest.raises(SystemExit, match="holds no BFCL_v4_multiple.jsonl"):
        bench_main(["backends", "--data", str(tmp_path)])


def test_report_writes_jsonl_and_json_and_skips_the_plot(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` fails
    out, png = tmp_path / "rows.jsonl", tmp_path / "b.png"
    args = backends.parse_args(["--n", "3", "--jsonl", str(out), "--plot", str(png), "--json"])
    results = {**RESULTS, "broken": "worker exited with 1"}
    assert backends.report(args, results) == 1  # a backend failed
    captured = capsys.readouterr()
    lines = out.read_text().splitlines()
    assert len(lines) == 9 and json.loads(lines[-1])["backend"] == "server"
    assert "matplotlib is not installed" in captured.err and not png.exists()
    bench = json.loads(captured.out.splitlines()[-1].removeprefix("BENCH_JSON "))
    assert bench["failed"] == {"broken": "worker exited with 1"}
    assert list(bench["backends"]) == ["llama.cpp", "transformers", "server"]
    assert bench["ratios"]["llama.cpp/server"]["s_per_call_mean"] == 3.0


def test_worker_reports_a_backend_that_cannot_start(tmp_path: Path) -> None:
    """The server needs a GGUF file: the worker writes the error, nothing is started."""
    spec = {"backend": "server", "model": str(tmp_path), "n_ctx": 4096, "threads": None}
    spec_file, result = tmp_path / "spec.json", tmp_path / "result.json"
    spec_file.write_text(json.dumps(spec))
    assert backends.worker_main(str(spec_file), str(result)) == 0
    assert "needs a GGUF model" in json.loads(result.read_text())["error"]
    rss = backends.peak_rss_mb()
    assert rss is not None and rss > 0


def _bfcl_data(folder: Path, n: int) -> Path:
    fn = {
        "name": "math.f",
        "description": "A test function.",
        "parameters": {"type": "dict", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
    }
    qs = [{"id": f"multiple_{i}", "question": [[{"role": "user", "content": "Do it."}]],
           "function": [fn]} for i in range(n)]  # fmt: skip
    answers = [{"id": q["id"], "ground_truth": [{"math.f": {"a": [1]}}]} for q in qs]
    (folder / "BFCL_v4_multiple.jsonl").write_text("".join(json.dumps(q) + "\n" for q in qs))
    (folder / "BFCL_v4_multiple.answers.jsonl").write_text(
        "".join(json.dumps(a) + "\n" for a in answers)
    )
    return folder


def test_questions_run_as_the_bfcl_bench_runs_them(
    tmp_path: Path, smollm2_tokenizer: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """On a scripted model: `run_items` gives the bfcl bench's required-mode outcome for each
    question (`Runner.run_sdk` is `sdk_turn` without the usage) and the turn's usage."""
    from sdk.backends.test import TestModel, ToolCallScript
    from sdk.bench.bfcl import Options, Runner, load

    data = _bfcl_data(tmp_path, 2)
    script = [[ToolCallScript("math.f", {"a": 1})], [ToolCallScript("math.f", {"a": 2})]]
    spec = {"backend": "llama.cpp", "n": 2, "offset": 0, "max_tokens": 64, "data": str(data)}
    rows = backends.run_items(TestModel(script, tokenizer=smollm2_tokenizer), spec)
    assert [(r.id, r.parsed, r.valid, r.correct) for r in rows] == [
        ("multiple_0", True, True, True),
        ("multiple_1", True, True, False),
    ]
    assert all(r.prompt_tokens > 0 and r.tokens > 0 and r.error is None for r in rows), rows
    assert "[llama.cpp 2/2] multiple_1: V" in capsys.readouterr().err
    item = load("multiple", 1, 0, data)[0]
    runner = Runner(TestModel(script[:1], tokenizer=smollm2_tokenizer), Options(max_tokens=64))
    out = runner.run_sdk(item, "required", "auto")
    assert (out.correct, out.tokens, out.text) == (True, rows[0].tokens, rows[0].text)
