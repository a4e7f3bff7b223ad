"""One row of logits as either backend gives it: a torch tensor (transformers, on any device)
or a NumPy array (llama.cpp, whose process then never imports torch: ~1 s and ~200 MB less).

The decoding loop, the gate and the matcher do the few things they need through these
functions. The torch branch is the code that ran before, unchanged; the NumPy branch computes
the same in float64 where it sums (softmax, log-sum-exp), so a decision taken on a sum is at
least as precise as torch's float32 one.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import torch

    Logits = torch.Tensor | np.ndarray
else:
    Logits = Any

__all__ = [
    "Logits",
    "Rng",
    "all_neginf",
    "as_float",
    "ban",
    "choose",
    "copy",
    "fill_neginf",
    "host",
    "is_banned",
    "keep_only",
    "log_softmax",
    "logsumexp",
    "neginf",
]


def as_float(x: Logits) -> Logits:
    """float32 logits (a copy only where the dtype differs)."""
    return x.astype(np.float32, copy=False) if isinstance(x, np.ndarray) else x.float()


def copy(x: Logits) -> Logits:
    return x.copy() if isinstance(x, np.ndarray) else x.clone()


def host(x: Any) -> np.ndarray:
    """A row as a NumPy array on the host (a torch tensor is copied off its device)."""
    return x if isinstance(x, np.ndarray) else x.detach().cpu().numpy()


def neginf(x: Logits) -> Any:
    """Where `x` is -inf, as a boolean row of `x`'s kind."""
    if isinstance(x, np.ndarray):
        return np.isneginf(x)
    import torch

    return torch.isneginf(x)


def all_neginf(x: Logits) -> bool:
    return bool(neginf(x).all())


def ban(x: Logits, ids: Any) -> None:
    """Set `x` to -inf at the token ids `ids` (a few: no whole-row mask is built)."""
    if isinstance(x, np.ndarray):
        x[np.asarray(ids, dtype=np.int64)] = -np.inf
        return
    import torch

    x[torch.as_tensor(np.asarray(ids, dtype=np.int64), device=x.device)] = float("-inf")


def is_banned(x: Logits, token: int) -> bool:
    """Is `x` -inf at `token`?"""
    return bool(np.isneginf(x[token])) if isinstance(x, np.ndarray) else bool(x[token].isneginf())


def fill_neginf(x: Logits, where: Any) -> None:
    """Set `x` to -inf where `where` (a boolean NumPy row, or one of `x`'s kind) holds."""
    if isinstance(x, np.ndarray):
        x[np.asarray(where, dtype=bool)] = -np.inf
        return
    import torch

    if isinstance(where, np.ndarray):
        where = torch.from_numpy(where)
    x.masked_fill_(where.to(x.device), float("-inf"))


def keep_only(x: Logits, allowed: np.ndarray) -> None:
    """-inf everywhere `allowed` (a boolean NumPy row, padded with False or cut to `x`'s
    length) is False."""
    n = x.shape[-1]
    if n > allowed.shape[0]:
        allowed = np.concatenate([allowed, np.zeros(n - allowed.shape[0], dtype=bool)])
    else:
        allowed = allowed[:n]
    fill_neginf(x, ~allowed)


def log_softmax(x: Logits) -> Logits:
    if isinstance(x, np.ndarray):
        top = float(np.max(x))
        if top == -math.inf:
            return np.full_like(x, -np.inf)
        shifted = x.astype(np.float64) - top
        return shifted - math.log(float(np.exp(shifted).sum()))
    import torch

    return torch.log_softmax(x.float(), dim=-1)


def logsumexp(values: Logits) -> float:
    """log(sum(exp(values))) of a 1-d row; -inf for an empty one."""
    if isinstance(values, np.ndarray):
        if values.size == 0:
            return -math.inf
        top = float(np.max(values))
        if top == -math.inf:
            return -math.inf
        return top + math.log(float(np.exp(values.astype(np.float64) - top).sum()))
    import torch

    if values.numel() == 0:
        return -math.inf
    return float(torch.logsumexp(values, dim=0).item())


class Rng:
    """A sampled turn's seeded random source, made for the kind of logits it first meets."""

    def __init__(self, seed: int | None) -> None:
        self.seed = seed
        self._torch: Any = None
        self._numpy: np.random.Generator | None = None

    def torch(self) -> Any:
        if self._torch is None:
            import torch

            self._torch = torch.Generator()
            if self.seed is not None:
                self._torch.manual_seed(self.seed)
        return self._torch

    def numpy(self) -> np.random.Generator:
        if self._numpy is None:
            self._numpy = np.random.default_rng(self.seed)
        return self._numpy


def choose(x: Logits, temperature: float, top_p: float, rng: Rng | None) -> int:
    """The next token: the argmax at temperature 0, else a draw from the tempered (and
    nucleus-cut) softmax."""
    if temperature <= 0 or rng is None:
        return int(np.argmax(x)) if isinstance(x, np.ndarray) else int(x.argmax().item())
    if isinstance(x, np.ndarray):
        return _choose_numpy(x, temperature, top_p, rng.numpy())
    import torch

    probs = torch.softmax(x.float() / temperature, dim=-1)
    if top_p < 1.0:
        sorted_p, order = torch.sort(probs, descending=True)
        keep = torch.cumsum(sorted_p, dim=-1) - sorted_p < top_p
        keep[0] = True
        probs = torch.zeros_like(probs).scatter_(0, order[keep], sorted_p[keep])
    return int(torch.multinomial(probs, 1, generator=rng.torch()).item())


def _choose_numpy(x: np.ndarray, temperature: float, top_p: float, rng: np.random.Generator) -> int:
    scaled = x.astype(np.float64) / temperature
    probs = np.exp(scaled - np.max(scaled))
    probs /= probs.sum()
    if top_p < 1.0:
        order = np.argsort(-probs, kind="stable")
        sorted_p = probs[order]
        keep = np.cumsum(sorted_p) - sorted_p < top_p
        keep[0] = True
        probs = np.zeros_like(probs)
        probs[order[keep]] = sorted_p[keep]
    cdf = np.cumsum(probs)
    return int(min(np.searchsorted(cdf, rng.random() * cdf[-1], side="right"), len(cdf) - 1))
