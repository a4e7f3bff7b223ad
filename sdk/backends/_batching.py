"""Continuous batching for a local transformers model: concurrent turns share forward passes.

Every turn is a row of one batched KV cache. Rows join between steps (prompts prefilled
together, each after the longest prefix a finished turn left in the prefix store), feed their
tokens (one sampled token, or a fast-forwarded run) in the same forward pass as the other rows,
and leave when their turn ends. In each step a row's tokens are right-aligned in the step's
block; the attention mask hides every column that is not one of the row's own tokens (padding,
other rows' longer runs, rolled-back tokens) and its position ids count only its own tokens, so
each row computes what it would compute alone.

Threads: each turn runs in its own thread (the agent's worker thread) and waits on a condition
for its logits; one scheduler thread runs every pass and every change of the batch. A step
waits for every row to be ready, at most about half a step's duration, so a row that is busy
with its grammar (a first mask, a long fast-forward) does not hold the others up; its mask
work overlaps the others' forward pass instead.
"""

from __future__ import annotations

import functools
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

__all__ = ["BatchScheduler", "batchable"]

_Layers = list[tuple["torch.Tensor", "torch.Tensor"]]


def _nbytes(layers: _Layers) -> int:
    return sum(k.nelement() * k.element_size() * 2 for k, _ in layers)


def batchable(model: Any) -> bool:
    """Whether the model's cache is plain full-attention layers (rows may then carry masked
    holes). Sliding-window layers count columns, not tokens: such models run one at a time."""
    try:
        from transformers import DynamicCache
        from transformers.cache_utils import DynamicLayer

        cache = DynamicCache(config=model.config)
    except Exception:  # noqa: BLE001 - an unknown model or cache: not batched
        return False
    layers: Any = getattr(cache, "layers", None) or []
    return bool(layers) and all(type(layer) is DynamicLayer for layer in layers)


@dataclass(eq=False)
class _Row:
    prompt: list[int]
    ids: list[int] = field(default_factory=list)  # tokens in the KV cache, in order
    pending: list[int] | None = None  # submitted for the next step
    since: float = 0.0  # when `pending` was submitted
    result: Any = None  # logits, or the exception that ended the row's step
    cached: int = 0  # prompt tokens taken from the prefix store
    prefilled: bool = False  # prefill() was called (or the row closed without it)
    joined: bool = False
    want: int = 1  # logits after this many of its next pass's last tokens (2-D when > 1)


class _Batch:
    """Rows, their KV layers ([rows, heads, columns, dim]) and the column mask ([rows, columns])."""

    def __init__(self, rows: list[_Row], layers: _Layers, mask: torch.Tensor) -> None:
        self.rows = rows
        self.layers = layers
        self.mask = mask
        self.cache: Any = None  # the layers in buffers with spare columns (see _growing)

    @property
    def length(self) -> int:
        return int(self.mask.shape[1])

    def nbytes(self) -> int:
        """Bytes held, spare capacity of the growing buffers included."""
        if self.cache is not None:
            return _nbytes([(layer.kbuf, layer.vbuf) for layer in self.cache.layers])
        return _nbytes(self.layers)


_GROWING: list[type] = []


