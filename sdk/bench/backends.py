"""The SDK's local backends and a llama.cpp server side by side, on the same BFCL questions.

    python -m sdk.bench backends [--backends llama.cpp,transformers,server] [--n 50]
        [--offset 0] [--data DIR] [--model smollm2|PATH.gguf] [--max-tokens 256]
        [--threads N] [--n-ctx 4096] [--jsonl OUT] [--plot OUT.png] [--json]

Which backend should an app run a GGUF model on? Each backend answers the first N BFCL v4
dev "multiple" questions (from --offset; the folder is `--data DIR` or `$SDK_BFCL_DIR`)
exactly as `python -m sdk.bench bfcl --modes required` does (its `Runner`): one turn of
`Agent(model, tools=<the offered functions>, tool_choice="required", max_tokens=...)`, greedy,
scored the same way (parsed: a call of an offered function; valid: its arguments validate;
correct: BFCL's AST match). The backends:

- llama.cpp: `LlamaCppModel(path)`, the quantized GGUF run in process under our masks;
- llama.cpp-reproducible (run when named): `LlamaCppModel(path, reproducible=True)`, logits
  that do not depend on the cache's history, prompts in decodes of under 64 tokens;
- transformers: `TransformersModel.from_pretrained(path)` (the GGUF de-quantized to float32);
- server: `python -m llama_cpp.server --model PATH --n_ctx N` on a free loopback port, driven
  by `OpenAIChatModel(url, constraint="gbnf")`: our turn grammar sent as GBNF, llama.cpp's
  own sampler enforcing it.

Each backend runs in a worker subprocess of its own, one after another, so that its load
time and memory are its own. Reported per backend:

- load (s): constructing the model with its tokenizer (server: from its start until it
  answers `GET /models`); the tokenizer index (disk-cached) is loaded after, untimed;
- seconds per call (median, mean): the turn's wall time, the agent's construction included;
- generated tokens / s: all completion tokens over all `usage.generation_time_s` (server:
  its HTTP round trips);
- prompt tokens reused: the share of prompt tokens reported as taken from the backend's KV
  cache (`usage.cached_prompt_tokens`; llama_cpp.server reports none, although it keeps the
  last prompt's cache); forward passes and mask seconds (`usage.mask_time_s`, part of the
  generation time) per call (a server reports neither: "-");
- peak RSS (MB): the worker's own peak (`VmHWM`) for the in-process backends, the server
  process's (its `VmHWM`, read before it is stopped) for the server;
- correct, parsed, valid: counts of n.

Ratios are the first backend's number over each other's (seconds per call llama.cpp /
transformers < 1: llama.cpp is faster). `--threads N` sets n_threads and n_threads_batch of
llama.cpp and the server and `num_threads` of transformers (default: each backend's own; the
server's own is half the cores for one-token steps). `--n-ctx` is the context window of
llama.cpp and the server. `--jsonl` writes one line per (backend, question), `--json` a
final BENCH_JSON line, `--plot` bars of seconds per call and peak RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ._stats import peak_rss_mb, pyplot_or_note
from .bfcl import DATA_ENV, Outcome, data_dir

BACKENDS = ("llama.cpp", "transformers", "server", "llama.cpp-reproducible")
DEFAULT_BACKENDS = BACKENDS[:3]
SERVER_TIMEOUT_S = 180.0  # the server's start: interpreter, FastAPI, the model


@dataclass
class Row:
    """One (backend, question) run: a `--jsonl` line."""

    backend: str
    id: str
    seconds: float = 0.0
    tokens: int = 0  # completion tokens
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    forward_passes: int = 0
    generation_s: float = 0.0  # usage.generation_time_s
    mask_s: float = 0.0  # usage.mask_time_s: masks and matchers (a server reports none)
    parsed: bool = False
    valid: bool = False
    correct: bool = False
    truncated: bool = False
    error: str | None = None
    text: str = ""


def make_row(backend: str, out: Outcome, usage: Any) -> Row:
    """A row from the bfcl bench's scored `Outcome` and the turn's `Usage` (or None)."""
    return Row(
        backend,
        out.id,
        seconds=round(out.seconds, 4),
        tokens=out.tokens,
        prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
        cached_prompt_tokens=int(getattr(usage, "cached_prompt_tokens", 0) or 0),
        forward_passes=out.forward_passes,
        generation_s=round(float(getattr(usage, "generation_time_s", 0.0) or 0.0), 4),
        mask_s=round(float(getattr(usage, "mask_time_s", 0.0) or 0.0), 4),
        parsed=out.parsed,
        valid=out.valid,
        correct=out.correct,
        truncated=out.truncated,
        error=out.error,
        text=out.text,
    )


# ------------------------------------------------------------------------------ summary


def summarize(result: Mapping[str, Any]) -> dict[str, Any]:
    """A worker's result (`load_s`, `peak_rss_mb`, `rows`) as the reported numbers."""
    rows = [r if isinstance(r, Row) else Row(**r) for r in result["rows"]]
    seconds = [r.seconds for r in rows]
    gen_s = sum(r.generation_s for r in rows)
    prompt = sum(r.prompt_tokens for r in rows)
    n = len(rows)
    return {
        "n": n,
        "load_s": result.get("load_s"),
        "s_per_call_median": round(statistics.median(seconds), 3) if seconds else None,
        "s_per_call_mean": round(statistics.fmean(seconds), 3) if seconds else None,
        "tokens_per_s": round(sum(r.tokens for r in rows) / gen_s, 1) if gen_s > 0 else None,
        "prompt_tokens_mean": round(prompt / n, 1) if n else None,
        "prompt_reused": round(sum(r.cached_prompt_tokens for r in rows) / prompt, 3)
        if prompt
        else None,
        "forward_passes_mean": round(statistics.fmean(r.forward_passes for r in rows), 1)
        if any(r.forward_passes for r in rows)  # a server reports none
        else None,
        "mask_s_mean": round(statistics.fmean(r.mask_s for r in rows), 3)
        if any(r.mask_s for r in rows)
        else None,
        "peak_rss_mb": result.get("peak_rss_mb"),
        **{k: result.get("speed", {}).get(k) for k in ("prefill_tok_s", "step_ms", "own_step_ms")},
        "correct": sum(r.correct for r in rows),
        "parsed": sum(r.parsed for r in rows),
        "valid": sum(r.valid for r in rows),
        "truncated": sum(r.truncated for r in rows),
        "errors": sum(r.error is not None for r in rows),
    }


