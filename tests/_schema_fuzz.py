"""Adversarial JSON Schemas for the hardening tests: hypothesis strategies and dev-schema mutators.

`compile_checked(schema, index)` runs the whole compile path (`compile_schema`,
`CompiledGrammar.from_schema`, one `Matcher.mask()`) under a watchdog and classifies the
outcome: "ok", the name of the `SDKError` subclass raised, or a crash (anything else) / hang
(over the time budget). The contract under test: only typed errors, always within the budget.
"""

from __future__ import annotations

import copy
import json
import os
import random
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from tests._data import MASKBENCH_DEV, maskbench_files

DEV = MASKBENCH_DEV
DEV_FILES = maskbench_files()  # the dev split, or the vendored sample: never empty


def _traced() -> bool:
    cov = sys.modules.get("coverage")
    return sys.gettrace() is not None or (cov is not None and cov.Coverage.current() is not None)


# CPU seconds per schema, compile + first mask; past it the compile counts as a hang. CPU time
# of the compiling thread, not wall clock: a machine busy with other work must not turn a slow
# compile into a "hang" (a wall-clock budget failed once beside a benchmark run). Under a line
# tracer (coverage, as CI runs) pure-Python compiles take ~3.5x the CPU: a regex refused after
# 2.5 s of subset construction took 8.6 s under coverage, and passed 10 s late in a full
# CI-like run. The budget catches hangs, so it scales with the tracer.
BUDGET_S = float(os.environ.get("SDK_FUZZ_BUDGET_S", "10")) * (4.0 if _traced() else 1.0)
# A backstop in wall-clock time, for a thread that waits instead of computing.
WALL_FACTOR = 10

# Regexes that hurt backtracking engines or blow up automata (nested quantifiers, huge counts,
# features outside the dialect) plus plain invalid ones.
PATHOLOGICAL_REGEXES = [
    r"^(a+)+$",
    r"^(a|aa)*b$",
    r"^(a|a?)+$",
    r"^(.*a){25}$",
    r"^(?:x{0,100}){0,100}$",
    r"^[a-z]{1000}$",
    r"^a{1000}{1000}$",
    r"^(?:(?:(?:(?:(?:a*)*)*)*)*)*$",
    r"^((a{1,10}){1,10}){1,10}$",
    r"^[\s\S]{0,65535}$",
    r"^(a)\1$",
    r"(?<=a)b",
    r"^\p{L}+$",
    r"^(?=.*\d)(?=.*[a-z])(?=.*[A-Z]).{8,64}$",
    r"^(?!.*(ab|cd|ef)).{0,50}$",
    r"^(?:[^\x00-\x7f]{2,30}|\d{3,}){2,20}$",
    r"(",
    r"[z-a]",
    r"a{5,2}",
    r"\\",
    r"*",
    r"a**",
    r"[[:alpha:]]",
    r"(?P<x>a)(?P=x)",
    "\x00\ud800",
    r"^\uD83D\uDE00+$",
    r"^(?i)abc$",
    r"^\b\w+\b$",
    r"^.{2147483647}$",
    r"^a{,5}$",
]

HUGE = [10**6, 10**9, 2**31 - 1, 2**63, 10**30]
WEIRD_NUMBERS = [0, -1, 1, 0.5, -0.0, 1e308, -1e308, 1e-300, 5e-324, 2**53 + 1, 10**40, 7, 3.3]
FORMATS = [
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "iri",
    "uuid",
    "regex",
    "json-pointer",
    "relative-json-pointer",
    "uri-template",
    "unknown-format",
    "",
]
WRONG_VALUES: list[Any] = [None, True, -3, 1.5, "x", [], {}, [1, "a"], {"a": 1}, "#/nope"]

# ------------------------------------------------------------------ hypothesis strategies

