"""The run loop: generate a turn, run its calls, feed the results back, until an answer.

`run_steps` is the loop; `RunState` is what one run carries from turn to turn; the helpers
below it build the transcript (instructions, call ids, assistant messages), check usage
limits, and run a coroutine from synchronous code or as a stream of events.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import queue
import threading
import weakref
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
from typing import TYPE_CHECKING, Any, TypeVar, cast

from pydantic import ValidationError

from sdk import tracing
from sdk._settings import UsageLimits, check_run_settings, check_sampling
from sdk.agent._approvals import Approval, ApprovalPredicate, check_approvals, pending_calls
from sdk.agent._approvals import resolve as resolve_pending
from sdk.agent._model import agenerate, generate
from sdk.agent._tools import PrepareTools, checked_args, format_validation_error
from sdk.agent._turn import answer_text, disguised_call, named_calls, split_reasoning
from sdk.decoding.generate import SamplingConfig, TurnOutput
from sdk.errors import (
    AgentRunError,
    ApprovalRequired,
    ConfigError,
    FailedAttempt,
    StepLimitExceeded,
    TruncationError,
    UsageLimitExceeded,
)
from sdk.events import CallDropped, FinalResult, Retry, StreamEvent, ToolResult
from sdk.messages import Message, ToolCallPart, coerce_messages
from sdk.result import RunResult, ToolCall, Usage

if TYPE_CHECKING:
    from sdk.agent import Agent
    from sdk.decoding.formats import ParsedCall
    from sdk.decoding.turn_grammar import TurnGrammar

T = TypeVar("T")
_log = logging.getLogger("sdk.agent")


@dataclass(frozen=True)
class RunOptions:
    """A run's own settings, over the agent's."""

    max_steps: int | None = None
    settings: Mapping[str, Any] | None = None
    limits: UsageLimits | None = None
    prepare: PrepareTools | None = None
    approvals: Mapping[str, Approval] | None = None  # decisions on a history's pending calls
    approval: ApprovalPredicate | None = None  # which calls need approval (besides the tools')


@dataclass
class RunState:
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
    # Every call that ran, by name and canonical arguments: a repeat gets its result again.
    results: dict[str, Any] = field(default_factory=dict)
    # Calls whose tool raised (keys as `results`'): sent again, they are a loop.
    raised: set[str] = field(default_factory=set)
    approval: ApprovalPredicate | None = None
    pending: list[ToolCall] = field(default_factory=list)  # validated, awaiting approval
    resume: list[ToolCallPart] = field(default_factory=list)  # the history's pending calls
    decisions: dict[str, Approval] = field(default_factory=dict)  # and what to do with them
    # Set when the run's task is cancelled: its worker thread stops at the next token (and a
    # batched model frees the turn's row) instead of generating to max_tokens unobserved.
    cancel: threading.Event = field(default_factory=threading.Event)


async def execute(
    agent: Agent[Any], run: RunState, new_from: int, max_steps: int | None
) -> RunResult[Any]:
    """The run in its tracing span; a failure takes what the run did along."""
    attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "sdk.Agent"}
    with tracing.span("invoke_agent", attrs) as s:
        try:
            if run.resume:
                await resolve_pending(agent, run, run.resume, run.decisions)
            result = await run_steps(agent, run, new_from, max_steps)
        except AgentRunError as exc:
            exc.tool_calls = exc.tool_calls or list(run.tool_calls)
            exc.usage = exc.usage or run.usage
            raise
        tracing.annotate(s, usage_attributes(result.usage, result.finish_reason))
        return result


async def run_steps(
    agent: Agent[Any], run: RunState, new_from: int, max_steps: int | None
) -> RunResult[Any]:
    """Turns until one answers without calls (validated into `output_type` when it has
    one), each turn's calls run in order; `StepLimitExceeded` after `max_steps` turns.

    A turn that only failed (a call's arguments or the output rejected, `ModelRetry`) is
    retried with the same tool choice and tools: the per-turn choices move on only past
    turns that got somewhere, so `["required", "none"]` retries a bad call as a call."""
    limit = agent.max_steps if max_steps is None else max_steps
    position = 1  # which of the per-turn tool choices this turn takes
    retry: str | None = None  # the failed turn's choice, kept for its retry
    one_call = False  # the turn (and its retries) regenerates a call written as text as one
    step = 0
    while step < limit:
        step += 1
        if retry is None:
            one_call = False
            tool_choice = agent._choice(position)
            agent._tool_manager.prepare(run, step, tool_choice)
        else:
            tool_choice = retry
        failed_before = len(run.attempts)
        check_limits(run, calls=0)
        with tracing.span(f"chat {model_name(agent)}", chat_attributes(agent, run)) as s:
            try:
                assembly = agent._assembly
                if one_call:
                    assembly = replace(assembly, parallel_tool_calls=False)
                out, grammar = await agenerate(agent._models.current, assembly, run, tool_choice)
            except TruncationError as exc:
                _retry_cut_value(agent, run, exc, step)  # raises once the retries are spent
                retry = tool_choice
                continue
            tracing.annotate(s, usage_attributes(out.usage, out.finish_reason))
        check_limits(run, calls=0)
        calls = agent._assembly.calls(out, grammar, agent.resolved_format())
        redo = _got_nowhere(agent, run, out, grammar, calls, step)
        if redo is not None:  # the turn is generated again, under another choice
            retry, same_step, one_call = redo
            step -= same_step
            continue
        calls, ids = record_turn(agent, run, out, grammar, calls)
        if calls:
            await _run_calls(agent, run, calls, ids, step, grammar.tool_names)
            if run.pending:  # the run stops here; the app resumes it with the decisions
                raise ApprovalRequired(
                    run.pending, messages=list(run.messages), raw_output=run.last_raw
                )
            retry = _retry_choice(run, failed_before, len(calls), tool_choice)
            position += retry is None
            continue
        answer = answer_text(out, agent.resolved_format())
        adapter = agent._output_adapter
        if adapter is None:
            return final_result(agent, run, answer, out, new_from)
        try:
            value = adapter.validate_json(answer)
        except ValidationError as exc:
            feedback = f"Validation feedback:\n{format_validation_error(exc)}"
            agent._tool_manager.fail(
                run, "\x00output", FailedAttempt(None, out.text, feedback, step)
            )
            run.messages.append(
                Message.user(f"{feedback}\nFix the errors and reply again with valid JSON.")
            )
            retry = tool_choice
            continue
        return final_result(agent, run, value, out, new_from)
    raise StepLimitExceeded(
        f"no final answer after max_steps={limit} model turns",
        messages=run.messages,
        raw_output=run.last_raw,
    )


async def run_loop(
    agent: Agent[Any],
    prompt: str | None,
    history: Iterable[Message | Mapping[str, Any]] | None,
    deps: Any,
    options: RunOptions,
    sink: Callable[[StreamEvent], None] | None = None,
) -> RunResult[Any]:
    """One run of `agent` (`Agent.run` and its variants): its state, then its turns."""
    run, new_from = new_run(agent, prompt, history, deps, options, sink)
    return await execute(agent, run, new_from, options.max_steps)


def stream_run(
    agent: Agent[Any],
    prompt: str | None,
    history: Iterable[Message | Mapping[str, Any]] | None,
    deps: Any,
    options: RunOptions,
) -> AsyncIterator[StreamEvent]:
    """`run_loop`'s events as it goes, then its `FinalResult` (`stream_events`)."""
    return stream_events(lambda sink: run_loop(agent, prompt, history, deps, options, sink))


def new_run(
    agent: Agent[Any],
    prompt: str | None,
    history: Iterable[Message | Mapping[str, Any]] | None,
    deps: Any,
    options: RunOptions,
    sink: Callable[[StreamEvent], None] | None,
) -> tuple[RunState, int]:
    """A run's state, with its per-run settings over the agent's (checked first), and
    where its new messages start."""
    if prompt is not None and (not isinstance(prompt, str) or not prompt.strip()):
        raise ConfigError(
            f"prompt={prompt!r}: expected a non-empty str (or None with a history ending in "
            "a user turn)"
        )
    system = agent._assembly.system_text(agent.system_prompt)
    messages = with_instructions(coerce_messages(history), system)
    new_from = len(messages)
    pending = pending_calls(messages)
    if pending or options.approvals is not None:
        if prompt is not None and pending:
            raise ConfigError(
                "the history ends with calls awaiting approval: resume it with "
                "approvals={...} and no prompt"
            )
        decisions = check_approvals(pending, options.approvals)
    elif prompt is not None:
        messages.append(Message.user(prompt))
    elif not messages or messages[-1].role == "assistant":
        raise ValueError("nothing to answer: pass a prompt or a history ending in a user turn")
    if options.approval is not None and not callable(options.approval):
        raise ConfigError(f"requires_approval={options.approval!r}: expected a callable")
    overrides = check_run_settings(options.settings)
    sampling = agent.sampling
    if overrides.keys() & {"temperature", "top_p", "seed", "decoding"}:
        changes = {k: v for k, v in overrides.items() if k != "max_tokens"}
        sampling = replace(sampling, **changes)
        check_sampling(sampling.temperature, sampling.top_p, sampling.seed, sampling.decoding)
    if options.limits is not None and not isinstance(options.limits, UsageLimits):
        raise ConfigError(f"usage_limits={options.limits!r}: expected a UsageLimits")
    if options.prepare is not None and not callable(options.prepare):
        raise ConfigError(f"prepare_tools={options.prepare!r}: expected a callable")
    run = RunState(
        messages=messages,
        deps=deps,
        sink=sink,
        max_tokens=overrides.get("max_tokens", agent.max_tokens),
        sampling=sampling,
        limits=options.limits,
        prepare=options.prepare,
        offered=dict(agent.tools),
        approval=options.approval,
    )
    if pending:
        run.resume, run.decisions = pending, decisions
    return run, new_from


def model_name(agent: Agent[Any]) -> str:
    slot = agent._models.current
    if isinstance(slot.spec, str):
        return slot.spec
    backend = slot.backend() if slot.loaded else slot.spec
    return "smollm2" if backend is None else type(backend).__name__


def chat_attributes(agent: Agent[Any], run: RunState) -> dict[str, Any]:
    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "sdk",
        "gen_ai.request.model": model_name(agent),
        "gen_ai.request.max_tokens": run.max_tokens,
        "gen_ai.request.temperature": run.sampling.temperature,
        "gen_ai.request.top_p": run.sampling.top_p,
        "gen_ai.request.seed": run.sampling.seed,
    }


