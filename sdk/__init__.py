"""Pydantic-first, grammar-constrained function calling for local language models.

    from sdk import Agent, tool

    @tool
    def get_weather(city: str) -> str: ...

    result = Agent(tools=[get_weather]).run_sync("Weather in Paris?")

Heavy parts (the agent loop, backends) load on first attribute access.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from sdk.errors import ConfigError, ModelRetry, SDKError, ToolDefinitionError
from sdk.tools import RunContext, Tool, tool

if TYPE_CHECKING:
    from sdk._settings import UsageLimits
    from sdk.agent import Agent, ToolDenied, ToolReturn
    from sdk.backends.openai import OpenAIChatModel
    from sdk.errors import (
        AgentRunError,
        ApprovalRequired,
        ContextLengthError,
        RemoteModelError,
        RemoteTimeoutError,
        RetriesExhausted,
        StepLimitExceeded,
        ToolExecutionError,
        ToolNotOffered,
        TruncationError,
        UnexpectedModelBehavior,
        UsageLimitExceeded,
    )
    from sdk.messages import Message
    from sdk.result import RunResult, ToolCall, Usage

__all__ = [
    "Agent",
    "AgentRunError",
    "ApprovalRequired",
    "ContextLengthError",
    "ConfigError",
    "Message",
    "ModelRetry",
    "OpenAIChatModel",
    "RemoteModelError",
    "RemoteTimeoutError",
    "RetriesExhausted",
    "RunContext",
    "RunResult",
    "SDKError",
    "StepLimitExceeded",
    "Tool",
    "ToolCall",
    "ToolDefinitionError",
    "ToolDenied",
    "ToolExecutionError",
    "ToolNotOffered",
    "ToolReturn",
    "TruncationError",
    "UnexpectedModelBehavior",
    "Usage",
    "UsageLimitExceeded",
    "UsageLimits",
    "tool",
]

# The `sdk` logger (`sdk.grammar`: compiles and cache hits; `sdk.agent`: each turn's tokens,
# forced tokens and mask time, each call, each retry) is silent unless the app configures it.
logging.getLogger("sdk").addHandler(logging.NullHandler())

_LAZY = {
    "Agent": "sdk.agent",
    "OpenAIChatModel": "sdk.backends.openai",
    "RemoteModelError": "sdk.errors",
    "RemoteTimeoutError": "sdk.errors",
    "RunResult": "sdk.result",
    "ToolCall": "sdk.result",
    "Usage": "sdk.result",
    "Message": "sdk.messages",
    "AgentRunError": "sdk.errors",
    "ApprovalRequired": "sdk.errors",
    "ToolDenied": "sdk.agent",
    "ToolReturn": "sdk.agent",
    "ContextLengthError": "sdk.errors",
    "RetriesExhausted": "sdk.errors",
    "StepLimitExceeded": "sdk.errors",
    "ToolExecutionError": "sdk.errors",
    "ToolNotOffered": "sdk.errors",
    "TruncationError": "sdk.errors",
    "UnexpectedModelBehavior": "sdk.errors",
    "UsageLimitExceeded": "sdk.errors",
    "UsageLimits": "sdk._settings",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'sdk' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
