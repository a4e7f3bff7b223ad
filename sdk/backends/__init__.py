"""Model backends, and the one interface the agent drives them through.

Two kinds of backend meet in `TurnBackend`, whose `run_turn`/`arun_turn` produce one assistant
turn from a rendered request and its turn grammar:

- local models (`LlamaCppModel`, `TransformersModel`, the scripted `TestModel`) implement
  `ModelBackend`: a tokenizer, its byte index and a `DecodeSession` per turn;
  `run_local_turn` runs the SDK's own decoding loop over it: the matcher's masks on the
  logits, fast-forward, the call gate.
- servers (`OpenAIChatModel`) implement `RemoteBackend`: they get the turn grammar and enforce
  it in their own way, returning whole turns.

The agent holds a `TurnBackend` and never asks which kind it has: `as_turn_backend` adapts a
backend of either kind once, when the agent resolves its model (a backend may also implement
`TurnBackend` itself and run turns its own way).
`resolve_backend` turns an `Agent(model=...)` argument into a backend.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import os
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar, cast, runtime_checkable

from sdk._stream import TokenStream, TurnScanner, emit_whole_turn
from sdk.decoding.best import best_turn
from sdk.decoding.exact import exact_turn
from sdk.decoding.formats import format_traits
from sdk.decoding.generate import (
    DecodeSession,
    SamplingConfig,
    TurnOutput,
    TurnRequest,
    generate_turn,
)
from sdk.decoding.local_turn import LocalTurn, open_turn, reasoning_start
from sdk.errors import ConfigError

if TYPE_CHECKING:
    from sdk.decoding._gate import CallGate
    from sdk.decoding.generate import RollbackSession
    from sdk.decoding.turn_grammar import TurnGrammar
    from sdk.engine.tokenizer import TokenizerIndex

__all__ = [
    "DecodeSession",
    "ModelBackend",
    "RemoteBackend",
    "TurnBackend",
    "TurnSettings",
    "as_turn_backend",
    "check_model_spec",
    "in_decode_thread",
    "is_remote_spec",
    "resolve_backend",
]

T = TypeVar("T")


@dataclass(frozen=True)
class TurnSettings:
    """How one turn is generated, beyond what the prompt and the grammar say."""

    max_tokens: int
    sampling: SamplingConfig = SamplingConfig()  # noqa: RUF009 - frozen dataclass
    parallel_tool_calls: bool = True
    # Local decoding only (a server decides these itself): the call boundaries' steering, and
    # whether forced text ends where the model's own tokens would.
    gate: CallGate | None = None
    heal: bool = True
    # A streamed run's events for this turn: token by token locally, at once from a server.
    scanner: TurnScanner | None = None
    # Set when the run is cancelled: a local turn stops before its next forward pass.
    cancel: threading.Event | None = None


@runtime_checkable
class TurnBackend(Protocol):
    """What the agent drives: one assistant turn at a time, local or remote alike."""

    # The model's tokenizer (its chat template decides the call format); None where the
    # server tokenizes.
    tokenizer: Any

    def run_turn(
        self, request: TurnRequest, grammar: TurnGrammar, settings: TurnSettings
    ) -> TurnOutput:
        """One turn, blocking (`Agent.plan_sync`; a worker thread of an async run)."""
        ...

    async def arun_turn(
        self, request: TurnRequest, grammar: TurnGrammar, settings: TurnSettings
    ) -> TurnOutput:
        """One turn without blocking the event loop."""
        ...


@runtime_checkable
class ModelBackend(Protocol):
    """A local model the decoding loop drives: a tokenizer, its byte index, turn sessions."""

    tokenizer: Any

    @property
    def index(self) -> TokenizerIndex: ...

    def begin_turn(self, request: TurnRequest) -> DecodeSession: ...


@runtime_checkable
class RemoteBackend(Protocol):
    """A model that produces whole turns itself (an OpenAI-compatible server): it gets the
    turn's grammar to enforce in its own way and returns text and/or already-split calls."""

    def complete_turn(
        self,
        request: TurnRequest,
        grammar: TurnGrammar,
        *,
        max_tokens: int,
        sampling: SamplingConfig,
        parallel_tool_calls: bool,
    ) -> TurnOutput: ...

    async def acomplete_turn(
        self,
        request: TurnRequest,
        grammar: TurnGrammar,
        *,
        max_tokens: int,
        sampling: SamplingConfig,
        parallel_tool_calls: bool,
    ) -> TurnOutput: ...


_DECODE_POOL: concurrent.futures.ThreadPoolExecutor | None = None
_DECODE_POOL_LOCK = threading.Lock()


