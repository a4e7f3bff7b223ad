"""A GGUF model run in process by llama.cpp (llama-cpp-python's C API), under the SDK's masks.

`TransformersModel` de-quantizes a GGUF to float32: ~3x slower per token than llama.cpp and ~8x
the memory. Here the quantized weights run as they are; everything else is the SDK's own: the
prompt is rendered by the GGUF's chat template and tokenized by llama.cpp from the vocabulary
the model already holds (`_llama_tokenizer`), the decoding loop (`run_local_turn`) masks the
logits with the turn's matcher, fast-forwards forced text as one batched `llama_decode`, and
rolls the KV cache back (`llama_memory_seq_rm`) where the call probe or a cut call needs it.

The KV cache outlives the turn: the next turn's prompt usually extends the last one (same
system prompt and tools, the conversation plus the reply and tool results), so only the new
suffix is evaluated (`usage.cached_prompt_tokens`). Concurrent turns (runs gathered with
asyncio, threads) each get a sequence of one context and share its decodes: see
`sdk.backends._llama_batch`.
"""

from __future__ import annotations

import ctypes
import os
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

from sdk.backends._llama_batch import MIN_SLOTS, UBATCH, LlamaContext, Slot
from sdk.backends._llama_tokenizer import gguf_tokenizer
from sdk.backends._openmp import cores as _cores
from sdk.backends._openmp import one_thread, restore_threads
from sdk.backends.chat_template import encode_prompt, index_for, render_prompt
from sdk.errors import ConfigError, ContextLengthError, ModelLoadError

if TYPE_CHECKING:
    import numpy as np

    from sdk.decoding.generate import TurnRequest
    from sdk.engine.tokenizer import TokenizerIndex

__all__ = ["LlamaCppModel", "llama_cpp_available"]

_INIT_LOCK = threading.Lock()
_LIB: Any = None
_QUIET: Any = None  # the log callback: kept alive as long as llama.cpp may call it


def llama_cpp_available() -> bool:
    """Is llama-cpp-python importable here (without importing it)?"""
    import importlib.util

    return importlib.util.find_spec("llama_cpp") is not None


def _lib() -> Any:
    """llama_cpp's C API, initialized once per process, its logging silenced (it prints every
    tensor it loads to stderr)."""
    global _LIB, _QUIET
    with _INIT_LOCK:
        if _LIB is None:
            try:
                import llama_cpp
            except ImportError as exc:
                raise ModelLoadError(
                    "llama-cpp-python is not installed (scripts/setup.sh builds it; "
                    "or use TransformersModel)"
                ) from exc
            llama_cpp.llama_backend_init()
            if os.environ.get("SDK_LLAMA_CPP_LOG") != "1":
                _QUIET = llama_cpp.llama_log_callback(lambda level, text, data: None)
                llama_cpp.llama_log_set(_QUIET, ctypes.c_void_p(0))
            _LIB = llama_cpp
        return _LIB