RATIO_KEYS = (
    "load_s",
    "s_per_call_median",
    "s_per_call_mean",
    "tokens_per_s",
    "peak_rss_mb",
    "prefill_tok_s",
    "step_ms",
)


def ratios(summaries: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, float | None]]:
    """The first backend's number over each other backend's, keyed "first/other"."""
    names = list(summaries)
    if not names:
        return {}
    first = summaries[names[0]]
    out: dict[str, dict[str, float | None]] = {}
    for name in names[1:]:
        other = summaries[name]
        out[f"{names[0]}/{name}"] = {
            key: round(first[key] / other[key], 3)
            if first.get(key) is not None and other.get(key)
            else None
            for key in RATIO_KEYS
        }
    return out


_ROWS: tuple[tuple[str, str, str], ...] = (
    ("load (s)", "load_s", "f"),
    ("seconds / call, median", "s_per_call_median", "f"),
    ("seconds / call, mean", "s_per_call_mean", "f"),
    ("generated tokens / s", "tokens_per_s", "f"),
    ("prompt tokens / call, mean", "prompt_tokens_mean", "f"),
    ("prompt tokens reused", "prompt_reused", "%"),
    ("forward passes / call, mean", "forward_passes_mean", "f"),
    ("mask seconds / call, mean", "mask_s_mean", "f"),
    ("peak RSS (MB)", "peak_rss_mb", "f"),
    ("prefill tok/s (555-token prompt)", "prefill_tok_s", "f"),
    ("decode step (ms), constrained", "step_ms", "f"),
    ("llama.cpp's own step (ms)", "own_step_ms", "f"),
    ("correct", "correct", "n"),
    ("parsed", "parsed", "n"),
    ("valid", "valid", "n"),
    ("truncated by max_tokens", "truncated", "n"),
    ("errors", "errors", "n"),
)
_RATIO_ROWS = (
    ("load", "load_s"),
    ("seconds / call, median", "s_per_call_median"),
    ("seconds / call, mean", "s_per_call_mean"),
    ("generated tokens / s", "tokens_per_s"),
    ("peak RSS", "peak_rss_mb"),
    ("prefill tok/s", "prefill_tok_s"),
    ("decode step", "step_ms"),
)