async def in_decode_thread(fn: Callable[..., T], *args: Any) -> T:
    """`asyncio.to_thread` on a pool of its own: the default executor has cores + 4 threads
    (6 on 2 cores), which would cap how many concurrent turns a batched model can serve."""
    global _DECODE_POOL
    with _DECODE_POOL_LOCK:
        if _DECODE_POOL is None:
            _DECODE_POOL = concurrent.futures.ThreadPoolExecutor(64, "sdk-decode")
    ctx = contextvars.copy_context()  # tracing spans and the like follow the turn
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_DECODE_POOL, functools.partial(ctx.run, fn, *args))


def run_local_turn(
    model: ModelBackend, request: TurnRequest, grammar: TurnGrammar, settings: TurnSettings
) -> TurnOutput:
    """The SDK's decoding loop over a local model's session: the turn grammar's matcher
    masks every step, forced text is fast-forwarded, the gate steers call boundaries."""
    turn = open_turn(model, request, grammar, settings.gate)
    max_tokens = settings.max_tokens
    limit = getattr(model, "context_length", None)  # the window caps the turn: a "length" end
    if isinstance(limit, int):
        max_tokens = max(1, min(max_tokens, limit - len(turn.session.prompt_ids)))
    stream = None
    if settings.scanner is not None:
        stream = TokenStream(settings.scanner, turn.index.decode_bytes)
        stream.scanner.opened = turn.reasoning_opened
    if _whole_reply_decoding(turn, request, grammar, settings):
        assert turn.matcher is not None
        session = cast("RollbackSession", turn.session)
        if settings.sampling.decoding == "best":
            out = best_turn(
                session,
                turn.matcher,
                turn.index,
                model.tokenizer,
                max_tokens,
                heal=settings.heal,
                gate=settings.gate,
                on_progress=stream,
            )
        else:
            out = exact_turn(
                session,
                turn.matcher,
                turn.index,
                max_tokens,
                settings.sampling,
                stream,
                tokenizer=model.tokenizer,
                heal=settings.heal,
                open_end=format_traits(request.fmt).closer if grammar.mode == "required" else None,
            )
        if stream is not None:
            stream.finish()
        return out
    out = generate_turn(
        turn.session,
        turn.matcher,
        turn.index,
        model.tokenizer,
        max_tokens=max_tokens,
        sampling=settings.sampling,
        gate=turn.gate,
        heal=settings.heal,
        on_progress=stream,
        cancel=settings.cancel,
        runaways=_runaway_scope(grammar.mode, turn.gate is not None),
        dead_ends=grammar.mode in ("auto", "none") and not grammar.has_output,
    )
    out.reasoning_opened = turn.reasoning_opened
    if stream is not None:
        stream.finish()
    return out


def _whole_reply_decoding(
    turn: LocalTurn, request: TurnRequest, grammar: TurnGrammar, settings: TurnSettings
) -> bool:
    """`decoding="exact"` draws, and `"best"` searches, turns whose whole reply the grammar
    constrains: a typed output, or a `"required"` turn without a reasoning span (whose free
    text the gate bounds)."""
    return (
        settings.sampling.decoding in ("exact", "best")
        and turn.matcher is not None
        and grammar.mode in ("output", "required")
        and not reasoning_start(request.fmt)
        and hasattr(turn.session, "rollback")
    )


def _runaway_scope(mode: str, gated: bool) -> Literal["reply", "calls"] | None:
    """Where a runaway value stops the turn (`generate_turn`'s `runaways`): inside calls
    where the gate tracks them, the whole reply where it is all value (a call, a typed
    output), never in an answer's free text."""
    if mode == "none":
        return None
    if gated:
        return "calls"
    return "reply" if mode in ("required", "output") else None


async def arun_local_turn(
    model: ModelBackend, request: TurnRequest, grammar: TurnGrammar, settings: TurnSettings
) -> TurnOutput:
    """`run_local_turn` in a worker thread: decoding is CPU/GPU bound. A cancelled run stops
    its turn at the next token (and a batched model frees the turn's row)."""
    try:
        return await in_decode_thread(run_local_turn, model, request, grammar, settings)
    except asyncio.CancelledError:
        if settings.cancel is not None:
            settings.cancel.set()
        raise


def _local_only(settings: TurnSettings) -> None:
    decoding = settings.sampling.decoding
    if decoding != "masked":
        raise ConfigError(
            f"decoding={decoding!r} needs a local model (it reads the model's distribution at "
            "every prefix it visits); a server decodes on its own"
        )


def run_remote_turn(
    server: RemoteBackend, request: TurnRequest, grammar: TurnGrammar, settings: TurnSettings
) -> TurnOutput:
    _local_only(settings)
    out = server.complete_turn(request, grammar, **_server_options(settings))
    return _streamed_whole(out, settings)


