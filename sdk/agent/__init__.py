"""`Agent`: a local model, tools and an optional output type, run as a tool-calling loop.

Each step renders the conversation, generates one assistant turn under the turn grammar
(`sdk.decoding.turn_grammar`), parses the calls out of it, validates their arguments with the
tools' Pydantic models and runs the tools. Validation errors and `ModelRetry` go back to the
model as tool results and it tries again (per-tool retry budget); a turn without calls ends
the run with its text, or with its JSON validated into `output_type`.

The parts, one job each (after PydanticAI's split): this class holds the configuration and
the public run methods; `_turn` assembles each turn (format, grammar, gate, request) and
reads it back; `_tools` offers, checks and runs tools with their retry budget; `_run` is the
loop and the run's state. Models are driven through `sdk.backends.TurnBackend`, one interface
for local and remote backends.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from typing import Any, Generic, Literal, TypeVar, overload

from sdk._settings import (
    UsageLimits,
    check_int,
    check_sampling,
    check_tools_arg,
)
from sdk.agent._approvals import Approval, ApprovalPredicate, ToolDenied, ToolReturn
from sdk.agent._config import (
    CallStyleSpec,
    ToolChoiceSpec,
    check_call_bias,
    check_call_format,
    check_text,
    output_adapter,
    tool_choices,
)
from sdk.agent._model import Models
from sdk.agent._run import (
    RunOptions,
    blocked_by_run_sync,
    iterate_blocking,
    plan,
    run_blocking,
    run_loop,
    stream_run,
)
from sdk.agent._tools import PrepareTools, ToolErrors, ToolManager, normalize_tools
from sdk.agent._turn import assembly_of
from sdk.backends import (
    ModelBackend,
    RemoteBackend,
)
from sdk.decoding.call_style import CallStyle
from sdk.decoding.formats import ToolCallFormat
from sdk.decoding.generate import SamplingConfig
from sdk.decoding.turn_grammar import TurnGrammar, format_style
from sdk.events import StreamEvent
from sdk.history import HistoryProcessor
from sdk.messages import Message
from sdk.result import RunResult

__all__ = [
    "Agent",
    "CallStyleSpec",
    "PrepareTools",
    "ToolChoiceSpec",
    "ToolDenied",
    "ToolErrors",
    "ToolReturn",
    "blocked_by_run_sync",
]

OutputT = TypeVar("OutputT")
T = TypeVar("T")

History = Iterable[Message | Mapping[str, Any]] | None


class Agent(Generic[OutputT]):
    """A tool-calling agent on a local model; arguments always parse and validate.

    Args:
        model: None (the embedded SmolLM2-135M, loaded once per process on first use; or, when
            `SDK_MODEL_URL` is set, that OpenAI-compatible server: `OpenAIChatModel.from_env()`),
            a `LlamaCppModel` or `TransformersModel`, a `(model, tokenizer)` pair,
            "smollm2"/"gemma3"/a `.gguf` path (on llama.cpp where llama-cpp-python is
            installed, else transformers: `sdk.backends.local`)/a local HF directory
            (transformers), a scripted `TestModel` / `FunctionModel`, an
            `OpenAIChatModel` (vLLM, SGLang, llama.cpp, ... server) or an "http(s)://.../v1" URL.
        tools: functions (decorated with `@tool` or not), `Tool`s or Pydantic models.
        output_type: the type of the final reply (`str` by default); anything else is generated as
            JSON under its schema and validated (retried like tool arguments on failure).
        system_prompt: instructions for the model, the conversation's system message (with
            the JSON answer instructions of a typed `output_type` after them). A system
            message the history starts with is kept, with these after it.
        tool_choice: "auto" (model decides), "required" (the turn must call tools), a tool name
            (the turn must call it), or "none" (tools are neither shown nor callable). A single
            "required" or name applies to the first turn, later turns are "auto" (forcing calls on
            every turn could never end; the OpenAI Agents SDK resets it the same way). A list gives
            one choice per turn, its last entry repeating: `["required", "none"]` = call, then
            answer from the results (what small models do best).
        max_tokens: the most tokens one model turn may generate (per run:
            `settings={"max_tokens": ...}`). A call or typed output it cuts is never used:
            it is retried like an invalid one, then `TruncationError`; a text answer it cuts
            is returned with `finish_reason="length"`.
        max_steps: the most model turns one run may take, then `StepLimitExceeded` (per run:
            `run(max_steps=...)`).
        retries: per-tool (and output) retry budget: an int (retries after the first attempt) or a
            tenacity stop condition such as `stop_after_attempt(3) | stop_after_delay(30)`.
        temperature: 0 decodes greedily (deterministic, the default); above 0 the model's
            tokens are sampled at this temperature. The grammar constrains both.
        top_p: when sampling, only the most likely tokens whose probabilities sum to `top_p`
            are drawn from (nucleus sampling); 1.0 keeps all. In (0, 1].
        seed: seeds the sampling, so that a run with `temperature > 0` can be repeated;
            None leaves it unseeded.
        decoding: "masked" (the default) samples each token among those the grammar allows,
            renormalized, which distorts the model's distribution over valid outputs
            (docs/concepts/faithful-sampling.md). "exact" draws a turn whose whole reply the
            grammar constrains (a typed output, a `"required"` turn without a reasoning span)
            from the model restricted to the grammar, exactly, on a local model; other turns
            are masked as usual. `usage.exact_attempts` counts its draws. It needs
            `temperature > 0` and `top_p=1`. "best" decodes those turns as the most likely
            valid output a best-first search finds within about twice greedy's forward
            passes (never less likely than greedy's; temperature does not apply to them),
            its log-probability in the message's `metadata["logprob"]`.
        tool_errors: "return" sends a tool's exception text back to the model, a failed attempt
            on that tool's `retries` budget; "raise" ends the run with `ToolExecutionError`.
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
            get, and it calls iff log(that share) + this bias > 0. "auto": 0.03 for models whose
            chat template renders tools (trained to call), 2.75 for others such as the
            embedded SmolLM2; None: no decision, the model's own sampled token decides (small
            models then almost never call). See the call-quality page.
        reasoning_tokens: under "required" (or a tool name), let the model write up to this
            many tokens of free text before its call (0: the call starts at once); the text
            stays in the turn's output and is never parsed for calls. For a reasoning model
            (a format with `<think>` markers) it bounds the reasoning span instead: this many
            tokens into it, the end marker is forced (0: unbounded).
        history_processors: functions that shape what the model is shown of the conversation
            before each turn (`sdk.history.keep_last(n)`, `summarize_older(fn)` or your own,
            list of `Message` in, list out); the run's transcript keeps every message.
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
        decoding: Literal["masked", "exact", "best"] = "masked",
        tool_errors: ToolErrors = "return",
        parallel_tool_calls: bool = True,
        call_format: ToolCallFormat | str = "auto",
        call_style: CallStyleSpec = "auto",
        auto_call_bias: float | Literal["auto"] | None = "auto",
        reasoning_tokens: int = 0,
        token_healing: bool = True,
        drop_repeated_calls: bool = True,
        history_processors: Sequence[HistoryProcessor] = (),
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
        decoding: Literal["masked", "exact", "best"] = "masked",
        tool_errors: ToolErrors = "return",
        parallel_tool_calls: bool = True,
        call_format: ToolCallFormat | str = "auto",
        call_style: CallStyleSpec = "auto",
        auto_call_bias: float | Literal["auto"] | None = "auto",
        reasoning_tokens: int = 0,
        token_healing: bool = True,
        drop_repeated_calls: bool = True,
        history_processors: Sequence[HistoryProcessor] = (),
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
        decoding: Literal["masked", "exact", "best"] = "masked",
        tool_errors: ToolErrors = "return",
        parallel_tool_calls: bool = True,
        call_format: ToolCallFormat | str = "auto",
        call_style: CallStyleSpec = "auto",
        auto_call_bias: float | Literal["auto"] | None = "auto",
        reasoning_tokens: int = 0,
        token_healing: bool = True,
        drop_repeated_calls: bool = True,
        history_processors: Sequence[HistoryProcessor] = (),
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
        decoding: Literal["masked", "exact", "best"] = "masked",
        tool_errors: ToolErrors = "return",
        parallel_tool_calls: bool = True,
        call_format: ToolCallFormat | str = "auto",
        call_style: CallStyleSpec = "auto",
        auto_call_bias: float | Literal["auto"] | None = "auto",
        reasoning_tokens: int = 0,
        token_healing: bool = True,
        drop_repeated_calls: bool = True,
        history_processors: Sequence[HistoryProcessor] = (),
    ) -> None:
        self._models = Models(model)
        self.tools: dict[str, Any] = normalize_tools(check_tools_arg(tools))
        self._choices = tool_choices(tool_choice, self.tools)
        self._tool_manager = ToolManager(self.tools, tool_errors, retries)
        check_int("max_tokens", max_tokens, 1)
        check_int("max_steps", max_steps, 1)
        check_sampling(temperature, top_p, seed, decoding)
        self.tool_choice = tool_choice
        self.output_type = output_type
        self._output_adapter, output_schema = output_adapter(output_type)
        self.system_prompt = check_text("system_prompt", system_prompt)
        self.max_tokens = max_tokens
        self.max_steps = max_steps
        self.retries = retries
        self.sampling = SamplingConfig(
            temperature=temperature, top_p=top_p, seed=seed, decoding=decoding
        )
        self.tool_errors = tool_errors
        self.format = check_call_format(call_format)
        self.call_style = call_style
        self.auto_call_bias = check_call_bias(auto_call_bias)
        self.reasoning_tokens = check_int("reasoning_tokens", reasoning_tokens, 0)
        self.token_healing = bool(token_healing)
        self.drop_repeated_calls = bool(drop_repeated_calls)
        self.parallel_tool_calls = parallel_tool_calls
        self._assembly = assembly_of(self, output_schema, history_processors)
        # Compile the grammars now: an inexpressible schema fails here, not mid-conversation.
        for c in set(self._choices):
            self._turn_grammar(c)

    @property
    def model(self) -> ModelBackend | RemoteBackend:
        """The backend, resolved (and for named models loaded) on first use (inside
        `override(model=...)`, the override's)."""
        return self._models.current.backend()

    @contextlib.contextmanager
    def override(self, *, model: Any) -> Iterator[None]:
        """Run this agent on `model` (any `Agent(model=...)` value) inside the block: how an
        app's tests put a `TestModel` or `FunctionModel` under a module-level agent. Scoped
        to the current context (a thread, an asyncio task and what it starts), so tests run
        side by side do not see each other's model; blocks nest.

        Args:
            model: the model to use inside the block.
        """
        with self._models.override(model):
            yield

    def resolved_format(self) -> ToolCallFormat:
        """The call format with its body layout resolved for this agent's model.

        `call_style="auto"` follows the model's chat template (`probe_call_style`): the
        separators its template writes calls with, `json.dumps`' spacing where it writes none.
        Resolving may load the model (a named model loads on first use anyway).
        """
        return self._models.current.fmt(self._assembly)

    @property
    def resolved_style(self) -> CallStyle:
        """The layout of call bodies this agent's grammar enforces (`resolved_format`'s)."""
        return format_style(self.resolved_format())

    def _turn_grammar(
        self,
        tool_choice: str,
        fmt: ToolCallFormat | None = None,
        tools: Mapping[str, Any] | None = None,
    ) -> TurnGrammar:
        fmt = fmt or self._models.current.likely_fmt(self._assembly)
        return self._assembly.turn_grammar(tool_choice, fmt, tools)

    def _choice(self, step: int) -> str:
        return self._choices[min(step, len(self._choices)) - 1]

    async def run(
        self,
        prompt: str | None = None,
        *,
        message_history: History = None,
        deps: Any = None,
        max_steps: int | None = None,
        settings: Mapping[str, Any] | None = None,
        usage_limits: UsageLimits | None = None,
        prepare_tools: PrepareTools | None = None,
        approvals: Mapping[str, Approval] | None = None,
        requires_approval: ApprovalPredicate | None = None,
    ) -> RunResult[OutputT]:
        """Run the agent until the model answers without calling tools.

        Generation runs in a worker thread (it is CPU/GPU bound); async tools are awaited on
        this loop. Raises `StepLimitExceeded`, `RetriesExhausted`, `TruncationError`,
        `ToolExecutionError`, `ContextLengthError`, `UsageLimitExceeded`, `ApprovalRequired`
        — each with the transcript in `.messages`.

        Args:
            prompt: the user's message. None: answer `message_history` as it is (it must
                end with a user turn), or resume calls awaiting approval (`approvals`).
            message_history: the conversation so far (`Message`s or OpenAI-style dicts; a
                run's `all_messages()`).
            deps: anything the tools need (a database handle, the user): passed to them as
                `RunContext.deps`.
            max_steps: this run's limit on model turns, over the agent's.
            settings: this run's `max_tokens`, `temperature`, `top_p` or `seed`, over the
                agent's (any other key is a `ConfigError`).
            usage_limits: a `UsageLimits` budget of tokens and tool calls; reaching it
                stops the run with `UsageLimitExceeded`.
            prepare_tools: `prepare_tools(ctx, tools)` returns the tools to offer on each
                turn (some of the agent's; `ctx.step` is the turn).
            approvals: resumes a run stopped by `ApprovalRequired` (pass its `messages` as
                `message_history`): one decision per pending call id, True (run it), False or
                `ToolDenied(message)` (not run; the model is told why) or `ToolReturn(value)`
                (the app ran it: `value` is the result).
            requires_approval: `requires_approval(ctx, call)` returns True for calls a
                person must approve before they run (besides tools marked
                `requires_approval`): the run then stops with `ApprovalRequired`.
        """
        options = RunOptions(
            max_steps, settings, usage_limits, prepare_tools, approvals, requires_approval
        )
        return await run_loop(self, prompt, message_history, deps, options)

    def run_sync(
        self,
        prompt: str | None = None,
        *,
        message_history: History = None,
        deps: Any = None,
        max_steps: int | None = None,
        settings: Mapping[str, Any] | None = None,
        usage_limits: UsageLimits | None = None,
        prepare_tools: PrepareTools | None = None,
        approvals: Mapping[str, Approval] | None = None,
        requires_approval: ApprovalPredicate | None = None,
    ) -> RunResult[OutputT]:
        """`run` for synchronous code (also safe to call while an event loop is running).

        Parameters as `run`.
        """
        options = RunOptions(
            max_steps, settings, usage_limits, prepare_tools, approvals, requires_approval
        )
        return run_blocking(run_loop(self, prompt, message_history, deps, options))

    async def run_stream(
        self,
        prompt: str | None = None,
        *,
        message_history: History = None,
        deps: Any = None,
        max_steps: int | None = None,
        settings: Mapping[str, Any] | None = None,
        usage_limits: UsageLimits | None = None,
        prepare_tools: PrepareTools | None = None,
        approvals: Mapping[str, Approval] | None = None,
        requires_approval: ApprovalPredicate | None = None,
    ) -> AsyncIterator[StreamEvent]:
        """`run`, streamed: yields `sdk.events` as the run goes (text and argument deltas as
        they are generated, each call once validated, each tool result, each retry), then
        `FinalResult`. A failing run raises its error from the iterator. Calls run only once
        complete and validated, exactly as in `run`, which returns the same result.

        Leaving the loop early cancels the run; a turn being generated stops at its next
        token. Parameters as `run`.
        """
        options = RunOptions(
            max_steps, settings, usage_limits, prepare_tools, approvals, requires_approval
        )
        async for event in stream_run(self, prompt, message_history, deps, options):
            yield event

    def run_stream_sync(
        self,
        prompt: str | None = None,
        *,
        message_history: History = None,
        deps: Any = None,
        max_steps: int | None = None,
        settings: Mapping[str, Any] | None = None,
        usage_limits: UsageLimits | None = None,
        prepare_tools: PrepareTools | None = None,
        approvals: Mapping[str, Approval] | None = None,
        requires_approval: ApprovalPredicate | None = None,
    ) -> Iterator[StreamEvent]:
        """`run_stream` for synchronous code: a generator of the same events (the run goes on
        in a background thread with its own event loop).

        Parameters as `run`.
        """
        options = RunOptions(
            max_steps, settings, usage_limits, prepare_tools, approvals, requires_approval
        )
        return iterate_blocking(lambda: stream_run(self, prompt, message_history, deps, options))

    def plan_sync(
        self, prompt: str | None = None, *, message_history: History = None
    ) -> RunResult[str]:
        """One model turn, without running tools: which calls would the model make?

        `tool_calls` holds the parsed calls with validated `args` (or the validation `error`);
        `output` is the turn's raw text. No retries. Used by the BFCL benchmark.

        Args:
            prompt: as in `run`.
            message_history: as in `run`.
        """
        return plan(self, prompt, message_history)

    def __repr__(self) -> str:
        out = getattr(self.output_type, "__name__", self.output_type)
        return (
            f"Agent(tools={list(self.tools)}, tool_choice={self.tool_choice!r}, output_type={out})"
        )
