"""End-to-end generation speed: one tool call per prompt, constrained vs unconstrained vs XGrammar.

    python -m sdk.bench e2e [--n 20] [--model smollm2] [--plot docs/assets/bench/e2e.png]

Every mode runs the same prompts (BFCL "multiple" questions from the dev set, rendered with
the same chat template and tool list) through the same model, the same KV-cached decoding
loop and greedy decoding, so the differences are the constraint alone:

- ``ours``: our turn grammar for ``tool_choice="required"`` (one call), masks applied per
  token, forced continuations fast-forwarded (appended without sampling, one forward pass);
- ``ours-no-ff``: the same grammar with fast-forward off (to count the passes it saves);
- ``unconstrained``: no mask;
- ``xgrammar``: XGrammar's transformers logits processor (``xgrammar.contrib.hf``) over an
  equivalent grammar (the same envelope around the same call-body JSON Schema), called on
  the same logits as HF ``generate`` would call it.

Reported per mode: median wall seconds per call, tokens per call, tokens per second, forward
passes per call, mask time as a share of step time, and how many calls parsed and validated.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import dataclass, field
from typing import Any

MODES = ("ours", "ours-no-ff", "unconstrained", "xgrammar")


@dataclass
class Row:
    mode: str
    qid: str
    seconds: float = 0.0
    tokens: int = 0
    forward_passes: int = 0
    forced_tokens: int = 0
    mask_s: float = 0.0
    parsed: bool = False
    valid: bool = False
    error: str | None = None
    text: str = field(default="", repr=False)


def _score(text: str, tools: dict[str, Any]) -> tuple[bool, bool]:
    from sdk.decoding import HERMES

    calls = [c for c in HERMES.parse(text) if c.error is None]
    if not calls or calls[0].name not in tools:
        return False, False
    try:
        tools[calls[0].name].validate_args(calls[0].arguments)
    except Exception:
        return True, False
    return True, True


class _XgrammarMask:
    """XGrammar's HF logits processor, driven like `generate` drives it."""

    def __init__(self, tokenizer: Any, vocab_size: int) -> None:
        import xgrammar as xgr

        self.xgr = xgr
        self.info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab_size)
        self.compiler = xgr.GrammarCompiler(self.info, max_threads=1)

    def processor(self, body_schema: dict[str, Any]) -> Any:
        from xgrammar.contrib.hf import LogitsProcessor

        from sdk.decoding import HERMES

        xgr = self.xgr
        body = xgr.Grammar.from_json_schema(
            json.dumps(body_schema),
            any_whitespace=False,
            separators=HERMES.style.separators,  # the layout our grammar and prompt use
        )
        grammar = xgr.Grammar.concat(
            xgr.Grammar.from_ebnf('root ::= "<tool_call>\\n"'),
            body,
            xgr.Grammar.from_ebnf('root ::= "\\n</tool_call>"'),
        )
        return LogitsProcessor(self.compiler.compile_grammar(grammar))


def _run_xgrammar(
    backend: Any, request: Any, xmask: _XgrammarMask, body_schema: dict[str, Any], max_tokens: int
) -> tuple[str, int, int, float]:
    import torch

    proc = xmask.processor(body_schema)
    session = backend.begin_turn(request)
    eos = backend.index.eos_ids
    ids = list(session.prompt_ids)
    out: list[int] = []
    passes = 0
    mask_s = 0.0
    try:
        logits = session.prefill()
        passes += 1
        while len(out) < max_tokens:
            t0 = time.perf_counter()
            scores = proc(torch.tensor([ids], dtype=torch.long), logits.float()[None, :])
            mask_s += time.perf_counter() - t0
            tid = int(torch.argmax(scores[0]).item())
            if tid in eos or bool(torch.isneginf(scores).all()):
                break
            out.append(tid)
            ids.append(tid)
            logits = session.feed([tid])
            passes += 1
    finally:
        session.close()
    return backend.tokenizer.decode(out), len(out), passes, mask_s


