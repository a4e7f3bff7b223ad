"""Hermes / Qwen 2.5: `<tool_call>\\n{"name": ..., "arguments": ...}\\n</tool_call>`."""

from __future__ import annotations

import json
import re
from typing import Any

from sdk.decoding.formats._base import CallFormat, ParsedCall, call_from_object, lark_literal

__all__ = ["HERMES", "HermesFormat"]


class HermesFormat(CallFormat):
    """Hermes / Qwen style: `<tool_call>\\n{"name": ..., "arguments": ...}\\n</tool_call>`.

    Several calls are separated by a newline. The body's layout is `style` (`CallStyle`,
    `json.dumps`' spacing by default; the agent resolves it from the model's chat template):
    the grammar, the rendered history and the prompt's example all follow it. The fallback for
    templates that do not render tools.
    """

    name = "hermes"
    opener = "<tool_call>"
    closer: str | None = "</tool_call>"
    family = "Qwen2.5, Qwen3 (with `<think>`), Hermes 2/3, SmolLM2 and most fine-tunes"
    spec = "NousResearch Hermes function calling; Qwen2.5 chat template"
    _CALL_RE = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)

    def call_rule(self, body_rule: str) -> str:
        closer = self.closer or ""
        return f"{lark_literal(self.opener + chr(10))} {body_rule} {lark_literal(chr(10) + closer)}"

    def parse_calls(self, text: str) -> list[ParsedCall]:
        calls: list[ParsedCall] = []
        for m in self._CALL_RE.finditer(text):
            body = m.group(1)
            try:
                data = json.loads(body)
            except ValueError as exc:
                calls.append(ParsedCall("", None, body, f"invalid JSON in tool call: {exc}"))
                continue
            calls.append(call_from_object(data, body, ("arguments", "parameters")))
        return calls

    def render_call(self, name: str, arguments: Any) -> str:
        body = self.body_text(name, arguments)
        closer = self.closer or ""
        # The closer can only occur inside a JSON string here; `\/` keeps the call whole.
        body = body.replace(closer, closer.replace("/", "\\/")) if closer else body
        return f"{self.opener}\n{body}\n{closer}"

    def tools_prompt(self, tools: Any) -> str:
        text = super().tools_prompt(tools)
        return text.replace(
            "To call a function, write it like this:",
            "For each function call, return a JSON object with the function name and arguments "
            f"within {self.opener}{self.closer} XML tags, like this:",
        )


HERMES = HermesFormat()
