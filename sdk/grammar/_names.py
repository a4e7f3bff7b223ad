"""Readable, unique Lark rule and terminal names derived from schema paths and definitions."""

from __future__ import annotations

import re

MAX_NAME = 48


def _clean(hint: str) -> str:
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", hint)
    s = re.sub(r"[^A-Za-z0-9]+", "_", s).strip("_").lower()
    s = re.sub(r"_+", "_", s)
    if len(s) > MAX_NAME:
        s = s[-MAX_NAME:].lstrip("_")
    if not s or s[0].isdigit():
        s = "n_" + s
    return s.rstrip("_") or "n"


class Names:
    def __init__(self) -> None:
        self._used: set[str] = set()
        #: per base, the suffix to try next: every lower one is taken (names are never
        #: released), so a schema of thousands of `anyOf` branches numbers them in linear time
        self._next: dict[str, int] = {}

    def reserve(self, name: str) -> str:
        self._used.add(name)
        return name

    def rule(self, hint: str) -> str:
        return self._fresh(_clean(hint))

    def terminal(self, hint: str) -> str:
        return self._fresh(_clean(hint).upper())

    def _fresh(self, base: str) -> str:
        name, i = base, self._next.get(base, 2)
        if name in self._used:
            name = f"{base}_{i}"
            while name in self._used:
                i += 1
                name = f"{base}_{i}"
            self._next[base] = i + 1
        self._used.add(name)
        return name
