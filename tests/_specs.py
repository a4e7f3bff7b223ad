"""A tool as the turn grammar sees it (`ToolSpec`): a name and an arguments schema, for tests
that need schemas no Python signature writes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class Spec:
    name: str
    json_schema: dict[str, Any]

    def to_openai(self) -> dict[str, Any]:
        return {"type": "function", "function": {"name": self.name, "parameters": self.json_schema}}
