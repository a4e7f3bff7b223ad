"""The tokenizer index a call format needs: its marker tokens (`[TOOL_CALLS]`) spelled as text.

Format markers are control tokens in the families that use them; the base index gives control
tokens no bytes, so a grammar that spells the marker could only be matched by ordinary pieces
the model never writes. The derived index is built once per (index, markers).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sdk._memo import per_object
from sdk.decoding.formats import format_traits

if TYPE_CHECKING:
    from sdk.engine.tokenizer import TokenizerIndex

__all__ = ["format_index"]


@per_object
def _derived(index: TokenizerIndex) -> dict[tuple[str, ...], TokenizerIndex]:
    return {}


def format_index(index: TokenizerIndex, tokenizer: Any, fmt: Any) -> TokenizerIndex:
    """`index` with `fmt.markers` that are single special tokens of `tokenizer` as text."""
    markers = tuple(format_traits(fmt).markers or ())
    if not markers or tokenizer is None:
        return index
    cache = _derived(index)
    hit = cache.get(markers)
    if hit is not None:
        return hit
    try:
        vocab = tokenizer.get_vocab()
    except Exception:  # noqa: BLE001 - a tokenizer without a vocabulary: nothing to add
        vocab = {}
    texts: dict[int, bytes] = {}
    for text in markers:
        tid = vocab.get(text)
        if isinstance(tid, int) and 0 <= tid < index.vocab_size and tid in index.special_ids:
            texts[tid] = text.encode()
    return cache.setdefault(markers, index.with_token_text(texts))
