"""MaskBench: replay JSON instances token by token through each engine's mask and matcher.

Why this shape:

* Every engine runs in its own long-lived worker process (``spawn``), so a native hang or
  crash in one engine costs that schema only: the parent enforces a hard per-schema deadline
  and restarts the worker, while the worker itself checks the wall clock between tokens.
* Engines are interleaved schema by schema, so on a shared, noisy machine they see the same
  background load and their numbers stay comparable within one run.
* Tokenization happens once in the parent, so every engine replays identical token ids.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import multiprocessing as mp
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

import numpy as np

from . import _stats
from ._peers import ENGINES, CompileFailed, EngineUnavailable, make_adapter

_Log = Callable[[str], None]  # progress lines (stderr, or nowhere with --quiet)

DEFAULT_PEERS = "llguidance,xgrammar"
#: Extra seconds the parent waits beyond --timeout-s before it kills a silent worker.
HARD_GRACE_S = 10.0
#: How long a fresh worker may take to import, load the tokenizer and index it.
STARTUP_TIMEOUT_S = 600.0


# --------------------------------------------------------------------------- tokenizer


def load_tokenizer(spec: str) -> Any:
    """The HF tokenizer for `spec` ("smollm2", "gemma3" or a path), via the backends' loader.

    Imported lazily so a worker pays for transformers only once it is spawned.
    """
    from sdk.backends.embedded import load_tokenizer as _load

    return _load(spec)


# --------------------------------------------------------------------------- replay


def _rss_mb(pid: int | str = "self") -> float:
    """Peak resident set size of process `pid` so far, in MB (0.0 if unknown)."""
    return _stats.peak_rss_mb(pid) or 0.0


def _rss_now_mb() -> float:
    """Current resident set size of this process in MB (0.0 if unknown): sampled after every
    schema, so a cache that grows without bound shows as a rising trace."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return round(int(line.split()[1]) / 1024.0, 1)
    except OSError:
        pass
    return 0.0


class FullCollections:
    """Full (generation 2) garbage collections of this process: how many, and their seconds.

    One takes a fraction of a second in a process with torch loaded (every tracked object is
    walked) and lands on whatever schema is running: counted per schema, so a TTFM or TBM
    outlier can be told apart from the engine's own work."""

    def __init__(self) -> None:
        self.count = 0
        self.seconds = 0.0
        self._start = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if info.get("generation") != 2:
            return
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.count += 1
            self.seconds += time.perf_counter() - self._start

    def install(self) -> FullCollections:
        gc.callbacks.append(self)
        return self

    def uninstall(self) -> None:
        with contextlib.suppress(ValueError):
            gc.callbacks.remove(self)


def _describe(tokenizer: Any, ids: list[int], pos: int) -> dict[str, Any]:
    """Where a replay stopped, in text, so a failure can be read without re-running."""
    prefix = tokenizer.decode(ids[:pos]) if tokenizer is not None else ""
    tok = tokenizer.decode([ids[pos]]) if tokenizer is not None and pos < len(ids) else ""
    return {
        "at": pos,
        "token_id": ids[pos] if pos < len(ids) else None,
        "token": tok,
        "prefix": prefix[-60:],
    }


def _result(
    status: str, n_tests: int, *, error: str | None = None, exc_type: str | None = None
) -> dict[str, Any]:
    """One schema's result record before any mask was computed."""
    return {
        "status": status,
        "compile_ms": None,
        "ttfm_ms": None,
        "n_tests": n_tests,
        "n_masks": 0,
        "validation_errors": 0,
        "invalidation_errors": 0,
        "failures": [],
        "error": error,
        "exc_type": exc_type,
    }


