"""The agent's tool loop as apps use it: does a run end with a real answer, how often do tools
run, does one call run twice, how long does a run take.

    python -m sdk.bench loop [--model smollm2|PATH.gguf|HF-DIR] [--n-single 30] [--n-two 20]
        [--bfcl DIR] [--max-tokens N] [--max-steps N] [--baseline DIR ...] [--jsonl OUT] [--json]

50 questions, the project's own (data in this module): 30 answered by one tool call ("What's
the weather in Paris?"), 20 needing two where the second needs the first's result ("the
weather in the capital of Japan": get_capital, then get_weather). Every own question is run
with ALL the own tools offered, as an app offers its several tools, and the Agent's defaults
(tool_choice, retries, max_tokens, max_steps) unless an option sets them. With `--bfcl DIR`
(BFCL v4 dev, `DIR/BFCL_v4_multiple.jsonl`) 10 of the single-tool questions are BFCL
"multiple" ones instead (every third), offered their own functions as stub tools that record
the call and return `{"status": "ok", ...}`. The tools are deterministic fakes, so two runs
of one tree differ only by the model.

Measured by the bench itself (each tool wrapped, the run's outcome read through public names
only), not by the SDK's counters, so an older checkout is measured the same way:

- answered: the run returned (no exception). Other endings: step_limit (StepLimitExceeded),
  truncation (TruncationError at max_tokens), runaway (TruncationError for a value that ran away,
  stopped early), retries (RetriesExhausted / UnexpectedModelBehavior), error:T;
- answer is a call: the returned text is a tool call in disguise (tagged, fenced or bare JSON,
  `looks_like_call`): the app shows the user a call instead of an answer;
- within 3: answered with a real (not a call) answer in at most 3 model turns;
- executions: tool functions actually run per run (mean, max; "one tool": the most runs of a
  single tool in one run); repeated: a run executed the same (tool, arguments) twice, the side
  effect a looping model causes (a payment made twice);
- max_tokens: the last turn ended on max_tokens, a TruncationError, or a call cut by it;
- expected ran: every tool the question needs was executed (the own questions, and BFCL's when
  its answers file is there);
- seconds: wall time of `run_sync`, the model loaded beforehand (a warm-up run).

Shares are of all runs of the group. `--baseline DIR` (repeatable or comma-separated: older
checkouts, e.g. `git worktree add /tmp/old REV`) runs this same file in a subprocess with
`PYTHONPATH=DIR` per tree, the current tree first, one after another (timings comparable),
same questions and model; columns are labelled by each tree's `git rev-parse --short HEAD`
(`*`: uncommitted changes). `--jsonl` writes one line per run, `--json` a final BENCH_JSON line.
"""

from __future__ import annotations

import argparse
import functools
import inspect
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

try:
    from sdk.bench import _loop_data as data
except ImportError:  # run by path against an older tree (`--baseline`): the file beside this
    import _loop_data as data  # type: ignore[no-redef]

OWN_TOOLS = data.OWN_TOOLS


@dataclass(frozen=True)
class Question:
    """One question; `functions` (BFCL: the offered functions, JSON Schema) replaces the own
    tools when set."""

    id: str
    kind: Literal["single", "two"]
    prompt: str
    expected: tuple[str, ...]
    functions: tuple[dict[str, Any], ...] | None = None


def _own(table: str, kind: Literal["single", "two"]) -> list[Question]:
    rows = [line.split("|") for line in table.splitlines()]
    return [Question(q, kind, p, tuple(e.split(","))) for q, p, e in rows]


_NO_ARGS = {"type": "object", "properties": {}}


def bfcl_questions(folder: str | os.PathLike[str], n: int) -> list[Question]:
    """The first `n` BFCL "multiple" questions, their functions as JSON Schema."""
    from sdk.bench.bfcl import ANSWERS, QUESTIONS, bfcl_schema, data_dir

    base = data_dir(folder)  # a folder without the questions: a clear exit, before any model
    expected: dict[str, tuple[str, ...]] = {}
    if (base / ANSWERS).is_file():
        for line in (base / ANSWERS).read_text(encoding="utf-8").splitlines():
            a = json.loads(line)
            expected[a["id"]] = tuple(name for call in a["ground_truth"] for name in call)
    out: list[Question] = []
    for line in (base / QUESTIONS).read_text(encoding="utf-8").splitlines()[:n]:
        q = json.loads(line)
        fns = tuple({**fn, "parameters": bfcl_schema(fn.get("parameters") or _NO_ARGS)}
                    for fn in q["function"])  # fmt: skip
        prompt = q["question"][0][0]["content"]
        out.append(Question(q["id"], "single", prompt, expected.get(q["id"], ()), fns))
    return out


