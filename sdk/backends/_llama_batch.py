"""llama.cpp's context shared by concurrent turns: one sequence (slot) per turn, their tokens
decoded together in one `llama_decode`, KV prefixes kept and shared between turns.

Every turn holds a slot, a llama.cpp sequence id, for as long as it runs. Its forward passes
are requests to `LlamaContext.decode`: whichever turn's thread finds no decode running takes
every queued request (other turns' steps, prompts, forced runs) into batches, runs them, and
hands each turn the logits after its last token (group commit: no scheduler thread, and a turn
alone pays nothing).

What a batch holds must not change what a sequence computes, nor may what ran before: greedy
text that depends on the process's history is not the model's. llama.cpp's CPU kernels take
other paths by the batch's size, each differing from the rest by float rounding (logits up to
~1.2 apart on Gemma-3, 0.3 on Qwen2.5, 0.8 on SmolLM2: enough to flip a greedy token):

- a lone token (matrix-vector products; attention split over 512 cells or more): it is padded
  with a throwaway token on a sequence of its own (`_pad`);
- 64 tokens or more (`TILE`: flash attention's tiled kernel), which sums cells in tiles of 64
  by their place in the cache, so a prompt's logits move with where its cells landed and with
  how the prompt was split between what the cache held and what was new. In reproducible mode
  (`LlamaCppModel(reproducible=True)`) no decode holds that many tokens: prompts go in parts
  of at most `TILE - 1`, about a fifth slower (docs/performance.md). Otherwise short requests
  are batched only with each other and long ones (prompts) only with long ones, so steps and
  forced runs compute what they would alone, and prompts are fast.

Between 2 and 63 tokens, a token's logits are the same whatever else the batch holds and
however the prompt was cut: flash attention's per-token kernel skips the cells a token may not
see. It does sum the visible ones in their order in the cache, so a sequence's cells must lie
in the order of their positions. llama.cpp puts new cells in the first free ones from its head,
which moves down to any cell freed below; the context mirrors the pool's layout (`_Cells`) and,
where a freed cell lies below a used one, compacts the pool before the next decode (the whole
cache written out and read back, in order, from cell 0: a copy of the used cells, 13 ms for
660 cells of Qwen2.5-0.5B). So in reproducible mode a sequence's logits depend only on its
tokens, whatever ran before or beside it.

The KV cache is unified (one pool of `n_ctx` cells): a finished turn's slot keeps its cells, and
a new turn's prompt starts from the longest prefix any slot holds (`llama_memory_seq_cp` shares
those cells with the new sequence, no copy), so the system prompt and tools are evaluated once
for every run of an agent; runs that start together wait for the first one's prompt to be
decoded rather than each decoding the same tokens (`_worth_waiting`). When the pool is full, idle slots' cells are dropped, least recently
used first.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sdk.backends._llama_cells import Cells
from sdk.errors import ContextLengthError, LocalModelError

__all__ = ["MIN_SLOTS", "TILE", "UBATCH", "LlamaContext", "Slot"]

#: The most tokens one `llama_decode` takes (longer prompts are split into near-equal parts).
UBATCH = 512
#: Decodes this long or longer run in flash attention's tiled kernel; see the module's doc.
TILE = 64
#: How long the decoding thread waits for the other running turns' next steps before it
#: decodes without them (they are masking and sampling: well under a millisecond each).
_GATHER_S = 0.003
#: A turn waits for another's prompt when that saves decoding at least this many tokens.
_SHARE_MIN = 16
#: Sequences kept at least, whatever `max_batch`: an agent's turns alternate between prompts
#: that share little (a turn with tools, the answer turn of `"none"` without them), so even
#: one turn at a time keeps a prefix for each.
MIN_SLOTS = 4


@dataclass
class Slot:
    seq: int
    ids: list[int] = field(default_factory=list)  # what the sequence's KV cells hold
    busy: bool = False
    used: int = 0  # when it was last taken (a counter): the least recent is evicted first
    prompt: list[int] = field(default_factory=list)  # its turn's prompt
    pending: bool = False  # its turn's prompt is not decoded yet


@dataclass
class _Request:
    slot: Slot
    ids: list[int]
    pos: int
    rows: int = 1  # logits wanted after this many of the last tokens
    logits: Any = None  # 1-D (rows == 1) or (rows, n_vocab)
    got: int = 0  # rows filled
    error: BaseException | None = None
    done: bool = False


class LlamaContext:
    """A llama.cpp context, its batch buffer and its slots; every C call on the context runs
    under `_exec`."""

    def __init__(
        self,
        lib: Any,
        ctx: Any,
        n_vocab: int,
        slots: int,
        running: int,
        *,
        reproducible: bool = False,
    ) -> None:
        self._lib = lib
        self._ctx = ctx
        self._mem = lib.llama_get_memory(ctx)
        self.n_ctx = int(lib.llama_n_ctx(ctx))
        self.n_vocab = n_vocab
        self.n_batch = n_batch = UBATCH
        # Reproducible: no decode reaches the tiled kernel, and each sequence's cells stay in
        # the order of their positions.
        self.span = TILE - 1 if reproducible else n_batch
        self._cells: Cells | None = Cells() if reproducible else None
        self._batch = lib.llama_batch_init(n_batch + 1, 0, slots + 1)
        for i in range(n_batch + 1):
            self._batch.n_seq_id[i] = 1
        self.slots = [Slot(i) for i in range(slots)]
        self.running = running  # the most turns that run at once (`max_batch`)
        self._scratch = slots  # the padding token's sequence (see `_decode_rows`)
        self._cond = threading.Condition()
        self._exec = threading.Lock()
        self._queue: list[_Request] = []
        self._decoding = False
        self._clock = 0
        self.active = 0  # slots taken by running turns

    # ---------------------------------------------------------------------- slots

    def take(self, prompt: Sequence[int]) -> tuple[Slot, int]:
        """A free slot for a turn over `prompt`, its cells cut to the longest prefix of the
        prompt that any slot holds (shared from that slot where it is not this one), and how
        many prompt tokens that prefix covers (at least one token is left to run)."""
        with self._cond:
            while self.active >= self.running or all(s.busy for s in self.slots):
                self._cond.wait()
            free = [s for s in self.slots if not s.busy]
            slot = max(free, key=lambda s: _keep_most(s, prompt))
            slot.busy = True
            self._clock += 1
            slot.used = self._clock
            while self._worth_waiting(slot, prompt):
                self._cond.wait()
            slot.prompt, slot.pending = list(prompt), True
            self.active += 1
        limit = len(prompt) - 1
        with self._exec:
            n = min(_common(slot.ids, prompt), limit)
            source = max(self.slots, key=lambda s: _common(s.ids, prompt))
            shared = min(_common(source.ids, prompt), limit)
            mem, lib = self._mem, self._lib
            if source is not slot and shared > n:
                self._rm(slot.seq, 0)
                lib.llama_memory_seq_cp(mem, source.seq, slot.seq, 0, shared)
                if self._cells is not None:
                    self._cells.copy(source.seq, slot.seq, 0, shared)
                n = shared
            else:
                self._rm(slot.seq, n)
            slot.ids = list(prompt[:n])
        return slot, n

    def _worth_waiting(self, slot: Slot, prompt: Sequence[int]) -> bool:
        """Is another turn about to decode a prefix of `prompt` longer, by `_SHARE_MIN` tokens
        or more, than any cells hold? (Runs started together share their system prompt and
        tools: the first decodes them, the others wait for its cells and share them, instead
        of each decoding the same tokens.) Only turns that took their slot earlier are waited
        for, so no two turns wait for each other."""
        have = max(_common(s.ids, prompt) for s in self.slots)
        return any(
            s is not slot and s.pending and _common(s.prompt, prompt) >= have + _SHARE_MIN
            for s in self.slots
        )

    def cut(self, slot: Slot, keep: int) -> None:
        """Forget the slot's tokens from position `keep` on."""
        with self._exec:
            self._rm(slot.seq, keep)
            del slot.ids[keep:]

    def _rm(self, seq: int, p0: int) -> None:
        """The sequence's cells from position `p0` on are freed (under `_exec`)."""
        self._lib.llama_memory_seq_rm(self._mem, seq, p0, -1)
        if self._cells is not None:
            self._cells.remove(seq, p0)

    def give_back(self, slot: Slot) -> None:
        with self._cond:
            slot.pending = False
            if slot.busy:
                slot.busy = False
                self.active -= 1
            self._cond.notify_all()

    # ---------------------------------------------------------------------- decoding

    def decode(self, slot: Slot, ids: Sequence[int], rows: int = 1) -> Any:
        """Append `ids` to the slot's sequence; the logits after the last one (an array of
        its own: llama.cpp reuses its buffer on the next call), or with `rows` > 1 after each
        of the last `rows` tokens (one row each, in order)."""
        if not ids:
            raise ValueError("nothing to decode")
        if not 1 <= rows <= len(ids):
            raise ValueError(f"rows={rows}: expected 1 to {len(ids)}")
        pos = len(slot.ids)
        if pos + len(ids) > self.n_ctx:
            raise ContextLengthError(pos + len(ids), self.n_ctx)
        request = _Request(slot, list(ids), pos, rows)
        with self._cond:
            self._queue.append(request)
            self._cond.notify_all()  # a gathering decoder counts the queue
            while not request.done:
                if self._decoding:
                    self._cond.wait()
                    continue
                self._decoding = True
                self._gather()
                taken, self._queue = self._queue, []
                self._cond.release()
                try:
                    self._run(taken)
                finally:
                    self._cond.acquire()
                    self._decoding = False
                    self._cond.notify_all()
        if request.error is not None:
            raise request.error
        if request.got < request.rows:
            raise LocalModelError("the batch was interrupted before this turn's tokens ran")
        return request.logits

    def _gather(self) -> None:
        """Wait briefly (holding `_cond`) for the other running turns' requests."""
        deadline = time.perf_counter() + _GATHER_S
        while len(self._queue) < self.active:
            left = deadline - time.perf_counter()
            if left <= 0:
                return
            self._cond.wait(left)

    def _run(self, requests: list[_Request]) -> None:
        """Decode the requests' tokens, short ones batched with short ones and long ones with
        long ones (see the module's doc); each request gets the logits after its last token,
        or the error that stopped it."""
        try:
            for batch in _batches(requests, self.n_batch, self.span):
                self._decode_rows(batch)
        except Exception as exc:  # noqa: BLE001 - each waiting turn raises it
            for request in requests:
                if request.got < request.rows:
                    request.error = exc
        finally:
            for request in requests:
                request.done = True

    def _decode_rows(self, rows: list[tuple[_Request, int, int]]) -> None:
        import numpy as np

        lib, batch = self._lib, self._batch
        with self._exec:
            n = 0
            wanted: list[tuple[_Request, int, int]] = []  # (request, its row, the batch's)
            for request, at, take in rows:
                seq = request.slot.seq
                first = len(request.ids) - request.rows  # the first token with logits
                for i in range(at, at + take):
                    batch.token[n] = request.ids[i]
                    batch.pos[n] = request.pos + i
                    batch.seq_id[n][0] = seq
                    batch.logits[n] = int(i >= first)
                    if i >= first:
                        wanted.append((request, i - first, n))
                    n += 1
            padded = n == 1
            if padded:  # see `_pad`
                self._pad(rows[0][0].ids[-1])
            batch.n_tokens = n + padded
            try:
                self._decode_or_evict()
                if self._cells is not None:  # on top, in the batch's order
                    for i in range(n + padded):
                        self._cells.add(batch.seq_id[i][0], batch.pos[i])
            finally:
                if padded:
                    self._rm(self._scratch, 0)
            for request, at, take in rows:
                request.slot.ids.extend(request.ids[at : at + take])
                if at + take == len(request.ids):
                    request.slot.pending = False  # its first request is its prompt
            for request, at_row, row in wanted:
                ptr = lib.llama_get_logits_ith(self._ctx, row)
                if not ptr:
                    raise LocalModelError("llama.cpp returned no logits")
                row_logits = np.ctypeslib.as_array(ptr, shape=(self.n_vocab,))
                if request.rows == 1:  # NumPy: turns on llama.cpp need no torch
                    request.logits = row_logits.copy()
                else:
                    if request.logits is None:
                        request.logits = np.empty((request.rows, self.n_vocab), np.float32)
                    request.logits[at_row] = row_logits
                request.got += 1

    def _pad(self, token: int) -> None:
        """Make a one-token batch two tokens long, the second a throwaway on a sequence of its
        own: llama.cpp computes a lone token on other kernels than a batch's tokens (its
        matrix products, and attention over 512 cells or more: logits differ by up to ~0.5),
        so without this a run's greedy tokens would depend on whether other runs shared its
        steps. (Two tokens also ran faster than one.)"""
        batch = self._batch
        batch.token[1] = token
        batch.pos[1] = 0
        batch.seq_id[1][0] = self._scratch
        batch.logits[1] = 0

    def _decode_or_evict(self) -> None:
        """`llama_decode`; where the cell pool is full, idle slots' cells are dropped (least
        recently used first) and the batch tried again."""
        lib = self._lib
        while True:
            if self._cells is not None and self._cells.holes:
                self._cells.compact(lib, self._ctx)
            rc = lib.llama_decode(self._ctx, self._batch)
            if rc == 0:
                return
            idle = sorted((s for s in self.slots if not s.busy and s.ids), key=lambda s: s.used)
            if rc != 1 or not idle:
                why = "the KV cache is full" if rc == 1 else f"code {rc}"
                raise LocalModelError(
                    f"llama_decode failed ({why}) with {self.active} running turns: raise "
                    "n_ctx or lower max_batch"
                )
            self._rm(idle[0].seq, 0)
            idle[0].ids = []

    def clear(self) -> None:
        """Forget every idle slot's cells, as a new context would have none (outside
        reproducible mode, where a prompt's cells lie moves its logits by rounding: see the
        module's doc). Busy slots keep theirs."""
        with self._cond, self._exec:
            if any(s.busy for s in self.slots):
                for slot in self.slots:
                    if not slot.busy:
                        self._rm(slot.seq, 0)
                        slot.ids = []
                return
            self._lib.llama_memory_clear(self._mem, True)
            if self._cells is not None:
                self._cells.clear()
            for slot in self.slots:
                slot.ids = []

    def free(self) -> None:
        with self._exec:
            if self._batch is not None:
                self._lib.llama_batch_free(self._batch)
                self._batch = None