class LlamaCppModel:
    """A GGUF file run by llama.cpp in this process, decoded under the SDK's own masks.

    The default backend for GGUF files and the embedded models where llama-cpp-python is
    installed (`sdk.backends.local`): the quantized weights run as they are.

    Args:
        path: "smollm2", "gemma3" or the path of a `.gguf` file.
        n_ctx: The context window to allocate, shared by all running turns (default: the
            model's training window, at most 8,192 tokens: the KV cache's memory grows with
            it). llama.cpp rounds it up to a multiple of 256.
        n_threads: Threads for a one-token step (default: this process's cores).
        n_threads_batch: Threads for a prompt or a forced run (default: this process's cores).
        max_batch: How many turns run at once, each a llama.cpp sequence whose tokens share
            every `llama_decode` with the others' (more wait for a free one). Prompt
            prefixes are kept in max(max_batch, 4) sequences, so even one turn at a time
            finds both its agent's prompts (with tools, and the answer turn's without) cached.
        tokenizer: A transformers tokenizer to render and tokenize prompts with (default:
            the GGUF's own as llama.cpp loaded it, `LlamaTokenizer`: no second copy of the
            vocabulary, and the model's own tokenization).
        reproducible: Make a turn's logits depend only on its tokens, not on what ran
            before it or beside it (cached prefixes, other runs sharing its decodes): prompts
            decode in parts of at most 63 tokens and the KV cache keeps each sequence's cells
            in order (`sdk.backends._llama_batch`). It costs about a fifth of prefill speed.
            Off (the default, unless `SDK_LLAMA_REPRODUCIBLE=1`, which also reaches models
            named by a string), prompts decode up to 512 tokens at once and float rounding
            moves with the cache's history, enough to flip a greedy token at a near tie.
            Sliding-window models (Gemma-3) keep their window's cells in a full-size pool
            when it is on (llama.cpp's `swa_full`), paid in memory as cells fill; the promise
            holds while each sequence fits the window (512 tokens on Gemma-3-270M): beyond
            it, llama.cpp reuses cells that left the window in its own order.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] = "smollm2",
        *,
        n_ctx: int | None = None,
        n_threads: int | None = None,
        n_threads_batch: int | None = None,
        max_batch: int = 8,
        tokenizer: Any = None,
        reproducible: bool | None = None,
    ) -> None:
        from sdk._settings import check_int
        from sdk.backends.embedded import resolve_gguf

        if reproducible is None:
            flag = os.environ.get("SDK_LLAMA_REPRODUCIBLE", "").strip().lower()
            if flag not in ("", "0", "1", "false", "true", "no", "yes", "off", "on"):
                raise ConfigError(f"SDK_LLAMA_REPRODUCIBLE={flag!r}: expected 1 or 0")
            reproducible = flag in ("1", "true", "yes", "on")
        self.reproducible = bool(reproducible)
        gguf = resolve_gguf(path)
        if gguf is None:
            raise ModelLoadError(
                f"LlamaCppModel needs a .gguf file or an embedded name, got {path!r}"
            )
        self.path = gguf
        lib = _lib()
        self._lib = lib
        self._index: TokenizerIndex | None = None
        mparams = lib.llama_model_default_params()
        mparams.n_gpu_layers = 0
        # No repacked copies of weights (llama.cpp's CPU_REPACK buffers): the copy comes on
        # top of the mapped file (29 MB of Qwen2.5-0.5B's RSS) and measured no faster here,
        # prefill or step, on SmolLM2, Qwen2.5-0.5B or Gemma-3-270M (docs/performance.md).
        mparams.use_extra_bufts = False
        model = lib.llama_model_load_from_file(str(gguf).encode(), mparams)
        if not model:
            raise ModelLoadError(f"llama.cpp could not load {gguf}")
        self._model = model
        self.tokenizer: Any = (
            tokenizer
            if tokenizer is not None
            else gguf_tokenizer(lib, model, _vocab_of(weakref.ref(self)), str(gguf))
        )
        self.max_batch = check_int("max_batch", max_batch, 1)
        train = int(lib.llama_model_n_ctx_train(model))
        want = check_int("n_ctx", n_ctx, 16) if n_ctx is not None else min(train, 8192)
        cores = _cores()
        cparams = lib.llama_context_default_params()
        cparams.n_ctx = want
        cparams.n_batch = UBATCH
        cparams.n_ubatch = UBATCH
        slots = max(self.max_batch, MIN_SLOTS)  # sequences: running turns and kept prefixes
        cparams.n_seq_max = slots + 1  # and one for padding (`_llama_batch._pad`)
        cparams.kv_unified = True  # one pool of n_ctx cells: prefixes shared between slots
        # Flash attention, on: its CPU kernel skips the cells a token may not see, so a
        # sequence's logits do not depend on where its cells lie among other sequences' (the
        # kernel without it sums whole rows in SIMD lanes: they do; it is also 20 % slower per
        # step on Qwen2.5-0.5B here). See `_llama_batch`.
        cparams.flash_attn_type = lib.LLAMA_FLASH_ATTN_TYPE_ENABLED
        cparams.n_threads = check_int("n_threads", n_threads, 1) if n_threads else cores
        cparams.n_threads_batch = (
            check_int("n_threads_batch", n_threads_batch, 1) if n_threads_batch else cores
        )
        cparams.no_perf = True
        # A sliding-window pool of its own size reuses cells as they leave the window, out of
        # order; full-size, it fills like the main pool (`_llama_cells`).
        cparams.swa_full = self.reproducible
        ctx = lib.llama_init_from_model(model, cparams)
        if not ctx:
            lib.llama_model_free(model)
            self._model = None
            raise ModelLoadError(f"llama.cpp could not make a context for {gguf} (n_ctx={want})")
        self._ctx = ctx
        vocab = lib.llama_model_get_vocab(model)
        self.n_vocab = int(lib.llama_vocab_n_tokens(vocab))
        self._context: LlamaContext | None = LlamaContext(
            lib,
            ctx,
            self.n_vocab,
            slots,
            self.max_batch,
            reproducible=self.reproducible,
        )
        self.n_ctx = int(lib.llama_n_ctx(ctx))

    @classmethod
    def from_pretrained(
        cls, spec: str | os.PathLike[str] = "smollm2", **kwargs: Any
    ) -> LlamaCppModel:
        """`LlamaCppModel(spec, **kwargs)`, named like `TransformersModel.from_pretrained`.

        Args:
            spec: "smollm2", "gemma3" or the path of a `.gguf` file.
            **kwargs: The constructor's other arguments (`n_ctx`, `max_batch`, ...).
        """
        return cls(spec, **kwargs)

    load = from_pretrained

    def _vocab(self) -> Any:
        """The model's `llama_vocab` (what the default tokenizer reads)."""
        if not getattr(self, "_model", None):
            raise ModelLoadError("this LlamaCppModel was closed")
        return self._lib.llama_model_get_vocab(self._model)

    @property
    def index(self) -> TokenizerIndex:
        """The tokenizer's byte index the matcher masks with (built or loaded once)."""
        if self._index is None:
            self._index = index_for(self.tokenizer)
        return self._index

    @property
    def context_length(self) -> int:
        """The allocated context window in tokens (`n_ctx`)."""
        return self.n_ctx

    def render(self, request: TurnRequest) -> list[int]:
        """The turn's prompt ids, rendered by the chat template.

        Args:
            request: The turn's conversation, tools and call format.

        Raises:
            ContextLengthError: The prompt leaves no room to generate in `n_ctx`.
        """
        ids = encode_prompt(self.tokenizer, render_prompt(self.tokenizer, request))
        if len(ids) >= self.n_ctx:
            raise ContextLengthError(len(ids), self.n_ctx)
        return ids

    def begin_turn(self, request: TurnRequest) -> _LlamaSession:
        """A turn's session over the rendered prompt (`ModelBackend`): it takes a sequence
        at its prefill and gives it back, its KV cells kept for later turns, at its close.

        Args:
            request: The turn's conversation, tools and call format.
        """
        if self._context is None:
            raise ModelLoadError("this LlamaCppModel was closed")
        return _LlamaSession(self._context, self.render(request))

    def close(self) -> None:
        """Free llama.cpp's context and model (also done when the object is collected)."""
        lib = self._lib
        context = getattr(self, "_context", None)
        if context is not None:
            context.free()
            self._context = None
        if getattr(self, "_ctx", None):
            lib.llama_free(self._ctx)
            self._ctx = None
        if getattr(self, "_model", None):
            lib.llama_model_free(self._model)
            self._model = None

    def __del__(self) -> None:
        try:
            if getattr(self, "_lib", None) is not None:
                self.close()
        except Exception:  # noqa: BLE001, S110 - interpreter shutdown
            pass


