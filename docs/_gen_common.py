"""What the docs generators share: the marked region of a page, rewritten or checked."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

END = "<!-- END GENERATED -->"


def begin_marker(script: str) -> str:
    return f"<!-- BEGIN GENERATED: docs/{script} -->"


def render(page: str, script: str, table: str) -> str:
    """`page` with the region between the markers replaced by `table`."""
    begin = begin_marker(script)
    head, rest = page.split(begin, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{begin}\n{table}{END}{tail}"


def main(argv: list[str], page: Path, script: str, table: Callable[[], str]) -> int:
    """Rewrite the page in place, or with `--check` exit 1 when it is stale."""
    current = page.read_text(encoding="utf-8")
    fresh = render(current, script, table())
    if "--check" in argv:
        if fresh != current:
            print(f"{page} is stale: run python docs/{script}", file=sys.stderr)
            return 1
        return 0
    page.write_text(fresh, encoding="utf-8")
    return 0
