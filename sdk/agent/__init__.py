"""`Agent`: a local model, tools and an optional output type, run as a tool-calling loop.

Each step renders the conversation, generates one assistant turn under the turn grammar
(`sdk.decoding.turn_grammar`), parses the calls out of it, validates their arguments with the
tools' Pydantic models and runs the tools. Validation errors and `ModelRetry` go back to the
model as tool results and it tries again (per-tool retry budget); a turn without calls ends
the run with its text, or with its JSON validated into `output_type`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import json
import logging
import math
import os
import queue
import threading
import time
from collections.abc import (
    AsyncIterator,
    Callable,
    Coroutine,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from dataclasses import dataclass, field, replace
from typing import Any, Generic, Literal, TypeVar, cast, overload

import pydantic_core
from pydantic import TypeAdapter, ValidationError

from sdk import tracing
from sdk._settings import (
    UsageLimits,
    check_int,
    check_run_settings,
    check_sampling,
    check_tool_choice,
    check_tools_arg,
)
from sdk._stream import TokenStream, TurnScanner, emit_whole_turn
from sdk.decoding import (
    DEFAULT_AUTO_CALL_BIAS,
    TOOL_TRAINED_CALL_BIAS,
    CallGate,
    open_turn,
    reasoning_start,
)
from sdk.decoding.call_style import SPACED, CallStyle, as_call_style
from sdk.decoding.formats import (
    HERMES,
    HermesFormat,
    ParsedCall,
    ToolCallFormat,
    get_format,
    strip_property_titles,
)
from sdk.decoding.generate import (
    ModelBackend,
    RemoteBackend,
    SamplingConfig,
    TurnOutput,
    TurnRequest,
    generate_turn,
)
from sdk.decoding.turn_grammar import TurnGrammar, build_turn_grammar, format_style
from sdk.errors import (
    AgentRunError,
    ConfigError,
    FailedAttempt,
    RetriesExhausted,
    StepLimitExceeded,
    ToolExecutionError,
    ToolNotOffered,
    TruncationError,
    UnexpectedModelBehavior,
    UsageLimitExceeded,
)
from sdk.events import (
    CallValidated,
    FinalResult,
    Retry,
    StreamEvent,
    ToolResult,
)
from sdk.messages import Message, ToolCallPart, coerce_messages
from sdk.result import RunResult, ToolCall, Usage
from sdk.tools import (
    ModelRetry,
    RunContext,
    Tool,
    ToolDefinitionError,
    as_tool,
    not_runnable_message,
)

__all__ = ["Agent"]

OutputT = TypeVar("OutputT")
T = TypeVar("T")

_log = logging.getLogger("sdk.agent")
ToolErrors = Literal["return", "raise"]
ToolChoiceSpec = str | Mapping[str, Any] | Sequence[str | Mapping[str, Any]]
"""A mode, a tool name, an OpenAI `tool_choice` dict, or one of those per turn."""
CallStyleSpec = Literal["auto", "compact", "spaced", "flexible"] | CallStyle | tuple[str, str]


def _stop_policy(retries: Any) -> Callable[[int], bool]:
    """`retries` as "stop after k failures?": an int n allows n retries
    (= `tenacity.stop_after_attempt(n + 1)`); tenacity stop conditions are used as given."""
    if isinstance(retries, int):
        if retries < 0:
            raise ConfigError(f"retries={retries!r}: must be >= 0")
        return lambda failures: failures > retries
    if not callable(retries):
        raise ConfigError(f"retries={retries!r}: expected an int or a tenacity stop condition")
    from tenacity import RetryCallState

    started = time.monotonic()

    def stop(failures: int) -> bool:
        state = RetryCallState(None, None, (), {})  # type: ignore[arg-type]
        state.start_time = started
        state.attempt_number = failures
        state.outcome_timestamp = time.monotonic()
        return bool(retries(state))

    return stop


def _format_validation_error(exc: ValidationError) -> str:
    lines = []
    for err in exc.errors(include_url=False):
        loc = ".".join(str(p) for p in err.get("loc", ())) or "(root)"
        given = err.get("input")
        shown = json.dumps(given, ensure_ascii=False, default=str)[:80]
        lines.append(f"- {loc}: {err.get('msg')} (got {shown})")
    return "\n".join(lines)


def _result_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return pydantic_core.to_json(value, fallback=str).decode()
    except Exception:  # noqa: BLE001 - anything unserializable: its repr
        return repr(value)


def _normalize_tools(tools: Iterable[Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in tools:
        # Duck-typed tool objects (e.g. raw-schema adapters) pass as they are; OpenAI function
        # dicts become declared schema tools.
        if isinstance(item, Mapping):
            t: Any = Tool.from_openai(item)
        else:
            t = item if _is_tool_like(item) else as_tool(item)
        if t.name in out:
            raise ToolDefinitionError(f"duplicate tool name {t.name!r}", function=t.name)
        out[t.name] = t
    return out


def _is_remote(obj: Any) -> bool:
    return hasattr(obj, "complete_turn") and hasattr(obj, "acomplete_turn")


def _is_remote_spec(spec: Any) -> bool:
    """Does this `model=` resolve to a remote backend (without loading anything)?"""
    if spec is None:
        return bool(os.environ.get("SDK_MODEL_URL"))
    if isinstance(spec, str):
        return spec.startswith(("http://", "https://"))
    return _is_remote(spec)


def _is_tool_like(obj: Any) -> bool:
    return isinstance(obj, Tool) or all(
        hasattr(obj, a) for a in ("name", "json_schema", "validate_args", "to_openai", "call")
    )


PrepareTools = Callable[[RunContext[Any], list[Any]], Sequence[Any]]
"""Per run: called before each model turn with the run's context (`deps`, `step`) and the
agent's tools; returns the tools to offer on that turn (a subset, or copies such as
`dataclasses.replace(tool, description=...)`)."""


@dataclass(frozen=True)
class _Options:
    max_steps: int | None = None
    settings: Mapping[str, Any] | None = None
    limits: UsageLimits | None = None
    prepare: PrepareTools | None = None


_DECODE_POOL: concurrent.futures.ThreadPoolExecutor | None = None
_DECODE_POOL_LOCK = threading.Lock()


async def _in_decode_thread(fn: Callable[..., T], *args: Any) -> T:
    """`asyncio.to_thread` on a pool of its own: the default executor has cores + 4 threads
    (6 on 2 cores), which would cap how many concurrent turns a batched model can serve."""
    global _DECODE_POOL
    with _DECODE_POOL_LOCK:
        if _DECODE_POOL is None:
            _DECODE_POOL = concurrent.futures.ThreadPoolExecutor(64, "sdk-decode")
    ctx = contextvars.copy_context()  # tracing spans and the like follow the turn
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_DECODE_POOL, functools.partial(ctx.run, fn, *args))


@dataclass
class _Run:
    """Mutable state of one run."""

    messages: list[Message]
    deps: Any
    usage: Usage = field(default_factory=Usage)
    tool_calls: list[ToolCall] = field(default_factory=list)
    failures: dict[str, int] = field(default_factory=dict)
    attempts: list[FailedAttempt] = field(default_factory=list)
    last_raw: str = ""
    sink: Callable[[StreamEvent], None] | None = None  # a streamed run's events
    max_tokens: int = 512  # this run's settings (the agent's, or per-run overrides)
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    limits: UsageLimits | None = None
    prepare: PrepareTools | None = None
    offered: dict[str, Any] = field(default_factory=dict)  # this turn's tools
    # Set when the run's task is cancelled: its worker thread stops at the next token (and a
    # batched model frees the turn's row) instead of generating to max_tokens unobserved.
    cancel: threading.Event = field(default_factory=threading.Event)


class Agent(Generic[OutputT]):
    """A tool-calling agent on a local model; arguments always parse and validate.

    Args:
        model: None (the embedded SmolLM2-135M, loaded once per process on first use; or, when
            `SDK_MODEL_URL` is set, that OpenAI-compatible server: `OpenAIChatModel.from_env()`),
            a `TransformersModel`, a `(model, tokenizer)` pair, "smollm2"/"gemma3"/a `.gguf`
            path/a local HF directory, a scripted `TestModel` / `FunctionModel`, an
            `OpenAIChatModel` (vLLM, SGLang, llama.cpp, ... server) or an "http(s)://.../v1" URL.
        tools: functions (decorated with `@tool` or not), `Tool`s or Pydantic models.
        output_type: the type of the final reply (`str` by default); anything else is generated as
            JSON under its schema and validated (retried like tool arguments on failure).
        tool_choice: "auto" (model decides), "required" (the turn must call tools), a tool name
            (the turn must call it), or "none" (tools are neither shown nor callable). A single
            "required" or name applies to the first turn, later turns are "auto" (forcing calls on
            every turn could never end; the OpenAI Agents SDK resets it the same way). A list gives
            one choice per turn, its last entry repeating: `["required", "none"]` = call, then
            answer from the results (what small models do best).
        retries: per-tool (and output) retry budget: an int (retries after the first attempt) or a
            tenacity stop condition such as `stop_after_attempt(3) | stop_after_delay(30)`.
        tool_errors: "return" sends a tool's exception text back to the model; "raise" ends the run
            with `ToolExecutionError`.
        parallel_tool_calls: allow several calls in one turn. Small models tend to repeat the same
            call over and over; False ends the turn after its first call.
        drop_repeated_calls: a call identical (name and arguments) to an earlier call of the same
            turn is cut away and the turn ends after the call before it: the model is looping,
            and the tool would only run twice. False keeps every call the model writes.
        call_format: the envelope of calls: "auto" (the format the model's chat template
            writes calls in, Hermes `<tool_call>` tags where it writes none), a built-in
            format's name (`sdk.decoding.formats.FORMATS`: "hermes", "llama3_json",
            "mistral", "mistral_args", "granite", "deepseek_v3", "pythonic", "qwen_xml",
            "functiongemma", "harmony") or a `ToolCallFormat`. See the model-families page.
        call_style: the layout of a call's JSON body, which the grammar enforces exactly:
            "auto" (what the model's chat template writes, else `json.dumps`' `", "`/`": "`),
            "compact", "spaced", "flexible" (bounded whitespace, the model's choice), an
            `(item, key)` separator pair or a `CallStyle`. A layout the model was not trained
            on costs correct values; see the call-quality page.
        auto_call_bias: in "auto", whether to open a call is decided where one may start: a
            tentative call shows how much of the model's probability the offered tool names
            get, and it calls iff log(that share) + this bias > 0. "auto": 0.1 for models whose
            chat template renders tools (trained to call), 2.75 for others such as the
            embedded SmolLM2; None: no decision, the model's own sampled token decides (small
            models then almost never call). See the call-quality page.
        reasoning_tokens: under "required" (or a tool name), let the model write up to this
            many tokens of free text before its call (0: the call starts at once); the text
            stays in the turn's output and is never parsed for calls. For a reasoning model
            (a format with `<think>` markers) it bounds the reasoning span instead: this many
            tokens into it, the end marker is forced (0: unbounded).
        token_healing: where forced text (an envelope, a key, `": "`) meets free text, give the
            last forced tokens back when one of the model's own tokens could run across the
            boundary (` 36` after `":`), so the model writes the tokens it was trained on.
            False forces the tokenizer's encoding of the forced text as it is (for
            comparisons).
    """

    @overload
    def __init__(
        self: Agent[str],
        model: Any = None,
        *,
        tools: Sequence[Any] = (),
        output_type: None = None,
        system_prompt: str | None = None,
        tool_choice: ToolChoiceSpec = "auto",
        max_tokens: int = 512,
        max_steps: int = 8,
        retries: Any = 3,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = None,
        tool_errors: ToolErrors = "return",
        parallel_tool_calls: bool = True,
        call_format: ToolCallFormat | str = "auto",
        call_style: CallStyleSpec = "auto",
        auto_call_bias: float | Literal["auto"] | None = "auto",
        reasoning_tokens: int = 0,
        token_healing: bool = True,
        drop_repeated_calls: bool = True,
    ) -> None: ...

    @overload
    def __init__(
        self: Agent[T],
        model: Any = None,
        *,
        tools: Sequence[Any] = (),
        output_type: type[T],
        system_prompt: str | None = None,
        tool_choice: ToolChoiceSpec = "auto",
        max_tokens: int = 512,
        max_steps: int = 8,
        retries: Any = 3,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = None,
        tool_errors: ToolErrors = "return",
        parallel_tool_calls: bool = True,
        call_format: ToolCallFormat | str = "auto",
        call_style: CallStyleSpec = "auto",
        auto_call_bias: float | Literal["auto"] | None = "auto",
        reasoning_tokens: int = 0,
        token_healing: bool = True,
        drop_repeated_calls: bool = True,
    ) -> None: ...

    @overload
    def __init__(
        self: Agent[Any],
        model: Any = None,
        *,
        tools: Sequence[Any] = (),
        output_type: Any,
        system_prompt: str | None = None,
        tool_choice: ToolChoiceSpec = "auto",
        max_tokens: int = 512,
        max_steps: int = 8,
        retries: Any = 3,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = None,
        tool_errors: ToolErrors = "return",
        parallel_tool_calls: bool = True,
        call_format: ToolCallFormat | str = "auto",
        call_style: CallStyleSpec = "auto",
        auto_call_bias: float | Literal["auto"] | None = "auto",
        reasoning_tokens: int = 0,
        token_healing: bool = True,
        drop_repeated_calls: bool = True,
    ) -> None: ...

    def __init__(
        self,
        model: Any = None,
        *,
        tools: Sequence[Any] = (),
        output_type: Any = None,
        system_prompt: str | None = None,
        tool_choice: ToolChoiceSpec = "auto",
        max_tokens: int = 512,
        max_steps: int = 8,
        retries: Any = 3,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = None,
        tool_errors: ToolErrors = "return",
        parallel_tool_calls: bool = True,
        call_format: ToolCallFormat | str = "auto",
        call_style: CallStyleSpec = "auto",
        auto_call_bias: float | Literal["auto"] | None = "auto",
        reasoning_tokens: int = 0,
        token_healing: bool = True,
        drop_repeated_calls: bool = True,
    ) -> None:
        self._model_spec = model
        self._backend: ModelBackend | RemoteBackend | None = None
        self._backend_lock = threading.Lock()
        self.tools: dict[str, Any] = _normalize_tools(check_tools_arg(tools))
        if isinstance(tool_choice, str | Mapping):
            first = check_tool_choice(tool_choice)
            choices: tuple[str, ...] = (first,) if first in ("auto", "none") else (first, "auto")
        elif isinstance(tool_choice, Iterable):
            choices = tuple(check_tool_choice(c) for c in tool_choice)
        else:
            choices = (check_tool_choice(tool_choice),)
        if not choices:
            raise ConfigError("tool_choice must not be empty")
        for c in choices:
            if c not in ("auto", "required", "none") and c not in self.tools:
                raise ConfigError(
                    f"tool_choice={c!r} is neither a mode ('auto', 'required', 'none') nor an "
                    f"offered tool {sorted(self.tools)}"
                )
            if c == "required" and not self.tools:
                raise ConfigError('tool_choice="required" needs at least one tool')
        if tool_errors not in ("return", "raise"):
            raise ConfigError(f'tool_errors={tool_errors!r}: must be "return" or "raise"')
        check_int("max_tokens", max_tokens, 1)
        check_int("max_steps", max_steps, 1)
        check_sampling(temperature, top_p, seed)
        self.tool_choice = tool_choice
        self._choices = choices
        self.output_type = output_type
        self._output_adapter: TypeAdapter[Any] | None = None
        self._output_schema: dict[str, Any] | None = None
        if output_type is not None and output_type is not str:
            self._output_adapter = TypeAdapter(output_type)
            self._output_schema = self._output_adapter.json_schema()
        self.system_prompt = system_prompt
        self.max_tokens = max_tokens
        self.max_steps = max_steps
        self.retries = retries
        self._stop = _stop_policy(retries)
        self.sampling = SamplingConfig(temperature=temperature, top_p=top_p, seed=seed)
        self.tool_errors = tool_errors
        if isinstance(call_format, str):
            if call_format != "auto":
                get_format(call_format)  # a ConfigError naming the known formats
        elif not isinstance(call_format, ToolCallFormat):
            raise ConfigError(
                f"call_format={call_format!r}: expected 'auto', a format name or a ToolCallFormat"
            )
        self.format = call_format
        self.call_style = call_style
        self._style: CallStyle | None = None if call_style == "auto" else as_call_style(call_style)
        if (
            self._style is not None
            and not isinstance(call_format, str)
            and not hasattr(call_format, "with_style")
            and self._style != format_style(call_format)
        ):
            raise ConfigError(
                f"call_style={call_style!r}: the format {call_format.name!r} has no "
                "with_style(); lay its calls out in the format itself"
            )
        self._resolved: ToolCallFormat | None = None
        if auto_call_bias != "auto" and auto_call_bias is not None:
            if isinstance(auto_call_bias, bool) or not isinstance(auto_call_bias, int | float):
                raise ConfigError(
                    f"auto_call_bias={auto_call_bias!r}: expected a float, 'auto' or None"
                )
            if not math.isfinite(auto_call_bias):
                raise ConfigError(f"auto_call_bias={auto_call_bias!r}: expected a finite float")
        self.auto_call_bias = auto_call_bias
        self.reasoning_tokens = check_int("reasoning_tokens", reasoning_tokens, 0)
        self.token_healing = bool(token_healing)
        self.drop_repeated_calls = bool(drop_repeated_calls)
        self.parallel_tool_calls = parallel_tool_calls
        # Compile the grammars now: a schema the grammar cannot express should fail here, not
        # in the middle of a conversation.
        for c in set(choices):
            self._turn_grammar(c)

    # ------------------------------------------------------------------ configuration

    @property
    def model(self) -> ModelBackend | RemoteBackend:
        """The backend, resolved (and for named models loaded) on first use."""
        with self._backend_lock:
            if self._backend is None:
                spec = self._model_spec
                if _is_remote_spec(spec):
                    from sdk.backends.openai import OpenAIChatModel

                    if spec is None:
                        spec = OpenAIChatModel.from_env()
                    elif isinstance(spec, str):
                        spec = OpenAIChatModel(spec)
                    self._backend = cast(RemoteBackend, spec)
                else:
                    from sdk.backends.transformers import coerce_model

                    self._backend = cast(ModelBackend, coerce_model(spec))
            return self._backend

    def resolved_format(self) -> ToolCallFormat:
        """The call format with its body layout resolved for this agent's model.

        `call_style="auto"` follows the model's chat template (`probe_call_style`): the
        separators its template writes calls with, `json.dumps`' spacing where it writes none.
        Resolving may load the model (a named model loads on first use anyway).
        """
        if self._resolved is None:
            self._resolved = self._format_for(self.model)
        return self._resolved

    @property
    def resolved_style(self) -> CallStyle:
        """The layout of call bodies this agent's grammar enforces (`resolved_format`'s)."""
        return format_style(self.resolved_format())

    def _format_for(self, backend: Any) -> ToolCallFormat:
        tokenizer = None if _is_remote(backend) else getattr(backend, "tokenizer", None)
        spec = self.format
        if isinstance(spec, str):
            if spec != "auto":
                fmt: ToolCallFormat = get_format(spec)
            elif tokenizer is not None:
                from sdk.backends.transformers import detect_call_format

                fmt = detect_call_format(tokenizer)
            else:  # a remote server parses calls itself; Hermes for text it returns raw
                fmt = HERMES
        else:
            fmt = spec
        if not hasattr(fmt, "with_style"):
            return fmt
        style = self._style
        if style is None:
            if tokenizer is None:
                style = SPACED
            else:
                from sdk.backends.transformers import probe_call_style

                style = probe_call_style(tokenizer)
        return cast(ToolCallFormat, fmt.with_style(style))

    def _current_format(self) -> ToolCallFormat:
        """The resolved format, or (before the model is loaded) the most likely one."""
        if self._resolved is not None:
            return self._resolved
        spec = self._model_spec
        if self._backend is not None or not (spec is None or isinstance(spec, str | os.PathLike)):
            return self.resolved_format()
        return self._format_for(None)

    def _turn_grammar(
        self,
        tool_choice: str,
        fmt: ToolCallFormat | None = None,
        tools: Mapping[str, Any] | None = None,
    ) -> TurnGrammar:
        fmt = fmt or self._current_format()
        # A reasoning model's span already precedes its call (the format's own markers).
        free_text = self.reasoning_tokens > 0 and not getattr(fmt, "reasoning", None)
        return build_turn_grammar(
            list((self.tools if tools is None else tools).values()),
            tool_choice,
            self._output_schema,
            fmt,
            parallel_tool_calls=self.parallel_tool_calls,
            reasoning=free_text,
        )

    def _call_bias(self) -> float:
        """`auto_call_bias`, with "auto" resolved: models whose chat template renders tools
        were trained to call and are confident when a tool fits, so they get a stricter bias
        than generic chat models (see `sdk.decoding._gate`)."""
        if self.auto_call_bias != "auto":
            return float(cast(float, self.auto_call_bias))
        tokenizer = getattr(self._backend, "tokenizer", None)
        if tokenizer is not None:
            from sdk.backends.transformers import template_supports_tools

            if template_supports_tools(tokenizer):
                return TOOL_TRAINED_CALL_BIAS
        return DEFAULT_AUTO_CALL_BIAS

    def _gate(self, grammar: TurnGrammar, fmt: ToolCallFormat) -> CallGate | None:
        """How this turn's call boundaries are steered (see `sdk.decoding._gate`)."""
        if not grammar.tool_names:
            return None
        closer = getattr(fmt, "closer", None)
        # Several calls per turn, each closed: the loop can cut back to the last complete one.
        tracked = self.parallel_tool_calls and closer is not None
        # A reasoning model's span: no call is seen inside it; `reasoning_tokens` bounds it.
        thinking = getattr(fmt, "reasoning", None)
        gate = CallGate(
            fmt.opener,
            closer,
            drop_repeats=tracked and self.drop_repeated_calls,
            keep_complete_calls=tracked,
            reasoning=thinking,
            reasoning_budget=(self.reasoning_tokens or None) if thinking else None,
            at_start_only=bool(getattr(fmt, "whole_reply", False)),
        )
        if grammar.mode == "auto" and self.auto_call_bias is not None:
            return replace(gate, bias=self._call_bias(), name_prefix=_name_prefix(fmt))
        budget = self.reasoning_tokens if grammar.mode == "required" and not thinking else 0
        if budget > 0 or tracked or thinking:
            return replace(gate, budget=budget or None)
        return None

    def _system_text(self) -> str | None:
        parts = [self.system_prompt] if self.system_prompt else []
        if self._output_schema is not None:
            schema = json.dumps(strip_property_titles(self._output_schema), ensure_ascii=False)
            when = "When you have the final answer, reply" if self.tools else "Reply"
            parts.append(f"{when} with JSON matching this JSON schema:\n{schema}")
        return "\n\n".join(parts) if parts else None

    def _start_messages(
        self, prompt: str | None, history: Iterable[Message | Mapping[str, Any]] | None
    ) -> tuple[list[Message], int]:
        messages = _with_instructions(coerce_messages(history), self._system_text())
        new_from = len(messages)
        if prompt is not None:
            messages.append(Message.user(prompt))
        elif not messages or messages[-1].role == "assistant":
            raise ValueError("nothing to answer: pass a prompt or a history ending in a user turn")
        return messages, new_from

    # ------------------------------------------------------------------ one model turn

    def _request(self, run: _Run, tool_choice: str) -> tuple[TurnRequest, TurnGrammar]:
        fmt = self.resolved_format()
        grammar = self._turn_grammar(tool_choice, fmt, run.offered)
        # Every tool is shown (a named tool_choice narrows the grammar, not the prompt).
        request = TurnRequest(
            messages=tuple(run.messages),
            tools=list(run.offered.values()) if tool_choice != "none" else [],
            tool_choice=tool_choice,
            output_schema=self._output_schema,
            fmt=fmt,
        )
        return request, grammar

    async def _agenerate(self, run: _Run, tool_choice: str) -> tuple[TurnOutput, TurnGrammar]:
        """One turn: awaited on a remote backend, in a worker thread on a local model."""
        resolved = self._backend
        remote = _is_remote(resolved) if resolved is not None else _is_remote_spec(self._model_spec)
        if not remote:  # local decoding is CPU/GPU bound: a worker thread
            try:
                return await _in_decode_thread(self._generate, run, tool_choice)
            except asyncio.CancelledError:
                run.cancel.set()
                raise
        backend = cast(RemoteBackend, self.model)
        request, grammar = self._request(run, tool_choice)
        try:
            out = await backend.acomplete_turn(
                request,
                grammar,
                max_tokens=run.max_tokens,
                sampling=run.sampling,
                parallel_tool_calls=self.parallel_tool_calls,
            )
        except AgentRunError as exc:
            exc.messages = list(run.messages)
            raise
        self._stream_whole(run, out, grammar, request.fmt)
        return self._account(run, out, grammar), grammar

    def _scanner(self, run: _Run, grammar: TurnGrammar, fmt: ToolCallFormat) -> TurnScanner:
        assert run.sink is not None
        opener = fmt.opener if grammar.tool_names else None
        closer = getattr(fmt, "closer", None)
        # Calls `opener {"name": .., "arguments": ..} closer` stream their arguments as they
        # are written; other layouts are parsed whole when the turn ends.
        streamed = isinstance(fmt, HermesFormat) and fmt.arguments_key == "arguments"
        return TurnScanner(
            run.usage.steps + 1,
            opener,
            closer,
            run.sink,
            parse=None if streamed else self._parse_calls,
            reasoning=getattr(fmt, "reasoning", None),
            at_start=bool(getattr(fmt, "whole_reply", False)),
        )

    def _stream_whole(
        self, run: _Run, out: TurnOutput, grammar: TurnGrammar, fmt: ToolCallFormat
    ) -> None:
        """A remote turn arrives in one piece: its events, at once."""
        if run.sink is not None:
            emit_whole_turn(self._scanner(run, grammar, fmt), out.text, out.calls)

    def _generate(self, run: _Run, tool_choice: str) -> tuple[TurnOutput, TurnGrammar]:
        model = self.model
        request, grammar = self._request(run, tool_choice)
        if _is_remote(model):
            try:
                out = cast(RemoteBackend, model).complete_turn(
                    request,
                    grammar,
                    max_tokens=run.max_tokens,
                    sampling=run.sampling,
                    parallel_tool_calls=self.parallel_tool_calls,
                )
            except AgentRunError as exc:
                exc.messages = list(run.messages)
                raise
            self._stream_whole(run, out, grammar, request.fmt)
            return self._account(run, out, grammar), grammar
        backend = cast(ModelBackend, model)
        stream = None
        try:
            # Inside: a backend's own failure (a scripted model running out of replies) keeps
            # the transcript too.
            turn = open_turn(backend, request, grammar, self._gate(grammar, request.fmt))
            if run.sink is not None:
                stream = TokenStream(
                    self._scanner(run, grammar, request.fmt), turn.index.decode_bytes
                )
                stream.scanner.opened = turn.reasoning_opened
            out = generate_turn(
                turn.session,
                turn.matcher,
                turn.index,
                backend.tokenizer,
                max_tokens=run.max_tokens,
                sampling=run.sampling,
                gate=turn.gate,
                heal=self.token_healing,
                on_progress=stream,
                cancel=run.cancel,
            )
        except UnexpectedModelBehavior as exc:
            exc.messages = list(run.messages)
            if exc.raw_output is None:  # failed before any output: the last turn's
                exc.raw_output = run.last_raw
            raise
        out.reasoning_opened = turn.reasoning_opened
        if stream is not None:
            stream.finish()
        return self._account(run, out, grammar), grammar

    def _account(self, run: _Run, out: TurnOutput, grammar: TurnGrammar) -> TurnOutput:
        """Usage and the truncation check, the same for every backend."""
        run.usage.add(out.usage)
        run.usage.steps += 1
        run.last_raw = out.text
        if _log.isEnabledFor(logging.DEBUG):
            u = out.usage
            _log.debug(
                "turn %d (%s): %d tokens (%d forced), %d forward passes, mask %.3f s of "
                "%.3f s, finish=%s",
                run.usage.steps,
                grammar.mode,
                u.completion_tokens,
                u.forced_tokens,
                u.forward_passes,
                u.mask_time_s,
                u.generation_time_s,
                out.finish_reason,
            )
        if out.accepting and not self._cut_inside_value(run, out, grammar):
            return out
        opener = self.resolved_format().opener
        in_call = (
            bool(out.calls)
            or not grammar.has_output
            or (
                bool(grammar.tool_names)
                and (opener in out.text or opener.startswith(out.text.lstrip()))
            )
        )
        raise TruncationError(
            f"max_tokens={run.max_tokens} ran out inside a "
            + ("tool call" if in_call else "structured output"),
            partial_text=out.text,
            messages=list(run.messages),
        )

    def _cut_inside_value(self, run: _Run, out: TurnOutput, grammar: TurnGrammar) -> bool:
        """Did `max_tokens` cut a constrained span (a call, a typed output)? Such a value
        counts only when the model or the grammar ended it, even if the cut left text the
        grammar accepts (`12` of `12345`). A cut in "auto"'s free text is an ordinary
        "length" finish."""
        if out.finish_reason != "length" or not grammar.constrained:
            return False
        if out.dropped == "truncated":  # the cut call is gone; the turn is its complete calls
            _log.warning(
                "max_tokens=%d ran out inside a call: it was dropped, the %d complete calls "
                "before it are kept",
                run.max_tokens,
                len(self._calls(out, grammar)),
            )
            return False
        if grammar.mode != "auto" or grammar.has_output:
            return True
        fmt = self.resolved_format()
        opener = fmt.opener
        closer = getattr(fmt, "closer", None)
        opened = out.text.rfind(opener)
        if getattr(fmt, "whole_reply", False):  # calls are the reply, or there are none
            head = self._split_reasoning(out)[1]
            opened = 0 if head.lstrip().startswith(opener) else -1
        if opened < 0:
            return False
        return not closer or out.text.find(closer, opened) < 0

    def _calls(self, out: TurnOutput, grammar: TurnGrammar) -> list[ParsedCall]:
        """The turn's calls: split by a remote server already, or parsed out of the text
        (values the format wrote as raw text typed by the named tool's schema)."""
        if out.calls is not None:
            return list(out.calls)
        if not grammar.tool_names:
            return []
        return self._parse_calls(out.text, out.reasoning_opened)

    def _parse_calls(self, text: str, opened: bool = False) -> list[ParsedCall]:
        fmt = self.resolved_format()
        calls = fmt.parse(reasoning_start(fmt) + text if opened else text)
        resolve = getattr(fmt, "resolve_arguments", None)
        if resolve is not None:
            for i, call in enumerate(calls):
                tool = self.tools.get(call.name)
                schema = getattr(tool, "grammar_schema", None) or getattr(tool, "json_schema", None)
                if isinstance(schema, dict):
                    calls[i] = resolve(call, schema)
        return calls

    # ------------------------------------------------------------------ tools

    def _fail(self, run: _Run, key: str, attempt: FailedAttempt) -> None:
        _log.info("retry (%s): %s", attempt.tool_name or "output", attempt.error.replace("\n", " "))
        if run.sink is not None:
            call = run.tool_calls[-1] if attempt.tool_name is not None else None
            run.sink(Retry(attempt.step, call, attempt.error))
        run.attempts.append(attempt)
        run.usage.retries += 1
        run.failures[key] = run.failures.get(key, 0) + 1
        if self._stop(run.failures[key]):
            what = f"tool {key!r}" if attempt.tool_name is not None else "the output"
            raise RetriesExhausted(
                f"{what} failed {run.failures[key]} times; last error:\n{attempt.error}",
                attempts=run.attempts,
                messages=list(run.messages),
                raw_output=attempt.raw,
            )

    async def _call_tool(
        self,
        run: _Run,
        call: ParsedCall,
        call_id: str,
        step: int,
        offered: Sequence[str] | None = None,
    ) -> Message:
        # Re-checked here whatever produced the call (a remote server, a custom format): only
        # a tool offered THIS turn (`offered`, the turn grammar's names) may run.
        tool: Any = run.offered.get(call.name) if offered is None or call.name in offered else None
        if tool is None and (call.error is None or call.name):
            raise ToolNotOffered(call.name, messages=list(run.messages), raw_output=run.last_raw)
        record = ToolCall(name=call.name, args=None, raw=call.raw, id=call_id, step=step)
        run.tool_calls.append(record)
        _log.debug("call %s: %s(%s)", call_id, call.name, call.raw)
        record.args, feedback = _checked_args(call, tool)
        if record.args is not None and isinstance(tool, Tool) and not tool.runnable:
            raise ToolExecutionError(
                call.name,
                not_runnable_message(call.name),
                messages=list(run.messages),
                raw_output=run.last_raw,
            )
        if record.args is not None:
            if run.sink is not None:
                run.sink(CallValidated(step, record))
            ctx = RunContext(
                deps=run.deps, tool_name=call.name, retry=run.failures.get(call.name, 0)
            )
            try:
                if getattr(tool, "is_async", False):
                    result = await tool.acall(record.args, ctx)
                else:
                    result = tool.call(record.args, ctx)
                    if asyncio.iscoroutine(result):
                        result = await result
                record.result = result
                return Message.tool(_result_text(result), tool_call_id=call_id, name=call.name)
            except ModelRetry as exc:
                feedback = exc.message
            except Exception as exc:
                record.error = f"{type(exc).__name__}: {exc}"
                if self.tool_errors == "raise":
                    raise ToolExecutionError(
                        call.name,
                        f"tool {call.name!r} raised {record.error}",
                        messages=list(run.messages),
                        raw_output=run.last_raw,
                    ) from exc
                return Message.tool(f"Error: {record.error}", tool_call_id=call_id, name=call.name)
        record.error = feedback
        self._fail(run, call.name, FailedAttempt(call.name, call.raw, feedback or "", step))
        return Message.tool(
            f"{feedback}\nFix the errors and call the tool again.",
            tool_call_id=call_id,
            name=call.name,
        )

    # ------------------------------------------------------------------ the loop

    async def run(
        self,
        prompt: str | None = None,
        *,
        message_history: Iterable[Message | Mapping[str, Any]] | None = None,
        deps: Any = None,
        max_steps: int | None = None,
        settings: Mapping[str, Any] | None = None,
        usage_limits: UsageLimits | None = None,
        prepare_tools: PrepareTools | None = None,
    ) -> RunResult[OutputT]:
        """Run the agent until the model answers without calling tools.

        Generation runs in a worker thread (it is CPU/GPU bound); async tools are awaited on
        this loop. Raises `StepLimitExceeded`, `RetriesExhausted`, `TruncationError`,
        `ToolExecutionError` — each with the transcript in `.messages`.
        """
        options = _Options(max_steps, settings, usage_limits, prepare_tools)
        return await self._loop(prompt, message_history, deps, options, None)

    async def _loop(
        self,
        prompt: str | None,
        message_history: Iterable[Message | Mapping[str, Any]] | None,
        deps: Any,
        options: _Options,
        sink: Callable[[StreamEvent], None] | None,
    ) -> RunResult[OutputT]:
        messages, new_from = self._start_messages(prompt, message_history)
        run = self._new_run(messages, deps, options, sink)
        attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "sdk.Agent"}
        with tracing.span("invoke_agent", attrs) as s:
            result = await self._steps(run, new_from, options.max_steps)
            tracing.annotate(s, _usage_attributes(result.usage, result.finish_reason))
            return result

    async def _steps(self, run: _Run, new_from: int, max_steps: int | None) -> RunResult[OutputT]:
        sink = run.sink
        limit = self.max_steps if max_steps is None else max_steps
        for step in range(1, limit + 1):
            tool_choice = self._choices[min(step, len(self._choices)) - 1]
            self._prepare_turn(run, step, tool_choice)
            self._check_limits(run, calls=0)
            with tracing.span(f"chat {self._model_name()}", self._chat_attributes(run)) as s:
                out, grammar = await self._agenerate(run, tool_choice)
                tracing.annotate(s, _usage_attributes(out.usage, out.finish_reason))
            self._check_limits(run, calls=0)
            calls, ids = self._record_turn(run, out, grammar)
            if calls:
                for call, call_id in zip(calls, ids, strict=True):
                    attrs = {
                        "gen_ai.operation.name": "execute_tool",
                        "gen_ai.tool.name": call.name,
                        "gen_ai.tool.call.id": call_id,
                        "gen_ai.tool.type": "function",
                    }
                    self._check_limits(run, calls=1)
                    with tracing.span(f"execute_tool {call.name}", attrs):
                        reply = await self._call_tool(run, call, call_id, step, grammar.tool_names)
                    run.messages.append(reply)
                    if sink is not None:
                        sink(ToolResult(step, call_id, call.name, reply.content))
                continue
            answer = self._answer(out)
            if self._output_adapter is None:
                return self._result(run, cast(OutputT, answer), out, new_from)
            try:
                value = self._output_adapter.validate_json(answer)
            except ValidationError as exc:
                feedback = f"Validation feedback:\n{_format_validation_error(exc)}"
                self._fail(run, "\x00output", FailedAttempt(None, out.text, feedback, step))
                run.messages.append(
                    Message.user(f"{feedback}\nFix the errors and reply again with valid JSON.")
                )
                continue
            return self._result(run, cast(OutputT, value), out, new_from)
        raise StepLimitExceeded(
            f"no final answer after max_steps={limit} model turns",
            messages=run.messages,
            raw_output=run.last_raw,
        )

    def _new_run(
        self,
        messages: list[Message],
        deps: Any,
        options: _Options,
        sink: Callable[[StreamEvent], None] | None,
    ) -> _Run:
        """A run's state, with its per-run settings over the agent's (checked first)."""
        overrides = check_run_settings(options.settings)
        sampling = self.sampling
        if overrides.keys() & {"temperature", "top_p", "seed"}:
            changes = {k: v for k, v in overrides.items() if k != "max_tokens"}
            sampling = replace(sampling, **changes)
            check_sampling(sampling.temperature, sampling.top_p, sampling.seed)
        if options.limits is not None and not isinstance(options.limits, UsageLimits):
            raise ConfigError(f"usage_limits={options.limits!r}: expected a UsageLimits")
        if options.prepare is not None and not callable(options.prepare):
            raise ConfigError(f"prepare_tools={options.prepare!r}: expected a callable")
        return _Run(
            messages=messages,
            deps=deps,
            sink=sink,
            max_tokens=overrides.get("max_tokens", self.max_tokens),
            sampling=sampling,
            limits=options.limits,
            prepare=options.prepare,
            offered=dict(self.tools),
        )

    def _prepare_turn(self, run: _Run, step: int, tool_choice: str) -> None:
        """This turn's tools: all of the agent's, or what `prepare_tools` keeps of them."""
        if run.prepare is None:
            return
        kept = run.prepare(RunContext(deps=run.deps, step=step), list(self.tools.values()))
        offered: dict[str, Any] = {}
        for t in kept:
            name = getattr(t, "name", None)
            if name not in self.tools:
                raise ConfigError(
                    f"prepare_tools returned {t!r}: only the agent's own tools (or copies with "
                    "the same name) can be offered"
                )
            offered[name] = t
        if tool_choice not in ("auto", "none") and not offered:
            raise ConfigError(f"tool_choice={tool_choice!r} but prepare_tools kept no tool")
        if tool_choice not in ("auto", "required", "none") and tool_choice not in offered:
            raise ConfigError(f"tool_choice={tool_choice!r} but prepare_tools left that tool out")
        run.offered = offered

    def _check_limits(self, run: _Run, *, calls: int) -> None:
        """Stop the run once it has used what its `UsageLimits` allow (`calls`: a tool call
        is about to run)."""
        limits = run.limits
        if limits is None:
            return
        u = run.usage
        over = None
        if limits.total_tokens is not None and u.total_tokens > limits.total_tokens:
            over = f"total_tokens={u.total_tokens} > {limits.total_tokens}"
        elif limits.output_tokens is not None and u.completion_tokens > limits.output_tokens:
            over = f"output_tokens={u.completion_tokens} > {limits.output_tokens}"
        elif calls and limits.tool_calls is not None:
            ran = sum(c.args is not None for c in run.tool_calls)
            if ran + calls > limits.tool_calls:
                over = f"tool_calls: {limits.tool_calls} already ran"
        if over is not None:
            raise UsageLimitExceeded(
                f"usage limit reached: {over}", messages=list(run.messages), raw_output=run.last_raw
            )

    def _model_name(self) -> str:
        spec = self._model_spec
        if isinstance(spec, str):
            return spec
        backend = self._backend if self._backend is not None else spec
        return "smollm2" if backend is None else type(backend).__name__

    def _chat_attributes(self, run: _Run) -> dict[str, Any]:
        return {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "sdk",
            "gen_ai.request.model": self._model_name(),
            "gen_ai.request.max_tokens": run.max_tokens,
            "gen_ai.request.temperature": run.sampling.temperature,
            "gen_ai.request.top_p": run.sampling.top_p,
            "gen_ai.request.seed": run.sampling.seed,
        }

    def _record_turn(
        self, run: _Run, out: TurnOutput, grammar: TurnGrammar
    ) -> tuple[list[ParsedCall], list[str]]:
        """The turn's calls with their ids; the turn joins the transcript (`run` and
        `plan_sync` alike)."""
        calls = self._calls(out, grammar)
        ids = _call_ids(run.messages, len(calls))
        run.messages.append(_assistant_message(out, calls, ids))
        return calls, ids

    def _split_reasoning(self, out: TurnOutput) -> tuple[str, str]:
        """`(reasoning, answer)` of a final turn (reasoning "" for formats without it); a span
        the prompt opened counts from the turn's first character."""
        fmt = self.resolved_format()
        split = getattr(fmt, "split_reasoning", None)
        if split is None:
            return "", out.text
        start = reasoning_start(fmt) if out.reasoning_opened else ""
        thought, answer = split(start + out.text)
        thought = thought[len(start) :]
        return thought, answer.lstrip() if thought else answer

    def _answer(self, out: TurnOutput) -> str:
        answer = self._split_reasoning(out)[1]
        unwrap = getattr(self.resolved_format(), "answer_text", None)
        return str(unwrap(answer)) if unwrap is not None else answer

    def _result(
        self, run: _Run, output: OutputT, out: TurnOutput, new_from: int
    ) -> RunResult[OutputT]:
        return RunResult(
            output=output,
            messages=run.messages,
            tool_calls=run.tool_calls,
            usage=run.usage,
            finish_reason=out.finish_reason,
            raw_output=out.text,
            reasoning=self._split_reasoning(out)[0],
            _new_from=new_from,
        )

    def run_sync(
        self,
        prompt: str | None = None,
        *,
        message_history: Iterable[Message | Mapping[str, Any]] | None = None,
        deps: Any = None,
        max_steps: int | None = None,
        settings: Mapping[str, Any] | None = None,
        usage_limits: UsageLimits | None = None,
        prepare_tools: PrepareTools | None = None,
    ) -> RunResult[OutputT]:
        """`run` for synchronous code (also safe to call while an event loop is running)."""
        options = _Options(max_steps, settings, usage_limits, prepare_tools)
        return _run_blocking(self._loop(prompt, message_history, deps, options, None))

    async def run_stream(
        self,
        prompt: str | None = None,
        *,
        message_history: Iterable[Message | Mapping[str, Any]] | None = None,
        deps: Any = None,
        max_steps: int | None = None,
        settings: Mapping[str, Any] | None = None,
        usage_limits: UsageLimits | None = None,
        prepare_tools: PrepareTools | None = None,
    ) -> AsyncIterator[StreamEvent]:
        """`run`, streamed: yields `sdk.events` as the run goes (text and argument deltas as
        they are generated, each call once validated, each tool result, each retry), then
        `FinalResult`. A failing run raises its error from the iterator. Calls run only once
        complete and validated, exactly as in `run`, which returns the same result.

        Leaving the loop early cancels the run; a turn being generated stops at its next
        token.
        """
        options = _Options(max_steps, settings, usage_limits, prepare_tools)
        async for event in self._stream(prompt, message_history, deps, options):
            yield event

    async def _stream(
        self,
        prompt: str | None,
        message_history: Iterable[Message | Mapping[str, Any]] | None,
        deps: Any,
        options: _Options,
    ) -> AsyncIterator[StreamEvent]:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Any] = asyncio.Queue()
        done = object()

        def sink(event: StreamEvent) -> None:  # called from the decoding thread too
            loop.call_soon_threadsafe(queue.put_nowait, event)

        task = asyncio.ensure_future(self._loop(prompt, message_history, deps, options, sink))
        task.add_done_callback(lambda _: loop.call_soon_threadsafe(queue.put_nowait, done))
        try:
            while (event := await queue.get()) is not done:
                yield event
            yield FinalResult(task.result())
        finally:
            task.cancel()

    def run_stream_sync(
        self,
        prompt: str | None = None,
        *,
        message_history: Iterable[Message | Mapping[str, Any]] | None = None,
        deps: Any = None,
        max_steps: int | None = None,
        settings: Mapping[str, Any] | None = None,
        usage_limits: UsageLimits | None = None,
        prepare_tools: PrepareTools | None = None,
    ) -> Iterator[StreamEvent]:
        """`run_stream` for synchronous code: a generator of the same events (the run goes on
        in a background thread with its own event loop)."""
        options = _Options(max_steps, settings, usage_limits, prepare_tools)
        events: queue.Queue[Any] = queue.Queue()
        end = object()

        async def pump() -> None:
            try:
                async for event in self._stream(prompt, message_history, deps, options):
                    events.put(event)
            except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
                events.put(exc)
            events.put(end)

        thread = threading.Thread(target=asyncio.run, args=(pump(),), daemon=True)
        thread.start()
        while (item := events.get()) is not end:
            if isinstance(item, BaseException):
                raise item
            yield item
        thread.join()

    def plan_sync(
        self,
        prompt: str | None = None,
        *,
        message_history: Iterable[Message | Mapping[str, Any]] | None = None,
    ) -> RunResult[str]:
        """One model turn, without running tools: which calls would the model make?

        `tool_calls` holds the parsed calls with validated `args` (or the validation `error`);
        `output` is the turn's raw text. No retries. Used by the BFCL benchmark.
        """
        messages, new_from = self._start_messages(prompt, message_history)
        run = self._new_run(messages, None, _Options(), None)
        self._prepare_turn(run, 1, self._choices[0])
        out, grammar = self._generate(run, self._choices[0])
        calls, ids = self._record_turn(run, out, grammar)
        for call, call_id in zip(calls, ids, strict=True):
            record = ToolCall(name=call.name, args=None, raw=call.raw, id=call_id, step=1)
            tool = run.offered.get(call.name) if call.name in grammar.tool_names else None
            if tool is None and call.error is None:
                record.error = f"tool {call.name!r} was not offered"
            else:
                record.args, record.error = _checked_args(call, tool)
            run.tool_calls.append(record)
        return RunResult(
            output=out.text,
            messages=run.messages,
            tool_calls=run.tool_calls,
            usage=run.usage,
            finish_reason=out.finish_reason,
            raw_output=out.text,
            _new_from=new_from,
        )

    def __repr__(self) -> str:
        out = getattr(self.output_type, "__name__", self.output_type)
        return (
            f"Agent(tools={list(self.tools)}, tool_choice={self.tool_choice!r}, output_type={out})"
        )