def plan(
    agent: Agent[Any], prompt: str | None, history: Iterable[Message | Mapping[str, Any]] | None
) -> RunResult[str]:
    """One turn without running its calls: `Agent.plan_sync`."""
    run, new_from = new_run(agent, prompt, history, None, RunOptions(), None)
    out, grammar = generate(agent._models.current, agent._assembly, run, agent._choice(1))
    calls, ids = record_turn(agent, run, out, grammar)
    for call, call_id in zip(calls, ids, strict=True):
        record = ToolCall(name=call.name, args=None, raw=call.raw, id=call_id, step=1)
        tool = run.offered.get(call.name) if call.name in grammar.tool_names else None
        if tool is None and call.error is None:
            record.error = f"tool {call.name!r} was not offered"
        else:
            record.args, record.error = checked_args(call, tool)
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


def record_turn(
    agent: Agent[Any],
    run: RunState,
    out: TurnOutput,
    grammar: TurnGrammar,
    calls: list[ParsedCall] | None = None,
) -> tuple[list[ParsedCall], list[str]]:
    """The turn's calls (parsed here unless given) with their ids; the turn joins the
    transcript and counts as a step (`run` and `plan_sync` alike)."""
    if calls is None:
        calls = agent._assembly.calls(out, grammar, agent.resolved_format())
    ids = call_ids(run.messages, len(calls))
    run.messages.append(assistant_message(out, calls, ids))
    run.usage.steps += 1
    return calls, ids


