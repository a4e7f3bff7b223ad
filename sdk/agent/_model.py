"""The agent's model: resolved (and loaded) on first use, swapped by `Agent.override`, and
driven for one turn.

`ModelSlot` holds the `model=` argument and what it resolves to: the backend, its
`TurnBackend` adapter and the call format resolved for its tokenizer. An override is a second
slot, held in a context variable, so it reaches a run's worker threads and tasks and no
other. `generate`/`agenerate` run one turn on whichever slot is in force.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from sdk.backends import (
    ModelBackend,
    RemoteBackend,
    TurnBackend,
    TurnSettings,
    as_turn_backend,
    check_model_spec,
    in_decode_thread,
    resolve_backend,
)
from sdk.errors import AgentRunError, UnexpectedModelBehavior

if TYPE_CHECKING:
    from sdk.agent._run import RunState
    from sdk.agent._turn import TurnAssembly
    from sdk.decoding.formats import ToolCallFormat
    from sdk.decoding.generate import TurnOutput, TurnRequest
    from sdk.decoding.turn_grammar import TurnGrammar


class ModelSlot:
    """One `model=` value and what it resolves to, each resolved once, thread-safely."""

    def __init__(self, spec: Any) -> None:
        self.spec = spec
        self._lock = threading.Lock()
        self._backend: ModelBackend | RemoteBackend | None = None
        self._turns: TurnBackend | None = None
        self._fmt: ToolCallFormat | None = None

    @property
    def loaded(self) -> bool:
        return self._backend is not None

    def backend(self) -> ModelBackend | RemoteBackend:
        self.turn_backend()
        assert self._backend is not None
        return self._backend

    def turn_backend(self) -> TurnBackend:
        with self._lock:
            if self._turns is None:
                self._backend = resolve_backend(self.spec)
                self._turns = as_turn_backend(self._backend)
            return self._turns

    def fmt(self, assembly: TurnAssembly) -> ToolCallFormat:
        """The call format resolved for this model's tokenizer (may load the model)."""
        if self._fmt is None:
            self._fmt = assembly.format_for(getattr(self.turn_backend(), "tokenizer", None))
        return self._fmt

    def likely_fmt(self, assembly: TurnAssembly) -> ToolCallFormat:
        """The resolved format, or, for a named model not loaded yet, the likeliest one
        (without loading it: an agent is built before its model loads)."""
        spec = self.spec
        if (
            self._fmt is None
            and not self.loaded
            and (spec is None or isinstance(spec, str | os.PathLike))
        ):
            return assembly.format_for(None)
        return self.fmt(assembly)


class Models:
    """The agent's own slot, and an override's where one is in force."""

    def __init__(self, spec: Any) -> None:
        check_model_spec(spec)
        self.own = ModelSlot(spec)
        self.swap: contextvars.ContextVar[ModelSlot | None] = contextvars.ContextVar(
            "sdk_agent_override", default=None
        )

    @property
    def current(self) -> ModelSlot:
        return self.swap.get() or self.own

    @contextlib.contextmanager
    def override(self, spec: Any) -> Iterator[None]:
        """`Agent.override`: `spec`'s slot in force in the current context, inside the block."""
        check_model_spec(spec)
        token = self.swap.set(ModelSlot(spec))
        try:
            yield
        finally:
            self.swap.reset(token)


def turn_inputs(
    slot: ModelSlot, assembly: TurnAssembly, run: RunState, tool_choice: str
) -> tuple[TurnBackend, TurnRequest, TurnGrammar, TurnSettings]:
    """The backend and what it needs for this turn (may load the model, compile a grammar:
    an async run calls it in a worker thread)."""
    backend = slot.turn_backend()
    fmt = slot.fmt(assembly)
    request, grammar = assembly.request(run, tool_choice, fmt)
    tokenizer = getattr(backend, "tokenizer", None)
    return backend, request, grammar, assembly.settings(run, grammar, fmt, tokenizer)


async def agenerate(
    slot: ModelSlot, assembly: TurnAssembly, run: RunState, tool_choice: str
) -> tuple[TurnOutput, TurnGrammar]:
    backend, request, grammar, settings = await in_decode_thread(
        turn_inputs, slot, assembly, run, tool_choice
    )
    try:
        out = await backend.arun_turn(request, grammar, settings)
    except AgentRunError as exc:
        keep_transcript(exc, run)
        raise
    return assembly.account(run, out, grammar, request.fmt), grammar


def generate(
    slot: ModelSlot, assembly: TurnAssembly, run: RunState, tool_choice: str
) -> tuple[TurnOutput, TurnGrammar]:
    backend, request, grammar, settings = turn_inputs(slot, assembly, run, tool_choice)
    try:
        out = backend.run_turn(request, grammar, settings)
    except AgentRunError as exc:
        keep_transcript(exc, run)
        raise
    return assembly.account(run, out, grammar, request.fmt), grammar


def keep_transcript(exc: AgentRunError, run: RunState) -> None:
    """A backend's failure keeps the run's transcript (and, failing before any output, the
    last turn's text)."""
    exc.messages = list(run.messages)
    if isinstance(exc, UnexpectedModelBehavior) and exc.raw_output is None:
        exc.raw_output = run.last_raw