def _cell(value: Any, kind: str, n: int) -> str:
    if value is None:
        return "-"
    if kind == "%":
        return f"{value:.0%}"
    if kind == "n":
        return f"{value}/{n}"
    return f"{value:.1f}" if abs(value) >= 100 else f"{value:.2f}"


def format_table(
    summaries: Mapping[str, Mapping[str, Any]],
    ratio: Mapping[str, Mapping[str, Any]],
    header: str,
    failed: Mapping[str, str] | None = None,
) -> str:
    """Metrics down, backends across; then the ratios of the first backend to the others."""
    names = list(summaries)
    width = max([14, *(len(x) + 2 for x in names), *(len(p) + 2 for p in ratio)])
    lines = [header, "", " " * 30 + "".join(x.rjust(width) for x in names)]
    for label, key, kind in _ROWS:
        cells = "".join(_cell(s[key], kind, s["n"]).rjust(width) for s in summaries.values())
        lines.append(f"  {label:<28}{cells}")
    if ratio:
        lines.append("\n" + "ratios".ljust(30) + "".join(p.rjust(width) for p in ratio))
        for label, key in _RATIO_ROWS:
            cells = "".join(_cell(r[key], "f", 0).rjust(width) for r in ratio.values())
            lines.append(f"  {label:<28}{cells}")
    for name, why in (failed or {}).items():
        lines.append(f"{name}: failed: {why}")
    return "\n".join(lines)


def plot(path: str, summaries: Mapping[str, Mapping[str, Any]], title: str) -> bool:
    """Bars of seconds per call (median) and peak RSS per backend; False (and a note on
    stderr) when matplotlib is not installed."""
    plt = pyplot_or_note("backends", path)
    if plt is None:
        return False
    names = list(summaries)
    fig, axes = plt.subplots(1, 2, figsize=(max(7.0, 2.0 + 1.6 * len(names)), 3.8))
    panels = (("s_per_call_median", "seconds / call (median)"), ("peak_rss_mb", "peak RSS (MB)"))
    for ax, (key, label) in zip(axes, panels, strict=True):
        bars = ax.bar(names, [summaries[x][key] or 0.0 for x in names])
        ax.bar_label(bars, fmt="%.2f" if key != "peak_rss_mb" else "%.0f", fontsize=8)
        ax.set_ylabel(label)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


# ------------------------------------------------------------------------------ the server


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def server_command(gguf: Path, port: int, n_ctx: int, threads: int | None) -> list[str]:
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf)]
    cmd += ["--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx)]
    if threads:
        cmd += ["--n_threads", str(threads), "--n_threads_batch", str(threads)]
    return cmd


def _wait_ready(proc: subprocess.Popen[bytes], url: str, log: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            tail = log.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"llama_cpp.server exited ({proc.returncode}):\n{tail}")
        try:
            with urllib.request.urlopen(url + "/models", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            tail = log.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"llama_cpp.server did not answer in {timeout:.0f}s:\n{tail}")
        time.sleep(0.25)


@contextmanager
def llama_server(
    gguf: Path, n_ctx: int, threads: int | None, log: Path, peak: dict[str, Any]
) -> Iterator[str]:
    """`python -m llama_cpp.server` on a free loopback port, its output in `log`: yields its
    API root once it answers; stopped (its peak RSS read into `peak["mb"]` first) on exit."""
    port = free_port()
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            server_command(gguf, port, n_ctx, threads), stdout=out, stderr=subprocess.STDOUT
        )
    url = f"http://127.0.0.1:{port}/v1"
    try:
        _wait_ready(proc, url, log, SERVER_TIMEOUT_S)
        yield url
    finally:
        peak["mb"] = peak_rss_mb(proc.pid)
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# ------------------------------------------------------------------------------ the worker