def build_questions(bfcl: str | None, n_single: int = 30, n_two: int = 20) -> list[Question]:
    """30 single-tool questions (with `bfcl`: every third a BFCL one) and 20 two-step ones."""
    single = _own(data.SINGLE, "single")
    if bfcl:
        extra = bfcl_questions(bfcl, 10)
        own = single[: len(single) - len(extra)]
        single = [extra.pop(0) if i % 3 == 2 and extra else own.pop(0) for i in range(len(single))]
    return single[:n_single] + _own(data.TWO, "two")[:n_two]


# ------------------------------------------------------------------------------ recording


def canonical(value: Any) -> Any:
    """JSON-able arguments with 21.0 == 21 (a float argument validated from an int)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {str(k): canonical(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [canonical(v) for v in value]
    return value if isinstance(value, str | int | float | bool | type(None)) else str(value)


class Recorder:
    """Every tool execution, as (name, canonical JSON of the arguments). Tools run in worker
    threads; runs one after another, so one log serves the process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._calls: list[tuple[str, str]] = []

    def add(self, name: str, args: Any) -> None:
        key = json.dumps(canonical(args), sort_keys=True, ensure_ascii=False)
        with self._lock:
            self._calls.append((name, key))

    def take(self) -> list[tuple[str, str]]:
        with self._lock:
            out, self._calls = self._calls, []
        return out


RECORDER = Recorder()


