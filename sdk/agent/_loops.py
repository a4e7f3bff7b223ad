"""Whether a turn's calls ask for anything new, or the model is going round in circles.

Small tool-trained models rarely stop after the result they needed: Qwen2.5-Coder-0.5B calls
the same tool again, or feeds it its own output (`convert(21 C -> F)` = 69.8, then
`convert(69.8 C -> F)`, ... until `max_steps`). A call *loops* when an earlier call of the same
tool in this run had the same arguments except for values that came out of the run's tool
results (an exact repeat is the case with no difference). A turn whose calls all loop gets
the model nowhere; the agent answers instead. A tool that is meant to be called again that way
(polling, pagination: `list(page_token=<from the last result>)`) is marked
`@tool(repeatable=True)`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import pydantic_core

if TYPE_CHECKING:
    from sdk.result import ToolCall


def _plain(value: Any) -> Any:
    """`value` as JSON data; a string holding a JSON object or list, parsed."""
    plain = pydantic_core.to_jsonable_python(value, fallback=repr)
    if isinstance(plain, str) and plain.lstrip()[:1] in ("{", "["):
        try:
            return json.loads(plain)
        except ValueError:
            return plain
    return plain


def _scalars(value: Any) -> Iterator[Any]:
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
        elif v is not None:
            yield v


def _key(v: Any) -> str:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return json.dumps(v, ensure_ascii=False)
    return repr(float(v))


class ResultValues:
    """The scalars of a run's tool results, to tell a value the model copied from them."""

    def __init__(self, results: Sequence[Any]) -> None:
        self.keys: set[str] = set()
        self.texts: list[str] = []
        for r in results:
            for v in _scalars(_plain(r)):
                self.keys.add(_key(v))
                if isinstance(v, str):
                    self.texts.append(v)

    def has(self, value: Any) -> bool:
        """Is every scalar of `value` one of the results' (or text inside a result's)?"""
        found = False
        for v in _scalars(value):
            text = v if isinstance(v, str) else None if isinstance(v, bool) else repr(v)
            if _key(v) not in self.keys and not (
                text is not None and len(text) > 1 and any(text in t for t in self.texts)
            ):
                return False
            found = True
        return found


def loops(name: str, args: Any, earlier: Sequence[ToolCall], values: ResultValues) -> bool:
    """Does the call `name(args)` (validated) repeat an earlier call of the same tool, up to
    values taken from the run's results?"""
    now = _plain(args)
    if not isinstance(now, dict):
        return False
    for call in earlier:
        if call.name != name or call.args is None or call.error is not None:
            continue
        before = _plain(call.args)
        if not isinstance(before, dict):
            continue
        changed = [k for k in now.keys() | before.keys() if now.get(k) != before.get(k)]
        if all(k in now and values.has(now[k]) for k in changed):
            return True
    return False