def _growing(layers: _Layers) -> Any:
    """A `DynamicCache` whose layers write new columns into spare capacity in place. The
    stock layer concatenates, copying the whole cache on every pass: for a batch of rows
    with holes that copy costs more than the attention."""
    from transformers import DynamicCache
    from transformers.cache_utils import DynamicLayer

    if not _GROWING:

        class GrowingLayer(DynamicLayer):
            def fill(self, k: torch.Tensor, v: torch.Tensor, spare: int) -> None:
                self.dtype, self.device = k.dtype, k.device
                self.is_initialized = True
                self.n = int(k.shape[-2])
                shape = (*k.shape[:2], self.n + spare, k.shape[3])
                self.kbuf, self.vbuf = k.new_empty(shape), v.new_empty(shape)
                self.kbuf[:, :, : self.n] = k
                self.vbuf[:, :, : self.n] = v
                self.keys, self.values = self.kbuf[:, :, : self.n], self.vbuf[:, :, : self.n]

            def drop_row(self, b: int) -> None:
                last = int(self.kbuf.shape[0]) - 1
                if b != last:
                    self.kbuf[b] = self.kbuf[last]
                    self.vbuf[b] = self.vbuf[last]
                self.kbuf, self.vbuf = self.kbuf[:last], self.vbuf[:last]
                self.keys, self.values = self.kbuf[:, :, : self.n], self.vbuf[:, :, : self.n]

            def update(
                self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kw: Any
            ) -> tuple[torch.Tensor, torch.Tensor]:
                n, m = self.n, int(key_states.shape[-2])
                if n + m > self.kbuf.shape[-2]:
                    self.fill(self.kbuf[:, :, :n], self.vbuf[:, :, :n], max(64, (n + m) // 2) + m)
                self.kbuf[:, :, n : n + m] = key_states
                self.vbuf[:, :, n : n + m] = value_states
                self.n = n + m
                self.keys, self.values = self.kbuf[:, :, : self.n], self.vbuf[:, :, : self.n]
                return self.keys, self.values

        _GROWING.append(GrowingLayer)
    cache = DynamicCache(ddp_cache_data=[(k[:, :, :0], v[:, :, :0]) for k, v in layers])
    grown = []
    for k, v in layers:
        layer = _GROWING[0]()
        layer.fill(k, v, max(64, int(k.shape[-2]) // 2))
        grown.append(layer)
    cache.layers = grown
    return cache


def _empty_batch() -> _Batch:
    import torch

    return _Batch([], [], torch.zeros((0, 0), dtype=torch.bool))


def _left_pad(t: torch.Tensor, width: int) -> torch.Tensor:
    import torch

    if width <= 0:
        return t
    shape = list(t.shape)
    shape[-2] = width
    return torch.cat([t.new_zeros(shape), t], dim=-2)


def _stack(parts: Sequence[tuple[_Layers, torch.Tensor]]) -> tuple[_Layers, torch.Tensor]:
    """Batches (layers, mask) side by side along the rows, left-padded to the longest."""
    import torch

    n = max(int(mask.shape[1]) for _, mask in parts)
    masks = [
        torch.cat([mask.new_zeros((mask.shape[0], n - mask.shape[1])), mask], 1)
        for _, mask in parts
    ]
    with_layers = [layers for layers, _ in parts if layers]
    layers: _Layers = []
    if with_layers and n:
        for i in range(len(with_layers[0])):
            ks, vs = [], []
            for part, mask in parts:
                if part:
                    k, v = part[i]
                else:  # rows without a prefix: all padding
                    k0, v0 = with_layers[0][i]
                    k = k0.new_zeros((mask.shape[0], k0.shape[1], 0, k0.shape[3]))
                    v = v0.new_zeros((mask.shape[0], v0.shape[1], 0, v0.shape[3]))
                ks.append(_left_pad(k, n - k.shape[-2]))
                vs.append(_left_pad(v, n - v.shape[-2]))
            layers.append((torch.cat(ks, 0), torch.cat(vs, 0)))
    return layers, torch.cat(masks, 0)


class _PrefixStore:
    """KV caches of finished turns (their own tokens only, no holes), for the next turns'
    prompts: the next turn of a conversation extends its last one, and every turn with the same
    tools shares the system prompt. Least recently used first out, within a byte budget."""

    def __init__(self, max_bytes: int, max_entries: int) -> None:
        self.max_bytes = max_bytes
        self.max_entries = max_entries
        self.entries: list[tuple[list[int], _Layers, int]] = []

    def put(self, ids: list[int], layers: _Layers) -> None:
        size = _nbytes(layers)
        if not ids or size > self.max_bytes:
            return
        self.entries = [e for e in self.entries if e[0] != ids]
        self.entries.append((ids, layers, size))
        while len(self.entries) > self.max_entries or self.nbytes() > self.max_bytes:
            self.entries.pop(0)

    def _best(self, prompt: Sequence[int], left: int = 1) -> tuple[int, int]:
        best, best_n = -1, 0
        limit = len(prompt) - left
        for k, (ids, _, _) in enumerate(self.entries):
            n, m = 0, min(len(ids), limit)
            while n < m and ids[n] == prompt[n]:
                n += 1
            if n > best_n:
                best, best_n = k, n
        return best, best_n

    def longest(self, prompt: Sequence[int], left: int = 1) -> int:
        """How many tokens of `prompt` `take` would give."""
        return self._best(prompt, left)[1]

    def take(self, prompt: Sequence[int], left: int = 1) -> tuple[_Layers, int]:
        """The longest stored prefix of `prompt` that leaves `left` tokens (at least one) to
        run: a row that asked for the logits after its last k tokens runs k at least."""
        best, best_n = self._best(prompt, left)
        if best < 0:
            return [], 0
        entry = self.entries.pop(best)
        self.entries.append(entry)  # most recently used
        return [(k[:, :, :best_n], v[:, :, :best_n]) for k, v in entry[1]], best_n

    def nbytes(self) -> int:
        return sum(e[2] for e in self.entries)


Forward = Callable[..., tuple[Any, Any]]


#: A pass costs about this many token columns more than its columns (reading the weights):
#: feeds whose lengths differ by less share a pass.
_PASS_COLUMNS = 16


def _long_groups(feeds: dict[_Row, list[int]]) -> list[dict[_Row, list[int]]]:
    """Long feeds grouped for passes, longest first: a feed joins the current group while
    padding it to the group's width costs less than a pass of its own."""
    groups: list[dict[_Row, list[int]]] = []
    width = 0
    for row, ids in sorted(feeds.items(), key=lambda kv: -len(kv[1])):
        if groups and width - len(ids) <= max(_PASS_COLUMNS, len(ids)):
            groups[-1][row] = ids
        else:
            groups.append({row: ids})
            width = len(ids)
    return groups


def _stop(ref: weakref.ref[BatchScheduler]) -> None:
    scheduler = ref()
    if scheduler is not None:
        scheduler.stop()


class BatchScheduler:
    """Rows of concurrent turns in one batched KV cache (see the module docstring).

    `forward(input_ids, attention_mask, position_ids, cache)` runs the model and returns
    (logits of each row's last column, the cache); `cache` is a `DynamicCache` or None. A
    fifth argument `keep` > 1 asks for the logits of each row's last `keep` columns (a turn's
    `feed_rows`).
    """

    def __init__(
        self,
        forward: Forward,
        *,
        max_batch: int,
        pad_id: int = 0,
        prefix_bytes: int = 512 << 20,
        max_wait_s: float = 0.05,
    ) -> None:
        self._forward = forward
        self.max_batch = max_batch
        self.pad_id = pad_id
        self.max_wait_s = max_wait_s
        self.join_wait_s = 0.01
        self._cv = threading.Condition()
        self._busy = False
        self._joining: list[_Row] = []
        self._leaving: list[_Row] = []  # closed during a pass: dropped right after it
        self._batch = _empty_batch()
        # two entries a row: a conversation's last turn, and a shared system prompt
        self._store = _PrefixStore(prefix_bytes, max(4, 2 * max_batch))
        self._step_s = 0.0  # running average of a step's duration
        self._last_end = 0.0
        self._opening = 0  # sessions opened, not prefilled yet: joiners worth waiting for
        self.steps = 0  # forward passes (joins included) and the rows they carried
        self.rows_stepped = 0
        self.peak_rows = self.peak_bytes = self.peak_columns = 0  # the fullest batch seen
        self._stopping = False
        self._worker: threading.Thread | None = None  # started on demand, ends when idle
        # Stopped before the interpreter joins its threads (as concurrent.futures stops its
        # workers): a daemon thread killed inside a torch call aborts the process at exit. A
        # weak reference: a dropped model's scheduler is freed once its worker has ended.
        register = getattr(threading, "_register_atexit", None)
        if register is not None:
            ref = weakref.ref(self)
            register(functools.partial(_stop, ref))

    #: A worker with nothing to do for this long ends (and a dropped model can be freed).
    IDLE_EXIT_S = 2.0

    # ---------------------------------------------------------------- what sessions call

    def open(self) -> _Row:
        """A row for a turn about to start (its prompt is set before `prefill`)."""
        with self._cv:
            self._opening += 1
        return _Row([])

    def prefill(self, row: _Row, extra: Sequence[int] = (), rows: int = 1) -> torch.Tensor:
        """Join the batch with the row's prompt, then `extra` (the turn's forced start); the
        logits after the last token, or (`rows` > 1) after each of the last `rows`."""
        row.want = rows
        if extra:
            row.prompt = [*row.prompt, *extra]
        with self._cv:
            self._opening -= 1
            row.prefilled = True
            self._joining.append(row)
            row.since = time.monotonic()
            self._wake()
        return self._wait(row)

    def feed(self, row: _Row, ids: Sequence[int], rows: int = 1) -> torch.Tensor:
        row.want = rows
        if not row.joined:
            if isinstance(row.result, BaseException):
                raise row.result  # a failed step this row was not waiting on
            raise RuntimeError("feed() before prefill()")
        with self._cv:
            row.pending = list(ids)
            row.since = time.monotonic()
            self._wake()
        return self._wait(row)

    def rollback(self, row: _Row, n: int) -> None:
        if n <= 0 or not row.joined:
            return
        with self._cv:
            while self._busy:  # a pass reads the mask: edit it between passes
                self._cv.wait()
            b = self._batch.rows.index(row)
            cols = self._batch.mask[b].nonzero().flatten()[-n:]
            self._batch.mask[b, cols] = False
            del row.ids[len(row.ids) - n :]

    def close(self, row: _Row) -> None:
        """The worker drops the row before its next pass; the turn's thread goes on to the
        tool call and the next turn without waiting."""
        with self._cv:
            if row in self._joining:
                self._joining.remove(row)
            elif not row.prefilled:  # opened, never prefilled
                row.prefilled = True
                self._opening -= 1
            if row.joined:
                row.joined = False
                self._leaving.append(row)
                self._wake()

    def idle(self, timeout: float = 10.0) -> bool:
        """Wait until no row is left in the batch (closed rows are dropped by the worker)."""
        deadline = time.monotonic() + timeout
        with self._cv:
            while self._batch.rows or self._leaving or self._busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cv.wait(left)
        return True

    def stats(self) -> dict[str, int]:
        """Rows, cache columns and bytes now (the prefix store apart): for memory reports."""
        with self._cv:
            return {
                "rows": len(self._batch.rows),
                "columns": self._batch.length,
                "batch_bytes": self._batch.nbytes(),
                "prefix_bytes": self._store.nbytes(),
                "prefix_entries": len(self._store.entries),
            }

    # ---------------------------------------------------------------- scheduling

    def _wait(self, row: _Row) -> torch.Tensor:
        with self._cv:
            while row.result is None:
                self._cv.wait()
            out, row.result = row.result, None
        if isinstance(out, BaseException):
            raise out
        return out

    def _serve(self) -> None:
        """The worker: every pass and every change of the batch happens in this one thread
        (one owner for the cache; allocations from one thread also keep glibc from holding
        freed memory in one arena per turn thread)."""
        cv = self._cv
        with cv:
            idle_since = time.monotonic()
            while not self._stopping:
                try:
                    work: Callable[[], None] | None
                    if self._leaving:
                        work = functools.partial(self._leave_all, self._leaving)
                        self._leaving = []
                    else:
                        work, timeout = self._next_work()
                    if work is None:
                        if self._batch.rows or self._joining:
                            idle_since = time.monotonic()
                        elif time.monotonic() - idle_since > self.IDLE_EXIT_S:
                            break
                        cv.wait(timeout if timeout is not None else self.IDLE_EXIT_S)
                        continue
                    idle_since = time.monotonic()
                    self._busy = True
                    cv.release()
                    try:
                        work()
                    finally:
                        cv.acquire()
                        self._busy = False
                        cv.notify_all()
                except BaseException as exc:  # noqa: BLE001 - the worker must not die
                    self._fail_all(exc)
            self._worker = None

    def stop(self) -> None:
        """Stop the worker after its current pass (at interpreter exit)."""
        with self._cv:
            self._stopping = True
            self._cv.notify_all()
            worker = self._worker
        if worker is not None and threading.current_thread() is not worker:
            worker.join(timeout=30)

    def _wake(self) -> None:
        """Notify the worker, starting one if none runs (called holding the condition)."""
        if self._worker is None and not self._stopping:
            self._worker = threading.Thread(target=self._serve, name="sdk-batch", daemon=True)
            self._worker.start()
        self._cv.notify_all()

    def _leave_all(self, rows: list[_Row]) -> None:
        for row in rows:
            self._leave(row)

    def _fail_all(self, exc: BaseException) -> None:
        """Hand an unexpected error to every row and start over with an empty batch (called
        holding the condition)."""
        for row in self._joining:
            row.result = exc
        self._joining = []
        self._leaving = []
        self._drop_batch(exc)
        self._cv.notify_all()

    def _drop_batch(self, exc: BaseException) -> None:
        """Hand `exc` to every row of the batch and empty it (its cache may be half-written)."""
        for row in self._batch.rows:
            row.joined = False
            row.pending = None
            row.result = exc
        self._batch = _empty_batch()

    def _next_work(self) -> tuple[Callable[[], None] | None, float | None]:
        """What to run now (called under the condition, not busy), else how long to wait."""
        room = self.max_batch - len(self._batch.rows)
        window = min(self.max_wait_s, max(0.001, 0.5 * self._step_s))
        if self._joining and room > len(self._joining):
            # turns starting together (a gathered wave, answers after their tools) are
            # prefilled together: wait a little for them, longer while some are being opened
            wait = window if self._opening > 0 else min(window, self.join_wait_s)
            left = self._joining[0].since + wait - time.monotonic()
            if left > 0:
                return None, left
        if self._joining and room > 0:
            joiners, self._joining = self._joining[:room], self._joining[room:]
            return (lambda: self._join(joiners)), None
        rows = self._batch.rows
        pending = [r for r in rows if r.pending is not None]
        if not pending:
            return None, None
        if len(pending) < len(rows):
            # the rows a step just served need a moment for their masks: count from its end
            start = max(min(r.since for r in pending), self._last_end)
            left = start + window - time.monotonic()
            if left > 0:
                return None, left
        feeds = {r: r.pending for r in pending}
        for r in pending:
            r.pending = None
        return (lambda: self._step(feeds)), None  # type: ignore[arg-type]

    # ---------------------------------------------------------------- batch operations

    def _run_block(
        self, batch: _Batch, feeds: dict[_Row, list[int]]
    ) -> tuple[dict[_Row, torch.Tensor], _Layers, torch.Tensor]:
        """One forward pass of `batch` with each row's `feeds` right-aligned in a new block:
        the rows' logits, the grown layers and mask (the batch itself is left as it was)."""
        import torch
        from transformers import DynamicCache

        rows = batch.rows
        width = max(len(f) for f in feeds.values())
        n_rows = len(rows)
        input_ids = torch.full((n_rows, width), self.pad_id, dtype=torch.long)
        position_ids = torch.zeros((n_rows, width), dtype=torch.long)
        block = torch.zeros((n_rows, width), dtype=torch.bool)
        for b, row in enumerate(rows):
            ids = feeds.get(row, [])
            k, p = len(ids), len(row.ids)
            position_ids[b] = p
            if k:
                input_ids[b, width - k :] = torch.tensor(ids, dtype=torch.long)
                position_ids[b, width - k :] = torch.arange(p, p + k)
                block[b, width - k :] = True
        mask = torch.cat([batch.mask, block], 1)
        cache: Any = None
        if batch is self._batch and batch.layers:  # the batch's own: grows in place
            if batch.cache is None:
                batch.cache = _growing(batch.layers)
            cache = batch.cache
        elif batch.layers:  # a pass of its own: around the tensors as they are
            cache = DynamicCache(
                ddp_cache_data=[(kt[:, :, :0], vt[:, :, :0]) for kt, vt in batch.layers]
            )
            for layer, (kt, vt) in zip(cache.layers, batch.layers, strict=True):
                layer.keys, layer.values = kt, vt
        keep = max(row.want for row in feeds)
        if keep > 1:  # rows that asked for the logits after each of their last tokens
            logits, cache = self._forward(input_ids, mask, position_ids, cache, keep)
            out = {
                row: (logits[b, -row.want :] if row.want > 1 else logits[b, -1]).clone()
                for b, row in enumerate(rows)
                if row in feeds
            }
        else:
            logits, cache = self._forward(input_ids, mask, position_ids, cache)
            out = {row: logits[b].clone() for b, row in enumerate(rows) if row in feeds}
        layers: _Layers = [(layer.keys, layer.values) for layer in cache.layers]
        return out, layers, mask

    def _join(self, joiners: list[_Row]) -> None:
        """Prefill the joiners (after their stored prefixes), then add them. Suffixes of
        about the same length share a pass; a 1-token suffix is not padded to an 84-token one
        (that pass cost 0.53 s for 5 rows instead of 0.21 s for the 2 long ones)."""
        feeds: dict[_Row, list[int]] = {}
        for row in joiners:
            row.cached = self._store.longest(row.prompt, row.want)
            feeds[row] = row.prompt[row.cached :]
        for group in _long_groups(feeds):
            self._join_group(group)

    def _join_group(self, feeds: dict[_Row, list[int]]) -> None:
        import torch

        joiners = list(feeds)
        try:
            parts: list[tuple[_Layers, torch.Tensor]] = []
            for row in joiners:
                layers, n = self._store.take(row.prompt, row.want)  # entries unchanged
                row.ids = row.prompt[:n]
                parts.append((layers, torch.ones((1, n), dtype=torch.bool)))
            layers, mask = _stack(parts)
            mini = _Batch(joiners, layers, mask)
            t0 = time.perf_counter()
            out, mini.layers, mini.mask = self._run_block(mini, feeds)
            self._note(time.perf_counter() - t0, len(joiners))
        except BaseException as exc:  # noqa: BLE001 - handed to each joiner's own thread
            for row in joiners:
                row.result = exc
            return
        for row in joiners:
            row.ids.extend(feeds[row])
            row.joined = True
            row.result = out[row]
        batch = self._batch
        if not batch.rows:
            self._batch = mini
        else:
            layers, mask = _stack([(batch.layers, batch.mask), (mini.layers, mini.mask)])
            self._batch = _Batch(batch.rows + mini.rows, layers, mask)

    def _step(self, feeds: dict[_Row, list[int]]) -> None:
        """Single tokens and forced runs go in separate passes:
        padding a one-token row to another row's 20 forced tokens would cost 20 columns of
        compute. Long feeds of about the same length share a pass."""
        batch = self._batch
        single = {r: f for r, f in feeds.items() if len(f) <= 1}
        try:
            for group in [single, *_long_groups({r: f for r, f in feeds.items() if len(f) > 1})]:
                if not group:
                    continue
                t0 = time.perf_counter()
                everyone = len(group) == len(batch.rows)
                if everyone or (group is single and 2 * len(group) > len(batch.rows)):
                    out, batch.layers, batch.mask = self._run_block(batch, group)
                else:
                    out = self._run_rows(batch, group)
                self._note(time.perf_counter() - t0, len(group))
                for row, ids in group.items():
                    row.ids.extend(ids)
                    row.result = out[row]
        except BaseException as exc:  # noqa: BLE001 - the cache may be half-written: reset
            self._drop_batch(exc)

    def _run_rows(self, batch: _Batch, feeds: dict[_Row, list[int]]) -> dict[_Row, torch.Tensor]:
        """A pass over some rows only: their rows of the cache, then the new columns written
        back (masked for the others)."""
        import torch

        picked = [b for b, r in enumerate(batch.rows) if r in feeds]
        idx = torch.tensor(picked, dtype=torch.long)
        sub = _Batch(
            [batch.rows[b] for b in picked],
            [(k[idx], v[idx]) for k, v in batch.layers],
            batch.mask[idx],
        )
        out, layers, mask = self._run_block(sub, feeds)
        n = batch.length
        width = int(mask.shape[1]) - n
        full = torch.cat([batch.mask, batch.mask.new_zeros((len(batch.rows), width))], 1)
        full[idx, n:] = mask[:, n:]
        if batch.cache is None:
            base = batch.layers or [  # no columns yet (the first prompts)
                (sk.new_zeros((len(batch.rows), sk.shape[1], n, sk.shape[3])),) * 2
                for sk, _ in layers
            ]
            batch.cache = _growing(base)
        grown: _Layers = []
        for layer, (sk, sv) in zip(batch.cache.layers, layers, strict=True):
            shape = (len(batch.rows), sk.shape[1], width, sk.shape[3])
            nk, nv = sk.new_zeros(shape), sv.new_zeros(shape)
            nk[idx] = sk[:, :, n:]
            nv[idx] = sv[:, :, n:]
            grown.append(layer.update(nk, nv))
        batch.layers, batch.mask = grown, full
        return out

    def _note(self, seconds: float, rows: int) -> None:
        self._step_s = seconds if not self.steps else 0.8 * self._step_s + 0.2 * seconds
        self.steps += 1
        self.rows_stepped += rows
        self._last_end = time.monotonic()
        batch = self._batch
        if len(batch.rows) >= self.peak_rows:
            self.peak_rows = len(batch.rows)
            self.peak_bytes = max(self.peak_bytes, batch.nbytes())
            self.peak_columns = batch.length

    def _leave(self, row: _Row) -> None:
        """Keep the row's own columns in the prefix store, drop its row, trim dead columns."""
        import torch

        batch = self._batch
        b = batch.rows.index(row)
        cols = batch.mask[b].nonzero().flatten()
        if len(cols) == len(row.ids) and batch.layers:
            self._store.put(
                list(row.ids),
                [(k[b : b + 1, :, cols], v[b : b + 1, :, cols]) for k, v in batch.layers],
            )
        last = len(batch.rows) - 1
        if not last:
            self._batch = _empty_batch()
            return
        rows = list(batch.rows)
        rows[b] = rows[last]
        rows.pop()
        mask = batch.mask
        mask[b] = mask[last]
        mask = mask[:last]
        if batch.cache is not None:  # the last row moves into the hole: one row copied
            for layer in batch.cache.layers:
                layer.drop_row(b)
            layers = [(layer.keys, layer.values) for layer in batch.cache.layers]
        else:
            order = [*range(last)]
            if b < last:
                order[b] = last
            idx = torch.tensor(order, dtype=torch.long)
            layers = [(k[idx], v[idx]) for k, v in batch.layers]
        batch.rows, batch.layers, batch.mask = rows, layers, mask
        live = mask.any(0)
        dead = int((~live).sum())
        if dead >= 64 and dead * 4 >= batch.length:  # holes every row has: cut them out
            col = live.nonzero().flatten()
            layers = [(k[:, :, col], v[:, :, col]) for k, v in layers]
            self._batch = _Batch(rows, layers, mask[:, col])
