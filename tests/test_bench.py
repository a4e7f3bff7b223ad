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
        (True, [1, 2, 3]),  # valid, accepted
        (False, [1, 3]),  # invalid, rejected at token 1
        (False, [1, 2]),  # invalid, not accepting at the end
        (True, [1, 2]),  # "valid" but incomplete: a validation error
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
    base = {
        "status": "pass",
        "validation_errors": 0,
        "invalidation_errors": 0,
        "exc_type": None,
        "n_tests": 1,
        "wall_s": 0.1,
    }
    results = [
        {**base, "ttfm_ms": 2.0},
        {**base, "status": "crash", "exc_type": "KeyError", "ttfm_ms": None},
    ]
    s = _stats.summarize_engine(results, [np.array([1.0, 3.0])], 100.0, 50.0)
    assert s["passing"] == 1 and s["crashes"] == {"count": 1, "types": {"KeyError": 1}}
    assert s["tbm_us"]["p50"] == 2.0 and s["ttfm_ms"]["p50"] == 2.0
    peer = {**s, "tbm_us": {**s["tbm_us"], "p50": 4.0}}
    r = _stats.ratios({"ours": s, "llguidance": peer})
    assert r["ours/llguidance"]["tbm_p50"] == 0.5
    assert "llguidance" in _stats.format_table({"ours": s, "llguidance": peer}, r)


def test_full_collections_are_counted_per_schema_and_summed() -> None:
    """A forced full collection is counted with its time; younger ones are not; the summary
    sums the schemas' counts (a TTFM outlier can then be matched to a collection)."""
    import gc

    from sdk.bench.maskbench import FullCollections

    counter = FullCollections().install()
    try:
        gc.collect(0)
        assert counter.count == 0
        gc.collect()
        gc.collect(2)
        assert counter.count == 2 and counter.seconds > 0.0
    finally:
        counter.uninstall()
    gc.collect()
    assert counter.count == 2  # uninstalled
    base = {"status": "pass", "validation_errors": 0, "invalidation_errors": 0}
    base |= {"exc_type": None, "n_tests": 1, "wall_s": 0.1, "ttfm_ms": 1.0}
    results = [{**base, "gc_full": 1, "gc_full_s": 0.25}, {**base, "gc_full": 0}, base]
    s = _stats.summarize_engine(results, [np.array([1.0])], None, None)
    assert (s["gc_full"], s["gc_full_s"]) == (1, 0.25)
    assert "full GCs (count, s)" in _stats.format_table({"ours": s}, {})


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
    _write(
        tmp_path,
        "b_obj.json",
        {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
        [(True, {"name": "bo"}), (False, {})],
    )
    # The second test's flag is deliberately wrong: "blue" is not in the enum.
    _write(tmp_path, "c_enum.json", {"enum": ["red", "green"]}, [(True, "red"), (True, "blue")])
    details = tmp_path / "details.jsonl"
    bench_main(
        [
            "maskbench",
            str(tmp_path),
            "--engines",
            "llguidance",
            "--quiet",
            "--json-out",
            str(details),
        ]
    )
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("BENCH_JSON ")]
    assert len(lines) == 1
    report = json.loads(lines[0][len("BENCH_JSON ") :])
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
        Row(
            "ours",
            "q1",
            seconds=1.0,
            tokens=40,
            forward_passes=8,
            forced_tokens=30,
            mask_s=0.05,
            parsed=True,
            valid=True,
        ),
        Row("ours-no-ff", "q1", seconds=4.0, tokens=40, forward_passes=41),
        Row("unconstrained", "q1", seconds=8.0, tokens=80, forward_passes=80),
        Row(
            "ours",
            "q2",
            seconds=3.0,
            tokens=20,
            forward_passes=6,
            forced_tokens=10,
            parsed=True,
            valid=False,
        ),
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


# ------------------------------------------------------------------------------------ BFCL


def _bfcl_fn(name: str = "f") -> dict[str, Any]:
    return {
        "name": name,
        "description": "A test function.",
        "parameters": {
            "type": "dict",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a"],
        },
    }


def _bfcl_item(category: str, truth: list[dict[str, Any]], *names: str) -> Any:
    from sdk.bench.bfcl import Item, RawTool

    tools = {n: RawTool.from_bfcl(_bfcl_fn(n)) for n in (names or ("f",))}
    return Item(category, f"{category}_0", "Do it.", tools, truth)


