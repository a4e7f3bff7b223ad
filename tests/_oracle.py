"""Lark-based oracle for compiled schemas, and a MaskBench runner (`python -m tests._oracle`).

The Earley parser with the dynamic lexer uses Python's `re`, which implements the dialect's
lookaheads natively, so it decides membership in the grammar's language independently of
the engine.
"""

from __future__ import annotations

import collections
import glob
import json
import os
import random
import signal
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import lark

from sdk.engine import CompiledGrammar, Matcher
from sdk.errors import SchemaError, SDKError
from sdk.grammar import compile_schema
from tests._data import maskbench_files

_PUNCT = ("LBRACE", "RBRACE", "LSQB", "RSQB", "COMMA", "COLON")


def parser(text: str) -> lark.Lark:
    """Earley parser for a generated grammar.

    Lark's dynamic lexer takes the *first* match of Python's leftmost-first `re` at each
    position, while the dialect's lexemes may end wherever the terminal accepts. Value
    terminals are therefore given a trailing `(?![0-9.eE+\\-])` (no JSON value lexeme is ever
    followed by those characters), which makes `re` backtrack to the intended lexeme end.
    """
    lines = []
    for line in text.splitlines():
        name, sep, body = line.partition(": /")
        if sep and name.isupper() and name not in _PUNCT and body.endswith("/"):
            line = f"{name}: /(?:{body[:-1]})(?![0-9.eE+\\-])/"
        lines.append(line)
    return lark.Lark("\n".join(lines), parser="earley", lexer="dynamic")


def accepts(p: lark.Lark, text: str) -> bool:
    try:
        p.parse(text)
    except lark.exceptions.LarkError:
        return False
    return True


@dataclass(eq=False)
class ByteIndex:
    """A vocabulary of byte strings (token 0, empty, is the end of text)."""

    token_bytes: tuple[bytes, ...]
    eos_ids: frozenset[int] = frozenset({0})

    @classmethod
    def of(cls, extra: list[str]) -> ByteIndex:
        """Every single byte, then the `extra` tokens."""
        singles = (bytes([b]) for b in range(256))
        return cls((b"", *singles, *(t.encode() for t in extra)))

    @property
    def vocab_size(self) -> int:
        return len(self.token_bytes)


BYTES = ByteIndex.of([])


def engine_accepts(grammar: CompiledGrammar | str, text: str, index: ByteIndex = BYTES) -> bool:
    """Whether the engine accepts `text` whole (for grammars Lark cannot judge: an
    `//@any_order` line is a comment to Lark)."""
    if isinstance(grammar, str):
        grammar = CompiledGrammar.from_lark(grammar)
    m = Matcher(grammar, index)
    try:
        m.advance_bytes(text.encode())
    except SDKError:
        return False
    return m.is_accepting()


def brute_force_mask(m: Matcher, index: Any) -> Any:
    """Allowed iff the token's bytes keep some parse alive (sound when every reachable parser
    state can still finish): the engine's mask without its vocabulary walks."""
    import numpy as np

    rt = m._rt
    state = rt.initial if not m.tokens else m._history[-1]
    out = np.zeros(m.vocab_size, dtype=bool)
    for tid, data in enumerate(index.token_bytes):
        if data and rt.feed(state, data):
            out[tid] = True
    if m.is_accepting():
        out[list(index.eos_ids)] = True
    return out


def _error_keywords(schema: Any, data: Any) -> set[str]:
    """Keywords jsonschema blames for an invalid instance (including nested contexts)."""
    import jsonschema

    try:
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft7Validator)
        errors = list(cls(schema).iter_errors(data))
    except Exception:  # noqa: BLE001 - the oracle is best effort
        return {"*"}
    out: set[str] = set()

    def walk(errs: Any) -> None:
        for e in errs:
            out.add(str(e.validator))
            walk(e.context or [])

    walk(errors)
    return out


class _Timeout(Exception):
    pass


def _alarm(_sig: int, _frame: Any) -> None:
    raise _Timeout


def run(files: list[str], timeout: float = 20.0) -> dict[str, Any]:
    """Compile each file's schema (flexible whitespace) and parse its tests with the oracle."""
    stats: dict[str, Any] = collections.Counter()
    errors: collections.Counter[str] = collections.Counter()
    details: list[str] = []
    signal.signal(signal.SIGALRM, _alarm)
    for path in files:
        with open(path) as f:
            case = json.load(f)
        name = os.path.basename(path)
        signal.setitimer(signal.ITIMER_REAL, timeout)
        try:
            t0 = time.perf_counter()
            try:
                g = compile_schema(case["schema"], whitespace="flexible")
            except SchemaError as exc:
                stats["compile_error"] += 1
                errors[type(exc).__name__ + ":" + str(exc).split(" (at")[0][:60]] += 1
                details.append(f"COMPILE {name}: {exc}")
                continue
            stats["compile_s"] += time.perf_counter() - t0
            stats["compiled"] += 1
            if g.validated:
                stats["with_validated"] += 1
            p = parser(g.lark)
            vkw = {k for k, _ in g.validated}
            bad = False
            for t in case["tests"]:
                text = json.dumps(t["data"], ensure_ascii=False)
                ok = accepts(p, text)
                if t["valid"] and not ok:
                    stats["valid_rejected"] += 1
                    bad = True
                    details.append(f"VALID-REJECTED {name}: {text[:200]}")
                elif not t["valid"] and ok:
                    blamed = _error_keywords(case["schema"], t["data"])
                    if blamed & vkw or "*" in blamed:
                        stats["invalid_accepted_excused"] += 1
                    else:
                        stats["invalid_accepted"] += 1
                        bad = True
                        details.append(f"INVALID-ACCEPTED {name} {sorted(blamed)}: {text[:200]}")
            stats["schemas_clean" if not bad else "schemas_bad"] += 1
        except _Timeout:
            stats["timeout"] += 1
            details.append(f"TIMEOUT {name}")
        except RecursionError:
            stats["oracle_recursion"] += 1
            details.append(f"ORACLE-RECURSION {name}")
        except lark.exceptions.GrammarError as exc:
            stats["lark_grammar_error"] += 1
            details.append(f"LARK {name}: {exc}")
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    return {"stats": dict(stats), "errors": dict(errors.most_common()), "details": details}


def sample(n: int, seed: int = 0) -> list[str]:
    files = [str(p) for p in maskbench_files()]
    if n >= len(files):
        return files
    by_prefix: dict[str, list[str]] = collections.defaultdict(list)
    for f in files:
        by_prefix[os.path.basename(f).split("---")[0].split("_")[0]].append(f)
    rng = random.Random(seed)
    out: list[str] = []
    for group in by_prefix.values():
        rng.shuffle(group)
    while len(out) < n:
        for group in by_prefix.values():
            if group and len(out) < n:
                out.append(group.pop())
    return sorted(out)


def _main(argv: list[str]) -> None:
    n = int(argv[0]) if argv else 300
    files = sample(n, int(argv[1]) if len(argv) > 1 else 0)
    result = run(files)
    for line in result["details"]:
        print(line)
    print(json.dumps(result["errors"], indent=1))
    print(json.dumps(result["stats"], indent=1))


def iter_cases(pattern: str) -> Iterator[dict[str, Any]]:
    for path in sorted(glob.glob(pattern)):
        with open(path) as f:
            yield json.load(f)


if __name__ == "__main__":
    sys.setrecursionlimit(10000)
    _main(sys.argv[1:])