def _batches(
    requests: list[_Request], n_batch: int, span: int | None = None
) -> list[list[tuple[_Request, int, int]]]:
    """The decodes that run `requests`: lists of (request, offset, tokens). With `span` under
    `TILE` (reproducible), every request goes in parts into decodes of at most `span` tokens,
    short requests first. Otherwise short requests (under `TILE` tokens) go whole into decodes
    of under `TILE` tokens; long ones are cut into near-equal parts of at most `n_batch` (each
    at least `TILE` long) packed into decodes of at most `n_batch`."""
    if span is not None and span < TILE:
        return _packed(sorted(requests, key=lambda r: len(r.ids) >= TILE), span)
    out: list[list[tuple[_Request, int, int]]] = []
    short = [r for r in requests if len(r.ids) < TILE]
    long = [r for r in requests if len(r.ids) >= TILE]
    rows: list[tuple[_Request, int, int]] = []
    used = 0
    for request in short:
        if used + len(request.ids) >= TILE:
            out.append(rows)
            rows, used = [], 0
        rows.append((request, 0, len(request.ids)))
        used += len(request.ids)
    if rows:
        out.append(rows)
    rows, used = [], 0
    for request in long:
        total = len(request.ids)
        parts = -(-total // n_batch)
        at = 0
        for k in range(parts):
            size = total // parts + (1 if k < total % parts else 0)
            if used + size > n_batch:
                out.append(rows)
                rows, used = [], 0
            rows.append((request, at, size))
            used += size
            at += size
    if rows:
        out.append(rows)
    return out


def _packed(requests: list[_Request], span: int) -> list[list[tuple[_Request, int, int]]]:
    """The requests' tokens in order, in decodes of `span` tokens (the last one shorter)."""
    out: list[list[tuple[_Request, int, int]]] = []
    rows: list[tuple[_Request, int, int]] = []
    used = 0
    for request in requests:
        at, total = 0, len(request.ids)
        while at < total:
            take = min(total - at, span - used)
            rows.append((request, at, take))
            used += take
            at += take
            if used == span:
                out.append(rows)
                rows, used = [], 0
    if rows:
        out.append(rows)
    return out


def _keep_most(slot: Slot, prompt: Sequence[int]) -> tuple[int, int, int]:
    """Which free slot a turn over `prompt` takes (the largest key): one whose cells the
    prompt extends (nothing is lost; the longest first; an empty slot extends nothing), else
    the least recently used. The prefix itself is shared from whichever slot holds most of
    it (`take`), so overwriting a slot that shares only a little loses its tail for nothing."""
    n = _common(slot.ids, prompt)
    return (1, n, -slot.used) if n == len(slot.ids) else (0, 0, -slot.used)


def _common(a: Sequence[int], b: Sequence[int]) -> int:
    n, limit = 0, min(len(a), len(b))
    while n < limit and a[n] == b[n]:
        n += 1
    return n
