"""Follow one tool's schema from `Agent(tools=...)` to the matcher, call by call.

A taint trace (issue 46's measure of how far the data path wanders): the tool and its schema
are tracked, and so is whatever a call that was handed a tracked object returns, when that
call is on the data path (`sdk.grammar`, `sdk.schema`, `sdk.engine`, `sdk.decoding`) or
builds a piece, a grammar or a compile; and what such a value holds (attributes, items, two
levels down). A call counts when an argument is tracked. Printed: the modules such calls ran
in, in order (consecutive calls in one module collapsed), how many modules, and how many
times the path came back to a module it had left. It stops when the first matcher is built
(the embedded model's first turn).

Run from a checkout: `HF_HUB_OFFLINE=1 .venv/bin/python scripts/trace_schema_path.py`.
"""

from __future__ import annotations

import os
import sys
import threading
from types import FrameType
from typing import Any, Literal

sys.path.insert(0, os.getcwd())

from sdk import Agent, tool  # noqa: E402
from sdk.tools import as_tool  # noqa: E402

ROOT = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(sys.modules["sdk"].__file__ or ""))), ""
)
DATA_PATH = tuple(f"sdk/{p}/" for p in ("grammar", "schema", "engine", "decoding"))
BUILDERS = ("piece", "grammar", "compile")


@tool
def get_weather(city: str, unit: Literal["celsius", "fahrenheit"] = "celsius") -> str:
    """Weather in a city."""
    return "sunny"


class Trace:
    def __init__(self, *roots: Any) -> None:
        self.ids: set[int] = set()
        self.keep: list[Any] = []  # alive, so that no tracked id is reused
        self.live: set[int] = set()
        self.path: list[tuple[str, str]] = []
        self.done = False
        for r in roots:
            self.taint(r, 0)

    @staticmethod
    def trivial(v: Any) -> bool:
        if v is None or isinstance(v, bool | int | float | bytes):
            return True
        if isinstance(v, str):
            return len(v) < 16
        return isinstance(v, tuple | frozenset | list | dict | set) and not v

    def taint(self, v: Any, depth: int) -> None:
        if self.trivial(v) or depth > 2 or id(v) in self.ids:
            return
        self.ids.add(id(v))
        self.keep.append(v)
        if isinstance(v, dict):
            items = list(v.values())[:200]
        elif isinstance(v, list | tuple):
            items = list(v)[:200]
        elif hasattr(v, "__dict__") and not isinstance(v, type):
            items = list(vars(v).values())[:50]
        else:
            items = []
        for x in items:
            self.taint(x, depth + 1)

    def tracked(self, v: Any, depth: int = 0) -> bool:
        if self.trivial(v):
            return False
        if id(v) in self.ids:
            return True
        if depth < 2 and isinstance(v, list | tuple):
            return any(self.tracked(x, depth + 1) for x in v[:50])
        if depth < 2 and isinstance(v, dict):
            return any(self.tracked(x, depth + 1) for x in list(v.values())[:50])
        return False

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        code = frame.f_code
        if self.done or not code.co_filename.startswith(ROOT + "sdk"):
            return
        if event == "call":
            n = code.co_argcount + code.co_kwonlyargcount
            if any(self.tracked(frame.f_locals.get(a)) for a in code.co_varnames[:n]):
                self.live.add(id(frame))
                module = os.path.relpath(code.co_filename, ROOT)
                if not self.path or self.path[-1][0] != module:
                    self.path.append((module, code.co_name))
        elif event == "return" and id(frame) in self.live:
            self.live.discard(id(frame))
            if any(p in code.co_filename for p in DATA_PATH) or any(
                b in code.co_name for b in BUILDERS
            ):
                self.taint(arg, 0)
            if code.co_name == "__init__" and code.co_filename.endswith("engine/matcher.py"):
                self.done = True


def main() -> None:
    spec = as_tool(get_weather)
    trace = Trace(get_weather, spec, spec.json_schema)
    threading.setprofile(trace)
    sys.setprofile(trace)
    try:
        Agent(tools=[get_weather]).run_sync("What is the weather in Paris?")
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    seen: set[str] = set()
    back = 0
    for module, function in trace.path:
        back += module in seen
        seen.add(module)
        print(f"  {module}:{function}")
    print(
        f"modules visited: {len(seen)}; returns to a module already left: {back}; "
        f"matcher reached: {trace.done}"
    )


if __name__ == "__main__":
    main()
