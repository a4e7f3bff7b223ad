"""How tool calls look in the model's text: one small protocol, one class per format.

A format says how a call is wrapped (the envelope around the JSON body), how several calls are
separated, how calls are parsed back out of text, and how tools and tool results are described
to models whose chat template has no tool support. The JSON body is the same for every format:
`{"name":NAME,"arguments":ARGS}`, constrained by the turn grammar.
"""

from __future__ import annotations

import contextlib
import copy
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from sdk.decoding.call_style import SPACED, CallStyle

__all__ = ["HERMES", "HermesFormat", "ParsedCall", "ToolCallFormat", "lark_literal"]


@dataclass(frozen=True)
class ParsedCall:
    """A call found in text; `error` says why it could not be decoded (then name may be "")."""

    name: str
    arguments: Any
    raw: str  # the arguments as JSON text
    error: str | None = None


def lark_literal(text: str) -> str:
    """`text` as a Lark string literal (JSON escaping is a subset Lark accepts)."""
    return json.dumps(text, ensure_ascii=True)


@runtime_checkable
class ToolCallFormat(Protocol):
    """The envelope of tool calls in generated text (see `HermesFormat`)."""

    name: str
    opener: str  # text that starts a call; free text may never contain it (auto mode)

    def call_rule(self, body_rule: str) -> str:
        """Lark rule body for one call whose JSON body is the rule `body_rule`."""
        ...

    def separator_rule(self) -> str:
        """Lark expression between consecutive calls (parallel calls)."""
        ...

    def parse(self, text: str) -> list[ParsedCall]:
        """Every call in `text`, in order."""
        ...

    def render_call(self, name: str, arguments: Any) -> str:
        """The text of one call, exactly as the turn grammar accepts it."""
        ...

    def tools_prompt(self, tools: Sequence[Mapping[str, Any]]) -> str:
        """System-prompt text describing `tools` (OpenAI dicts) for templates without tools."""
        ...

    def tool_result_text(self, name: str, content: str) -> str:
        """A tool result as user-turn text, for templates without a tool role."""
        ...


def _strip_property_titles(schema: Any) -> Any:
    """Drop Pydantic's generated `title`s (prompt tokens that say nothing new); keys inside
    `properties`/`$defs` are names, not keywords, so a property called "title" survives."""
    if isinstance(schema, dict):
        out: dict[str, Any] = {}
        for k, v in schema.items():
            if k == "title" and isinstance(v, str):
                continue
            if k in ("properties", "$defs", "definitions") and isinstance(v, dict):
                out[k] = {name: _strip_property_titles(sub) for name, sub in v.items()}
            else:
                out[k] = _strip_property_titles(v)
        return out
    if isinstance(schema, list):
        return [_strip_property_titles(v) for v in schema]
    return schema


class HermesFormat:
    """Hermes / Qwen style: `<tool_call>\\n{"name": ..., "arguments": ...}\\n</tool_call>`.

    Several calls are separated by a newline. The body's layout is `style` (`CallStyle`,
    `json.dumps`' spacing by default; the agent resolves it from the model's chat template):
    the grammar, the rendered history and the prompt's example all follow it.
    """

    name = "hermes"
    opener = "<tool_call>"
    closer = "</tool_call>"
    _CALL_RE = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)

    def __init__(self, style: CallStyle = SPACED) -> None:
        self.style = style

    def with_style(self, style: CallStyle) -> HermesFormat:
        """A copy of this format whose calls are laid out in `style`."""
        if style == self.style:
            return self
        other = copy.copy(self)
        other.style = style
        return other

    def call_rule(self, body_rule: str) -> str:
        return f"{lark_literal(self.opener + chr(10))} {body_rule} {lark_literal(chr(10) + self.closer)}"

    def separator_rule(self) -> str:
        return lark_literal("\n")

    def parse(self, text: str) -> list[ParsedCall]:
        calls: list[ParsedCall] = []
        for m in self._CALL_RE.finditer(text):
            body = m.group(1)
            try:
                data = json.loads(body)
            except ValueError as exc:
                calls.append(ParsedCall("", None, body, f"invalid JSON in tool call: {exc}"))
                continue
            if not isinstance(data, dict) or not isinstance(data.get("name"), str):
                calls.append(ParsedCall("", None, body, 'expected {"name": ..., "arguments": ...}'))
                continue
            args = data.get("arguments", data.get("parameters", {}))
            if isinstance(args, str):  # some models double-encode the arguments
                with contextlib.suppress(ValueError):
                    args = json.loads(args)
            raw = json.dumps(args, ensure_ascii=False)
            calls.append(ParsedCall(data["name"], args, raw))
        return calls

    def render_call(self, name: str, arguments: Any) -> str:
        body = self.style.dumps({"name": name, "arguments": arguments})
        # The closer can only occur inside a JSON string here; `\/` keeps the call whole.
        body = body.replace(self.closer, self.closer.replace("/", "\\/"))
        return f"{self.opener}\n{body}\n{self.closer}"

    def tools_prompt(self, tools: Sequence[Mapping[str, Any]]) -> str:
        lines = "\n".join(
            json.dumps(_strip_property_titles(dict(t)), ensure_ascii=False) for t in tools
        )
        return (
            "You are a function calling AI model. You are provided with function signatures "
            "within <tools></tools> XML tags. You may call one or more functions to assist with "
            "the user query. Don't make assumptions about what values to plug into functions.\n"
            f"<tools>\n{lines}\n</tools>\n"
            "For each function call, return a JSON object with the function name and arguments "
            "within <tool_call></tool_call> XML tags, like this:\n"
            + self.render_call("<function-name>", "<args-dict>")
            .replace('"<function-name>"', "<function-name>")
            .replace('"<args-dict>"', "<args-dict>")
        )

    def tool_result_text(self, name: str, content: str) -> str:
        body = json.dumps({"name": name, "content": content}, ensure_ascii=False)
        return f"<tool_response>\n{body}\n</tool_response>"


HERMES = HermesFormat()