def recorded(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn`, recording each execution (signature, hints and docstring kept for `@tool`)."""
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        RECORDER.add(fn.__name__, dict(bound.arguments))
        return fn(*args, **kwargs)

    return wrapper


@dataclass(frozen=True)
class StubTool:
    """A BFCL function as a tool (the SDK's `ToolLike` protocol, nothing imported from the
    tree under test): arguments checked by `jsonschema`, each call recorded, a fixed result."""

    name: str
    description: str
    json_schema: dict[str, Any]

    def validate_args(self, data: Any) -> Any:
        import jsonschema

        value = json.loads(data) if isinstance(data, str | bytes) else data
        jsonschema.validate(value, self.json_schema)
        return value

    def to_openai(self) -> dict[str, Any]:
        fn = {"name": self.name, "description": self.description, "parameters": self.json_schema}
        return {"type": "function", "function": fn}

    def call(self, args: Any, ctx: Any = None) -> Any:
        RECORDER.add(self.name, args)
        return {"status": "ok", "result": f"{self.name} completed"}


# ------------------------------------------------------------------------------ calls in text

_TAGS = re.compile(
    r"<tool_call>|</tool_call>|<\|python_tag\|>|\[TOOL_CALLS\]|<function[=>]|<\|tool_call"
    r"|<tool_calls?>|<start_function_call>|<\|tool_calls_section_begin\|>",
    re.IGNORECASE,
)
_FENCE = re.compile(r"```[a-zA-Z_]*[ \t]*\n?(.*?)```", re.DOTALL)
_PROSE_MAX = 80  # prose allowed before a bare JSON call ("Sure, here is the call:")
_NAME_KEYS = ("name", "function", "tool", "tool_name")
_ARG_KEYS = ("arguments", "parameters", "args", "input")


def _call_shaped(value: Any, tools: Sequence[str]) -> bool:
    """A call object: a name and arguments ({"name", "arguments"} and its spellings, OpenAI's
    {"function": {...}}, {"tool_calls": [...]}), {"name": <a tool>}, or {<a tool>: {...}};
    a list of objects is one when any of them is."""
    if isinstance(value, list):
        return all(isinstance(v, dict) for v in value) and any(
            _call_shaped(v, tools) for v in value
        )
    if not isinstance(value, dict):
        return False
    for wrapper in ("function", "tool_calls", "tool_call"):
        if isinstance(value.get(wrapper), dict | list) and _call_shaped(value[wrapper], tools):
            return True
    name = next((value[k] for k in _NAME_KEYS if isinstance(value.get(k), str)), None)
    if name is not None:
        return name in tools or any(k in value for k in _ARG_KEYS)
    if len(value) != 1:
        return False
    ((key, inner),) = value.items()
    return key in tools and isinstance(inner, dict)


def _json_candidates(text: str) -> Iterator[Any]:
    """Fenced blocks anywhere, then JSON starting within `_PROSE_MAX` characters."""
    for body in _FENCE.findall(text):
        try:
            yield json.loads(body)
        except ValueError:
            continue
    decoder = json.JSONDecoder()
    for match in re.finditer(r"[{\[]", text[: _PROSE_MAX + 1]):
        try:
            yield decoder.raw_decode(text, match.start())[0]
        except ValueError:
            continue


def looks_like_call(text: str, tools: Sequence[str] = ()) -> bool:
    """Whether a final answer is really a tool call written as text, which an app would show
    the user instead of an answer: a call tag (`<tool_call>`, `<|python_tag|>`,
    `[TOOL_CALLS]`, `<function=`...), JSON shaped like a call (`_call_shaped`) in a fence or
    bare after at most a short prose lead-in, or `tool(...)` for an offered `tool`. JSON that
    is data (`{"temperature": 18}`) and braces in prose are answers."""
    if _TAGS.search(text):
        return True
    if any(_call_shaped(value, tools) for value in _json_candidates(text)):
        return True
    stripped = text.strip()
    head = re.match(r"([A-Za-z_][\w.]*)\(", stripped)
    return bool(head and head.group(1) in tools and stripped.endswith(")"))


# ------------------------------------------------------------------------------ one run


@dataclass
class Run:
    """One question's run on one tree (a `--jsonl` line)."""

    id: str
    kind: str
    ending: str  # answer | step_limit | truncation | runaway | retries | error:<Type>
    output: str = ""
    is_call: bool = False
    steps: int = 0
    within_3: bool = False
    executions: int = 0
    max_one_tool: int = 0  # the most executions of a single tool in this run
    repeated: bool = False  # one (tool, arguments) executed twice
    executed: list[str] = field(default_factory=list)
    expected_ran: bool | None = None  # None: the question names no expected tools
    max_tokens: bool = False
    retries: int = 0
    dead_ends: int = 0  # free text backed out of (`Usage.dead_ends`; 0 on trees without it)
    seconds: float = 0.0
    error: str = ""
    tree: str = ""


_ENDINGS = {"StepLimitExceeded": "step_limit", "TruncationError": "truncation",
            "RetriesExhausted": "retries", "UnexpectedModelBehavior": "retries"}  # fmt: skip


def ending_of(exc: BaseException) -> str:
    """The run's ending, by class name (the classes of an older tree are other objects);
    the most specific class wins (TruncationError is an UnexpectedModelBehavior)."""
    found = (_ENDINGS[c.__name__] for c in type(exc).__mro__ if c.__name__ in _ENDINGS)
    ending = next(found, f"error:{type(exc).__name__}")
    runaway: object = getattr(exc, "runaway", None)
    if ending == "truncation" and runaway:
        return "runaway"  # stopped early, not at max_tokens
    return ending


def measure(
    q: Question,
    outcome: Any,
    executions: Sequence[tuple[str, str]],
    seconds: float,
    tools: Sequence[str],
) -> Run:
    """A run's numbers from its outcome (a `RunResult` or the exception it raised) and the
    tool executions recorded meanwhile."""
    failed = isinstance(outcome, BaseException)
    usage = getattr(outcome, "usage", None)
    if failed:
        messages = getattr(outcome, "messages", None) or []
    else:
        messages = outcome.new_messages() if hasattr(outcome, "new_messages") else []
    run = Run(q.id, q.kind, ending_of(outcome) if failed else "answer", seconds=round(seconds, 3))
    assistant_turns = sum(1 for m in messages if getattr(m, "role", None) == "assistant")
    run.steps = int(getattr(usage, "steps", 0) or 0) or assistant_turns
    if failed:
        run.error = f"{type(outcome).__name__}: {outcome}"[:300]
    else:
        text = outcome.output if isinstance(outcome.output, str) else json.dumps(outcome.output)
        run.output = text[:300]
        run.is_call = looks_like_call(text, tools)
        run.within_3 = not run.is_call and run.steps <= 3
    names = Counter(name for name, _ in executions)
    run.executions = len(executions)
    run.max_one_tool = max(names.values(), default=0)
    run.repeated = len(set(executions)) < len(executions)
    run.executed = sorted(names)
    run.expected_ran = set(q.expected) <= set(names) if q.expected else None
    run.retries = int(getattr(usage, "retries", 0) or 0)
    run.dead_ends = int(getattr(usage, "dead_ends", 0) or 0)
    cut = int(getattr(usage, "cut_calls", 0) or 0)
    finish = getattr(outcome, "finish_reason", None)
    run.max_tokens = finish == "length" or run.ending == "truncation" or cut > 0
    return run


@dataclass
class Options:
    """What a tree's worker needs besides the questions."""

    model: Any = "smollm2"
    max_tokens: int | None = None
    max_steps: int | None = None
    warm_up: bool = True


def _agent(options: Options, tools: Sequence[Any], **extra: Any) -> Any:
    from sdk import Agent

    kwargs: dict[str, Any] = {"tools": list(tools), **extra}
    if options.max_tokens is not None:
        kwargs.setdefault("max_tokens", options.max_tokens)
    if options.max_steps is not None:
        kwargs.setdefault("max_steps", options.max_steps)
    return Agent(options.model, **kwargs)


def run_questions(
    questions: Sequence[Question], options: Options, label: str = "", log: bool = True
) -> list[Run]:
    """Run each question once, in order: the own questions through one agent (as an app
    keeps one), a BFCL question through an agent over its own functions."""
    from sdk import tool

    own = [tool(recorded(fn)) for fn in OWN_TOOLS]
    own_names = [fn.__name__ for fn in OWN_TOOLS]
    shared = _agent(options, own)
    if options.warm_up:  # the model's load and the tools' grammar are not a question's time
        try:
            _agent(options, own, max_tokens=4, max_steps=1).run_sync("Hello")
        except Exception as exc:  # noqa: BLE001 - whatever the warm-up does, the runs count
            print(f"loop: warm-up ended with {type(exc).__name__}", file=sys.stderr)
    runs = []
    for i, q in enumerate(questions):
        names = own_names if q.functions is None else [f["name"] for f in q.functions]
        RECORDER.take()
        start = time.perf_counter()
        try:
            agent = shared
            if q.functions is not None:
                stubs = [StubTool(f["name"], f.get("description", ""), f["parameters"])
                         for f in q.functions]  # fmt: skip
                agent = _agent(options, stubs)
            outcome: Any = agent.run_sync(q.prompt)
        except Exception as exc:  # noqa: BLE001 - every failure is an ending to count
            outcome = exc
        seconds = time.perf_counter() - start
        run = measure(q, outcome, RECORDER.take(), seconds, names)
        run.tree = label
        runs.append(run)
        if log:
            print(
                f"[{label or 'loop'} {i + 1}/{len(questions)}] {q.id}: {run.ending} "
                f"steps={run.steps} execs={run.executions} {run.seconds:.1f}s"
                + (" CALL-AS-TEXT" if run.is_call else ""),
                file=sys.stderr,
                flush=True,
            )
    return runs


# ------------------------------------------------------------------------------ summary


def _share(flags: Sequence[bool]) -> float | None:
    return round(sum(flags) / len(flags), 4) if flags else None


def summarize(runs: Sequence[Run]) -> dict[str, Any]:
    """The reported numbers of a group of runs (shares are of all its runs)."""
    seconds = [r.seconds for r in runs]
    execs = [r.executions for r in runs]
    with_expected = [bool(r.expected_ran) for r in runs if r.expected_ran is not None]
    return {
        "n": len(runs),
        "answered": _share([r.ending == "answer" for r in runs]),
        "answer_is_call": _share([r.is_call for r in runs]),
        "within_3": _share([r.within_3 for r in runs]),
        "executions_mean": round(statistics.fmean(execs), 3) if execs else None,
        "executions_max": max(execs, default=None),
        "max_one_tool": max((r.max_one_tool for r in runs), default=None),
        "repeated": _share([r.repeated for r in runs]),
        "max_tokens": _share([r.max_tokens for r in runs]),
        "step_limit": sum(r.ending == "step_limit" for r in runs),
        "endings": dict(Counter(r.ending for r in runs).most_common()),
        "seconds_median": round(statistics.median(seconds), 3) if seconds else None,
        "seconds_mean": round(statistics.fmean(seconds), 3) if seconds else None,
        "expected_ran": _share(with_expected),
    }


GROUPS = {"single": "single-tool", "two": "two-step", "all": "all"}


def summarize_groups(runs: Sequence[Run]) -> dict[str, dict[str, Any]]:
    return {g: summarize([r for r in runs if g in ("all", r.kind)]) for g in GROUPS}


_ROWS: tuple[tuple[str, str, str], ...] = (
    ("ended with an answer", "answered", "%"),
    ("answer is a call", "answer_is_call", "%"),
    ("real answer within 3 steps", "within_3", "%"),
    ("tool executions / run, mean", "executions_mean", "f"),
    ("tool executions / run, max", "executions_max", "d"),
    ("one tool's executions, max", "max_one_tool", "d"),
    ("repeated execution", "repeated", "%"),
    ("reached max_tokens", "max_tokens", "%"),
    ("StepLimitExceeded (runs)", "step_limit", "d"),
    ("seconds / run, median", "seconds_median", "f"),
    ("seconds / run, mean", "seconds_mean", "f"),
    ("expected tools ran", "expected_ran", "%"),
)


def _cell(value: Any, kind: str) -> str:
    if value is None:
        return "-"
    return {"%": f"{value:.0%}", "f": f"{value:.2f}", "d": f"{value}"}[kind]


def format_table(trees: Sequence[tuple[str, dict[str, dict[str, Any]]]], header: str) -> str:
    """Metrics down, trees across, one block per group (single-tool, two-step, all)."""
    labels = [label for label, _ in trees]
    width = max([12, *(len(x) + 2 for x in labels)])
    lines = [header]
    for group, title in GROUPS.items():
        counts = "/".join(dict.fromkeys(str(s[group]["n"]) for _, s in trees))
        if counts == "0":
            continue
        lines.append(f"\n{title} (n={counts})".ljust(31) + "".join(x.rjust(width) for x in labels))
        for name, key, kind in _ROWS:
            cells = "".join(_cell(s[group][key], kind).rjust(width) for _, s in trees)
            lines.append(f"  {name:<28}{cells}")
        others = [
            ",".join(f"{k}:{v}" for k, v in s[group]["endings"].items() if k != "answer") or "-"
            for _, s in trees
        ]
        lines.append(
            "  other endings: "
            + " | ".join(f"{x}={o}" for x, o in zip(labels, others, strict=True))
        )
    return "\n".join(lines)


# ------------------------------------------------------------------------------ trees


def tree_root() -> Path:
    """The checkout whose `sdk` this process imports."""
    import sdk

    return Path(sdk.__file__).resolve().parent.parent


def tree_label(root: Path) -> str:
    """`git rev-parse --short HEAD`, `*` for uncommitted changes to tracked files."""

    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", "-C", str(root), *args], capture_output=True, text=True, check=False
        )
        return done.stdout.strip() if done.returncode == 0 else ""

    rev = git("rev-parse", "--short", "HEAD") or root.name
    return rev + ("*" if git("status", "--porcelain", "--untracked-files=no") else "")


def run_worker(root: Path, questions: Sequence[Question], options: Options, label: str) -> Any:
    """This file run as a script with `PYTHONPATH=root` (so `import sdk` is that tree's):
    its runs, or an error text."""
    with tempfile.TemporaryDirectory(prefix="sdk-loop-") as tmp:
        spec, out = Path(tmp) / "spec.json", Path(tmp) / "runs.jsonl"
        payload = {**asdict(options), "label": label, "questions": [asdict(q) for q in questions]}
        spec.write_text(json.dumps(payload), encoding="utf-8")
        env = {**os.environ, "PYTHONPATH": str(root)}
        cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", str(spec), str(out)]
        done = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, text=True, check=False)
        lines = out.read_text(encoding="utf-8").splitlines() if out.is_file() else []
        if done.returncode != 0 or not lines:
            return (
                f"worker exited with {done.returncode} (its stderr is above) {done.stdout[-300:]}"
            )
        meta, *rows = (json.loads(line) for line in lines)
        if Path(meta["sdk"]).resolve().parent.parent != root.resolve():
            return f"worker imported {meta['sdk']}, not {root}'s sdk"
        return [Run(**row) for row in rows]


def worker_main(spec_path: str, out_path: str) -> int:
    """The subprocess side: run the questions on the tree `import sdk` finds."""
    import sdk

    spec = json.loads(Path(spec_path).read_text(encoding="utf-8"))
    questions = [
        Question(q["id"], q["kind"], q["prompt"], tuple(q["expected"]),
                 tuple(q["functions"]) if q["functions"] is not None else None)
        for q in spec.pop("questions")
    ]  # fmt: skip
    label = spec.pop("label")
    runs = run_questions(questions, Options(**spec), label)
    with open(out_path, "w", encoding="utf-8") as f:
        f.write(json.dumps({"sdk": sdk.__file__}) + "\n")
        f.writelines(json.dumps(asdict(r), ensure_ascii=False) + "\n" for r in runs)
    return 0


# ------------------------------------------------------------------------------ CLI


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m sdk.bench loop",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--model", default="smollm2", help="smollm2, gemma3, .gguf or HF dir")
    parser.add_argument("--n-single", type=int, default=30, help="single-tool questions (30)")
    parser.add_argument("--n-two", type=int, default=20, help="two-step questions (20)")
    parser.add_argument("--bfcl", help="BFCL v4 dev folder: 10 single-tool questions from it")
    parser.add_argument("--max-tokens", type=int, help="Agent(max_tokens=...); default: its own")
    parser.add_argument("--max-steps", type=int, help="Agent(max_steps=...); default: its own")
    parser.add_argument(
        "--baseline",
        action="append",
        default=[],
        help="an older checkout to run side by side (repeatable or comma-separated)",
    )
    parser.add_argument("--jsonl", help="write one line per run here")
    parser.add_argument("--json", action="store_true", help="print a final BENCH_JSON line")
    parser.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None, model: Any = None) -> int:
    """The bench; `model` (a backend object, e.g. a scripted `TestModel`) overrides `--model`."""
    args = parse_args(argv)
    if args.worker:
        return worker_main(*args.worker)
    spec = args.model
    if model is None and Path(spec).expanduser().exists():
        spec = str(Path(spec).expanduser().resolve())  # the workers' cwd may differ
    options = Options(model if model is not None else spec, args.max_tokens, args.max_steps)
    questions = build_questions(args.bfcl, args.n_single, args.n_two)
    baselines = [Path(d) for arg in args.baseline for d in arg.split(",") if d]
    trees: list[tuple[str, Any]] = []
    if not baselines:
        label = tree_label(tree_root())
        trees.append((label, run_questions(questions, options, label)))
    else:
        seen: Counter[str] = Counter()
        for root in [tree_root(), *baselines]:
            label = tree_label(root)
            seen[label] += 1
            label += f"#{seen[label]}" if seen[label] > 1 else ""
            trees.append((label, run_worker(root, questions, options, label)))
    return report(args, trees, questions)


def report(
    args: argparse.Namespace, trees: Sequence[tuple[str, Any]], questions: Sequence[Question]
) -> int:
    """Print the table (and BENCH_JSON), write `--jsonl`; 1 if a tree's worker failed."""
    failed = [(label, r) for label, r in trees if isinstance(r, str)]
    for label, why in failed:
        print(f"loop: tree {label} failed: {why}", file=sys.stderr)
    done = [(label, r) for label, r in trees if not isinstance(r, str)]
    summaries = [(label, summarize_groups(runs)) for label, runs in done]
    n_single = sum(q.kind == "single" for q in questions)
    n_two = len(questions) - n_single
    extra = [
        f"{k}={v}" for k, v in vars(args).items() if k in ("bfcl", "max_tokens", "max_steps") and v
    ]
    header = f"loop bench: model {args.model}, {n_single} single-tool + {n_two} two-step questions"
    header += ", own tools offered" + "".join(f", {x}" for x in extra)
    if summaries:
        print(format_table(summaries, header), flush=True)
    if args.jsonl:
        with open(args.jsonl, "w", encoding="utf-8") as f:
            for _, runs in done:
                f.writelines(json.dumps(asdict(r), ensure_ascii=False) + "\n" for r in runs)
    if args.json:
        bench = {
            "bench": "loop",
            "model": args.model,
            "max_tokens": args.max_tokens,
            "max_steps": args.max_steps,
            "bfcl": bool(args.bfcl),
            "n_single": n_single,
            "n_two": n_two,
            "trees": {label: s for label, s in summaries},
            "failed": {label: why for label, why in failed},
        }
        print("BENCH_JSON " + json.dumps(bench, separators=(",", ":")), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    # Run by path (a baseline's worker): this folder must not shadow top-level modules, and
    # `import sdk` must find the tree on PYTHONPATH.
    here = str(Path(__file__).resolve().parent)
    sys.path[:] = [p for p in sys.path if str(Path(p or ".").resolve()) != here]
    sys.exit(main())
