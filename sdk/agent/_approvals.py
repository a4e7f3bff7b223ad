"""Calls a person approves before they run: where a run stops, and how it resumes.

A call of a tool marked `@tool(requires_approval=True)`, or one the run's
`requires_approval(ctx, call)` picks, is validated like any other and then held: the turn's
other calls run, and the run stops with `ApprovalRequired` (the pending calls, the
transcript). The transcript is plain data (`Message.to_dict`), so an app stores it, asks a
person, and resumes later, in another process if need be:
`agent.run(message_history=..., approvals={call_id: decision})`. A decision is True (run it
now), False or `ToolDenied(message)` (not run; the model is told why), or `ToolReturn(value)`
(the app ran it itself: `value` is the result).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sdk.agent._tools import result_text
from sdk.decoding.formats import ParsedCall
from sdk.errors import ConfigError
from sdk.events import ToolResult
from sdk.messages import Message, ToolCallPart
from sdk.result import ToolCall
from sdk.tools import RunContext

if TYPE_CHECKING:
    from sdk.agent import Agent
    from sdk.agent._run import RunState

__all__ = ["Approval", "ApprovalPredicate", "ToolDenied", "ToolReturn"]


@dataclass(frozen=True)
class ToolDenied:
    """A pending call not approved: it does not run, and the model is told `message`.

    A decision of `False` is `ToolDenied()` with the default message.

    Attributes:
        message: why, as the model is told it (the tool message reads "Not run: ...").
    """

    message: str = "The user did not approve this call."


@dataclass(frozen=True)
class ToolReturn:
    """A pending call the app handled itself: `value` is its result, the tool does not run.

    Attributes:
        value: the call's result, shown to the model as a tool's return value would be.
    """

    value: Any


Approval = bool | ToolDenied | ToolReturn
ApprovalPredicate = Callable[[RunContext[Any], ToolCall], bool]


def pending_calls(messages: Sequence[Message]) -> list[ToolCallPart]:
    """The calls of the conversation's last assistant turn that have no result yet (the
    turn must be followed by tool results only)."""
    last = max((i for i, m in enumerate(messages) if m.role == "assistant"), default=-1)
    if last < 0 or any(m.role != "tool" for m in messages[last + 1 :]):
        return []
    answered = {m.tool_call_id for m in messages[last + 1 :]}
    return [p for p in messages[last].tool_calls if p.id not in answered]


def check_approvals(
    pending: Sequence[ToolCallPart], approvals: Mapping[str, Any] | None
) -> dict[str, Approval]:
    """Every pending call decided, nothing else: a `ConfigError` naming the ids otherwise."""
    ids = [p.id for p in pending]
    given = dict(approvals or {})
    if approvals is not None and not isinstance(approvals, Mapping):
        raise ConfigError(f"approvals={approvals!r}: expected a dict of call id -> decision")
    if set(given) != set(ids):
        missing = [i for i in ids if i not in given]
        extra = sorted(set(given) - set(ids))
        raise ConfigError(
            "approvals must decide exactly the calls awaiting approval "
            f"{ids}: missing {missing}, not pending {extra}"
        )
    for key, value in given.items():
        if not isinstance(value, bool | ToolDenied | ToolReturn):
            raise ConfigError(
                f"approvals[{key!r}]={value!r}: expected True, False, ToolDenied(...) or "
                "ToolReturn(...)"
            )
    return given


async def resolve(
    agent: Agent[Any],
    run: RunState,
    pending: Sequence[ToolCallPart],
    approvals: dict[str, Approval],
) -> None:
    """Carry out the decisions: each pending call gets its result in the transcript."""
    for part in pending:
        decision = approvals[part.id]
        raw = part.raw or json.dumps(part.arguments, ensure_ascii=False)
        if decision is True:
            call = ParsedCall(part.name, part.arguments, raw)
            reply = await agent._tool_manager.call(run, call, part.id, 0, approved=True)
            assert reply is not None
        else:
            record = ToolCall(name=part.name, args=None, raw=raw, id=part.id, step=0)
            if isinstance(decision, ToolReturn):
                record.result = decision.value
                text = result_text(decision.value)
            else:
                denied = decision if isinstance(decision, ToolDenied) else ToolDenied()
                record.error = f"denied: {denied.message}"
                text = f"Not run: {denied.message}"
            run.tool_calls.append(record)
            reply = Message.tool(text, tool_call_id=part.id, name=part.name)
        run.messages.append(reply)
        if run.sink is not None:
            run.sink(ToolResult(0, part.id, part.name, reply.content))
