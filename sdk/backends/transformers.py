"""A local transformers causal LM as an agent backend: prompt rendering and KV-cached decoding.

Prompts go through the tokenizer's chat template. Templates that take `tools=` (Qwen, Llama
3.1, Hermes, ...) render the tools themselves and get tool results as `role: "tool"` messages;
for the others (SmolLM2's, for one) the tools are described in the system prompt in the
Hermes style (`ToolCallFormat.tools_prompt`) and results come back as a user turn wrapped in
`<tool_response>` tags, which is how Hermes-format models were trained. Tokenizers without
any template (GGUF conversions such as Gemma-3's) get a built-in Gemma or ChatML one.

Decoding keeps the KV caches of finished turns: the next turn's prompt usually extends one (the
same conversation plus the assistant reply and tool results), so only the new suffix is run.
Concurrent turns (runs gathered with asyncio, requests of a server) share forward passes:
`sdk.backends._batching` puts them in one batched KV cache (continuous batching).
"""

from __future__ import annotations

import contextlib
import inspect
import os
import threading
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from sdk.backends._batching import BatchScheduler, batchable
from sdk.backends._openmp import cores as _cores
from sdk.backends._openmp import one_thread, release_pool, restore_threads

# Re-exported: they lived here before any other local backend rendered prompts.
from sdk.backends.chat_template import (
    detect_call_format,
    encode_prompt,
    index_for,
    probe_call_style,
    render_prompt,
    template_supports_tools,
)
from sdk.decoding.generate import TurnRequest
from sdk.errors import ContextLengthError

if TYPE_CHECKING:
    import torch

    from sdk.engine.tokenizer import TokenizerIndex

__all__ = [
    "TransformersModel",
    "detect_call_format",
    "encode_prompt",
    "index_for",
    "pack_linear_weights",
    "probe_call_style",
    "render_prompt",
    "template_supports_tools",
]


# ------------------------------------------------------------------------------ the model


def pack_linear_weights(model: Any) -> int:
    """Run a float32 CPU model's linear layers on oneDNN's prepacked matmul, in place (see
    `sdk.backends._cpu_linear`); the number of layers swapped, 0 where it does not apply."""
    from sdk.backends._cpu_linear import pack_linear_weights as pack

    return pack(model)