def _usage_attributes(usage: Usage, finish_reason: str) -> dict[str, Any]:
    return {
        "gen_ai.usage.input_tokens": usage.prompt_tokens,
        "gen_ai.usage.output_tokens": usage.completion_tokens,
        "gen_ai.response.finish_reasons": [finish_reason],
        "sdk.forced_tokens": usage.forced_tokens,
        "sdk.forward_passes": usage.forward_passes,
        "sdk.mask_time_s": usage.mask_time_s,
    }


def _with_instructions(messages: list[Message], instructions: str | None) -> list[Message]:
    """The conversation's leading system message carries THIS agent's instructions (system
    prompt, output schema). The part an agent added earlier (recorded in the message's
    `metadata["instructions"]`) is replaced; a system message the user wrote stays, with the
    instructions after it."""
    first = messages[0] if messages and messages[0].role == "system" else None
    base = first.content if first is not None else ""
    old = first.metadata.get("instructions") if first is not None else None
    if isinstance(old, str) and old and base.endswith(old):
        base = base[: len(base) - len(old)].rstrip("\n")
    elif not instructions:
        return messages  # nothing of an agent's to replace or add: the history as it is
    text = "\n\n".join(part for part in (base, instructions) if part)
    head = [Message("system", text, metadata={"instructions": instructions})] if text else []
    return head + messages[1 if first is not None else 0 :]


