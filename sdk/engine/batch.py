"""Batched decoding helpers: one token bitmask per row, filled by that row's `Matcher`.

Many sequences (batch rows) can share one `CompiledGrammar` (or use different ones); each row
has its own `Matcher`. The bitmask layout is XGrammar's: int32 words, bit `i % 32` of word
`i // 32` set when token `i` is allowed::

    bitmask = allocate_token_bitmask(len(matchers), vocab_size)
    fill_next_token_bitmask(matchers, bitmask)       # row i <- matchers[i] (None: no grammar)
    apply_token_bitmask(logits, bitmask)             # logits: (batch, vocab), in place
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch

    from .matcher import Matcher

__all__ = ["allocate_token_bitmask", "apply_token_bitmask", "fill_next_token_bitmask"]


def allocate_token_bitmask(batch_size: int, vocab_size: int) -> np.ndarray:
    """An all-allowed int32 bitmask of shape `(batch_size, ceil(vocab_size / 32))`."""
    return np.full((batch_size, (vocab_size + 31) // 32), -1, dtype=np.int32)


def fill_next_token_bitmask(matchers: Sequence[Matcher | None], bitmask: np.ndarray) -> None:
    """Row `i` of `bitmask` <- the allowed set of `matchers[i]`; a None row allows every token.

    Raises `NoValidTokenError` (from the matcher) for a row that cannot continue.
    """
    if bitmask.ndim != 2 or bitmask.dtype != np.int32 or len(matchers) > bitmask.shape[0]:
        raise ValueError(
            "bitmask must be an int32 array of shape (batch, words) with a row per matcher"
        )
    for row, matcher in enumerate(matchers):
        if matcher is None:
            bitmask[row] = -1
        else:
            matcher.fill_bitmask(bitmask[row])


def apply_token_bitmask(logits: torch.Tensor, bitmask: np.ndarray) -> torch.Tensor:
    """Set the logits of disallowed tokens to -inf, in place; `logits` is `(batch, vocab)` or
    `(vocab,)` with a one-row bitmask. Ids past the bitmask's width are disallowed."""
    import torch

    rows = logits if logits.dim() == 2 else logits.unsqueeze(0)
    vocab = rows.shape[-1]
    words = np.ascontiguousarray(bitmask[: rows.shape[0]]).view(np.uint8)
    bits = np.unpackbits(words, axis=-1, bitorder="little")
    allowed = np.zeros((rows.shape[0], vocab), dtype=bool)
    width = min(vocab, bits.shape[-1])
    allowed[:, :width] = bits[:, :width].astype(bool)
    rows.masked_fill_(~torch.from_numpy(allowed).to(rows.device), float("-inf"))
    return logits
