"""Named definitions: `$ref` targets and memoised intersections, computed lazily.

Why lazy: a definition is lowered only when reached, recursion is cut by referring to it by
name (`Ref`), and an intersection that needs a definition still being computed is deferred
(`Cycle`) instead of recursing forever.
"""

from __future__ import annotations

from collections.abc import Callable

from sdk.errors import TooComplexError

from ._ir import Node

MAX_DEFINITIONS = 5000


class Cycle(Exception):
    """A definition's body was needed while it is still being computed."""


class Definitions:
    def __init__(self) -> None:
        self.nodes: dict[str, Node] = {}
        self.names: dict[str, str] = {}
        self._thunks: dict[str, Callable[[], Node]] = {}
        self._active: list[str] = []
        self.final = False

    def declare(self, key: str, name: str, thunk: Callable[[], Node]) -> None:
        if key in self.names:
            return
        if len(self.names) >= MAX_DEFINITIONS:
            raise TooComplexError(f"more than {MAX_DEFINITIONS} schema definitions")
        self.names[key] = name
        self._thunks[key] = thunk

    def forget(self, key: str) -> None:
        self.names.pop(key, None)
        self._thunks.pop(key, None)
        self.nodes.pop(key, None)

    def active(self, key: str) -> bool:
        return key in self._active

    def node(self, key: str) -> Node:
        """The definition's body, computing it now if needed; Cycle if it is in progress."""
        if key in self.nodes:
            return self.nodes[key]
        if key in self._active:
            raise Cycle(key)
        self._active.append(key)
        try:
            node = self._thunks[key]()
        finally:
            self._active.pop()
        self.nodes[key] = node
        del self._thunks[key]  # it holds the lowerer, which holds this: no cycle left behind
        return node

    def finish(self) -> None:
        """Compute every definition still pending (in declaration order, repeatedly)."""
        self.final = True
        while True:
            pending = [k for k in self.names if k not in self.nodes]
            if not pending:
                return
            for key in pending:
                self.node(key)