def load_local(spec: Mapping[str, Any]) -> Any:
    """The in-process backend the spec names, loaded."""
    threads = spec.get("threads")
    if spec["backend"] in ("llama.cpp", "llama.cpp-reproducible"):
        from sdk.backends.llamacpp import LlamaCppModel

        return LlamaCppModel(
            spec["model"],
            n_ctx=spec["n_ctx"],
            n_threads=threads,
            n_threads_batch=threads,
            reproducible=spec["backend"] == "llama.cpp-reproducible",
        )
    from sdk.backends.transformers import TransformersModel

    extra = {"num_threads": threads} if threads else {}
    return TransformersModel.from_pretrained(spec["model"], **extra)


_PROMPT_TOKENS = 555  # the prefill measured (a BFCL multiple prompt is ~550 tokens)
_STEPS = 48


def measure_speed(model: Any, spec: Mapping[str, Any]) -> dict[str, Any]:
    """Prefill tokens per second of a ~555-token prompt (the best of 3, nothing cached), and
    the median wall time of one constrained decode step (forward pass, mask, sample: the time
    between two one-token feeds of a typed-output turn); for llama.cpp, also llama.cpp's own
    unconstrained greedy step (`Llama.sample` + `Llama.eval`) on the same file in the same
    process, measured after the questions and the peak RSS (its `Llama` is a second copy);
    "prompt" carries its prompt there."""
    from pydantic import BaseModel

    from sdk import Agent
    from sdk.decoding.generate import TurnRequest
    from sdk.messages import Message

    class Notes(BaseModel):
        lines: list[str]

    def request(rep: int, items: int) -> TurnRequest:
        words = " ".join(f"item{i} is a note about the weather" for i in range(items))
        return TurnRequest([Message.user(f"v{rep} {words}")], [])

    items = 10
    while len(model.render(request(0, items))) < _PROMPT_TOKENS:
        items += 1
    best, n = float("inf"), 0
    for rep in range(3):  # a different first word each time: no cached prefix
        session = model.begin_turn(request(rep, items))
        n = len(session.prompt_ids)
        start = time.perf_counter()
        session.prefill()
        best = min(best, time.perf_counter() - start)
        session.close()
    steps: list[float] = []
    original = model.begin_turn

    def timed(request: Any) -> Any:
        session = original(request)
        feed = session.feed

        def stamped(ids: Sequence[int]) -> Any:
            steps.append(time.perf_counter())
            return feed(ids)

        session.feed = stamped
        return session

    model.begin_turn = timed
    try:
        Agent(model, output_type=Notes, max_tokens=_STEPS).run_sync(
            "Write ten short notes about the weather in Paris."
        )
    except Exception:  # noqa: BLE001, S110 - only the steps' timing is wanted
        pass
    finally:
        model.begin_turn = original
    gaps = [b - a for a, b in zip(steps, steps[1:], strict=False)]
    out: dict[str, Any] = {"prefill_tok_s": round(n / best, 1), "prefill_tokens": n}
    if gaps:
        out["step_ms"] = round(statistics.median(gaps) * 1000, 2)
    out["prompt"] = model.render(request(9, items))  # for llama.cpp's own step, measured last
    return out


def own_llama_step_ms(spec: Mapping[str, Any], prompt: Sequence[int]) -> float:
    """llama.cpp's own unconstrained greedy decode step, through llama-cpp-python's `Llama`."""
    import llama_cpp

    from sdk.backends.embedded import resolve_gguf

    threads = spec.get("threads") or os.cpu_count() or 2
    llm = llama_cpp.Llama(
        str(resolve_gguf(spec["model"])),
        n_ctx=spec["n_ctx"],
        n_threads=threads,
        n_threads_batch=threads,
        verbose=False,
    )
    llm.eval(list(prompt))
    gaps = []
    for _ in range(_STEPS):
        start = time.perf_counter()
        token = llm.sample(temp=0.0)
        llm.eval([token])
        gaps.append(time.perf_counter() - start)
    llm.close()
    return round(statistics.median(gaps) * 1000, 2)