_DISGUISED = "Please answer my question in plain text now, from the tool results above."


def _got_nowhere(
    agent: Agent[Any],
    run: RunState,
    out: TurnOutput,
    grammar: TurnGrammar,
    calls: list[ParsedCall],
    step: int,
) -> tuple[str, bool, bool] | None:
    """Is this turn to be generated again? None: no, it stands. Else the tool choice to
    generate it with, whether that is the same step (the turn never enters the
    transcript) or the next, and whether it may hold one call only.

    - Every call loops (`_loops`): nothing new asked for, the model has the results it needs
      (small tool-trained models call again instead of answering): an answer, no tools.
    - An answer that is a call written as text (`disguised_call`): with tools shown, the
      model meant to call: the tool it named is called, under the grammar (an answer if it
      named none offered), as one call where the text wrote one (a small model given
      `tool_choice=name` and room for more wrote eight `get_stock_price` calls for one).
      Without tools, it is asked once more for the answer, under the output's retry budget
      (the call text stays out of the transcript, where it would be copied).
    """
    if grammar.tool_names and agent._tool_manager.loops_only(run, calls):
        _answer_instead(run, calls, step)
        return "none", True, False
    named = None if calls else _disguised(agent, out)
    if named is None:
        return None
    if grammar.tool_names:
        choice = named if named in grammar.tool_names else "none"
        _log.info("the answer was a call written as text; generated again as %r", choice)
        if run.sink is not None:
            run.sink(Retry(step, None, f"a call written as text: generated again as {choice!r}"))
        return choice, True, choice != "none" and named_calls(out.text, choice) <= 1
    agent._tool_manager.fail(run, "\x00output", FailedAttempt(None, out.text, _DISGUISED, step))
    if run.messages[-1].content != _DISGUISED:
        run.messages.append(Message.user(_DISGUISED))
    return "none", False, False