def run_schema(
    adapter: Any,
    schema: Any,
    tests: list[tuple[bool, list[int]]],
    timeout_s: float,
    tokenizer: Any = None,
) -> tuple[dict[str, Any], np.ndarray]:
    """Compile `schema`, replay every test, classify the outcome; returns (result, TBM µs)."""
    clock = time.perf_counter
    start = clock()
    deadline = start + timeout_s
    tbm: list[float] = []
    res = _result("pass", len(tests))

    def done(status: str | None = None) -> tuple[dict[str, Any], np.ndarray]:
        if status is not None:
            res["status"] = status
        elif res["validation_errors"] or res["invalidation_errors"]:
            res["status"] = "fail"
        arr = np.asarray(tbm, dtype=np.float64) * 1e6
        res["n_masks"] = int(arr.size)
        res["wall_s"] = round(clock() - start, 4)
        if arr.size:
            res["tbm_p50_us"] = round(float(np.median(arr)), 2)
            res["tbm_max_us"] = round(float(arr.max()), 2)
        return res, arr

    try:
        t0 = clock()
        try:
            state = adapter.compile(schema)
        except CompileFailed as e:
            res["error"] = str(e)[:500]
            return done("compile_error")
        t1 = clock()
        adapter.mask(adapter.new_matcher(state))
        t2 = clock()
        res["compile_ms"] = round((t1 - t0) * 1e3, 3)
        res["ttfm_ms"] = round((t2 - t0) * 1e3, 3)

        for i, (valid, ids) in enumerate(tests):
            m = adapter.new_matcher(state)
            stopped: dict[str, Any] | None = None
            for pos, tok in enumerate(ids):
                if clock() > deadline:
                    res["error"] = f"over {timeout_s}s at test {i} token {pos}"
                    return done("timeout")
                t = clock()
                mask = adapter.mask(m)
                ok = adapter.allowed(m, mask, tok)
                advanced = ok and adapter.advance(m, tok)
                tbm.append(clock() - t)
                if not advanced:
                    reason = "advance_refused" if ok else "masked"
                    stopped = {"reason": reason, **_describe(tokenizer, ids, pos)}
                    break
            if stopped is None:
                t = clock()
                adapter.mask(m)
                accepting = adapter.accepting(m)
                tbm.append(clock() - t)
                if not accepting:
                    stopped = {"reason": "not_accepting", "at": len(ids)}
            accepted = stopped is None
            if valid and not accepted:
                res["validation_errors"] += 1
                res["failures"].append({"test": i, "kind": "validation", **(stopped or {})})
            elif not valid and accepted:
                res["invalidation_errors"] += 1
                res["failures"].append({"test": i, "kind": "invalidation"})
    except Exception as e:  # anything not a deliberate compile refusal is a crash
        res["exc_type"] = type(e).__name__
        res["error"] = f"{type(e).__name__}: {e}"[:500]
        return done("crash")
    return done()


# --------------------------------------------------------------------------- worker


def _worker_main(
    conn: Connection, engine: str, tok_spec: str, whitespace: str, member_order: str
) -> None:
    """Worker loop: set the engine up once, then answer one schema job per message."""
    try:
        tokenizer = load_tokenizer(tok_spec)
        adapter = make_adapter(engine, tokenizer, whitespace, member_order)
    except EngineUnavailable as e:
        conn.send(("unavailable", str(e)))
        return
    except Exception as e:
        conn.send(("unavailable", f"setup failed: {type(e).__name__}: {e}"))
        return
    conn.send(("ready", _rss_mb()))
    collections = FullCollections().install()
    while True:
        try:
            job = conn.recv()
        except EOFError:
            return
        if job is None:
            return
        schema, tests, timeout_s = job
        count, seconds = collections.count, collections.seconds
        res, tbm = run_schema(adapter, schema, tests, timeout_s, tokenizer)
        res["rss_mb"] = _rss_mb()
        res["rss_now_mb"] = _rss_now_mb()
        res["gc_full"] = collections.count - count
        res["gc_full_s"] = round(collections.seconds - seconds, 4)
        conn.send((res, tbm.astype(np.float32)))


