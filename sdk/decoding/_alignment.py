"""Where forced text meets free text, tokens must fall where the model would put them.

Fast-forward appends the tokenizer's own encoding of the bytes the grammar forces. Its last
tokens may be ones the model would never write alone: after a forced `": "` a model writes
` 36` (space included) as one token, but once the space is forced it can only write `36`, a
token it rarely saw after `:` plus a lone space, and it drifts (`"days": 1` for 7). So the
trailing forced tokens that some allowed token could extend are given back (token healing):
the mask, exact as always, then lets the model pick every token that spells the rest of the
forced text and runs on into the free text.
"""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from sdk._memo import per_object

if TYPE_CHECKING:
    from sdk.engine.matcher import Matcher
    from sdk.engine.tokenizer import TokenizerIndex

__all__ = ["PrefixIndex", "give_back_extendable", "prefix_index"]


class PrefixIndex:
    """The vocabulary's token bytes in sorted order: which tokens start with given bytes."""

    def __init__(self, token_bytes: tuple[bytes, ...]) -> None:
        order = sorted((i for i, b in enumerate(token_bytes) if b), key=token_bytes.__getitem__)
        self.keys = [token_bytes[i] for i in order]
        self.ids: npt.NDArray[np.int64] = np.asarray(order, dtype=np.int64)

    def _range(self, prefix: bytes) -> tuple[int, int]:
        lo = bisect.bisect_left(self.keys, prefix)
        end = prefix.rstrip(b"\xff")
        if not end:
            return lo, len(self.keys)
        upper = end[:-1] + bytes([end[-1] + 1])
        return lo, bisect.bisect_left(self.keys, upper, lo)

    def extending(self, prefix: bytes) -> npt.NDArray[np.int64]:
        """Ids of tokens that start with `prefix` and are longer than it."""
        lo, hi = self._range(prefix)
        while lo < hi and self.keys[lo] == prefix:
            lo += 1
        return self.ids[lo:hi]

    def spelling(self, data: bytes) -> npt.NDArray[np.int64]:
        """Ids of tokens whose bytes are exactly `data`."""
        lo = bisect.bisect_left(self.keys, data)
        hi = bisect.bisect_right(self.keys, data, lo)
        return self.ids[lo:hi]


@per_object
def prefix_index(index: TokenizerIndex) -> PrefixIndex:
    """One `PrefixIndex` per tokenizer index (a sort of the vocabulary, built on first use)."""
    return PrefixIndex(index.token_bytes)


def allows_any(matcher: Matcher, ids: npt.NDArray[np.int64]) -> bool:
    """Does the matcher's mask allow any of `ids` (read off the packed bits, no unpacking)?"""
    packed = matcher.packed_mask()
    return bool(((packed[ids >> 3] >> (ids & 7)) & 1).any())


def give_back_extendable(matcher: Matcher, index: TokenizerIndex, taken: list[int]) -> int:
    """How many of the forced tokens `taken` (already advanced in `matcher`) to keep.

    The kept prefix ends where no token the grammar allows could run across the cut: for
    every suffix `taken[j:]` whose bytes some allowed token starts with (and goes beyond),
    everything from `j` on is given back and `matcher` is rolled back to match. The longest
    such suffix wins, so a merge the model might make is never ruled out.
    """
    if not taken:
        return 0
    pi = prefix_index(index)
    tb = index.token_bytes
    limit = index.max_len
    keep = len(taken)
    suffix = b""
    for j in range(len(taken) - 1, -1, -1):
        suffix = tb[taken[j]] + suffix
        if len(suffix) >= limit:
            break
        longer = pi.extending(suffix)
        if not longer.size:
            continue
        probe = matcher.fork()
        probe.rollback(len(taken) - j)
        if allows_any(probe, longer):
            keep = j
    if keep < len(taken):
        matcher.rollback(len(taken) - keep)
    return keep
