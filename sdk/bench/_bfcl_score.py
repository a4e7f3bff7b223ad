"""The BFCL bench's scoring: BFCL's AST match of a call against its ground truth (every
argument value acceptable, omitted only where allowed, strings compared loosely as BFCL does),
and a one-to-one matching of parallel calls."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

_STRIP = re.compile(r"[ ,./\-_*^'\"]")


def _norm(value: Any) -> Any:
    if isinstance(value, str):
        return _STRIP.sub("", value).lower()
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, list | tuple):
        return [_norm(v) for v in value]
    if isinstance(value, dict):
        return {k: _norm(v) for k, v in value.items()}
    return value


def _one_ok(value: Any, accepted: Any) -> bool:
    if accepted == "":
        return False
    if isinstance(accepted, dict) and isinstance(value, dict):
        # Nested ground truth: each key maps to its own list of acceptable values.
        return _args_ok(value, accepted)
    return bool(_norm(accepted) == _norm(value))


def _value_ok(value: Any, acceptable: Sequence[Any]) -> bool:
    return any(_one_ok(value, a) for a in acceptable)


def _args_ok(args: Mapping[str, Any], expected: Mapping[str, Any]) -> bool:
    if any(k not in expected for k in args):
        return False
    for key, acceptable in expected.items():
        options = acceptable if isinstance(acceptable, list) else [acceptable]
        if key not in args:
            if "" not in options:
                return False
        elif not _value_ok(args[key], options):
            return False
    return True


def is_correct(name: str, args: Any, truth: Mapping[str, Any]) -> bool:
    """BFCL-style AST match of one call against one ground-truth call."""
    if name not in truth or not isinstance(args, dict):
        return False
    return _args_ok(args, truth[name])


Call = tuple[str, Any]  # (function name, decoded arguments); name "" when undecodable


def call_status(call: Call, tools: Mapping[str, Any]) -> tuple[bool, bool]:
    """(parsed, valid): the function is offered / its arguments validate."""
    name, args = call
    tool = tools.get(name)
    if tool is None:
        return False, False
    try:
        tool.validate_args(args)
    except (ValidationError, ValueError, TypeError):
        return True, False
    return True, True


def match_calls(calls: Sequence[Call], truth: Sequence[Mapping[str, Any]]) -> bool:
    """Exactly `len(truth)` calls, and a one-to-one assignment in which every expected call
    is matched (`is_correct`) by its own produced call, in any order."""
    if len(calls) != len(truth):
        return False
    ok = [[is_correct(name, args, t) for t in truth] for name, args in calls]
    owner: list[int | None] = [None] * len(truth)

    def assign(i: int, seen: set[int]) -> bool:  # augmenting path (Kuhn's matching)
        for j, fits in enumerate(ok[i]):
            if fits and j not in seen:
                seen.add(j)
                prev = owner[j]
                if prev is None or assign(prev, seen):
                    owner[j] = i
                    return True
        return False

    return all(assign(i, set()) for i in range(len(calls)))
