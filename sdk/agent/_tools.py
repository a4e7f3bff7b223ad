"""The agent's tools: which are offered each turn, checking a call's arguments, running it,
and the retry budget that validation errors, `ModelRetry` and bad output draw on."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import pydantic_core
from pydantic import ValidationError

from sdk.agent._loops import ResultValues, loops
from sdk.errors import (
    ConfigError,
    FailedAttempt,
    RetriesExhausted,
    ToolExecutionError,
    ToolNotOffered,
)
from sdk.events import CallValidated, Retry
from sdk.messages import Message
from sdk.result import ToolCall
from sdk.tools import (
    ModelRetry,
    RunContext,
    Tool,
    ToolDefinitionError,
    ToolLike,
    as_tool,
    not_runnable_message,
)

if TYPE_CHECKING:
    from sdk.agent._run import RunState
    from sdk.decoding.formats import ParsedCall

_log = logging.getLogger("sdk.agent")
ToolErrors = Literal["return", "raise"]

PrepareTools = Callable[[RunContext[Any], list[Any]], Sequence[Any]]
"""Per run: called before each model turn with the run's context (`deps`, `step`) and the
agent's tools; returns the tools to offer on that turn (a subset, or copies such as
`dataclasses.replace(tool, description=...)`)."""


def stop_policy(retries: Any) -> Callable[[int], bool]:
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


def format_validation_error(exc: ValidationError) -> str:
    lines = []
    for err in exc.errors(include_url=False):
        loc = ".".join(str(p) for p in err.get("loc", ())) or "(root)"
        given = err.get("input")
        shown = json.dumps(given, ensure_ascii=False, default=str)[:80]
        lines.append(f"- {loc}: {err.get('msg')} (got {shown})")
    return "\n".join(lines)


def result_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return pydantic_core.to_json(value, fallback=str).decode()
    except Exception:  # noqa: BLE001 - anything unserializable: its repr
        return repr(value)


def normalize_tools(tools: Iterable[Any]) -> dict[str, ToolLike]:
    out: dict[str, ToolLike] = {}
    for item in tools:
        # Tools of your own (`ToolLike`: raw-schema adapters) pass as they are; OpenAI function
        # dicts become declared schema tools; functions and models become `Tool`s.
        if isinstance(item, Mapping):
            t: ToolLike = Tool.from_openai(item)
        else:
            t = item if isinstance(item, ToolLike) else as_tool(item)
        if t.name in out:
            raise ToolDefinitionError(f"duplicate tool name {t.name!r}", function=t.name)
        out[t.name] = t
    return out


def _call_key(name: str, args: Any) -> str:
    """A call's identity: its tool and its validated arguments as canonical JSON."""
    plain = pydantic_core.to_jsonable_python(args, fallback=repr)
    return name + "\x00" + json.dumps(plain, sort_keys=True, ensure_ascii=False)


def checked_args(call: ParsedCall, tool: Any) -> tuple[Any, str | None]:
    """`(validated arguments, None)`, or `(None, the feedback the model gets)`: one check for
    a run's calls and a plan's."""
    if call.error is not None:
        return None, f"Your tool call could not be parsed: {call.error}"
    try:
        return tool.validate_args(call.arguments), None
    except ValidationError as exc:
        return None, f"Validation feedback:\n{format_validation_error(exc)}"
    except Exception as exc:  # noqa: BLE001 - a duck-typed tool's own validator
        return None, f"Validation feedback:\n{type(exc).__name__}: {exc}"


def needs_approval(run: RunState, tool: Any, record: ToolCall, step: int) -> bool:
    if getattr(tool, "requires_approval", False):
        return True
    if run.approval is None:
        return False
    ctx = RunContext(deps=run.deps, tool_name=record.name, step=step)
    return bool(run.approval(ctx, record))


