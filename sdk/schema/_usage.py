"""Bookkeeping of which schema keywords the grammar enforces and which need post-validation."""

from __future__ import annotations

from typing import NamedTuple

from sdk.errors import UnsupportedSchemaError


class KeywordUse(NamedTuple):
    """A constraining keyword and the JSON pointer of the schema object that holds it."""

    keyword: str
    pointer: str


class Usage:
    """Collects `enforced` and `validated` keyword uses; strict mode refuses the latter."""

    def __init__(self, strict: bool) -> None:
        self.strict = strict
        self._enforced: dict[KeywordUse, None] = {}
        self._validated: dict[KeywordUse, None] = {}

    def enforce(self, keyword: str, pointer: str) -> None:
        self._enforced[KeywordUse(keyword, pointer)] = None

    def validate(self, keyword: str, pointer: str, detail: str = "") -> None:
        """Record a keyword the grammar only approximates (by a superset of its language)."""
        if self.strict:
            raise UnsupportedSchemaError(keyword, pointer, detail)
        self._validated[KeywordUse(keyword, pointer)] = None

    def mark(self) -> tuple[int, int]:
        return len(self._enforced), len(self._validated)

    def validated_since(self, mark: tuple[int, int]) -> bool:
        return len(self._validated) > mark[1]

    def rollback(self, mark: tuple[int, int]) -> None:
        """Forget the uses recorded after `mark` (a lowering that was replaced)."""
        self._enforced = dict.fromkeys(list(self._enforced)[: mark[0]])
        self._validated = dict.fromkeys(list(self._validated)[: mark[1]])

    @property
    def enforced(self) -> tuple[KeywordUse, ...]:
        return tuple(u for u in self._enforced if u not in self._validated)

    @property
    def validated(self) -> tuple[KeywordUse, ...]:
        return tuple(self._validated)