@dataclass
class _Worker:
    """Parent-side handle of one engine's worker; restarts it after a hard timeout."""

    engine: str
    tok_spec: str
    whitespace: str
    member_order: str = "declared"
    proc: BaseProcess | None = None
    conn: Connection | None = None
    unavailable: str | None = None
    dead: bool = False
    setup_rss_mb: float | None = None
    peak_rss_mb: float = 0.0
    restarts: int = 0
    results: list[dict[str, Any]] = field(default_factory=list)
    tbm: list[np.ndarray] = field(default_factory=list)

    def start(self) -> bool:
        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe()
        proc = ctx.Process(
            target=_worker_main,
            args=(child, self.engine, self.tok_spec, self.whitespace, self.member_order),
            daemon=True,
            name=f"maskbench-{self.engine}",
        )
        proc.start()
        child.close()
        self.proc, self.conn = proc, parent
        if not parent.poll(STARTUP_TIMEOUT_S):
            self.stop(kill=True)
            self.unavailable = "worker did not start in time"
            return False
        try:
            kind, payload = parent.recv()
        except EOFError:
            self.stop(kill=True)
            self.unavailable = f"worker died during setup (exit code {proc.exitcode})"
            return False
        if kind != "ready":
            self.stop()
            self.unavailable = str(payload)
            return False
        if self.setup_rss_mb is None:
            self.setup_rss_mb = float(payload)
        return True

    def stop(self, kill: bool = False) -> None:
        if self.conn is not None and not kill:
            with contextlib.suppress(OSError):
                self.conn.send(None)
        if self.proc is not None:
            if kill:
                self.proc.kill()
            self.proc.join(timeout=5)
            if self.proc.is_alive():
                self.proc.kill()
                self.proc.join(timeout=5)
        if self.conn is not None:
            self.conn.close()
        self.proc = self.conn = None

    def run(
        self, file: str, schema: Any, tests: list[tuple[bool, list[int]]], timeout_s: float
    ) -> dict[str, Any]:
        """One schema on this engine, with a hard deadline the worker cannot overrun."""
        if self.conn is None and not self.start():
            self.dead = True
            raise EngineUnavailable(self.unavailable or "worker unavailable")
        assert self.conn is not None
        begin = time.perf_counter()
        reply: Any = None
        try:
            self.conn.send((schema, tests, timeout_s))
            if self.conn.poll(timeout_s + HARD_GRACE_S):
                reply = self.conn.recv()
        except (EOFError, OSError):
            if self.proc is not None:  # the pipe closed: let the exit be reaped before asking
                self.proc.join(timeout=5)
        if reply is None:
            died = self.proc is not None and not self.proc.is_alive()
            code = self.proc.exitcode if self.proc is not None else None
            if self.proc is not None and self.proc.pid is not None and not died:
                self.peak_rss_mb = max(self.peak_rss_mb, _rss_mb(self.proc.pid))
            self.stop(kill=True)
            self.restarts += 1
            res = _result(
                "crash" if died else "timeout",
                len(tests),
                error=f"worker exited with code {code}"
                if died
                else f"hard timeout: no answer in {timeout_s + HARD_GRACE_S:.0f}s",
                exc_type="WorkerDied" if died else None,
            )
            res["wall_s"] = round(time.perf_counter() - begin, 4)
            tbm = np.empty(0, dtype=np.float32)
        else:
            res, tbm = reply
            self.peak_rss_mb = max(self.peak_rss_mb, float(res.pop("rss_mb", 0.0)))
        res = {"engine": self.engine, "file": file, **res}
        self.results.append(res)
        self.tbm.append(tbm)
        return res


# --------------------------------------------------------------------------- driver


def _tokenize_tests(tokenizer: Any, tests: list[dict[str, Any]]) -> list[tuple[bool, list[int]]]:
    """The protocol's serialisation: json.dumps defaults, no special tokens."""
    out = []
    for t in tests:
        text = json.dumps(t["data"], ensure_ascii=False)
        out.append((bool(t["valid"]), list(tokenizer.encode(text, add_special_tokens=False))))
    return out


def select_files(directory: str, filt: str | None, limit: int | None) -> list[Path]:
    """`*.json` in `directory`, sorted by name, then filtered by substring, then limited."""
    files = sorted(Path(directory).glob("*.json"), key=lambda p: p.name)
    if filt:
        files = [p for p in files if filt in p.name]
    if limit is not None:
        files = files[:limit]
    return files


def _engine_list(args: argparse.Namespace) -> list[str]:
    if args.engines:
        names = [e.strip() for e in args.engines.split(",") if e.strip()]
    else:
        names = ["ours"] + [p.strip() for p in args.peers.split(",") if p.strip()]
    unknown = [n for n in names if n not in ENGINES]
    if unknown:
        raise SystemExit(f"maskbench: unknown engine(s) {unknown}; known: {', '.join(ENGINES)}")
    return list(dict.fromkeys(names))


def build_parser(prog: str = "python -m sdk.bench maskbench") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog,
        description="Replay MaskBench JSON instances through token masks and compare engines.",
    )
    p.add_argument("dir", help="directory of MaskBench *.json files")
    p.add_argument("--tokenizer", default="smollm2", help="smollm2 | gemma3 | PATH")
    p.add_argument(
        "--peers",
        default=DEFAULT_PEERS,
        help="peer engines run next to ours (default: %(default)s)",
    )
    p.add_argument(
        "--engines",
        default=None,
        help="exact engine list, overrides --peers (ours,llguidance,xgrammar)",
    )
    p.add_argument("--limit", type=int, default=None, help="first N files by name")
    p.add_argument("--filter", default=None, help="only files whose name contains SUBSTR")
    p.add_argument("--timeout-s", type=float, default=60.0, help="per-schema wall-clock limit")
    p.add_argument(
        "--whitespace",
        default="flexible",
        help="'flexible' (any JSON whitespace); other values go to our engine "
        "as-is and make peers expect exactly json.dumps separators",
    )
    p.add_argument(
        "--member-order",
        choices=("declared", "any"),
        default="declared",
        help="our engine's object members: in declaration order (what generation uses) or "
        "in any order (compile_schema(member_order='any'))",
    )
    p.add_argument("--json-out", default=None, help="write per-schema details (JSON Lines)")
    p.add_argument("--plot", default=None, help="write TBM/TTFM distributions to this PNG")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    return p