def _disguised(agent: Agent[Any], out: TurnOutput) -> str | None:
    """The tool a text answer of an agent with tools calls in disguise ("" for none offered;
    None: a real answer; `disguised_call`)."""
    if not agent.tools or agent._output_adapter is not None:
        return None
    fmt = agent.resolved_format()
    return disguised_call(answer_text(out, fmt), fmt, agent.tools)


def _answer_instead(run: RunState, calls: Sequence[ParsedCall], step: int) -> None:
    """A turn whose calls all loop is dropped for an answer turn."""
    run.usage.repeated_calls += len(calls)
    names = ", ".join(sorted({c.name for c in calls}))
    _log.info("loop (%s): nothing new asked for; the model answers instead", names)
    if run.sink is not None:
        for i in range(len(calls)):
            run.sink(CallDropped(step, i))


def final_result(
    agent: Agent[Any], run: RunState, output: Any, out: TurnOutput, new_from: int
) -> RunResult[Any]:
    return RunResult(
        output=output,
        messages=run.messages,
        tool_calls=run.tool_calls,
        usage=run.usage,
        finish_reason=out.finish_reason,
        raw_output=out.text,
        reasoning=split_reasoning(out, agent.resolved_format())[0],
        _new_from=new_from,
    )


def _retry_cut_value(agent: Agent[Any], run: RunState, exc: TruncationError, step: int) -> None:
    """`max_tokens` cut a call or a typed output: a failed attempt like an invalid one (a
    runaway value is what feedback can fix), retried under the run's retry budget; the
    `TruncationError` itself once that is spent. The cut value is never used."""
    run.usage.steps += 1  # the cut turn was a step, whether it is retried or not
    key = "\x00max_tokens"
    run.failures[key] = run.failures.get(key, 0) + 1
    if agent._tool_manager.stop(run.failures[key]):
        raise exc
    feedback = (
        f"Your reply was cut off: a value in it repeated {exc.runaway!r} without end, so it "
        "was not used. Write it again without the repetition."
        if exc.runaway
        else f"Your reply was cut off: {exc}, so it was not used. Write it again, shorter "
        "(fewer or shorter values)."
    )
    _log.info("retry (max_tokens): %s", exc)
    run.attempts.append(FailedAttempt(None, exc.partial_text, feedback, step))
    run.usage.retries += 1
    if run.sink is not None:
        run.sink(Retry(step, None, feedback))
    run.messages.append(Message("assistant", exc.partial_text))
    run.messages.append(Message.user(feedback))


def _retry_choice(run: RunState, failed_before: int, n_calls: int, choice: str) -> str | None:
    """The choice a turn whose every call failed validation (or asked for a retry) is
    retried with: its own. None when some call ran: the run moves on."""
    failed = len(run.attempts) - failed_before
    return choice if failed >= n_calls else None


async def _run_calls(
    agent: Agent[Any],
    run: RunState,
    calls: Sequence[ParsedCall],
    ids: Sequence[str],
    step: int,
    offered: Sequence[str],
) -> None:
    for call, call_id in zip(calls, ids, strict=True):
        attrs = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": call.name,
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.type": "function",
        }
        check_limits(run, calls=1)
        with tracing.span(f"execute_tool {call.name}", attrs):
            reply = await agent._tool_manager.call(run, call, call_id, step, offered)
        if reply is None:  # awaiting approval
            continue
        run.messages.append(reply)
        if run.sink is not None:
            run.sink(ToolResult(step, call_id, call.name, reply.content))