def test_bfcl_missing_questions_offer_every_function_but_the_expected_one(
    tmp_path: Path,
) -> None:
    from sdk.bench.bfcl import Outcome, load, score

    fns = [_bfcl_fn("f"), _bfcl_fn("g"), _bfcl_fn("h")]
    question = {"id": "multiple_0", "question": [[{"role": "user", "content": "Do f."}]]}
    (tmp_path / "BFCL_v4_multiple.jsonl").write_text(json.dumps({**question, "function": fns}))
    truth = {"id": "multiple_0", "ground_truth": [{"g": {"a": [1]}}]}
    (tmp_path / "BFCL_v4_multiple.answers.jsonl").write_text(json.dumps(truth))
    (multiple,) = load("multiple", 5, data=tmp_path)
    (missing,) = load("missing", 5, data=tmp_path)
    assert list(multiple.tools) == ["f", "g", "h"] and multiple.truth
    assert (missing.category, list(missing.tools), missing.truth) == ("missing", ["f", "h"], [])
    assert score(Outcome(), missing, []).correct
    assert not score(Outcome(), missing, [("f", {"a": 1})]).correct


def test_bfcl_parallel_matching_is_one_to_one_in_any_order() -> None:
    from sdk.bench.bfcl import match_calls

    truth = [{"f": {"a": [1], "b": [2, ""]}}, {"f": {"a": [1], "b": [""]}}]
    full, bare = ("f", {"a": 1, "b": 2}), ("f", {"a": 1})
    # `bare` fits both expected calls: a greedy first-fit would take the first and fail.
    assert match_calls([bare, full], truth)
    assert match_calls([full, bare], truth)
    assert not match_calls([full, full], truth)  # right count, second expected call unmatched
    assert not match_calls([bare], truth)  # too few
    assert not match_calls([bare, full, bare], truth)  # too many
    assert not match_calls([("g", {"a": 1}), bare], truth)


def test_bfcl_scoring_per_category() -> None:
    from sdk.bench.bfcl import Outcome, _mark_truncated, score

    par = _bfcl_item("parallel", [{"f": {"a": [1]}}, {"f": {"a": [2]}}])
    o = score(Outcome(), par, [("f", {"a": 2}), ("f", {"a": 1})])
    assert (o.parsed, o.valid, o.count_ok, o.all_correct, o.correct, o.n_calls) == (
        True,
        True,
        True,
        True,
        True,
        2,
    )
    o = score(Outcome(), par, [("f", {"a": 2}), ("f", {"a": "1"})])  # a string: invalid
    assert (o.parsed, o.valid, o.count_ok, o.all_correct) == (True, False, True, False)
    o = score(Outcome(), par, [("f", {"a": 2}), ("", None)])  # an undecodable call
    assert (o.parsed, o.count_ok, o.correct, o.called) == (False, True, False, True)
    o = score(Outcome(), par, [("f", {"a": 1})])
    assert (o.valid, o.count_ok, o.correct) == (True, False, False)

    irr = _bfcl_item("irrelevance", [])
    assert score(Outcome(), irr, []).correct
    assert not score(Outcome(), irr, [("f", {"a": 1})]).correct
    cut = Outcome()
    _mark_truncated(cut, '<tool_call>\n{"name": "f", "arguments": {"a":' + " \n" * 6, 1)
    cut = score(cut, irr, [])  # a call cut short by max_tokens is still a call
    assert cut.called and not cut.correct and cut.whitespace_run and cut.calls_lost == 1
    indented = Outcome()
    _mark_truncated(indented, '<tool_call>\n{\n    "name": "f",\n' + " " * 15, 1)
    assert indented.truncated and not indented.whitespace_run

    mul = _bfcl_item("multiple", [{"g": {"a": [3]}}], "f", "g")
    assert score(Outcome(), mul, [("g", {"a": 3}), ("f", {"a": 1})]).correct  # the first call
    o = score(Outcome(), mul, [("f", {"a": 3})])
    assert (o.parsed, o.valid, o.correct) == (True, True, False)
    o = score(Outcome(), mul, [("h", {"a": 3})])  # not offered
    assert (o.parsed, o.called, o.correct) == (False, True, False)


