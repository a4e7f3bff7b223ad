"""gpt-oss's harmony format: channels instead of tags.

After `<|start|>assistant` the model may reason in the `analysis` channel, then either calls a
function in the `commentary` channel,

    <|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Paris"}

ended by the `<|call|>` stop token, or answers in the `final` channel,
`<|channel|>final<|message|>...`, ended by `<|return|>`. One call per turn (the call token
stops generation). The history is given back to the template as it expects it: the reasoning
as `thinking`, the answer as `content`, the calls as `tool_calls`.
"""

from __future__ import annotations

import json
import re
from typing import Any

from sdk.decoding.call_style import COMPACT, CallStyle
from sdk.decoding.formats._base import (
    CallFormat,
    ParsedCall,
    lark_literal,
    parse_named_calls,
)

__all__ = ["HARMONY", "HarmonyFormat"]

_CH, _MSG, _END, _START = "<|channel|>", "<|message|>", "<|end|>", "<|start|>"


class HarmonyFormat(CallFormat):
    """`<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{...}`."""

    name = "harmony"
    body = "named"
    opener = f"{_CH}commentary to=functions."
    markers = (_CH, _MSG, "<|constrain|>", _END, _START)
    parallel = False
    whole_reply = True
    text_prefix = f"{_CH}final{_MSG}"
    family = "gpt-oss (20b, 120b)"
    spec = "OpenAI harmony response format (cookbook)"
    _HEAD = re.compile(
        re.escape(_CH)
        + r"commentary to=functions\.([^\s<]+)\s*(?:<\|constrain\|>json)?"
        + re.escape(_MSG)
    )

    def __init__(self, style: CallStyle = COMPACT) -> None:
        super().__init__(style)
        self.reasoning: tuple[str, str] | None = (
            f"{_CH}analysis{_MSG}",
            f"{_END}{_START}assistant",
        )

    def named_call_rule(self, name: str, args_rule: str) -> str:
        return f"{lark_literal(f'{self.opener}{name} <|constrain|>json{_MSG}')} {args_rule}"

    def render_call(self, name: str, arguments: Any) -> str:
        return f"{self.opener}{name} <|constrain|>json{_MSG}{self.style.dumps(arguments)}"

    def parse_calls(self, text: str) -> list[ParsedCall]:
        return parse_named_calls(self._HEAD, text)

    def answer_text(self, text: str) -> str:
        """A final-channel reply without its channel header."""
        body = text.lstrip()
        return body[len(self.text_prefix) :] if body.startswith(self.text_prefix) else text

    def history_dict(self, message: Any) -> dict[str, Any]:
        """A message as the harmony template takes it (`thinking`, `content`, `tool_calls`)."""
        out: dict[str, Any] = dict(message.to_dict())
        if message.role != "assistant":
            return out
        thought, rest = self.split_reasoning(message.content)
        if thought and self.reasoning is not None:
            start, end = self.reasoning
            out["thinking"] = thought.removeprefix(start).removesuffix(end)
        out["content"] = "" if message.tool_calls else self.answer_text(rest).strip()
        return out

    def tools_prompt(self, tools: Any) -> str:
        lines = "\n".join(json.dumps(dict(t), ensure_ascii=False) for t in tools)
        return (
            "# Tools\n\n## functions\n\n"
            f"{lines}\n\n"
            "Calls to these tools must go to the commentary channel: 'functions'."
        )


HARMONY = HarmonyFormat()
