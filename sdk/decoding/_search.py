"""What the searches over outputs share (the exact sampler, the best-call search): a
session positioned at whichever prefix they ask for, and a prefix's valid tokens.

They visit prefixes in an order of their own; the session holds one path in its KV cache. Moving to another prefix rolls the session back to the
common prefix and feeds the rest in one forward pass. A search that scores forced tokens also
needs the logits after each of them: `rows` asks the session for one row per position
(`feed_rows`, `prefill_rows`) and falls back to one pass per token where it has none.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from sdk.engine.logits import host
from sdk.result import Usage

if TYPE_CHECKING:
    from collections.abc import Callable

    from sdk.decoding.generate import RollbackSession
    from sdk.engine.matcher import Matcher
    from sdk.engine.tokenizer import TokenizerIndex

__all__ = ["Cursor", "turn_result", "valid_tokens"]


def turn_result(
    session: RollbackSession,
    index: TokenizerIndex,
    tokens: list[int],
    passes: int,
    t0: float,
    on_progress: Callable[[list[int]], None] | None,
    **counts: int,
) -> tuple[str, Usage]:
    """A searched turn's text and usage (`counts`: its own `Usage` fields), its tokens
    reported to `on_progress` (the stream) at once: a search has no token-by-token order."""
    if on_progress is not None:
        on_progress(tokens)
    usage = Usage(
        prompt_tokens=len(session.prompt_ids),
        completion_tokens=len(tokens),
        forward_passes=passes,
        cached_prompt_tokens=session.cached_tokens,
        generation_time_s=time.perf_counter() - t0,
        **counts,
    )
    return index.decode_bytes(tokens).decode("utf-8", errors="replace"), usage


def valid_tokens(
    matcher: Matcher, size: int, eos_ids: frozenset[int], at_limit: bool
) -> np.ndarray:
    """The tokens the grammar allows after the matcher's prefix, as a bool row of `size`
    (a model's vocabulary may be longer than the tokenizer's); `at_limit`: the output has
    `max_tokens` tokens, so only an end token may follow."""
    allowed = np.zeros(size, dtype=bool)
    mask = matcher.mask()
    n = min(len(mask), size)
    allowed[:n] = mask[:n]
    if at_limit:
        ends = np.zeros_like(allowed)
        ends[[i for i in eos_ids if i < size]] = True
        allowed &= ends
    return allowed


class Cursor:
    """The session at a prefix; `passes` counts the forward passes it ran, `tokens` the
    output tokens they fed (the prompt's not counted)."""

    def __init__(self, session: RollbackSession) -> None:
        self.session = session
        self.fed: list[int] = []
        self.root: Any = None
        self.passes = 0
        self.tokens = 0

    def start(self, extra: Sequence[int] = ()) -> list[np.ndarray]:
        """Run the prompt and `extra` (one pass where the session can): the logits after the
        prompt and after each of `extra`, one row each."""
        prefill_rows = getattr(self.session, "prefill_rows", None)
        self.passes += 1
        if extra and prefill_rows is not None:
            rows = list(_as_rows(prefill_rows(list(extra)), len(extra) + 1))
        else:
            rows = [host(self.session.prefill())]
            rows += self._feed_rows(list(extra)) if extra else []
        self.root = rows[0]
        self.fed = list(extra)
        self.tokens += len(extra)
        return rows

    def logits(self, path: Sequence[int]) -> Any:
        """The logits after `path` (the prompt's own where it is empty)."""
        if not path:
            return self.root
        return self.rows(path, 0)[0]

    def rows(self, path: Sequence[int], k: int) -> list[np.ndarray]:
        """The logits after `path[:len(path) - k]`, after each next token, and after `path`:
        k + 1 rows, the session left holding `path`."""
        n = len(path)
        if not 0 <= k <= n:
            raise ValueError(f"k={k}: expected 0 to {n}")
        keep = n - k - 1  # tokens kept before the first one fed (-1: the prompt's row first)
        common = 0
        for a, b in zip(self.fed, path, strict=False):
            if a != b:
                break
            common += 1
        keep_fed = min(common, max(keep, 0))
        if len(self.fed) > keep_fed:
            self.session.rollback(len(self.fed) - keep_fed)
            del self.fed[keep_fed:]
        todo = list(path[keep_fed:])
        out: list[np.ndarray] = [self.root] if keep < 0 else []
        if todo:
            got = self._feed_rows(todo) if k > 0 else self._feed(todo)
            self.fed.extend(todo)
            self.tokens += len(todo)
            out += got[len(got) - (k + 1 - len(out)) :]
        return out

    def _feed(self, ids: list[int]) -> list[np.ndarray]:
        """`ids` in one pass: the logits after the last."""
        self.passes += 1
        return [host(self.session.feed(ids))]

    def _feed_rows(self, ids: list[int]) -> list[np.ndarray]:
        """`ids`: the logits after each (one pass, or one a token where the session serves
        only the last row)."""
        feed_rows = getattr(self.session, "feed_rows", None)
        if feed_rows is None:
            return [row for token in ids for row in self._feed([token])]
        self.passes += 1
        return list(_as_rows(feed_rows(ids), len(ids)))


def _as_rows(logits: Any, n: int) -> np.ndarray:
    return host(logits).reshape(n, -1)