_names = st.sampled_from(["a", "b", "id", "name", "x y", "", "é", "$ref", "type", "\u0000", "😀"])
_json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=6),
)
_json_values = st.recursive(
    _json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=6,
)
_regex_atoms = st.sampled_from(
    [
        "a",
        "b",
        ".",
        "\\d",
        "\\w",
        "\\s",
        "[a-c]",
        "[^x]",
        "(",
        ")",
        "|",
        "*",
        "+",
        "?",
        "{2}",
        "{1,3}",
        "{2,}",
        "^",
        "$",
        "\\",
        "(?:",
        "(?=",
        "(?!",
        "\\u00e9",
        "é",
        "[",
        "]",
        "-",
        "\\b",
    ]
)
_regexes = st.one_of(
    st.sampled_from(PATHOLOGICAL_REGEXES),
    st.lists(_regex_atoms, max_size=10).map("".join),
)
_small_int = st.integers(0, 12)
_bound = st.one_of(_small_int, st.integers(0, 40), st.sampled_from(HUGE))
_number = st.one_of(st.sampled_from(WEIRD_NUMBERS), st.integers(-100, 100))
_types = st.one_of(
    st.sampled_from(["null", "boolean", "integer", "number", "string", "object", "array"]),
    st.lists(
        st.sampled_from(["null", "boolean", "integer", "number", "string", "object", "array"]),
        max_size=4,
    ),
)


def _leaf_keywords() -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {},
        optional={
            "type": _types,
            "minLength": _bound,
            "maxLength": _bound,
            "pattern": _regexes,
            "format": st.sampled_from(FORMATS),
            "minimum": _number,
            "maximum": _number,
            "exclusiveMinimum": st.one_of(_number, st.booleans()),
            "exclusiveMaximum": st.one_of(_number, st.booleans()),
            "multipleOf": st.sampled_from([1, 2, 0.5, 0.01, 3.3, 1e-300, 1e300, 7, 10**20]),
            "enum": st.lists(_json_values, max_size=5),
            "const": _json_values,
            "minItems": _bound,
            "maxItems": _bound,
            "uniqueItems": st.booleans(),
            "minProperties": _bound,
            "maxProperties": _bound,
            "required": st.lists(_names, max_size=3),
            "$ref": st.sampled_from(
                [
                    "#",
                    "#/$defs/d0",
                    "#/$defs/d1",
                    "#/$defs/missing",
                    "#/definitions/d0",
                    "http://example.com/s.json",
                    "#anchor",
                    "#/properties/a",
                    "other.json#/x",
                    "#/$defs/d0/properties/x",
                ]
            ),
        },
    )


