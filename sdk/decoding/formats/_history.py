"""A message's calls as a call format writes them: what the model is shown of a history's
assistant turns, and the OpenAI shape with the call text cut out.

`sdk.messages` holds the data; what a turn looks like in a given model's format belongs to
the formats, here."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sdk.decoding.formats._base import ToolCallFormat, format_traits
from sdk.messages import Message, ToolCallPart

__all__ = ["openai_message", "prompt_content"]


def _calls_text(calls: Sequence[ToolCallPart], fmt: ToolCallFormat) -> str:
    """The calls as `fmt` writes them (several in one turn as it joins them)."""
    items = [(c.name, c.arguments) for c in calls]
    several = format_traits(fmt).render_calls
    if several is not None:
        return str(several(items))
    return "\n".join(fmt.render_call(n, a) for n, a in items)


def _holds_calls(message: Message, fmt: ToolCallFormat) -> bool:
    """Does the content already hold the message's calls? Yes when `fmt` parses a call of
    one of their names out of it: the SDK's own turns (the calls were parsed from that very
    text), never an OpenAI-format turn (null content, or text that writes no call)."""
    if not message.content.strip():
        return False
    names = {c.name for c in message.tool_calls}
    return any(p.name in names for p in fmt.parse(message.content))


def prompt_content(message: Message, fmt: ToolCallFormat) -> str:
    """What the model is shown of an assistant message: its content, where that already holds
    its calls (the model's raw text: the SDK's own transcripts replay byte for byte);
    otherwise the calls as `fmt` writes them, after the text if there is any (a newline
    between). So a history in OpenAI's format (`content: None` and `tool_calls`) shows the
    calls as the model itself would have written them."""
    if message.role != "assistant" or not message.tool_calls or _holds_calls(message, fmt):
        return message.content
    calls = _calls_text(message.tool_calls, fmt)
    return f"{message.content}\n{calls}" if message.content.strip() else calls


def _text_besides_calls(message: Message, fmt: ToolCallFormat) -> str:
    """The content without its calls, where `prompt_content` puts them back identically;
    the whole content otherwise."""
    content = message.content
    if not _holds_calls(message, fmt):
        return content
    calls = _calls_text(message.tool_calls, fmt)
    if content == calls:
        return ""
    text = content[: len(content) - len(calls) - 1]
    if content.endswith("\n" + calls) and text.strip():
        return text
    return content


def openai_message(message: Message, fmt: ToolCallFormat) -> dict[str, Any]:
    """`message.to_openai()` with the call text cut out of an assistant turn's `content`
    where `prompt_content` puts it back identically (None when nothing else is left): what a
    server given `tool_calls` should see. `fmt`: the call format the model wrote in
    (`agent.resolved_format()`). Read back, it shows the model the same prompt."""
    out = message.to_openai()
    if message.role == "assistant" and message.tool_calls:
        out["content"] = _text_besides_calls(message, fmt) or None
    return out
