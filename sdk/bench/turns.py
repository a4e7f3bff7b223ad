"""`python -m sdk.bench turns`: what a turn grammar costs over tools the agent already holds.

A turn grammar is built when a turn offers a set of tools the cache has not seen (another
subset, another `tool_choice`, a typed output). Its schemas were compiled when the tools were
defined (`@tool`): the turn joins their pieces (`sdk.grammar.pieces`). This bench defines N
tools, then builds their turn grammar R times with the turn-grammar cache emptied each time,
and prints the median and first build times and the schema compiles the builds paid
(`sdk.engine.caches.lookups()["schema pieces"]`: misses are compiles).

    python -m sdk.bench turns [--tools 20] [--repeats 7] [--choice auto] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, create_model

__all__ = ["main", "make_tools", "measure"]


def make_tools(n: int) -> list[Any]:
    """`n` tools as `@tool` makes them, of a realistic shape: seven parameters, an enum,
    a list, an optional nested model, each tool its own model and names."""
    from sdk.tools import as_tool

    tools = []
    for i in range(n):
        address = create_model(
            f"Address{i}", street=(str, ...), city=(str, ...), zip=(str | None, None)
        )
        args: type[BaseModel] = create_model(
            f"f{i}",
            city=(str, ...),
            days=(int, 3),
            unit=(Literal["c", "f"], "c"),
            tags=(list[str] | None, None),
            addr=(address | None, None),
            score=(float, 0.5),
            **{f"n{i}": (int, i)},  # type: ignore[call-overload]
        )
        tools.append(as_tool(args))
    return tools


def measure(tools: Sequence[Any], repeats: int, choice: str = "auto") -> dict[str, Any]:
    """Build the turn grammar of `tools` `repeats` times, the turn cache emptied before
    each: seconds of each build, schema compiles paid, size of the Lark text."""
    import sdk.decoding.turn_grammar as tg
    from sdk.decoding.formats import HERMES
    from sdk.engine import caches

    def misses() -> int:
        return caches.lookups().get("schema pieces", (0, 0))[1]

    before = misses()
    seconds = []
    text = ""
    for _ in range(repeats):
        tg._TURNS.clear()
        t0 = time.perf_counter()
        turn = tg.build_turn_grammar(list(tools), choice, None, HERMES)
        seconds.append(time.perf_counter() - t0)
        text = turn.lark or ""
    return {
        "tools": len(tools),
        "repeats": repeats,
        "choice": choice,
        "median_ms": round(statistics.median(seconds) * 1000, 2),
        "first_ms": round(seconds[0] * 1000, 2),
        "schema_compiles": misses() - before,
        "lark_chars": len(text),
    }


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sdk.bench turns", description=__doc__)
    ap.add_argument("--tools", type=int, default=20, help="tools in the turn")
    ap.add_argument("--repeats", type=int, default=7, help="builds, turn cache emptied each")
    ap.add_argument("--choice", default="auto", help="tool_choice of the turn")
    ap.add_argument("--json", action="store_true", help="print a final BENCH_JSON line")
    args = ap.parse_args(argv)
    if args.tools < 1 or args.repeats < 1:
        ap.error("--tools and --repeats must be at least 1")
    measure(make_tools(1), 1)  # the engine's first grammar (kernels, Lark) is not the subject
    tools = make_tools(args.tools)
    got = measure(tools, args.repeats, args.choice)
    print(
        f"turn grammar of {got['tools']} defined tools ({got['choice']}): median "
        f"{got['median_ms']} ms, first {got['first_ms']} ms over {got['repeats']} builds; "
        f"{got['schema_compiles']} schema compiles; {got['lark_chars']} chars of Lark"
    )
    if args.json:
        print("BENCH_JSON " + json.dumps({"bench": "turns", **got}))
    return 0