def _vocab_of(ref: weakref.ReferenceType[LlamaCppModel]) -> Callable[[], Any]:
    """The model's vocabulary pointer, read through a weak reference: the tokenizer must not
    keep the model (and its weights) alive, nor read a freed one."""

    def vocab() -> Any:
        model = ref()
        if model is None:
            raise ModelLoadError("the LlamaCppModel this tokenizer belongs to was freed")
        return model._vocab()

    return vocab


class _LlamaSession:
    """One turn on a slot of the model's context, from prefill to close."""

    def __init__(self, context: LlamaContext, prompt_ids: list[int]) -> None:
        self._context = context
        self.prompt_ids = prompt_ids
        self.cached_tokens = 0
        self._slot: Slot | None = None
        self._torch_threads = 0

    def prefill(self) -> np.ndarray:
        return self.prefill_with(())

    def prefill_with(self, extra: Sequence[int]) -> np.ndarray:
        """The prompt (all but the prefix the cache already holds), then `extra`, in one call."""
        return self._prefill(extra, 1)

    def prefill_rows(self, extra: Sequence[int]) -> np.ndarray:
        """`prefill_with(extra)`, with the logits after the prompt and after each of `extra`
        (one row each): what a search over outputs needs to score forced tokens."""
        return self._prefill(extra, len(extra) + 1).reshape(len(extra) + 1, -1)

    def _prefill(self, extra: Sequence[int], rows: int) -> np.ndarray:
        # The turn's own work (masking, sampling) is one NumPy row; where torch is loaded
        # anyway, its OpenMP pool is kept from spinning on cores llama.cpp's threads need.
        self._torch_threads = one_thread()
        self._slot, n = self._context.take(self.prompt_ids)
        self.cached_tokens = n
        ids = [*self.prompt_ids[n:], *extra]
        return cast("np.ndarray", self._context.decode(self._slot, ids, rows))

    def feed(self, ids: Sequence[int]) -> np.ndarray:
        if self._slot is None:
            raise RuntimeError("feed before prefill")
        return cast("np.ndarray", self._context.decode(self._slot, ids))

    def feed_rows(self, ids: Sequence[int]) -> np.ndarray:
        """`feed(ids)`, with the logits after each of `ids` (one row each, one pass)."""
        if self._slot is None:
            raise RuntimeError("feed before prefill")
        rows = self._context.decode(self._slot, ids, len(ids))
        return cast("np.ndarray", rows.reshape(len(ids), -1))

    def rollback(self, n: int) -> None:
        """Forget the last `n` fed tokens (their KV cells are removed)."""
        if n > 0 and self._slot is not None:
            self._context.cut(self._slot, len(self._slot.ids) - n)

    def close(self) -> None:
        slot, self._slot = self._slot, None
        if slot is None:
            return
        restore_threads(self._torch_threads)
        self._context.give_back(slot)