def _default_threads() -> int:
    # Decoding a small model is latency-bound: on a busy 2-core machine, 2 OpenMP threads spin
    # against each other and run ~10x slower than 1. Half the cores is a safe default.
    return max(1, _cores() // 2)


#: A pass over at least this many tokens (a prefill, a forced run, a batch of rows) is
#: compute-bound and gets every core: on 2 cores a 290-token prefill 0.40 -> 0.21 s, a step of
#: 8 rows ~1.3x faster; a one-token step is not (2 threads made it slower).
_PARALLEL_TOKENS = 4


class TransformersModel:
    """A `transformers` causal LM + its tokenizer, driven token by token with a KV cache.

    `num_threads` is the torch thread count used while decoding on CPU (restored afterwards);
    None picks half the cores. `max_batch`: how many concurrent turns share one forward pass
    (continuous batching; each keeps its own grammar, sampling and forced tokens, and computes
    what it would alone). With 1, or for models whose cache has sliding-window layers
    (Gemma-3), turns take turns behind a lock.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        num_threads: int | None = None,
        max_batch: int = 8,
    ) -> None:
        from sdk._settings import check_int

        self.model = model
        self.tokenizer = tokenizer
        self.num_threads = num_threads
        self.max_batch = check_int("max_batch", max_batch, 1)
        self._index: TokenizerIndex | None = None
        self._scheduler: BatchScheduler | None = None
        self._lock = threading.Lock()
        self._last: tuple[list[int], Any] | None = None  # (ids in the cache, cache)
        params = inspect.signature(model.forward).parameters
        self._cache_kw = "cache" if "cache" in params else "past_key_values"
        self._keep_kw = next(
            (k for k in ("logits_to_keep", "num_logits_to_keep") if k in params), None
        )
        if self._on_cpu():  # loading and packing ran parallel regions here (`_openmp`)
            release_pool()

    def _on_cpu(self) -> bool:
        device = getattr(self.model, "device", None)
        return device is None or getattr(device, "type", "cpu") == "cpu"

    @classmethod
    def from_pretrained(
        cls, spec: str | os.PathLike[str] = "smollm2", *, pack_weights: bool = True, **kwargs: Any
    ) -> TransformersModel:
        """Load "smollm2", "gemma3", a `.gguf` file or a local HF directory (offline).

        `pack_weights`: run the linear layers on oneDNN's prepacked matmul (`PackedLinear`):
        on a CPU, decode steps 1.3-1.6x faster and prefill 1.9x; the model must then stay on
        the CPU in float32. Apply it to a model of your own with `pack_linear_weights`.
        """
        from sdk.backends.embedded import load_model

        model, tokenizer = load_model(spec)
        if pack_weights:
            pack_linear_weights(model)
        return cls(model, tokenizer, **kwargs)

    load = from_pretrained

    @property
    def index(self) -> TokenizerIndex:
        if self._index is None:
            self._index = index_for(self.tokenizer)
        return self._index

    @property
    def context_length(self) -> int | None:
        """The model's context window in tokens (its config's), None where unknown."""
        config = getattr(self.model, "config", None)
        for key in ("max_position_embeddings", "n_positions", "max_sequence_length"):
            value = getattr(config, key, None)
            if isinstance(value, int) and value > 0:
                return value
        return None

    def render(self, request: TurnRequest) -> list[int]:
        """The turn's prompt ids; `ContextLengthError` when they leave no room to generate
        (checked here, before a forward pass, with the numbers)."""
        ids = encode_prompt(self.tokenizer, render_prompt(self.tokenizer, request))
        limit = self.context_length
        if limit is not None and len(ids) >= limit:
            raise ContextLengthError(len(ids), limit)
        return ids

    def begin_turn(self, request: TurnRequest) -> _HFSession | _BatchedSession:
        scheduler = self.scheduler
        if scheduler is None:
            return _HFSession(self, self.render(request))
        row = scheduler.open()  # announced before rendering: a join may wait for it
        try:
            row.prompt = self.render(request)
        except BaseException:
            scheduler.close(row)
            raise
        return _BatchedSession(scheduler, row, self._on_cpu())

    @property
    def scheduler(self) -> BatchScheduler | None:
        """The batching scheduler (None: turns run one at a time)."""
        if self._scheduler is None and self.max_batch > 1:
            with self._lock:
                if self._scheduler is None and batchable(self.model):
                    pad = getattr(self.tokenizer, "pad_token_id", None)
                    self._scheduler = BatchScheduler(
                        self._batch_forward,
                        max_batch=self.max_batch,
                        pad_id=pad if isinstance(pad, int) else 0,
                    )
        return self._scheduler

    def _batch_forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        position_ids: torch.Tensor,
        cache: Any,
        keep: int = 1,
    ) -> tuple[torch.Tensor, Any]:
        """The batch's logits after its last column ([rows, vocab]), or after each of its
        last `keep` columns ([rows, keep, vocab]); the new cache."""
        device = self.model.device
        with self._threads(input_ids.numel()):
            logits, new_cache = self._call(
                {
                    "input_ids": input_ids.to(device),
                    "attention_mask": attention_mask.to(device),
                    "position_ids": position_ids.to(device),
                },
                cache,
                keep,
            )
        return (logits[:, -1] if keep == 1 else logits[:, -keep:]), new_cache

    @contextlib.contextmanager
    def _threads(self, tokens: int = 0) -> Iterator[None]:
        """torch's CPU thread count for a pass over `tokens` tokens (0: a turn's default):
        `num_threads` when given, every core for a wide pass (`_PARALLEL_TOKENS`), else
        `_default_threads()`."""
        import torch

        if not self._on_cpu():
            yield
            return
        old = torch.get_num_threads()
        if self.num_threads:
            n = self.num_threads
        elif tokens >= _PARALLEL_TOKENS:
            n = _cores()
        else:
            n = min(old, _default_threads())
        if n == old:  # a decode step inside its turn's setting: nothing to switch
            yield
            return
        torch.set_num_threads(n)
        try:
            yield
        finally:
            torch.set_num_threads(old)

    def _take_cache(self, prompt: list[int]) -> tuple[Any, int]:
        """The previous turn's cache cropped to its common prefix with `prompt` (≥1 token left
        to run, so prefill always yields logits)."""
        last, self._last = self._last, None
        if last is None:
            return None, 0
        ids, cache = last
        n = 0
        limit = min(len(ids), len(prompt) - 1)
        while n < limit and ids[n] == prompt[n]:
            n += 1
        if n == 0:
            return None, 0
        try:
            if len(ids) > n:
                cache.crop(-(len(ids) - n))
            if cache.get_seq_length() != n:
                return None, 0
        except Exception:  # noqa: BLE001 - a cache type without crop: start over
            return None, 0
        return cache, n

    def _forward(self, ids: Sequence[int], cache: Any, rows: int = 0) -> tuple[torch.Tensor, Any]:
        """The logits after the last of `ids` (1-D), or with `rows` after each of the last
        `rows` (2-D); the new cache."""
        import torch

        input_ids = torch.tensor([list(ids)], dtype=torch.long, device=self.model.device)
        with self._threads(len(ids)):
            logits, new_cache = self._call({"input_ids": input_ids}, cache, max(rows, 1))
        return (logits[0, -rows:] if rows else logits[0, -1]), new_cache

    def _call(self, kwargs: dict[str, Any], cache: Any, keep: int = 1) -> tuple[torch.Tensor, Any]:
        """One forward pass with the cache under whichever keyword this model takes: (the
        last `keep` positions' logits at least, the new cache)."""
        import torch

        kwargs = {**kwargs, "use_cache": True}
        if cache is not None:
            kwargs[self._cache_kw] = cache
        if self._keep_kw is not None:
            kwargs[self._keep_kw] = keep
        with torch.no_grad():  # not inference_mode: the loop masks the logits in place
            out = self.model(**kwargs)
        new_cache = out.get("cache", None) if self._cache_kw == "cache" else None
        if new_cache is None:
            new_cache = out.get("past_key_values", None)
        return out.logits, new_cache


class _HFSession:
    def __init__(self, owner: TransformersModel, prompt_ids: list[int]) -> None:
        self.owner = owner
        self.prompt_ids = prompt_ids
        self.cached_tokens = 0
        self._ids: list[int] = []
        self._cache: Any = None
        self._threads: contextlib.ExitStack | None = None

    def prefill(self) -> torch.Tensor:
        return self.prefill_with(())

    def prefill_with(self, extra: Sequence[int]) -> torch.Tensor:
        """The prompt, then `extra` (the turn's forced start), in one forward pass."""
        return self._prefill(extra, 0)

    def prefill_rows(self, extra: Sequence[int]) -> torch.Tensor:
        """`prefill_with(extra)`, with the logits after the prompt and after each of `extra`
        (one row each): what a search over outputs needs to score forced tokens."""
        return self._prefill(extra, len(extra) + 1)

    def _prefill(self, extra: Sequence[int], rows: int) -> torch.Tensor:
        self._threads = contextlib.ExitStack()
        self._threads.enter_context(self.owner._lock)
        self._threads.enter_context(self.owner._threads())
        cache, n = self.owner._take_cache(self.prompt_ids)
        self.cached_tokens = n
        self._cache = cache
        self._ids = list(self.prompt_ids[:n])
        return self._feed([*self.prompt_ids[n:], *extra], rows)

    def feed(self, ids: Sequence[int]) -> torch.Tensor:
        return self._feed(ids, 0)

    def feed_rows(self, ids: Sequence[int]) -> torch.Tensor:
        """`feed(ids)`, with the logits after each of `ids` (one row each, one pass)."""
        return self._feed(ids, len(ids))

    def _feed(self, ids: Sequence[int], rows: int) -> torch.Tensor:
        logits, self._cache = self.owner._forward(ids, self._cache, rows)
        self._ids.extend(ids)
        return logits

    def rollback(self, n: int) -> None:
        """Forget the last `n` fed tokens (the KV cache is cropped to what remains)."""
        if n <= 0:
            return
        keep = len(self._ids) - n
        self._cache.crop(-n)
        del self._ids[keep:]

    def close(self) -> None:
        if self._threads is None:
            return
        if self._cache is not None:
            self.owner._last = (self._ids, self._cache)
        stack, self._threads = self._threads, None
        stack.close()
        if self.owner._on_cpu():  # the prefill's pool would slow other threads' passes
            release_pool()


class _BatchedSession:
    """A turn as one row of the model's batch (see `sdk.backends._batching`)."""

    def __init__(self, scheduler: BatchScheduler, row: Any, cpu: bool) -> None:
        self._scheduler = scheduler
        self.prompt_ids = row.prompt
        self._row = row
        # The turn's thread only masks and samples its row; the passes run in the scheduler's
        # thread, which must be the one with an OpenMP pool (`sdk.backends._openmp`).
        self._threads = one_thread() if cpu else 0

    @property
    def cached_tokens(self) -> int:
        return self._row.cached

    def prefill(self) -> torch.Tensor:
        return self._scheduler.prefill(self._row)

    def prefill_with(self, extra: Sequence[int]) -> torch.Tensor:
        """The prompt, then `extra` (the turn's forced start), in one forward pass."""
        return self._scheduler.prefill(self._row, extra)

    def feed(self, ids: Sequence[int]) -> torch.Tensor:
        return self._scheduler.feed(self._row, ids)

    def prefill_rows(self, extra: Sequence[int]) -> torch.Tensor:
        """`prefill_with(extra)`, with the logits after the prompt and after each of `extra`
        (one row each): what a search over outputs needs to score forced tokens."""
        return self._scheduler.prefill(self._row, extra, len(extra) + 1).reshape(len(extra) + 1, -1)

    def feed_rows(self, ids: Sequence[int]) -> torch.Tensor:
        """`feed(ids)`, with the logits after each of `ids` (one row each, one pass)."""
        return self._scheduler.feed(self._row, ids, len(ids)).reshape(len(ids), -1)

    def rollback(self, n: int) -> None:
        self._scheduler.rollback(self._row, n)

    def close(self) -> None:
        self._scheduler.close(self._row)
        if self._threads:
            restore_threads(self._threads)
            self._threads = 0
