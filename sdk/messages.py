"""Chat messages: the transcript a run produces and accepts back as `message_history`.

Plain dataclasses in the OpenAI chat shape (`role`, `content`, `tool_calls`, `tool_call_id`),
so a history can be stored as JSON (`to_dict` / `from_dict`) and handed to any chat template.
An assistant message keeps the model's raw text as `content` (tool-call blocks included): that
is what the model wrote, so replaying it reproduces the exact prompt it saw.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["Message", "Role", "ToolCallPart", "coerce_messages"]

Role = Literal["system", "user", "assistant", "tool"]


@dataclass(frozen=True)
class ToolCallPart:
    """A tool call as the model wrote it (before validation): name and decoded arguments."""

    id: str
    name: str
    arguments: Any  # decoded JSON (normally a dict)
    raw: str = ""  # the arguments' JSON text

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


@dataclass(frozen=True)
class Message:
    """One chat message. Build with `Message.user(...)`, `.system`, `.assistant`, `.tool`."""

    role: Role
    content: str
    tool_calls: tuple[ToolCallPart, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None  # the tool's name, for role "tool"
    metadata: Mapping[str, Any] = field(default_factory=dict, compare=False)

    @classmethod
    def system(cls, content: str) -> Message:
        return cls("system", content)

    @classmethod
    def user(cls, content: str) -> Message:
        return cls("user", content)

    @classmethod
    def assistant(cls, content: str, tool_calls: Iterable[ToolCallPart] = ()) -> Message:
        return cls("assistant", content, tuple(tool_calls))

    @classmethod
    def tool(cls, content: str, *, tool_call_id: str, name: str) -> Message:
        return cls("tool", content, tool_call_id=tool_call_id, name=name)

    def to_dict(self) -> dict[str, Any]:
        """OpenAI-style dict (what chat templates take); `tool_calls` carry decoded arguments."""
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            out["tool_calls"] = [c.to_dict() for c in self.tool_calls]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            out["name"] = self.name
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Message:
        """Inverse of `to_dict`; also accepts OpenAI dicts whose arguments are JSON text."""
        role = data.get("role")
        if role not in ("system", "user", "assistant", "tool"):
            from sdk.errors import ConfigError

            raise ConfigError(f"unknown message role {role!r}")
        calls = []
        for i, c in enumerate(data.get("tool_calls") or ()):
            fn = c.get("function", c)
            args = fn.get("arguments", {})
            raw = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
            if isinstance(args, str):
                with contextlib.suppress(ValueError):
                    args = json.loads(args)
            calls.append(ToolCallPart(str(c.get("id", f"call_{i}")), fn["name"], args, raw))
        content = data.get("content")
        return cls(
            role,
            content if isinstance(content, str) else "",
            tuple(calls),
            data.get("tool_call_id"),
            data.get("name"),
        )


def coerce_messages(items: Iterable[Message | Mapping[str, Any]] | None) -> list[Message]:
    """`message_history` as `Message`s (dicts in the OpenAI shape are converted); anything
    else is a `ConfigError` naming the entry."""
    from sdk.errors import ConfigError

    if items is None:
        return []
    if isinstance(items, str | bytes | Mapping | Message) or not isinstance(items, Iterable):
        raise ConfigError(f"message_history must be a list of messages, not {type(items).__name__}")
    out: list[Message] = []
    for i, m in enumerate(items):
        if isinstance(m, Message):
            out.append(m)
        elif isinstance(m, Mapping):
            try:
                out.append(Message.from_dict(m))
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                raise ConfigError(f"message_history[{i}] is not a chat message: {exc}") from exc
        else:
            raise ConfigError(
                f"message_history[{i}] is a {type(m).__name__}, not a Message or an "
                'OpenAI-style dict: wrap text as Message.user(...) or {"role": "user", '
                '"content": ...}'
            )
    return out