def _parse_args(argv: list[str] | None) -> tuple[argparse.Namespace, list[str]]:
    """The arguments, and the modes asked for (unknown ones are a usage error)."""
    parser = argparse.ArgumentParser(
        prog="python -m sdk.bench e2e",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--data", help="the BFCL v4 dev split's folder (default $SDK_BFCL_DIR)")
    parser.add_argument("--n", type=int, default=20, help="first N BFCL questions (default 20)")
    parser.add_argument("--offset", type=int, default=0)
    parser.add_argument("--model", default="smollm2", help="smollm2, gemma3, .gguf or HF dir")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--plot", default=None, help="write a bar chart PNG here")
    parser.add_argument("--jsonl", default=None, help="one line per (question, mode)")
    args = parser.parse_args(argv)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    bad = [m for m in modes if m not in MODES]
    if bad:
        parser.error(f"unknown modes {bad}; choose from {list(MODES)}")
    return args, modes


def _xgrammar_mask(backend: Any, modes: list[str]) -> _XgrammarMask | None:
    """XGrammar's masks for the "xgrammar" mode; when it is unavailable the mode is dropped
    from `modes` (peers are optional)."""
    if "xgrammar" not in modes:
        return None
    try:
        vocab = int(backend.model.get_output_embeddings().weight.shape[0])
        return _XgrammarMask(backend.tokenizer, vocab)
    except Exception as e:  # peers are optional
        print(f"e2e: xgrammar unavailable, skipped: {e}", file=sys.stderr)
        modes.remove("xgrammar")
        return None


def _question(q: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    """A BFCL question's tools by name and its turn request (a tool call required)."""
    from sdk.decoding import TurnRequest
    from sdk.messages import Message

    from .bfcl import RawTool

    tools = {t.name: t for t in (RawTool.from_bfcl(f) for f in q["function"])}
    prompt = q["question"][0][-1]["content"]
    request = TurnRequest(
        messages=[Message.user(prompt)], tools=list(tools.values()), tool_choice="required"
    )
    return tools, request


def _run_mode(
    mode: str,
    qid: str,
    tools: dict[str, Any],
    request: Any,
    backend: Any,
    xmask: _XgrammarMask | None,
    max_tokens: int,
) -> Row:
    """One question in one mode, timed and scored (an error is reported in the row)."""
    from sdk.decoding import HERMES, generate_turn
    from sdk.decoding.turn_grammar import build_turn_grammar, call_body_schema
    from sdk.engine.matcher import Matcher

    row = Row(mode, qid)
    start = time.perf_counter()
    try:
        if mode == "xgrammar":
            assert xmask is not None
            body = call_body_schema(list(tools.values()))
            row.text, row.tokens, row.forward_passes, row.mask_s = _run_xgrammar(
                backend, request, xmask, body, max_tokens
            )
        else:
            matcher = None
            if mode != "unconstrained":
                grammar = build_turn_grammar(
                    list(tools.values()), "required", fmt=HERMES, parallel_tool_calls=False
                )
                assert grammar.compiled is not None
                matcher = Matcher(grammar.compiled, backend.index)
            turn = generate_turn(
                backend.begin_turn(request),
                matcher,
                backend.index,
                backend.tokenizer,
                max_tokens=max_tokens,
                fast_forward=mode == "ours",
            )
            row.text, row.tokens = turn.text, turn.usage.completion_tokens
            row.forward_passes = turn.usage.forward_passes
            row.forced_tokens = turn.usage.forced_tokens
            row.mask_s = turn.usage.mask_time_s
    except Exception as e:  # a refused schema etc.: reported, never fatal
        row.error = f"{type(e).__name__}: {e}"[:300]
    row.seconds = time.perf_counter() - start
    row.parsed, row.valid = _score(row.text, tools)
    return row


def run(argv: list[str] | None = None) -> dict[str, Any]:
    args, modes = _parse_args(argv)

    from sdk.backends.transformers import TransformersModel

    from .bfcl import _load, data_dir

    t0 = time.perf_counter()
    backend = TransformersModel.from_pretrained(args.model)
    print(f"model {args.model} loaded in {time.perf_counter() - t0:.1f}s", file=sys.stderr)
    xmask = _xgrammar_mask(backend, modes)

    rows: list[Row] = []
    log = open(args.jsonl, "w") if args.jsonl else None  # noqa: SIM115 - closed below
    data = _load(args.n, args.offset, data_dir(args.data))
    # One warm-up question per mode so model and library warm-up is not billed to the first.
    for k, (q, _a) in enumerate([data[0], *data]):
        tools, request = _question(q)
        for mode in modes:
            row = _run_mode(mode, q["id"], tools, request, backend, xmask, args.max_tokens)
            if k == 0:
                continue  # warm-up
            rows.append(row)
            if log is not None:
                log.write(json.dumps(row.__dict__) + "\n")
                log.flush()
        if k:
            line = " ".join(
                f"{r.mode}={r.seconds:.2f}s/{r.forward_passes}p" for r in rows[-len(modes) :]
            )
            print(f"[{k}/{len(data)}] {q['id']}: {line}", file=sys.stderr, flush=True)
    if log is not None:
        log.close()
    summary = summarize(rows, modes)
    print(format_table(summary, args))
    if args.plot:
        plot(args.plot, summary)
        print(f"e2e: plot written to {args.plot}", file=sys.stderr)
    report = {"bench": "e2e", "model": args.model, "n": len(data), "modes": summary}
    print("BENCH_JSON " + json.dumps(report, separators=(",", ":")), flush=True)
    return report


def summarize(rows: list[Row], modes: list[str]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    by_q: dict[str, dict[str, Row]] = {}
    for r in rows:
        by_q.setdefault(r.qid, {})[r.mode] = r
    for mode in modes:
        rs = [r for r in rows if r.mode == mode]
        if not rs:
            continue
        secs = [r.seconds for r in rs]
        toks = sum(r.tokens for r in rs)
        step_s = sum(r.seconds for r in rs)
        s: dict[str, Any] = {
            "calls": len(rs),
            "wall_p50_s": round(statistics.median(secs), 3),
            "wall_mean_s": round(statistics.fmean(secs), 3),
            "tokens_per_call": round(toks / len(rs), 1),
            "tokens_per_s": round(toks / step_s, 1) if step_s else 0.0,
            "forward_passes_per_call": round(statistics.fmean(r.forward_passes for r in rs), 1),
            "forced_tokens_per_call": round(statistics.fmean(r.forced_tokens for r in rs), 1),
            "mask_share": round(sum(r.mask_s for r in rs) / step_s, 4) if step_s else 0.0,
            "parsed": round(sum(r.parsed for r in rs) / len(rs), 3),
            "valid": round(sum(r.valid for r in rs) / len(rs), 3),
            "errors": sum(r.error is not None for r in rs),
        }
        pairs = [
            (q[mode].seconds, q["unconstrained"].seconds)
            for q in by_q.values()
            if mode in q and "unconstrained" in q
        ]
        if pairs and mode != "unconstrained":
            ratios = [a / b for a, b in pairs if b > 0]
            s["wall_ratio_vs_unconstrained_p50"] = round(statistics.median(ratios), 3)
            s["calls_no_slower_than_unconstrained"] = round(
                sum(a <= b for a, b in pairs) / len(pairs), 3
            )
            # An unconstrained small model rarely stops at the end of a call, so also compare
            # with what it would need to write the same number of tokens at its own speed.
            same = [
                q[mode].seconds
                / (q[mode].tokens * q["unconstrained"].seconds / q["unconstrained"].tokens)
                for q in by_q.values()
                if mode in q
                and "unconstrained" in q
                and q[mode].tokens
                and q["unconstrained"].tokens
            ]
            if same:
                s["wall_ratio_vs_unconstrained_same_tokens_p50"] = round(statistics.median(same), 3)
        out[mode] = s
    if "ours" in out and "ours-no-ff" in out:
        saved = (
            out["ours-no-ff"]["forward_passes_per_call"] - out["ours"]["forward_passes_per_call"]
        )
        out["ours"]["passes_saved_per_call"] = round(saved, 1)
    return out


def format_table(summary: dict[str, dict[str, Any]], args: argparse.Namespace) -> str:
    cols = [
        ("wall_p50_s", "s/call p50"),
        ("tokens_per_call", "tokens"),
        ("tokens_per_s", "tok/s"),
        ("forward_passes_per_call", "passes"),
        ("mask_share", "mask %"),
        ("parsed", "parsed"),
        ("valid", "valid"),
        ("wall_ratio_vs_unconstrained_p50", "÷ unconstr."),
        ("wall_ratio_vs_unconstrained_same_tokens_p50", "÷ same-len"),
    ]
    lines = [
        f"e2e: {args.n} BFCL questions from #{args.offset}, model {args.model}, greedy, "
        f"max_tokens={args.max_tokens}, one tool call (required)",
        f"{'mode':<15}" + "".join(f"{title:>13}" for _, title in cols),
    ]
    for mode, s in summary.items():
        cells = []
        for key, _ in cols:
            v = s.get(key, "")
            if key == "mask_share" and v != "":
                v = f"{100 * v:.1f}%"
            elif key in ("parsed", "valid") and v != "":
                v = f"{100 * v:.0f}%"
            cells.append(f"{v!s:>13}")
        lines.append(f"{mode:<15}" + "".join(cells))
    if "ours" in summary and "passes_saved_per_call" in summary["ours"]:
        o = summary["ours"]
        lines.append(
            f"fast-forward: {o['passes_saved_per_call']} forward passes saved per call "
            f"({o['forced_tokens_per_call']} forced tokens per call); ours no slower than "
            f"unconstrained on {100 * o.get('calls_no_slower_than_unconstrained', 0):.0f}% of calls"
        )
    return "\n".join(lines)


def plot(path: str, summary: dict[str, dict[str, Any]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    modes = list(summary)
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.6))
    panels = [
        ("wall_p50_s", "seconds per call (median)"),
        ("forward_passes_per_call", "forward passes per call"),
        ("tokens_per_s", "tokens per second"),
    ]
    colors = {
        "ours": "#2b8a3e",
        "ours-no-ff": "#8ce99a",
        "unconstrained": "#868e96",
        "xgrammar": "#1971c2",
    }
    for ax, (key, title) in zip(axes, panels, strict=True):
        vals = [summary[m].get(key, 0) for m in modes]
        ax.bar(modes, vals, color=[colors.get(m, "#999") for m in modes])
        ax.set_title(title, fontsize=10)
        ax.tick_params(axis="x", labelrotation=20, labelsize=8)
        for i, v in enumerate(vals):
            ax.text(i, v, f"{v:g}", ha="center", va="bottom", fontsize=8)
    fig.suptitle(
        "One tool call, SmolLM2-135M on CPU, greedy (python -m sdk.bench e2e)", fontsize=10
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    run(argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