def test_bfcl_summary_and_tables() -> None:
    from sdk.bench.bfcl import Outcome, format_tables, summarize

    rows = [
        Outcome(
            "parallel",
            "p0",
            "required",
            "spaced",
            parsed=True,
            valid=True,
            correct=True,
            called=True,
            count_ok=True,
            all_correct=True,
            calls_checked=2,
            calls_noncanonical=1,
            seconds=1.0,
            tokens=40,
        ),
        Outcome(
            "parallel",
            "p1",
            "required",
            "spaced",
            called=True,
            truncated=True,
            whitespace_run=True,
            calls_lost=2,
            calls_checked=None,
            seconds=3.0,
            tokens=192,
        ),
        Outcome("parallel", "p0", "auto", "spaced", calls_checked=None),
        Outcome("irrelevance", "i0", "auto", "spaced", correct=True, calls_checked=0),
    ]
    report = summarize(rows)
    req = report["parallel"]["required/spaced"]
    assert (req["n"], req["all_correct"], req["count_ok"], req["called"]) == (2, 0.5, 0.5, 1.0)
    assert (req["calls_lost"], req["calls_lost_whitespace"], req["truncated"]) == (2, 2, 1)
    assert req["noncanonical"] == 0.5 and req["calls_checked"] == 2
    assert req["s_per_question"] == 2.0 and req["tokens_per_question"] == 116.0
    assert report["parallel"]["auto/spaced"]["noncanonical"] is None
    assert report["irrelevance"]["auto/spaced"]["no_call"] == 1.0
    table = format_tables(report, "head")
    lines = table.splitlines()
    row = next(ln for ln in lines if ln.startswith("required"))
    assert "50%" in row and "2/2" in row
    assert "n/a" in next(ln for ln in lines if ln.startswith("auto"))
    assert "no call" in table and "all ok" in table


def test_bfcl_data_is_an_argument(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The benches name no machine's path: the data folder is `--data` or `$SDK_BFCL_DIR`,
    and without either (or with a folder that is not the split) they stop with a message."""
    from sdk.bench.bfcl import QUESTIONS, data_dir

    monkeypatch.delenv("SDK_BFCL_DIR", raising=False)
    with pytest.raises(SystemExit, match="--data DIR"):
        data_dir()
    with pytest.raises(SystemExit, match=f"holds no {QUESTIONS}"):
        data_dir(tmp_path)
    (tmp_path / QUESTIONS).write_text("")
    assert data_dir(str(tmp_path)) == tmp_path
    monkeypatch.setenv("SDK_BFCL_DIR", str(tmp_path))
    assert data_dir() == tmp_path


def test_bfcl_arguments() -> None:
    from sdk.bench.bfcl import parse_args

    a = parse_args([])
    assert a.categories == ["multiple", "parallel", "irrelevance"]
    assert a.modes == ["required", "auto", "unconstrained", "xgrammar"]
    assert parse_args(["--modes", "required,best,exact"]).modes == ["required", "best", "exact"]
    assert (a.styles, a.max_tokens, a.auto_call_bias, a.reasoning_tokens) == (
        ["auto"],
        192,
        None,
        None,
    )
    a = parse_args(
        [
            "--categories",
            "parallel",
            "--styles",
            "compact,spaced",
            "--auto-call-bias",
            "-1.5",
            "--reasoning-tokens",
            "32",
            "--json",
        ]
    )
    assert (a.categories, a.styles, a.auto_call_bias, a.reasoning_tokens, a.json) == (
        ["parallel"],
        ["compact", "spaced"],
        -1.5,
        32,
        True,
    )
    for bad in (["--categories", "simple"], ["--modes", "ours"], ["--styles", "tight"]):
        with pytest.raises(SystemExit):
            parse_args(bad)


def test_maskbench_member_order_and_a_plot_that_cannot_be_drawn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Members out of declaration order fail by default and pass with `--member-order any`;
    without matplotlib the run still prints its numbers (BENCH_JSON) and says why no plot."""
    import sys

    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
        "required": ["a", "b"],
        "additionalProperties": False,
    }
    _write(tmp_path, "swap.json", schema, [(True, {"b": "x", "a": 1}), (False, {"a": 1})])
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` fails
    passing = {}
    for order in ("declared", "any"):
        plot = tmp_path / f"{order}.png"
        argv = ["maskbench", str(tmp_path), "--engines", "ours", "--quiet"]
        bench_main([*argv, "--member-order", order, "--plot", str(plot)])
        captured = capsys.readouterr()
        lines = [ln for ln in captured.out.splitlines() if ln.startswith("BENCH_JSON ")]
        report = json.loads(lines[0][len("BENCH_JSON ") :])
        assert report["member_order"] == order
        passing[order] = report["engines"]["ours"]["passing"]
        assert "matplotlib is not installed" in captured.err and not plot.exists()
    assert passing == {"declared": 0, "any": 1}


def test_bfcl_plot_without_matplotlib(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import sys

    from sdk.bench.bfcl import Outcome, plot, summarize

    report = summarize([Outcome("multiple", "m0", "required", "auto", correct=True)])
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` fails
    out = tmp_path / "bfcl.png"
    assert plot(str(out), report, "t") is False
    assert "matplotlib is not installed" in capsys.readouterr().err
    assert not out.exists()