def run_items(model: Any, spec: Mapping[str, Any]) -> list[Row]:
    """The spec's questions, one required-mode turn each, as the bfcl bench runs them."""
    from .bfcl import Options, Runner, load

    label = spec["backend"]
    runner = Runner(model, Options(max_tokens=spec["max_tokens"]))
    items = load("multiple", spec["n"], spec["offset"], Path(spec["data"]))
    rows = []
    for i, item in enumerate(items):
        try:
            out, usage = runner.sdk_turn(item, "required", "auto")
        except Exception as exc:  # noqa: BLE001 - a failing turn is a counted miss
            out, usage = Outcome(item.category, item.id, "required", "auto"), None
            out.error = f"{type(exc).__name__}: {exc}"[:300]
        rows.append(make_row(label, out, usage))
        r = rows[-1]
        mark = (
            "C" if r.correct else "E" if r.error else "V" if r.valid else "P" if r.parsed else "-"
        )
        print(
            f"[{label} {i + 1}/{len(items)}] {item.id}: {mark} {r.seconds:.2f}s "
            f"{r.tokens} tok, prompt {r.prompt_tokens} ({r.cached_prompt_tokens} cached)",
            file=sys.stderr,
            flush=True,
        )
    return rows


def run_backend(spec: Mapping[str, Any]) -> dict[str, Any]:
    """Load the spec's backend, run its questions: load seconds, peak RSS and the rows."""
    if spec["backend"] != "server":
        start = time.perf_counter()
        model = load_local(spec)
        load_s = time.perf_counter() - start
        speed = measure_speed(model, spec) if spec.get("speed", True) else {}
        rows = run_items(model, spec)
        rss = peak_rss_mb()  # before llama.cpp's own `Llama` loads a second copy
        if spec.get("speed", True) and spec["backend"].startswith("llama.cpp"):
            speed["own_step_ms"] = own_llama_step_ms(spec, speed.pop("prompt"))
        speed.pop("prompt", None)
        return {"load_s": round(load_s, 3), "peak_rss_mb": rss, "speed": speed, "rows": rows}
    from sdk.backends.embedded import resolve_gguf
    from sdk.backends.openai import OpenAIChatModel

    gguf = resolve_gguf(spec["model"])
    if gguf is None:
        raise ValueError(f"the server needs a GGUF model, not {spec['model']!r}")
    peak: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="sdk-server-") as tmp:
        start = time.perf_counter()
        log = Path(tmp) / "server.log"
        with llama_server(gguf, spec["n_ctx"], spec.get("threads"), log, peak) as url:
            model = OpenAIChatModel(url, constraint="gbnf")
            model.resolve_model()  # the served name, asked once, before any timing
            load_s = time.perf_counter() - start
            rows = run_items(model, spec)
    return {
        "load_s": round(load_s, 3),
        "peak_rss_mb": peak.get("mb"),
        "client_rss_mb": peak_rss_mb(),
        "rows": rows,
    }


def worker_main(spec_path: str, out_path: str) -> int:
    """The subprocess side: one backend; its result (or its error) as JSON in `out_path`."""
    spec = json.loads(Path(spec_path).read_text(encoding="utf-8"))
    try:
        result = run_backend(spec)
        result["rows"] = [asdict(r) for r in result["rows"]]
    except Exception as exc:  # noqa: BLE001 - reported by the parent, the other backends run
        result = {"error": f"{type(exc).__name__}: {exc}"[:3000]}
    Path(out_path).write_text(json.dumps(result, ensure_ascii=False), encoding="utf-8")
    return 0


def run_worker(spec: Mapping[str, Any]) -> dict[str, Any] | str:
    """This module in a subprocess for one backend: its result, or an error text."""
    import sdk

    root = Path(sdk.__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory(prefix="sdk-backends-") as tmp:
        spec_file, out = Path(tmp) / "spec.json", Path(tmp) / "result.json"
        spec_file.write_text(json.dumps(spec), encoding="utf-8")
        path = os.pathsep.join(p for p in (str(root), os.environ.get("PYTHONPATH")) if p)
        env = {**os.environ, "PYTHONPATH": path}
        cmd = [sys.executable, "-m", "sdk.bench.backends", "--worker", str(spec_file), str(out)]
        done = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, text=True, check=False)
        if done.returncode != 0 or not out.is_file():
            return (
                f"worker exited with {done.returncode} (its stderr is above) {done.stdout[-300:]}"
            )
        result: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return str(result["error"]) if "error" in result else result


