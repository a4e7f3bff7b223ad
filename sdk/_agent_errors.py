"""The errors of an agent run, now in `sdk.errors`; kept so that older imports keep working."""

from sdk.errors import (
    AgentRunError,
    FailedAttempt,
    RetriesExhausted,
    StepLimitExceeded,
    ToolExecutionError,
    ToolNotOffered,
    TruncationError,
    UnexpectedModelBehavior,
    UsageLimitExceeded,
)

__all__ = [
    "AgentRunError",
    "FailedAttempt",
    "RetriesExhausted",
    "StepLimitExceeded",
    "ToolExecutionError",
    "ToolNotOffered",
    "TruncationError",
    "UnexpectedModelBehavior",
    "UsageLimitExceeded",
]