def check_limits(run: RunState, *, calls: int) -> None:
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


def usage_attributes(usage: Usage, finish_reason: str) -> dict[str, Any]:
    return {
        "gen_ai.usage.input_tokens": usage.prompt_tokens,
        "gen_ai.usage.output_tokens": usage.completion_tokens,
        "gen_ai.response.finish_reasons": [finish_reason],
        "sdk.forced_tokens": usage.forced_tokens,
        "sdk.forward_passes": usage.forward_passes,
        "sdk.mask_time_s": usage.mask_time_s,
    }


def with_instructions(messages: list[Message], instructions: str | None) -> list[Message]:
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


def call_ids(messages: Sequence[Message], n: int) -> list[str]:
    """`call_<turn>_<i>`, the turn counted over the whole conversation (a continued history
    included), so ids never repeat within one transcript."""
    turn = 1 + sum(m.role == "assistant" for m in messages)
    return [f"call_{turn}_{i}" for i in range(n)]


def assistant_message(out: TurnOutput, calls: Sequence[ParsedCall], ids: Sequence[str]) -> Message:
    """The turn as a history message; `metadata["token_ids"]` keeps the ids the model wrote
    (local models), for callers that study tokenization, and `metadata["logprob"]` the
    output's log-probability where the decoding computed it (`decoding="best"`)."""
    parts = tuple(
        ToolCallPart(i, c.name, c.arguments, c.raw) for i, c in zip(ids, calls, strict=True)
    )
    meta: dict[str, Any] = {"token_ids": list(out.token_ids)} if out.token_ids else {}
    if out.logprob is not None:
        meta["logprob"] = out.logprob
    return Message("assistant", out.text, parts, metadata=meta)


_BLOCKED: weakref.WeakSet[asyncio.AbstractEventLoop] = weakref.WeakSet()
_BLOCKED_LOCK = threading.Lock()


def blocked_by_run_sync(loop: asyncio.AbstractEventLoop) -> bool:
    """Is `run_sync` blocking `loop`'s thread right now (called from code running on it)?
    Whatever needs that loop (an MCP connection opened on it) cannot be served meanwhile."""
    with _BLOCKED_LOCK:
        return loop in _BLOCKED


def run_blocking(coro: Coroutine[Any, Any, T]) -> T:
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    # Already inside an event loop (Jupyter, async frameworks): run in a private one.
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(coro)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = exc

    # The caller's context goes along (an `Agent.override` in force, tracing's span).
    th = threading.Thread(
        target=contextvars.copy_context().run, args=(target,), name="sdk-run-sync"
    )
    with _BLOCKED_LOCK:
        _BLOCKED.add(loop)
    try:
        th.start()
        th.join()
    finally:
        with _BLOCKED_LOCK:
            _BLOCKED.discard(loop)
    if "error" in box:
        raise box["error"]
    return cast(T, box["value"])


async def stream_events(
    start: Callable[[Callable[[StreamEvent], None]], Coroutine[Any, Any, RunResult[Any]]],
) -> AsyncIterator[StreamEvent]:
    """The events a run started by `start(sink)` emits, then its `FinalResult`; leaving the
    iteration early cancels the run."""
    loop = asyncio.get_running_loop()
    events: asyncio.Queue[Any] = asyncio.Queue()
    done = object()

    def sink(event: StreamEvent) -> None:  # called from the decoding thread too
        loop.call_soon_threadsafe(events.put_nowait, event)

    task = asyncio.ensure_future(start(sink))
    task.add_done_callback(lambda _: loop.call_soon_threadsafe(events.put_nowait, done))
    try:
        while (event := await events.get()) is not done:
            yield event
        yield FinalResult(task.result())
    finally:
        task.cancel()


def iterate_blocking(events: Callable[[], AsyncIterator[StreamEvent]]) -> Iterator[StreamEvent]:
    """An async event stream as a generator for synchronous code (the run goes on in a
    background thread with its own event loop)."""
    box: queue.Queue[Any] = queue.Queue()
    end = object()

    async def pump() -> None:
        try:
            async for event in events():
                box.put(event)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            box.put(exc)
        box.put(end)

    ctx = contextvars.copy_context()
    thread = threading.Thread(target=ctx.run, args=(asyncio.run, pump()), daemon=True)
    thread.start()
    while (item := box.get()) is not end:
        if isinstance(item, BaseException):
            raise item
        yield item
    thread.join()