def _split_token(ids: list[int], index: Any, start: int) -> list[int]:
    """`ids` with its first multi-byte token at or after `start` spelled by two tokens."""
    by_bytes: dict[bytes, int] = {}
    for tid, piece in enumerate(index.token_bytes):
        by_bytes.setdefault(piece, tid)
    for i in range(start, len(ids)):
        piece = index.token_bytes[ids[i]]
        if len(piece) >= 2 and piece[:1] in by_bytes and piece[1:] in by_bytes:
            return [*ids[:i], by_bytes[piece[:1]], by_bytes[piece[1:]], *ids[i + 1 :]]
    raise AssertionError("no token to split")


def test_bfcl_noncanonical_tokens(smollm2_tokenizer: Any, smollm2_index: Any) -> None:
    from sdk.bench._bfcl_peers import noncanonical_calls

    def enc(text: str) -> list[int]:
        return list(smollm2_tokenizer.encode(text, add_special_tokens=False))

    call = '<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>'
    tb = smollm2_index.token_bytes
    assert noncanonical_calls(enc(call), tb, enc) == [False]
    assert noncanonical_calls(_split_token(enc(call), smollm2_index, 0), tb, enc) == [True]
    # Only the call spans count: odd tokens in the text around them do not.
    prose = enc("Sure thing.\n")
    odd_prose = _split_token(prose, smollm2_index, 0)
    two = [*odd_prose, *enc(call), *enc("\n"), *enc(call)]
    assert noncanonical_calls(two, tb, enc) == [False, False]
    bad_second = [*odd_prose, *enc(call), *enc("\n"), *_split_token(enc(call), smollm2_index, 0)]
    assert noncanonical_calls(bad_second, tb, enc) == [False, True]
    assert noncanonical_calls(enc("no call here"), tb, enc) == []


def test_bfcl_xgrammar_driver_on_a_scripted_model(smollm2_tokenizer: Any) -> None:
    """The driver follows XGrammar's mask: a scripted reply in the grammar's layout comes out
    whole; the other layout is refused; a single-call grammar stops after the first call."""
    pytest.importorskip("xgrammar")
    from sdk.backends.test import TestModel, ToolCallScript
    from sdk.bench._bfcl_peers import XgrammarDriver
    from sdk.decoding import HERMES, TurnRequest
    from sdk.decoding.call_style import SPACED
    from sdk.decoding.turn_grammar import call_body_schema
    from sdk.messages import Message

    item = _bfcl_item("parallel", [])
    tools = list(item.tools.values())
    fmt = HERMES.with_style(SPACED)
    two = [ToolCallScript("f", {"a": 1}), ToolCallScript("f", {"a": 2, "b": 3})]
    m = TestModel([two] * 3, tokenizer=smollm2_tokenizer)
    request = TurnRequest([Message.user("x")], tools, tool_choice="required", fmt=fmt)
    driver = XgrammarDriver(m)
    body = call_body_schema(tools)
    turn = driver.run(m, request, driver.compile(body, (", ", ": "), True), 96)
    assert (turn.finish, turn.error) == ("stop", None)
    assert turn.text == fmt.render_call("f", {"a": 1}) + "\n" + fmt.render_call(
        "f", {"a": 2, "b": 3}
    )
    assert turn.forward_passes == len(turn.token_ids) + 1  # no fast-forward
    turn = driver.run(m, request, driver.compile(body, (", ", ": "), False), 96)
    assert (turn.finish, turn.text) == ("stop", fmt.render_call("f", {"a": 1}))
    turn = driver.run(m, request, driver.compile(body, (",", ":"), True), 96)
    assert turn.finish == "error" and turn.text == '<tool_call>\n{"name":'