class ToolManager:
    """The agent's tools and what a run does with them."""

    def __init__(self, tools: dict[str, Any], tool_errors: ToolErrors, retries: Any) -> None:
        if tool_errors not in ("return", "raise"):
            raise ConfigError(f'tool_errors={tool_errors!r}: must be "return" or "raise"')
        self.tools = tools
        self.tool_errors = tool_errors
        self.stop = stop_policy(retries)

    def prepare(self, run: RunState, step: int, tool_choice: str) -> None:
        """This turn's tools: all of the agent's, or what the run's `prepare_tools` keeps."""
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

    def loops_only(self, run: RunState, calls: Sequence[ParsedCall]) -> bool:
        """Does every call of the turn repeat one that already ran in this run, up to values
        copied from the run's results (`sdk.agent._loops`), or exactly one whose tool raised
        (it would raise again: Qwen2.5-Coder-0.5B sent `convert_currency(23, "celsius",
        "USD")` seven times, each answered with the same error), each of a tool not marked
        `repeatable`? Such a turn gets nowhere: the model should answer. (A call that asked
        for a retry, `ModelRetry`, is retried under the budget as the docs say.)"""
        ran = [c for c in run.tool_calls if c.args is not None and c.error is None]
        if not calls or not (ran or run.raised):
            return False
        values = ResultValues([c.result for c in ran])
        for call in calls:
            tool = run.offered.get(call.name)
            if tool is None or getattr(tool, "repeatable", False):
                return False
            args, _ = checked_args(call, tool)
            if args is None:
                return False
            if _call_key(call.name, args) not in run.raised and not loops(
                call.name, args, ran, values
            ):
                return False
        return True

    def fail(self, run: RunState, key: str, attempt: FailedAttempt) -> None:
        """Record a failed attempt (a call or the output); `RetriesExhausted` once `key` has
        used its budget."""
        _log.info("retry (%s): %s", attempt.tool_name or "output", attempt.error.replace("\n", " "))
        if run.sink is not None:
            call = run.tool_calls[-1] if attempt.tool_name is not None else None
            run.sink(Retry(attempt.step, call, attempt.error))
        run.attempts.append(attempt)
        run.usage.retries += 1
        run.failures[key] = run.failures.get(key, 0) + 1
        if self.stop(run.failures[key]):
            what = f"tool {key!r}" if attempt.tool_name is not None else "the output"
            raise RetriesExhausted(
                f"{what} failed {run.failures[key]} times; last error:\n{attempt.error}",
                attempts=run.attempts,
                messages=list(run.messages),
                raw_output=attempt.raw,
            )

    async def call(
        self,
        run: RunState,
        call: ParsedCall,
        call_id: str,
        step: int,
        offered: Sequence[str] | None = None,
        *,
        approved: bool = False,
    ) -> Message | None:
        """Check and run one call; its result (or the feedback to retry with) as a message.
        None: the call waits for a person's approval (`run.pending`); `approved` skips that."""
        # Re-checked here whatever produced the call (a remote server, a custom format): only
        # a tool offered THIS turn (`offered`, the turn grammar's names) may run.
        tool: Any = run.offered.get(call.name) if offered is None or call.name in offered else None
        if tool is None and (call.error is None or call.name):
            raise ToolNotOffered(call.name, messages=list(run.messages), raw_output=run.last_raw)
        record = ToolCall(name=call.name, args=None, raw=call.raw, id=call_id, step=step)
        run.tool_calls.append(record)
        _log.debug("call %s: %s(%s)", call_id, call.name, call.raw)
        record.args, feedback = checked_args(call, tool)
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
            key = _call_key(call.name, record.args)
            if key in run.results and not getattr(tool, "repeatable", False):
                # The same call ran earlier in this run: its result again, not a second run
                # (a tool with side effects acts once per request; a looping model is told).
                record.result = run.results[key]
                run.usage.repeated_calls += 1
                _log.info("repeat (%s): the same call already ran; its result is reused", call.name)
                text = result_text(record.result)
                return Message.tool(
                    f"{text}\n(The same call already ran in this conversation; this is its "
                    "result.)",
                    tool_call_id=call_id,
                    name=call.name,
                )
            if not approved and needs_approval(run, tool, record, step):
                run.pending.append(record)
                return None
            try:
                record.result = await self._execute(run, tool, record)
                run.results[key] = record.result
                return Message.tool(
                    result_text(record.result), tool_call_id=call_id, name=call.name
                )
            except ModelRetry as exc:
                feedback = exc.message
            except ConfigError:  # the app's mistake, not the model's: it ends the run
                raise
            except Exception as exc:
                record.error = f"{type(exc).__name__}: {exc}"
                if self.tool_errors == "raise":
                    raise ToolExecutionError(
                        call.name,
                        f"tool {call.name!r} raised {record.error}",
                        messages=list(run.messages),
                        raw_output=run.last_raw,
                    ) from exc
                # A failed attempt like an invalid call: it draws on the tool's retry budget
                # (a tool that keeps failing ends the run with `RetriesExhausted`).
                text = f"Error: {record.error}"
                run.raised.add(key)
                self.fail(run, call.name, FailedAttempt(call.name, call.raw, text, step))
                return Message.tool(text, tool_call_id=call_id, name=call.name)
        record.error = feedback
        self.fail(run, call.name, FailedAttempt(call.name, call.raw, feedback or "", step))
        return Message.tool(
            f"{feedback}\nFix the errors and call the tool again.",
            tool_call_id=call_id,
            name=call.name,
        )

    @staticmethod
    async def _execute(run: RunState, tool: Any, record: ToolCall) -> Any:
        """Async tools are awaited on the loop; sync ones run in a worker thread, so a slow
        one stalls neither the event loop nor the run's events (`Tool.acall` does both)."""
        ctx = RunContext(
            deps=run.deps,
            tool_name=record.name,
            retry=run.failures.get(record.name, 0),
            step=record.step,
        )
        acall = getattr(tool, "acall", None)
        if acall is not None:
            return await acall(record.args, ctx)
        result = await asyncio.to_thread(tool.call, record.args, ctx)
        if asyncio.iscoroutine(result):
            result = await result
        return result