async def arun_remote_turn(
    server: RemoteBackend, request: TurnRequest, grammar: TurnGrammar, settings: TurnSettings
) -> TurnOutput:
    _local_only(settings)
    out = await server.acomplete_turn(request, grammar, **_server_options(settings))
    return _streamed_whole(out, settings)


def _server_options(settings: TurnSettings) -> dict[str, Any]:
    return {
        "max_tokens": settings.max_tokens,
        "sampling": settings.sampling,
        "parallel_tool_calls": settings.parallel_tool_calls,
    }


def _streamed_whole(out: TurnOutput, settings: TurnSettings) -> TurnOutput:
    if settings.scanner is not None:  # a server's turn arrives whole: its events at once
        emit_whole_turn(settings.scanner, out.text, out.calls)
    return out


@dataclass
class _Adapted:
    """A `ModelBackend` or `RemoteBackend` as a `TurnBackend`: its turns run by the pair of
    functions for its kind (`run_local_turn` or `run_remote_turn` and their async twins)."""

    target: Any
    tokenizer: Any
    run: Callable[[Any, TurnRequest, TurnGrammar, TurnSettings], TurnOutput]
    arun: Callable[[Any, TurnRequest, TurnGrammar, TurnSettings], Awaitable[TurnOutput]]

    def run_turn(
        self, request: TurnRequest, grammar: TurnGrammar, settings: TurnSettings
    ) -> TurnOutput:
        return self.run(self.target, request, grammar, settings)

    async def arun_turn(
        self, request: TurnRequest, grammar: TurnGrammar, settings: TurnSettings
    ) -> TurnOutput:
        return await self.arun(self.target, request, grammar, settings)


def as_turn_backend(model: Any) -> TurnBackend:
    """`model` as the agent drives it: as it is when it implements `TurnBackend`, else
    adapted by what it implements (`RemoteBackend` or `ModelBackend`)."""
    if hasattr(model, "run_turn") and hasattr(model, "arun_turn"):
        return model
    if isinstance(model, RemoteBackend):
        return _Adapted(model, None, run_remote_turn, arun_remote_turn)
    if isinstance(model, ModelBackend):
        return _Adapted(model, model.tokenizer, run_local_turn, arun_local_turn)
    raise TypeError(f"model={model!r} implements neither ModelBackend nor RemoteBackend")


def is_remote_spec(spec: Any) -> bool:
    """Does this `model=` resolve to a server (without loading anything)?"""
    if spec is None:
        return bool(os.environ.get("SDK_MODEL_URL"))
    if isinstance(spec, str):
        return spec.startswith(("http://", "https://"))
    return isinstance(spec, RemoteBackend)


def check_model_spec(spec: Any) -> None:
    """`Agent(model=...)` checked without loading anything: a name that is no local model
    (`Agent("gpt-4o")`) or an object that is no backend fails at construction with a
    `ConfigError`, not at the first run."""
    if spec is None or is_remote_spec(spec):
        return
    if isinstance(spec, tuple) and len(spec) == 2:  # (model, tokenizer)
        return
    if isinstance(spec, str | os.PathLike):
        from sdk.backends.embedded import EMBEDDED_MODELS

        path = Path(spec).expanduser()
        if str(spec) in EMBEDDED_MODELS or path.is_dir():
            return
        if path.suffix.lower() == ".gguf" and path.is_file():
            return
        known = ", ".join(repr(k) for k in sorted(EMBEDDED_MODELS))
        raise ConfigError(
            f"model={str(spec)!r} is not a local model: expected {known}, a .gguf file or a "
            "local Hugging Face directory that exists. Models are not fetched by name; a "
            "server (vLLM, SGLang, llama.cpp, OpenAI) is reached with an http(s)://.../v1 "
            "URL or OpenAIChatModel(base_url, model=...)."
        )
    if not any(hasattr(spec, a) for a in ("run_turn", "begin_turn", "complete_turn")):
        raise ConfigError(
            f"model={spec!r}: expected None (the embedded model), a model name or path, a "
            "(model, tokenizer) pair, a backend (LlamaCppModel, TransformersModel, "
            "OpenAIChatModel, TestModel) or a server URL"
        )


def resolve_backend(spec: Any) -> Any:
    """An `Agent(model=...)` argument as a backend object: a server URL (or None with
    `SDK_MODEL_URL` set) as `OpenAIChatModel`, a backend as it is, anything else through
    `sdk.backends.local.coerce_model` (named models load once per process, on the
    local backend `sdk.backends.local.local_backend` picks)."""
    if is_remote_spec(spec):
        from sdk.backends.openai import OpenAIChatModel

        if spec is None:
            return OpenAIChatModel.from_env()
        if isinstance(spec, str):
            return OpenAIChatModel(spec)
        return spec
    from sdk.backends.local import coerce_model

    return coerce_model(spec)