def test_bfcl_runner_modes_on_a_scripted_model(smollm2_tokenizer: Any) -> None:
    """Every mode on scripted replies: scoring, truncation, and runs shared between styles."""
    pytest.importorskip("xgrammar")
    from sdk.backends.test import TestModel, ToolCallScript
    from sdk.bench.bfcl import Options, Runner

    item = _bfcl_item("parallel", [{"f": {"a": [1]}}, {"f": {"a": [2]}}])
    two = [ToolCallScript("f", {"a": 2}), ToolCallScript("f", {"a": 1})]
    m = TestModel([two] * 4, tokenizer=smollm2_tokenizer)
    runner = Runner(m, Options(max_tokens=96), xgrammar=True)
    outs = runner.run_item(item, ["required", "unconstrained", "xgrammar"], ["spaced", "auto"])
    assert [(o.mode, o.style) for o in outs] == [
        ("required", "spaced"),
        ("unconstrained", "spaced"),
        ("xgrammar", "spaced"),
        ("required", "auto"),
        ("unconstrained", "auto"),
        ("xgrammar", "auto"),
    ]
    assert all(o.all_correct and o.n_calls == 2 and o.error is None for o in outs), outs
    # SmolLM2's template has no tool support: auto resolves to spaced, the same prompt.
    assert [o.reused_from for o in outs] == [None, None, None, None, "spaced", "spaced"]
    assert outs[1].calls_checked == 2 and outs[1].calls_noncanonical == 0
    # max_tokens runs out inside the second call: it is lost, the first one stands.
    from sdk.decoding import HERMES
    from sdk.decoding.call_style import SPACED

    first = HERMES.with_style(SPACED).render_call("f", {"a": 2}) + "\n<tool_call>\n{"
    budget = len(smollm2_tokenizer.encode(first, add_special_tokens=False)) + 2
    m = TestModel([two], tokenizer=smollm2_tokenizer)
    [cut] = Runner(m, Options(max_tokens=budget)).run_item(item, ["required"], ["spaced"])
    assert cut.truncated and cut.calls_lost == 1 and cut.n_calls == 1 and cut.called
    assert not cut.all_correct and cut.tokens < budget
    assert first.startswith(cut.text) and cut.text.endswith("</tool_call>")


def test_bfcl_best_mode_against_required_on_a_scripted_model(smollm2_tokenizer: Any) -> None:
    """The best mode runs the search (its scripted call is the most likely one), the turns
    are scored under the model (`--logprobs`), and the comparison line names both modes."""
    from sdk.backends.test import TestModel, ToolCallScript
    from sdk.bench.bfcl import Options, Runner, _search_lines

    item = _bfcl_item("multiple", [{"f": {"a": [1]}}])
    m = TestModel([[ToolCallScript("f", {"a": 1})]] * 8, tokenizer=smollm2_tokenizer)
    runner = Runner(m, Options(max_tokens=96, logprobs=True, warm=True))
    outs = runner.run_item(item, ["required", "best"], ["spaced"])
    assert [o.correct for o in outs] == [True, True], outs
    assert outs[0].token_ids == outs[1].token_ids and outs[0].logprob is not None
    assert outs[1].logprob == outs[0].logprob
    [line] = _search_lines(outs)
    assert line.startswith("best vs required, multiple/spaced, 1 questions: correct 1 vs 1")
    assert "log p >= required's on 1/1 (0 higher)" in line


def test_concurrency_bench_compares_the_modes_on_the_real_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`python -m sdk.bench concurrency`: both modes per wave size, outputs compared, the KV
    memory a row adds, and a soak that leaves the batch empty."""
    out = tmp_path / "concurrency.jsonl"
    argv = ["concurrency", "--runs", "2", "--max-tokens", "48", "--soak", "2"]
    assert bench_main([*argv, "--json-out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["mode"], r["runs"]) for r in rows] == [("one-at-a-time", 2), ("batched", 2)]
    assert rows[-1]["identical"] == "2/2" and rows[-1]["speedup"] > 0
    text = capsys.readouterr().out
    assert "KV memory: peak" in text and "soak: 2 runs" in text
    assert "'rows': 0" in text  # the soak's batch emptied


def test_turns_bench_pays_no_schema_compile(capsys: pytest.CaptureFixture[str]) -> None:
    """Tools defined by `@tool` (here `Tool.from_model`) have their pieces: the turn grammars
    built over them compile no schema, however often the turn cache is emptied."""
    assert bench_main(["turns", "--tools", "3", "--repeats", "2", "--json"]) == 0
    out = capsys.readouterr().out
    got = json.loads(out.split("BENCH_JSON ", 1)[1])
    assert got["tools"] == 3 and got["repeats"] == 2 and got["schema_compiles"] == 0
    assert got["median_ms"] > 0 and got["lark_chars"] > 0
