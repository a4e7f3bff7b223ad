"""Where forced text meets free text, tokens must fall where the model would put them.

Fast-forward appends the tokenizer's own encoding of the bytes the grammar forces. Its last
tokens may be ones the model would never write alone: after a forced `": "` a model writes
` 36` (space included) as one token, but once the space is forced it can only write `36`, a
token it rarely saw after `:` plus a lone space, and it drifts (`"days": 1` for 7). So the
trailing forced tokens that some allowed token could extend are given back (token healing):
the mask, exact as always, then lets the model pick every token that spells the rest of the
forced text and runs on into the free text.

Given back, the forced text must still be spelled the tokenizer's way: a token that stops
inside it may only be the tokenizer's own first token of it (`spell_as_tokenizer`). Other
pieces spell it in splits the model never saw, and a model picks them for what they start
elsewhere: SmolLM2 after `"sku":` put its mass on a lone ` ` (the start of ` 1`, a number),
then, held to a string, wrote `""`, an empty SKU, where the tokenizer's ` "` leads to `A-100`.
"""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from sdk._memo import per_object
from sdk.engine.logits import Logits, ban, is_banned
from sdk.errors import MatcherError

if TYPE_CHECKING:
    from sdk.engine.matcher import Matcher
    from sdk.engine.tokenizer import TokenizerIndex

__all__ = [
    "PrefixIndex",
    "give_back_extendable",
    "prefix_index",
    "respell",
    "seam_token",
    "spell_as_tokenizer",
    "utf8_prefix",
]


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


#: How many of the tokens allowed after forced text `spell_as_tokenizer` tries as its
#: continuation before it takes the tokenizer's first token of it as canonical anyway.
CANONICAL_PROBES = 256


def spell_as_tokenizer(
    matcher: Matcher, index: TokenizerIndex, tokenizer: Any, logits: Logits
) -> None:
    """Where the grammar forces text here (healing gave it back), ban the tokens that stop
    inside it, except the tokenizer's own first token of it: the model may run past the
    forced text (what healing is for) or spell it as the tokenizer does, not split it.

    That token is banned too where no token allowed after the forced text would follow it in
    the tokenizer's own encoding: a lone ` ` before `true`/`false` (` true` is one token)
    leads only to splits the model never saw. What stays is, for each token allowed after
    the forced text, the start of the tokenizer's encoding of the two: the texts the model
    could write are the same, spelled as the tokenizer would."""
    forced = matcher.forced_bytes()
    if not forced:
        return
    text = utf8_prefix(forced)
    if not text:
        return
    ids = tokenizer.encode(text, add_special_tokens=False)
    tb = index.token_bytes
    first = int(ids[0]) if ids else -1
    piece = tb[first] if 0 <= first < len(tb) else b""
    if (
        not piece
        or not forced.startswith(piece)
        or first >= logits.shape[-1]
        or is_banned(logits, first)
    ):
        return
    pi = prefix_index(index)
    inside = [pi.spelling(forced[:k]) for k in range(1, min(len(forced), index.max_len) + 1)]
    banned = np.concatenate(inside)
    keep = _canonical_starts(matcher, tokenizer, tb, forced, first)
    if not keep and not allows_any(matcher, pi.extending(forced)):
        keep = {first}  # (cannot happen where healing gave the text back)
    banned = banned[~np.isin(banned, list(keep)) & (banned < logits.shape[-1])]
    if banned.size:
        ban(logits, banned)


def utf8_prefix(data: bytes) -> str:
    """The longest prefix of `data` that is whole UTF-8 characters, decoded."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return data[: exc.start].decode("utf-8")


def _canonical_starts(
    matcher: Matcher, tokenizer: Any, tb: tuple[bytes, ...], forced: bytes, first: int
) -> set[int]:
    """The tokens inside `forced` that start the tokenizer's encoding of `forced` followed by
    a token allowed after it. `first` (the tokenizer's first token of `forced` alone) is
    taken to be one as soon as it starts one such encoding, and where `CANONICAL_PROBES`
    tokens did not decide; a continuation whose encoding starts past `forced` needs none."""
    probe = matcher.fork()
    try:
        probe.advance_bytes(forced)
        packed = probe.packed_mask()
    except MatcherError:
        return {first}
    after = np.flatnonzero(np.unpackbits(packed, bitorder="little"))
    starts: set[int] = set()
    tried = 0
    for sigma in after[: len(tb)]:
        data = tb[int(sigma)]
        if not data:
            continue
        try:
            text = (forced + data).decode("utf-8")
        except UnicodeDecodeError:
            continue
        ids = tokenizer.encode(text, add_special_tokens=False)
        start = int(ids[0]) if ids else -1
        if start == first or not 0 <= start < len(tb):
            return starts | {first}
        if len(tb[start]) <= len(forced):
            starts.add(start)
        tried += 1
        if tried >= CANONICAL_PROBES:
            return starts | {first}
    return starts if tried else {first}


def respell(matcher: Matcher, index: TokenizerIndex, tokenizer: Any, feed: list[int]) -> list[int]:
    """A chosen token and the forced tokens after it (all advanced in `matcher`), spelled as
    the tokenizer spells their text where it merges across the seam: the model chose `]`,
    `,` was forced, and `],` is what it was trained on. The text is the same; only what the
    model reads next changes. `feed` as it was where the tokenizer agrees, where its
    spelling is not the matcher's or where healing would give all of it back."""
    tb = index.token_bytes
    data = b"".join(tb[t] for t in feed)
    text = utf8_prefix(data)
    if len(text.encode("utf-8")) != len(data):
        return feed
    ids = [int(t) for t in tokenizer.encode(text, add_special_tokens=False)]
    if ids == feed or b"".join(tb[t] if 0 <= t < len(tb) else b"" for t in ids) != data:
        return feed
    matcher.rollback(len(feed))
    for n, t in enumerate(ids):
        if not matcher.try_advance(t):
            matcher.rollback(n)
            for x in feed:
                matcher.advance(x)
            return feed
    keep = give_back_extendable(matcher, index, ids)
    if keep == 0:  # (the matcher is back where `feed` began)
        for x in feed:
            matcher.advance(x)
        return feed
    return ids[:keep]


def seam_token(matcher: Matcher, index: TokenizerIndex, tokenizer: Any, token: int) -> int:
    """The tokenizer's first token of `token`'s bytes and the forced text after it (`matcher`
    is past `token`): `token` itself where they do not merge or nothing is forced."""
    forced = matcher.forced_bytes()
    if not forced:
        return token
    data = index.token_bytes[token] + forced
    text = utf8_prefix(data)
    if len(text.encode("utf-8")) <= len(index.token_bytes[token]):
        return token
    ids = tokenizer.encode(text, add_special_tokens=False)
    return int(ids[0]) if ids and 0 <= int(ids[0]) < len(index.token_bytes) else token