# ------------------------------------------------------------------------------ CLI


def _backends(text: str) -> list[str]:
    items = [v.strip() for v in text.split(",") if v.strip()]
    bad = [v for v in items if v not in BACKENDS]
    if bad or not items or len(set(items)) != len(items):
        raise argparse.ArgumentTypeError(
            f"{text!r}: a comma-separated list of distinct backends from {list(BACKENDS)}"
        )
    return items


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m sdk.bench backends",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--backends", type=_backends, default=list(DEFAULT_BACKENDS), help="in order"
    )
    parser.add_argument("--data", help=f"the BFCL v4 dev split's folder (default ${DATA_ENV})")
    parser.add_argument("--n", type=int, default=50, help="questions (default 50)")
    parser.add_argument("--offset", type=int, default=0, help="skip this many questions first")
    parser.add_argument("--model", default="smollm2", help="smollm2, gemma3 or a .gguf file")
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--threads", type=int, help="threads of every backend (default: own)")
    parser.add_argument("--n-ctx", type=int, default=4096, help="llama.cpp's and the server's")
    parser.add_argument("--jsonl", help="one line per (backend, question)")
    parser.add_argument("--plot", help="bars of seconds per call and peak RSS (matplotlib)")
    parser.add_argument("--json", action="store_true", help="print a final BENCH_JSON line")
    parser.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def worker_spec(args: argparse.Namespace, backend: str, data: Path) -> dict[str, Any]:
    model = args.model
    if Path(model).expanduser().exists():
        model = str(Path(model).expanduser().resolve())  # the workers' cwd may differ
    return {
        "backend": backend,
        "model": model,
        "data": str(data.resolve()),
        "n": args.n,
        "offset": args.offset,
        "max_tokens": args.max_tokens,
        "threads": args.threads,
        "n_ctx": args.n_ctx,
    }


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker:
        return worker_main(*args.worker)
    data = data_dir(args.data)  # before any worker starts: a missing folder fails at once
    results: dict[str, dict[str, Any] | str] = {}
    for backend in args.backends:
        print(f"backends: {backend} ...", file=sys.stderr, flush=True)
        results[backend] = run_worker(worker_spec(args, backend, data))
    return report(args, results)


def report(args: argparse.Namespace, results: Mapping[str, dict[str, Any] | str]) -> int:
    """Print the table (and BENCH_JSON), write `--jsonl` and `--plot`; 1 if a backend failed."""
    failed = {name: r for name, r in results.items() if isinstance(r, str)}
    done = {name: r for name, r in results.items() if not isinstance(r, str)}
    summaries = {name: summarize(r) for name, r in done.items()}
    ratio = ratios(summaries)
    threads = args.threads or "each backend's own"
    header = (
        f"backends bench: model {args.model}, BFCL multiple n={args.n} from #{args.offset}, "
        f"tool_choice=required, greedy, max_tokens={args.max_tokens}, threads: {threads}, "
        f"n_ctx={args.n_ctx} (llama.cpp, server)"
    )
    print(format_table(summaries, ratio, header, failed), flush=True)
    if args.jsonl:
        with open(args.jsonl, "w", encoding="utf-8") as f:
            for r in done.values():
                f.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in r["rows"])
    title = f"backends, {args.model}, BFCL multiple n={args.n} (python -m sdk.bench backends)"
    if args.plot and summaries and plot(args.plot, summaries, title):
        print(f"backends: plot written to {args.plot}", file=sys.stderr)
    if args.json:
        bench = {
            "bench": "backends",
            **{k: getattr(args, k) for k in ("model", "n", "offset", "max_tokens", "threads")},
            "n_ctx": args.n_ctx,
            "backends": summaries,
            "client_rss_mb": {k: r.get("client_rss_mb") for k, r in done.items()},
            "ratios": ratio,
            "failed": failed,
        }
        print("BENCH_JSON " + json.dumps(bench, separators=(",", ":")), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
