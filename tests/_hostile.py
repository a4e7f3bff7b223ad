"""Hostile models for the hardening tests: logits that are random, or adversarial.

`HostileModel` is a `ModelBackend` (SmolLM2's real tokenizer and index) whose decode sessions
return seeded logits instead of a language model's:

- "random": noise plus a bonus for JSON closers, so that most spans can finish;
- "uniform": plain noise over the whole vocabulary;
- "adversary": the NEGATED biased noise: under the grammar's mask, greedy decoding then picks
  the least likely allowed token at every step (odd bytes, long strings, no closers);
- "stall": the adversary with EOS and closers pushed to the bottom, so spans run out of budget.

Nothing else is faked: `Agent` / `generate_turn` run the real turn grammar and matcher.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import jsonschema
import pydantic_core
import torch

from sdk.decoding.generate import TurnRequest

CLOSERS = set(b'"]},0123456789el')


def closer_bonus(index: Any) -> torch.Tensor:
    """Per-token bonus for short structural tokens (closing quotes/brackets, digits, ...)."""
    bonus = torch.zeros(index.vocab_size)
    for tid, piece in enumerate(index.token_bytes):
        if piece and len(piece) <= 2 and all(b in CLOSERS for b in piece):
            bonus[tid] = 1.0
    return bonus


class HostileModel:
    """A `ModelBackend` whose logits are seeded noise (see the module docstring)."""

    __test__ = False

    def __init__(self, tokenizer: Any, index: Any, mode: str, seed: int = 0) -> None:
        self.tokenizer = tokenizer
        self.index = index
        self.mode = mode
        self.seed = seed
        self.turns = 0
        self._bonus = closer_bonus(index)

    def begin_turn(self, request: TurnRequest) -> HostileSession:
        self.turns += 1
        return HostileSession(self, self.seed * 1009 + self.turns)


class HostileSession:
    def __init__(self, owner: HostileModel, seed: int) -> None:
        self.owner = owner
        self.prompt_ids: list[int] = [0]
        self.cached_tokens = 0
        self.gen = torch.Generator().manual_seed(seed)
        self.fed = 0

    def _logits(self) -> torch.Tensor:
        o = self.owner
        noise = torch.randn(o.index.vocab_size, generator=self.gen)
        eos = list(o.index.eos_ids)
        if o.mode == "uniform":
            return noise
        base = noise + 6.0 * o._bonus
        if o.mode == "random":
            return base
        logits = -base
        if o.mode == "stall":
            logits = logits - 50.0 * o._bonus
            logits[eos] = -1e4
        return logits

    def prefill(self) -> torch.Tensor:
        return self._logits()

    def feed(self, ids: Sequence[int]) -> torch.Tensor:
        self.fed += len(ids)
        return self._logits()

    def close(self) -> None:
        return None


# ------------------------------------------------------------------ raw-schema tools


def _validation_error(message: str, data: Any) -> pydantic_core.ValidationError:
    return pydantic_core.ValidationError.from_exception_data(
        "arguments", [{"type": "value_error", "loc": (), "input": data, "ctx": {"error": message}}]
    )


@dataclass
class RawTool:
    """A tool given as a raw JSON Schema (duck-typed, as the agent accepts): arguments are
    checked with `jsonschema`; every call records its arguments."""

    name: str
    json_schema: dict[str, Any]
    description: str = ""
    calls: list[Any] = field(default_factory=list)
    is_async: bool = False

    def validate_args(self, data: Any) -> Any:
        if isinstance(data, str | bytes):
            data = json.loads(data)
        try:
            jsonschema.validate(data, self.json_schema)
        except jsonschema.ValidationError as exc:
            raise _validation_error(exc.message, data) from None
        return data

    def to_openai(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.json_schema,
            },
        }

    def call(self, args: Any, ctx: Any) -> Any:
        # The agent validated before dispatch: re-check independently.
        jsonschema.validate(args, self.json_schema)
        self.calls.append(args)
        return "ok"
