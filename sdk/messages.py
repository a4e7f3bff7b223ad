"""Chat messages: the transcript a run produces and accepts back as `message_history`.

Plain dataclasses in the OpenAI chat shape (`role`, `content`, `tool_calls`, `tool_call_id`),
so a history can be stored as JSON (`to_dict` / `from_dict`) and handed to any chat template.
An assistant message keeps the model's raw text as `content` (tool-call blocks included): that
is what the model wrote, so replaying it reproduces the exact prompt it saw.

Histories in OpenAI's own format (assistant `content: None` next to its `tool_calls`, tool
results without `name`) are read too: the prompt shows such calls as the model would have
written them (`prompt_content`), and `Message.to_openai()` writes that format back.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal, cast

if TYPE_CHECKING:
    pass

__all__ = ["Message", "Role", "ToolCallPart", "coerce_messages"]

Role = Literal["system", "user", "assistant", "tool"]
_ROLES: tuple[str, ...] = ("system", "user", "assistant", "tool")
# OpenAI's newer name for system instructions; local chat templates only know "system".
_ROLE_ALIASES = {"developer": "system"}


@dataclass(frozen=True)
class ToolCallPart:
    """A tool call as the model wrote it (before validation): name and decoded arguments.

    Attributes:
        id: the call's id, the `tool_call_id` of the tool message that answers it.
        name: the tool's name.
        arguments: the decoded arguments (a dict; None for a call the model wrote as
            something that does not decode).
        raw: the arguments' JSON text as the model wrote it ("" where unknown).
    """

    id: str
    name: str
    arguments: Any  # decoded JSON (normally a dict)
    raw: str = ""  # the arguments' JSON text

    def to_dict(self) -> dict[str, Any]:
        """The call in the chat-template shape, arguments decoded (what templates iterate)."""
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }

    def to_openai(self) -> dict[str, Any]:
        """OpenAI's shape: the arguments as JSON text (the model's own text where kept)."""
        arguments = self.raw or json.dumps(self.arguments, ensure_ascii=False)
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": arguments},
        }


@dataclass(frozen=True)
class Message:
    """One chat message. Build with `Message.user(...)`, `.system`, `.assistant`, `.tool`.

    Attributes:
        role: "system", "user", "assistant" or "tool".
        content: the text. For an assistant turn the model wrote, its raw text, calls
            included (replayed as it is); for one read from OpenAI's format, the text
            besides the calls ("" when there is none).
        tool_calls: an assistant turn's calls.
        tool_call_id: for role "tool": the id of the call this result answers.
        name: for role "tool": the tool's name (taken from the call when a history omits it).
        metadata: what the SDK notes about the message (`token_ids` of a local model's
            turn, an agent's `instructions`); not compared, not serialized.
    """

    role: Role
    content: str
    tool_calls: tuple[ToolCallPart, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None  # the tool's name, for role "tool"
    metadata: Mapping[str, Any] = field(default_factory=dict, compare=False)

    @classmethod
    def system(cls, content: str) -> Message:
        """A system message.

        Args:
            content: the instructions.
        """
        return cls("system", content)

    @classmethod
    def user(cls, content: str) -> Message:
        """A user message.

        Args:
            content: what the user says.
        """
        return cls("user", content)

    @classmethod
    def assistant(cls, content: str, tool_calls: Iterable[ToolCallPart] = ()) -> Message:
        """An assistant message.

        Args:
            content: the model's text (calls written in it are shown as they are).
            tool_calls: its calls; shown in the model's call format after `content` when
                `content` does not already hold them (`prompt_content`).
        """
        return cls("assistant", content, tuple(tool_calls))

    @classmethod
    def tool(cls, content: str, *, tool_call_id: str, name: str) -> Message:
        """A tool result.

        Args:
            content: the result as text.
            tool_call_id: the id of the call it answers.
            name: the tool's name.
        """
        return cls("tool", content, tool_call_id=tool_call_id, name=name)

    def to_dict(self) -> dict[str, Any]:
        """OpenAI-style dict (what chat templates take); `tool_calls` carry decoded arguments.
        Lossless with `from_dict` (the content keeps the model's raw text): use it to store
        transcripts; `to_openai` is for other tools and APIs."""
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            out["tool_calls"] = [c.to_dict() for c in self.tool_calls]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            out["name"] = self.name
        return out

    def to_openai(self) -> dict[str, Any]:
        """The message as OpenAI's Chat Completions API takes it: calls in `tool_calls`
        (arguments as JSON text), `content` None beside them when there is no text, tool
        results with `tool_call_id` and `name`. An assistant turn keeps the text the model
        wrote, call text included, so it replays byte for byte; to cut the calls out of it
        (what another server should see), use `sdk.decoding.formats.openai_message(m, fmt)`
        with the model's call format."""
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.role == "assistant" and self.tool_calls:
            out["content"] = self.content if self.content.strip() else None
            out["tool_calls"] = [c.to_openai() for c in self.tool_calls]
        if self.role == "tool":
            out["tool_call_id"] = self.tool_call_id or ""
        elif self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            out["name"] = self.name
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Message:
        """Inverse of `to_dict` and `to_openai`: OpenAI chat dicts, arguments as objects or
        JSON text. `content` may be null (an assistant turn that only calls) or a list of text
        parts (joined by newlines); the `developer` role is read as `system`. Anything else
        is a `ConfigError` naming the field.

        Args:
            data: the message as a dict (`to_dict`'s, `to_openai`'s or OpenAI's own).
        """
        return _from_dict(data, "message")


def _from_dict(data: Any, where: str) -> Message:
    """`Message.from_dict`, errors naming the entry as `where` (`message_history[3]`)."""
    from sdk.errors import ConfigError

    def bad(path: str, problem: str) -> ConfigError:
        return ConfigError(f"{where}{path}: {problem}")

    if not isinstance(data, Mapping):
        raise bad("", f"expected a chat message dict, not {type(data).__name__}")
    role = data.get("role")
    role = _ROLE_ALIASES.get(role, role) if isinstance(role, str) else role
    if role not in _ROLES:
        hint = " (OpenAI's legacy 'function' role: use 'tool')" if role == "function" else ""
        raise bad(".role", f"unknown message role {role!r}; expected one of {list(_ROLES)}{hint}")
    content = _content_text(data.get("content"), where, bad)
    raw_calls = data.get("tool_calls")
    if raw_calls is None:
        raw_calls = ()
    if not isinstance(raw_calls, Sequence) or isinstance(raw_calls, str | bytes):
        raise bad(".tool_calls", f"expected a list of calls, not {type(raw_calls).__name__}")
    if raw_calls and role != "assistant":
        raise bad(".tool_calls", f"only assistant messages carry tool calls, not {role!r}")
    calls = tuple(_call_from_dict(c, f".tool_calls[{j}]", j, bad) for j, c in enumerate(raw_calls))
    call_id, name = data.get("tool_call_id"), data.get("name")
    if call_id is not None and not isinstance(call_id, str):
        raise bad(".tool_call_id", f"expected a string, not {type(call_id).__name__}")
    if name is not None and not isinstance(name, str):
        raise bad(".name", f"expected a string, not {type(name).__name__}")
    return Message(cast(Role, role), content, calls, call_id, name)


def _content_text(content: Any, where: str, bad: Any) -> str:
    """A message's text: a string, null (""), or OpenAI's list of text parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence) and not isinstance(content, bytes):
        texts: list[str] = []
        for k, part in enumerate(content):
            kind = part.get("type") if isinstance(part, Mapping) else None
            text = part.get(kind) if kind in ("text", "refusal") else None
            if not isinstance(text, str):
                shown = kind if kind is not None else type(part).__name__
                raise bad(
                    f".content[{k}]",
                    f"a {shown!r} part; only text parts ({{'type': 'text', 'text': ...}}) "
                    "can be shown to a local model",
                )
            texts.append(text)
        return "\n".join(texts)
    raise bad(
        ".content",
        f"expected a string, a list of text parts or null, not {type(content).__name__}",
    )


def _call_from_dict(c: Any, path: str, j: int, bad: Any) -> ToolCallPart:
    """One of `tool_calls`: OpenAI's `{"id", "type", "function": {"name", "arguments"}}`
    (the flat `{"id", "name", "arguments"}` too)."""
    if not isinstance(c, Mapping):
        raise bad(path, f"expected a call dict, not {type(c).__name__}")
    kind = c.get("type", "function")
    if kind != "function":
        raise bad(f"{path}.type", f"{kind!r} calls are not supported, only 'function'")
    fn = c.get("function", c)
    if "function" in c:
        path += ".function"
    if not isinstance(fn, Mapping):
        raise bad(path, f"expected a dict with name and arguments, not {type(fn).__name__}")
    name = fn.get("name")
    args: Any = fn.get("arguments", {})
    # A nameless call is only the SDK's own record of one it could not decode (`to_dict` of
    # a failed call: no name, arguments None), kept so that its transcripts read back.
    if not isinstance(name, str) or not (name or args is None):
        raise bad(f"{path}.name", "missing: every call needs the name of its tool")
    if isinstance(args, str):
        raw = args
        try:
            args = json.loads(args) if args.strip() else {}
        except ValueError as exc:
            raise bad(f"{path}.arguments", f"not valid JSON ({exc}): {args[:80]!r}") from exc
        if not isinstance(args, dict):
            raise bad(f"{path}.arguments", f"expected a JSON object, got {raw[:80]!r}")
    elif isinstance(args, Mapping):
        args = dict(args)
        try:
            raw = json.dumps(args, ensure_ascii=False)
        except (TypeError, ValueError) as exc:
            raise bad(f"{path}.arguments", f"not JSON data: {exc}") from exc
    elif args is None:  # a call the model wrote undecodably (`to_dict` of a failed call)
        raw = "null"
    else:
        raise bad(
            f"{path}.arguments",
            f"expected an object or its JSON text, not {type(args).__name__}",
        )
    call_id = c.get("id")
    return ToolCallPart(f"call_{j}" if call_id is None else str(call_id), name, args, raw)


# ------------------------------------------------------------------ histories


def coerce_messages(items: Iterable[Message | Mapping[str, Any]] | None) -> list[Message]:
    """`message_history` as `Message`s (dicts in the OpenAI shape are converted); anything
    else is a `ConfigError` naming the entry.

    A tool result without a `name` (OpenAI's tool messages have none) takes the name of the
    earlier call with its `tool_call_id`: templates and the `<tool_response>` fallback show
    the tool's name with its result.
    """
    from sdk.errors import ConfigError

    if items is None:
        return []
    if isinstance(items, str | bytes | Mapping | Message) or not isinstance(items, Iterable):
        raise ConfigError(f"message_history must be a list of messages, not {type(items).__name__}")
    out: list[Message] = []
    names: dict[str, str] = {}  # call id -> tool name, of the calls so far
    for i, m in enumerate(items):
        if isinstance(m, Message):
            msg = m
        elif isinstance(m, Mapping):
            try:
                msg = _from_dict(m, f"message_history[{i}]")
            except ConfigError:
                raise
            except (KeyError, TypeError, ValueError, AttributeError) as exc:  # an odd Mapping
                raise ConfigError(f"message_history[{i}] is not a chat message: {exc}") from exc
        else:
            raise ConfigError(
                f"message_history[{i}] is a {type(m).__name__}, not a Message or an "
                'OpenAI-style dict: wrap text as Message.user(...) or {"role": "user", '
                '"content": ...}'
            )
        for call in msg.tool_calls:
            names[call.id] = call.name
        if msg.role == "tool" and not msg.name:
            name = names.get(msg.tool_call_id) if msg.tool_call_id is not None else None
            if name is None:
                raise ConfigError(
                    f"message_history[{i}]: a tool message needs a name, or a tool_call_id "
                    f"of an earlier assistant call (tool_call_id={msg.tool_call_id!r} "
                    "matches none)"
                )
            msg = replace(msg, name=name)
        out.append(msg)
    return out