def _checked_args(call: ParsedCall, tool: Any) -> tuple[Any, str | None]:
    """`(validated arguments, None)`, or `(None, the feedback the model gets)`: one check for
    a run's calls and a plan's."""
    if call.error is not None:
        return None, f"Your tool call could not be parsed: {call.error}"
    try:
        return tool.validate_args(call.arguments), None
    except ValidationError as exc:
        return None, f"Validation feedback:\n{_format_validation_error(exc)}"
    except Exception as exc:  # noqa: BLE001 - a duck-typed tool's own validator
        return None, f"Validation feedback:\n{type(exc).__name__}: {exc}"


def _call_ids(messages: Sequence[Message], n: int) -> list[str]:
    """`call_<turn>_<i>`, the turn counted over the whole conversation (a continued history
    included), so ids never repeat within one transcript."""
    turn = 1 + sum(m.role == "assistant" for m in messages)
    return [f"call_{turn}_{i}" for i in range(n)]


def _name_prefix(fmt: ToolCallFormat) -> str | None:
    """A call's text up to the first character of its tool name, as `fmt` renders it (None
    when the name is not a JSON string there)."""
    marker = "sdk\x00name"
    text = fmt.render_call(marker, {})
    at = text.find(json.dumps(marker))
    return text[: at + 1] if at >= 0 else None


def _assistant_message(out: TurnOutput, calls: Sequence[ParsedCall], ids: Sequence[str]) -> Message:
    """The turn as a history message; `metadata["token_ids"]` keeps the ids the model wrote
    (local models), for callers that study tokenization."""
    parts = tuple(
        ToolCallPart(i, c.name, c.arguments, c.raw) for i, c in zip(ids, calls, strict=True)
    )
    meta = {"token_ids": list(out.token_ids)} if out.token_ids else {}
    return Message("assistant", out.text, parts, metadata=meta)


def _run_blocking(coro: Coroutine[Any, Any, T]) -> T:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    # Already inside an event loop (Jupyter, async frameworks): run in a private one.
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(coro)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = exc

    th = threading.Thread(target=target, name="sdk-run-sync")
    th.start()
    th.join()
    if "error" in box:
        raise box["error"]
    return cast(T, box["value"])