def _start_workers(args: argparse.Namespace, engines: list[str], log: _Log) -> dict[str, _Worker]:
    """One worker process per engine; those that cannot start are marked dead and skipped."""
    workers = {e: _Worker(e, args.tokenizer, args.whitespace, args.member_order) for e in engines}
    for w in workers.values():
        if not w.start():
            w.dead = True
            log(f"maskbench: engine {w.engine!r} unavailable, skipped: {w.unavailable}")
    return workers


def _run_files(
    args: argparse.Namespace,
    files: list[Path],
    tokenizer: Any,
    workers: dict[str, _Worker],
    log: _Log,
    t_start: float,
) -> None:
    """Every schema file on every live worker (each result to `--json-out` as it comes); the
    workers are stopped at the end."""
    details = open(args.json_out, "w", encoding="utf-8") if args.json_out else None  # noqa: SIM115
    try:
        for n, path in enumerate(files, 1):
            try:
                doc = json.loads(path.read_text(encoding="utf-8"))
                tests = _tokenize_tests(tokenizer, doc.get("tests") or [])
                schema = doc["schema"]
            except Exception as e:
                log(f"maskbench: skipping unreadable {path.name}: {type(e).__name__}: {e}")
                continue
            for w in workers.values():
                if w.dead:
                    continue
                try:
                    res = w.run(path.name, schema, tests, args.timeout_s)
                except EngineUnavailable as e:
                    log(f"maskbench: {w.engine} worker could not restart: {e}")
                    continue
                if details is not None:
                    details.write(json.dumps(res, ensure_ascii=False) + "\n")
            if n % 50 == 0 or n == len(files):
                log(f"maskbench: {n}/{len(files)} schemas, {time.perf_counter() - t_start:.0f}s")
    finally:
        if details is not None:
            details.close()
        for w in workers.values():
            w.stop()


def _summarize(workers: dict[str, _Worker]) -> dict[str, dict[str, Any]]:
    """Each engine's statistics, or why it has none."""
    summary: dict[str, dict[str, Any]] = {}
    for name, w in workers.items():
        if not w.results:
            summary[name] = {"available": False, "reason": w.unavailable or "no results"}
            continue
        s = _stats.summarize_engine(w.results, w.tbm, w.peak_rss_mb or None, w.setup_rss_mb)
        s["worker_restarts"] = w.restarts
        summary[name] = s
    return summary


def _plot(path: str, workers: dict[str, _Worker], log: _Log) -> None:
    try:
        _stats.plot(
            path,
            {n: np.concatenate(w.tbm) if w.tbm else np.empty(0) for n, w in workers.items()},
            {
                n: [r["ttfm_ms"] for r in w.results if r["ttfm_ms"] is not None]
                for n, w in workers.items()
            },
        )
        log(f"maskbench: plot written to {path}")
    except ImportError:
        print(
            f"maskbench: matplotlib is not installed (the `bench` extra); no plot written "
            f"to {path}",
            file=sys.stderr,
        )


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the benchmark; prints the table and one `BENCH_JSON ` line, returns that object."""
    args = build_parser().parse_args(argv)
    engines = _engine_list(args)
    files = select_files(args.dir, args.filter, args.limit)
    if not files:
        raise SystemExit(f"maskbench: no *.json files in {args.dir!r} match")
    log: _Log = (
        (lambda _m: None) if args.quiet else (lambda m: print(m, file=sys.stderr, flush=True))
    )

    t_start = time.perf_counter()
    # Workers inherit the environment; HF's tokenizer threads would only add noise here.
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    tokenizer = load_tokenizer(args.tokenizer)
    workers = _start_workers(args, engines, log)
    _run_files(args, files, tokenizer, workers, log, t_start)
    summary = _summarize(workers)
    ratio = _stats.ratios(summary)
    report = {
        "bench": "maskbench",
        "dir": str(args.dir),
        "tokenizer": args.tokenizer,
        "whitespace": args.whitespace,
        "member_order": args.member_order,
        "files": len(files),
        "limit": args.limit,
        "filter": args.filter,
        "timeout_s": args.timeout_s,
        "wall_s": round(time.perf_counter() - t_start, 2),
        "engines": summary,
        "ratios": ratio,
    }
    print(_stats.format_table(summary, ratio))
    # The numbers first: a plot that fails (no matplotlib) must not lose a long run's results.
    print("BENCH_JSON " + json.dumps(report, separators=(",", ":")), flush=True)
    if args.plot:
        _plot(args.plot, workers, log)
    return report


if __name__ == "__main__":  # pragma: no cover
    main()
