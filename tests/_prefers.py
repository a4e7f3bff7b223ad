"""A model whose preferences are given token by token: `wants(text so far)` ranks tokens
(single tokens of the real tokenizer, or `(token, logit)`), everything else is -inf. What a
test needs to show how decoding treats a model that wants something the grammar forbids."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from sdk.backends.chat_template import encode_prompt, render_prompt
from sdk.backends.test import TestModel
from sdk.decoding.generate import TurnRequest

__all__ = ["Prefers", "Wants"]

Wants = Callable[[bytes], Sequence[str | tuple[str, float]]]


class _Session:
    """Logits ranking `wants(text so far)` in order (single tokens, or `(token, logit)`),
    everything else at the model's `floor` (-inf unless given)."""

    def __init__(self, model: Prefers, prompt_ids: list[int]) -> None:
        self.model = model
        self.prompt_ids = prompt_ids
        self.cached_tokens = 0
        self.fed: list[int] = []

    def _logits(self) -> torch.Tensor:
        tb = self.model.index.token_bytes
        done = b"".join(tb[t] for t in self.fed)
        logits = torch.full((self.model.index.vocab_size,), self.model.floor)
        for rank, want in enumerate(self.model.wants(done)):
            text, logit = want if isinstance(want, tuple) else (want, -float(rank))
            logits[self.model.eos if text == "<eos>" else self.model.token(text)] = logit
        return logits

    def prefill(self) -> torch.Tensor:
        return self._logits()

    def feed(self, ids: Sequence[int]) -> torch.Tensor:
        self.fed += ids
        self.model.passes += 1
        return self._logits()

    def rollback(self, n: int) -> None:
        self.model.rollbacks.append(n)
        del self.fed[len(self.fed) - n :]

    def close(self) -> None:
        return None


class Prefers(TestModel):
    def __init__(self, wants: Wants, tokenizer: Any, floor: float = float("-inf")) -> None:
        super().__init__((), tokenizer=tokenizer)
        self.wants = wants
        self.floor = floor
        self.passes = 0
        self.rollbacks: list[int] = []
        self.eos = min(self.index.eos_ids)

    def token(self, text: str) -> int:
        ids = self.tokenizer.encode(text, add_special_tokens=False)
        assert len(ids) == 1, (text, ids)
        return int(ids[0])

    def begin_turn(self, request: TurnRequest) -> _Session:  # type: ignore[override]
        prompt = render_prompt(self.tokenizer, request)
        return _Session(self, encode_prompt(self.tokenizer, prompt))