def _combine(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    kids = st.lists(children, min_size=1, max_size=3)
    return st.one_of(
        st.builds(lambda b, k: {**b, "anyOf": k}, _leaf_keywords(), kids),
        st.builds(lambda b, k: {**b, "oneOf": k}, _leaf_keywords(), kids),
        st.builds(lambda b, k: {**b, "allOf": k}, _leaf_keywords(), kids),
        st.builds(lambda b, c: {**b, "not": c}, _leaf_keywords(), children),
        st.builds(
            lambda b, c, t, e: {**b, "if": c, "then": t, "else": e},
            _leaf_keywords(),
            children,
            children,
            children,
        ),
        st.builds(
            lambda b, props, add, req: {
                **b,
                "type": "object",
                "properties": props,
                "additionalProperties": add,
                "required": req,
            },
            _leaf_keywords(),
            st.dictionaries(_names, children, max_size=3),
            st.one_of(st.booleans(), children),
            st.lists(_names, max_size=3),
        ),
        st.builds(
            lambda b, pp, names: {**b, "patternProperties": pp, "propertyNames": names},
            _leaf_keywords(),
            st.dictionaries(_regexes, children, max_size=2),
            children,
        ),
        st.builds(
            lambda b, items, prefix, contains: {
                **b,
                "type": "array",
                "items": items,
                "prefixItems": prefix,
                "contains": contains,
            },
            _leaf_keywords(),
            st.one_of(children, st.lists(children, max_size=2)),
            st.lists(children, min_size=1, max_size=2),
            children,
        ),
        st.builds(
            lambda b, dep: {**b, "dependentRequired": dep},
            _leaf_keywords(),
            st.dictionaries(_names, st.lists(_names, max_size=2), max_size=2),
        ),
    )


def _garbage(schema: Any, data: st.DataObject) -> Any:
    """Some keyword of some subschema replaced by a value of the wrong type."""
    if not isinstance(schema, dict):
        return schema
    subs = _subschemas(schema, [])
    node = data.draw(st.sampled_from(subs))
    key = data.draw(st.sampled_from(sorted(node) or ["type"]))
    node[key] = data.draw(st.sampled_from(WRONG_VALUES))
    return schema


def schemas() -> st.SearchStrategy[Any]:
    """Random schemas: every keyword, refs (some dangling or cyclic); one in four has a
    keyword with a value of the wrong type."""
    clean = _clean_schemas()
    return st.one_of(clean, clean, clean, st.builds(_garbage, clean, st.data()))


def _clean_schemas() -> st.SearchStrategy[Any]:
    node = st.recursive(st.one_of(st.booleans(), _leaf_keywords()), _combine, max_leaves=12)
    return st.builds(
        lambda root, d0, d1, with_defs: (
            {**root, "$defs": {"d0": d0, "d1": d1}}
            if with_defs and isinstance(root, dict)
            else root
        ),
        node,
        node,
        st.one_of(node, st.just({"$ref": "#/$defs/d0"}), st.just({"$ref": "#/$defs/d1"})),
        st.booleans(),
    )


# ------------------------------------------------------------------ mutators of real schemas


def _subschemas(node: Any, out: list[dict[str, Any]]) -> list[dict[str, Any]]:
    todo = [node]
    while todo:
        item = todo.pop()
        if isinstance(item, dict):
            out.append(item)
            todo.extend(item.values())
        elif isinstance(item, list):
            todo.extend(item)
    return out


def _dangling(rng: random.Random, root: dict[str, Any], node: dict[str, Any]) -> None:
    node["$ref"] = rng.choice(
        [
            "#/$defs/__missing__",
            "#/definitions/a/b/c",
            "#/properties/%%",
            "https://x.invalid/s",
            "#/items/99",
            "#unknown-anchor",
            "#/$defs/~2bad",
        ]
    )


def _cycle(rng: random.Random, root: dict[str, Any], node: dict[str, Any]) -> None:
    defs = root.setdefault("$defs", {})
    if not isinstance(defs, dict):
        root["$defs"] = defs = {}
    kind = rng.randrange(4)
    if kind == 0:  # a pure ref cycle: a -> b -> a
        defs["cyc_a"] = {"$ref": "#/$defs/cyc_b"}
        defs["cyc_b"] = {"$ref": "#/$defs/cyc_a"}
        node["$ref"] = "#/$defs/cyc_a"
    elif kind == 1:  # the root refers to itself
        node["$ref"] = "#"
    elif kind == 2:  # allOf cycle
        defs["cyc_c"] = {"allOf": [{"$ref": "#/$defs/cyc_c"}, {"type": "object"}]}
        node["$ref"] = "#/$defs/cyc_c"
    else:  # a productive recursive structure, required at every level (infinite values)
        defs["cyc_d"] = {
            "type": "object",
            "properties": {"next": {"$ref": "#/$defs/cyc_d"}},
            "required": ["next"],
        }
        node["$ref"] = "#/$defs/cyc_d"


def _huge_enum(rng: random.Random, root: dict[str, Any], node: dict[str, Any]) -> None:
    n = rng.choice([300, 1000, 2000])
    kind = rng.randrange(3)
    if kind == 0:
        node["enum"] = [f"value_{i:06d}_{rng.random():.6f}" for i in range(n)]
    elif kind == 1:
        node["enum"] = list(range(n))
    else:
        node["enum"] = [{"k": i, "v": [i, str(i)]} for i in range(n // 10)]


def _deep(rng: random.Random, root: dict[str, Any], node: dict[str, Any]) -> None:
    depth = rng.choice([50, 200, 1000, 5000])
    wrapper = rng.choice(["items", "anyOf", "allOf", "properties", "not"])
    inner: Any = dict(node)
    for _ in range(depth):
        if wrapper == "items":
            inner = {"type": "array", "items": inner}
        elif wrapper == "anyOf":
            inner = {"anyOf": [inner, {"type": "null"}]}
        elif wrapper == "allOf":
            inner = {"allOf": [inner]}
        elif wrapper == "not":
            inner = {"not": inner}
        else:
            inner = {"type": "object", "properties": {"p": inner}, "required": ["p"]}
    node.clear()
    node.update(inner)


def _contradict(rng: random.Random, root: dict[str, Any], node: dict[str, Any]) -> None:
    kind = rng.randrange(7)
    if kind == 0:
        node.update(type="string", minLength=10, maxLength=2)
    elif kind == 1:
        node.update(type="number", minimum=5, maximum=1)
    elif kind == 2:
        node.update(type="array", minItems=5, maxItems=1)
    elif kind == 3:
        node.update(type="integer", exclusiveMinimum=1, exclusiveMaximum=2)
    elif kind == 4:
        node.update(type="object", properties={"a": False}, required=["a"])
    elif kind == 5:
        node.update(allOf=[{"type": "string"}, {"type": "integer"}])
    else:
        node.update(type="integer", multipleOf=0.7, minimum=0.1, maximum=0.6)


def _pathological_regex(rng: random.Random, root: dict[str, Any], node: dict[str, Any]) -> None:
    pattern = rng.choice(PATHOLOGICAL_REGEXES)
    if rng.random() < 0.5:
        node.update(type="string", pattern=pattern)
    else:
        node.update(type="object", patternProperties={pattern: {"type": "integer"}})


def _huge_bounds(rng: random.Random, root: dict[str, Any], node: dict[str, Any]) -> None:
    big = rng.choice(HUGE)
    kind = rng.randrange(6)
    if kind == 0:
        node.update(type="string", minLength=big)
    elif kind == 1:
        node.update(type="string", minLength=rng.randrange(100, 5000), maxLength=big)
    elif kind == 2:
        node.update(type="array", minItems=rng.randrange(50, 2000), items={"type": "integer"})
    elif kind == 3:
        node.update(type="object", minProperties=rng.randrange(20, 500))
    elif kind == 4:
        node.update(
            type="number",
            multipleOf=rng.choice([1e-300, 1e-9, 0.3, 1e300]),
            minimum=-big,
            maximum=big,
        )
    else:
        node.update(type="integer", minimum=-(10**40), maximum=10**40 + rng.randrange(10**6))


def _wrong_type(rng: random.Random, root: dict[str, Any], node: dict[str, Any]) -> None:
    keys = list(node) or ["type"]
    node[rng.choice(keys)] = rng.choice(WRONG_VALUES)


def _intersect(rng: random.Random, root: dict[str, Any], node: dict[str, Any]) -> None:
    subs = _subschemas(root, [])
    others = [copy.deepcopy(rng.choice(subs)) for _ in range(rng.randrange(2, 4))]
    for o in others:
        o.pop("$defs", None)
        o.pop("definitions", None)
    mine = copy.deepcopy(node)
    node.clear()
    node["allOf"] = [mine, *others] if rng.random() < 0.7 else []
    if rng.random() < 0.3:
        node["not"] = others[0]


MUTATORS = [
    _dangling,
    _cycle,
    _huge_enum,
    _deep,
    _contradict,
    _pathological_regex,
    _huge_bounds,
    _wrong_type,
    _intersect,
]


def mutate(schema: Any, rng: random.Random, n: int | None = None) -> Any:
    """`schema` with 1-3 random mutations at random subschemas (the input is not modified)."""
    root = copy.deepcopy(schema)
    if not isinstance(root, dict):
        root = {"anyOf": [root]}
    chosen = [rng.choice(MUTATORS) for _ in range(n if n is not None else rng.randrange(1, 4))]
    # Deep nesting last: the other mutators copy subschemas (recursively).
    chosen.sort(key=lambda m: m is _deep)
    for mutator in chosen:
        node = rng.choice(_subschemas(root, []))
        mutator(rng, root, node)
    return root


def dev_schema(path: Path) -> Any:
    return json.loads(path.read_text())["schema"]


# ------------------------------------------------------------------ the checked compile


@dataclass
class Outcome:
    kind: str  # "ok" | an SDKError subclass name | "crash" | "hang"
    seconds: float
    detail: str = ""


@dataclass
class Tally:
    total: int = 0
    ok: int = 0
    typed: dict[str, int] = field(default_factory=dict)
    crashes: list[str] = field(default_factory=list)
    hangs: list[str] = field(default_factory=list)
    max_seconds: float = 0.0

    def add(self, outcome: Outcome, label: str) -> None:
        self.total += 1
        self.max_seconds = max(self.max_seconds, outcome.seconds)
        if outcome.kind == "ok":
            self.ok += 1
        elif outcome.kind == "crash":
            self.crashes.append(f"{label}: {outcome.detail}")
        elif outcome.kind == "hang":
            self.hangs.append(f"{label}: {outcome.detail}")
        else:
            self.typed[outcome.kind] = self.typed.get(outcome.kind, 0) + 1

    @property
    def typed_errors(self) -> int:
        return sum(self.typed.values())

    def summary(self) -> str:
        return (
            f"schemas={self.total} ok={self.ok} typed_errors={self.typed_errors} {self.typed} "
            f"crashes={len(self.crashes)} hangs={len(self.hangs)} max_s={self.max_seconds:.2f}"
        )


def _compile(schema: Any, index: Any) -> None:
    from sdk.engine import CompiledGrammar, Matcher
    from sdk.grammar import compile_schema

    compile_schema(schema)
    grammar = CompiledGrammar.from_schema(schema)
    Matcher(grammar, index).mask()


def compile_checked(schema: Any, index: Any, budget_s: float = BUDGET_S) -> Outcome:
    """Compile under a watchdog thread: a run past `budget_s` is a hang (the worker thread is
    abandoned as a daemon; the caller fails the test)."""
    from sdk.errors import SDKError

    box: dict[str, Any] = {}

    def work() -> None:
        box["clock"] = time.pthread_getcpuclockid(threading.get_ident())
        start = time.thread_time()
        try:
            _compile(schema, index)
            box["kind"] = "ok"
        except SDKError as exc:
            box["kind"] = type(exc).__name__
            box["detail"] = str(exc)[:200]
        except BaseException as exc:  # noqa: BLE001 - the finding: an untyped error
            box["kind"] = "crash"
            box["detail"] = f"{type(exc).__name__}: {str(exc)[:200]}\n" + "".join(
                traceback.format_exception(exc)[-6:]
            )
        finally:
            box["cpu"] = time.thread_time() - start

    t0 = time.perf_counter()
    worker = threading.Thread(target=work, daemon=True, name="schema-fuzz")
    worker.start()
    seconds = 0.0
    while worker.is_alive():
        worker.join(min(0.25, budget_s))
        try:
            seconds = time.clock_gettime(box["clock"])
        except (KeyError, OSError):  # not started yet, or just ended
            if not worker.is_alive():
                break
        if seconds > budget_s or time.perf_counter() - t0 > WALL_FACTOR * budget_s:
            return Outcome("hang", seconds, f"still compiling after {seconds:.1f} s of CPU")
    return Outcome(box["kind"], box.get("cpu", seconds), box.get("detail", ""))


def rss_bytes() -> int:
    """Current resident set size (Linux), 0 where unknown."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * 4096
    except OSError:
        return 0


def short(schema: Any, limit: int = 300) -> str:
    try:
        text = json.dumps(schema, default=repr)
    except RecursionError:
        return f"<schema nested deeper than {sys.getrecursionlimit()} levels>"
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} chars)"
