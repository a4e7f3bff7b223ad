"""A parser position: what the runtime's stack entries number."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Position:
    """A state of one rule's automaton, numbered globally (static positions come from the
    rules' automata, dynamic ones from `_any_order`)."""

    rule: int
    terms: Mapping[int, int]  # terminal id -> next position
    calls: tuple[tuple[int, int], ...]  # (rule id, return position)
    final: bool
