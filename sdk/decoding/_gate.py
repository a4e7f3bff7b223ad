"""Whether to open a call: decided from the model's own distribution, where a call may start.

In `"auto"` the turn grammar lets the model either write text or open a call. Left to greedy
decoding, a small model almost never opens one: the opener's first token (`<` for SmolLM2)
is rarely its single most likely token even when most of its probability mass says "call".
So at a call boundary (the start of the turn, or right after a call closed, once any
whitespace is written) the gate compares the mass of the tokens that begin the opener with
the mass of every other token the grammar allows, in log-odds, plus a tunable `bias`:

    open a call  iff  log P(opener) - log P(anything else) + bias > 0

Whitespace-only tokens are neutral: while they are the most likely choice the decision waits
for the next token. Once the gate decides to call, the rest of the opener is forced (the model
cannot wander off into a `<b>` tag); once it decides not to, the opener is masked for that
token only, and the model may still open a call later in its text.

The same mechanism bounds reasoning before a required call: after `budget` free tokens the
opener is forced.
"""

from __future__ import annotations

import math
import threading
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from sdk.decoding._alignment import prefix_index

if TYPE_CHECKING:
    import torch

    from sdk.engine.tokenizer import TokenizerIndex

__all__ = ["DEFAULT_AUTO_CALL_BIAS", "CallGate", "GateRun"]

DEFAULT_AUTO_CALL_BIAS = 3.0
"""Log-odds added in favour of a call in "auto" (calibrated on the dev BFCL splits, see the
call-quality docs page): a call opens when its probability is above ~5 % of the rest."""

_WS = b" \t\r\n"


@dataclass(frozen=True)
class CallGate:
    """How one turn's call boundaries are steered.

    `bias`: log-odds in favour of opening a call at a boundary (None: no decision, the model's
    own pick stands). `budget`: free tokens allowed before a call must open (reasoning before
    a required call; None: unbounded).
    """

    opener: str
    closer: str | None = None
    bias: float | None = None
    budget: int | None = None


@dataclass(frozen=True)
class _Tables:
    opener_ids: npt.NDArray[np.int64]  # tokens spelling a prefix of the opener, or running past it
    neutral: npt.NDArray[np.bool_]  # whitespace-only tokens


_TABLES: weakref.WeakKeyDictionary[TokenizerIndex, dict[str, _Tables]] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def _tables(index: TokenizerIndex, opener: bytes) -> _Tables:
    key = opener.decode("utf-8", "replace")
    with _LOCK:
        hit = _TABLES.get(index, {}).get(key)
    if hit is not None:
        return hit
    pi = prefix_index(index)
    parts = [pi.spelling(opener[:k]) for k in range(1, len(opener) + 1)]
    parts.append(pi.extending(opener))
    ids = np.unique(np.concatenate(parts)) if parts else np.zeros(0, np.int64)
    neutral = np.fromiter(
        (bool(b) and not b.strip(_WS) for b in index.token_bytes),
        dtype=bool,
        count=len(index.token_bytes),
    )
    tables = _Tables(ids, neutral)
    with _LOCK:
        _TABLES.setdefault(index, {})[key] = tables
    return tables


def _logsumexp(values: torch.Tensor) -> float:
    import torch

    if values.numel() == 0:
        return -math.inf
    return float(torch.logsumexp(values, dim=0).item())


class GateRun:
    """The gate's state over one turn; the decoding loop calls `steer` before each pick and
    `after` with the bytes each step added."""

    def __init__(self, gate: CallGate, index: TokenizerIndex) -> None:
        self.gate = gate
        self.opener = gate.opener.encode()
        self.closer = gate.closer.encode() if gate.closer else None
        self.tables = _tables(index, self.opener)
        self.text = bytearray()
        self.boundary = gate.bias is not None  # the turn's start is a boundary
        self.since = 0  # where the text after the last boundary starts
        self.free_tokens = 0  # tokens since the turn's start or the last call, outside calls
        self.in_call = False
        self.opening = False  # decided to call: the rest of the opener is forced next
        self.decisions: list[tuple[float, bool]] = []  # (log-odds incl. bias, opened)

    def steer(self, logits: torch.Tensor) -> None:
        """Restrict `logits` (already masked by the grammar) in place at a decision point."""
        if self.in_call:
            return
        budget = self.gate.budget
        if budget is not None and self.free_tokens >= budget:
            self._only_opener(logits)
            return
        if not self.boundary or self.text[self.since :].strip(_WS):
            return
        self._decide(logits)

    def _decide(self, logits: torch.Tensor) -> None:
        import torch

        bias = self.gate.bias
        assert bias is not None
        n = min(logits.shape[-1], len(self.tables.neutral))
        lp = torch.log_softmax(logits.float(), dim=-1)
        ids = torch.from_numpy(self.tables.opener_ids[self.tables.opener_ids < n])
        is_open = torch.zeros(logits.shape[-1], dtype=torch.bool)
        is_open[ids] = True
        neutral = torch.zeros(logits.shape[-1], dtype=torch.bool)
        neutral[:n] = torch.from_numpy(self.tables.neutral[:n])
        neutral &= ~is_open
        p_open = _logsumexp(lp[is_open])
        p_neutral = _logsumexp(lp[neutral])
        p_other = _logsumexp(lp[~(is_open | neutral)])
        if p_neutral > max(p_open, p_other):
            return  # whitespace first: decide on the token after it
        self.boundary = False
        if p_open == -math.inf:
            return
        score = p_open - p_other + bias if p_other > -math.inf else math.inf
        opened = score > 0
        self.decisions.append((score, opened))
        if opened:
            self._only_opener(logits)
        else:
            logits[is_open] = float("-inf")

    def _only_opener(self, logits: torch.Tensor) -> None:
        import torch

        keep = torch.zeros(logits.shape[-1], dtype=torch.bool)
        ids = self.tables.opener_ids[self.tables.opener_ids < logits.shape[-1]]
        keep[torch.from_numpy(ids)] = True
        logits.masked_fill_(~keep, float("-inf"))
        self.opening = True

    def committed(self, token: bytes) -> bytes:
        """After the sampled `token`: the rest of the opener that must follow it (the gate
        decided to call and the token began the opener), else b""."""
        if not self.opening:
            return b""
        self.opening = False
        if self.opener.startswith(token):
            return self.opener[len(token) :]
        return b""

    def after(self, data: bytes, tokens: int = 1) -> None:
        """Account for the bytes one step wrote (the sampled token and what was forced)."""
        start = len(self.text)
        self.text += data
        if not self.in_call:
            at = self.text.find(self.opener, max(0, start - len(self.opener) + 1))
            if at >= 0:
                self.in_call = True
                self.boundary = False
            else:
                self.free_tokens += tokens
        if self.in_call and self.closer is not None:
            opened = self.text.rfind(self.opener)
            if self.text.find(self.closer, opened) >= 0:
                self.in_call = False
                self.free_tokens = 0
                self.boundary = self.gate.bias is not None
                self.since = len(self.text)
