"""Calls a person approves: the run stops with them, and resumes from JSON with decisions."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sdk import (
    Agent,
    ApprovalRequired,
    ConfigError,
    RunContext,
    ToolCall,
    ToolDenied,
    ToolReturn,
    tool,
)
from sdk.backends.test import ToolCallScript
from sdk.events import FinalResult


def _tools(ran: list[str]) -> list[Any]:
    @tool(requires_approval=True)
    def refund(order: int, amount: float) -> str:
        """Refund an order."""
        ran.append(f"refund {order}")
        return f"refunded {amount} on order {order}"

    @tool
    def order_status(order: int) -> str:
        """Look an order up."""
        ran.append(f"status {order}")
        return "delivered"

    return [refund, order_status]


def _paused(model: Any, ran: list[str], *replies: Any) -> tuple[Agent[str], ApprovalRequired]:
    script = [
        [
            ToolCallScript("order_status", {"order": 7}),
            ToolCallScript("refund", {"order": 7, "amount": 20}),
        ],
        *replies,
    ]
    agent = Agent(model(*script), tools=_tools(ran))
    with pytest.raises(ApprovalRequired) as info:
        agent.run_sync("Refund order 7 if it was delivered.")
    return agent, info.value


def _through_json(pause: ApprovalRequired) -> list[dict[str, Any]]:
    return json.loads(json.dumps([m.to_dict() for m in pause.messages]))


def test_a_call_needing_approval_stops_the_run_and_resumes_from_json(model: Any) -> None:
    ran: list[str] = []
    agent, pause = _paused(model, ran)
    assert ran == ["status 7"]  # the other call of the turn ran; the refund waits
    (call,) = pause.pending
    assert call.name == "refund" and call.args.amount == 20 and call.result is None
    assert pause.usage is not None and pause.usage.steps == 1
    history = _through_json(pause)  # stored anywhere, resumed later, another process

    with agent.override(model=model("Refunded 20.")):
        result = agent.run_sync(message_history=history, approvals={call.id: True})
    assert ran == ["status 7", "refund 7"] and result.output == "Refunded 20."
    assert result.tool_calls[0].result == "refunded 20.0 on order 7"
    roles = [m.role for m in result.all_messages()]
    assert roles[-4:] == ["assistant", "tool", "tool", "assistant"]


def test_a_denial_is_fed_back_and_a_supplied_result_replaces_the_run(model: Any) -> None:
    ran: list[str] = []
    agent, pause = _paused(model, ran)
    call_id = pause.pending[0].id
    m = model("I could not refund it.")
    with agent.override(model=m):
        result = agent.run_sync(
            message_history=pause.messages, approvals={call_id: ToolDenied("Over the limit.")}
        )
    assert "Not run: Over the limit." in m.prompts[0] and ran == ["status 7"]
    assert result.tool_calls[0].error == "denied: Over the limit."

    with agent.override(model=model("Done by hand.")):
        result = agent.run_sync(
            message_history=pause.messages, approvals={call_id: ToolReturn("refunded by a clerk")}
        )
    assert ran == ["status 7"] and result.tool_calls[0].result == "refunded by a clerk"


def test_decisions_must_match_the_pending_calls(model: Any) -> None:
    ran: list[str] = []
    agent, pause = _paused(model, ran)
    with pytest.raises(ConfigError, match="missing"):
        agent.run_sync(message_history=pause.messages, approvals={})
    with pytest.raises(ConfigError, match="awaiting approval"):
        agent.run_sync("and?", message_history=pause.messages)
    with pytest.raises(ConfigError, match="expected True, False"):
        agent.run_sync(message_history=pause.messages, approvals={pause.pending[0].id: "yes"})


def test_a_run_predicate_asks_for_approval_of_chosen_calls(model: Any) -> None:
    ran: list[str] = []

    def big(ctx: RunContext[Any], call: ToolCall) -> bool:
        return call.name == "order_status" and call.args.order > 100

    m = model(
        ToolCallScript("order_status", {"order": 7}), ToolCallScript("order_status", {"order": 700})
    )
    agent = Agent(m, tools=_tools(ran)[1:])
    with pytest.raises(ApprovalRequired) as info:
        agent.run_sync("Status of 7 and 700?", requires_approval=big)
    assert ran == ["status 7"] and info.value.pending[0].args.order == 700


def test_a_stream_ends_with_the_pause(model: Any) -> None:
    ran: list[str] = []
    script = [ToolCallScript("refund", {"order": 1, "amount": 5})]
    agent = Agent(model(*script), tools=_tools(ran))
    events: list[Any] = []
    with pytest.raises(ApprovalRequired):
        for event in agent.run_stream_sync("Refund order 1."):
            events.append(event)
    assert not any(isinstance(e, FinalResult) for e in events) and ran == []
