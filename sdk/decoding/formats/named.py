"""Formats that write the tool name as envelope text and the arguments as a JSON object after
it: Mistral's `[TOOL_CALLS]name[ARGS]{...}` (v11+ tokenizers) and DeepSeek V3's fenced calls.
Their grammar has one call rule per tool (`named_call_rule`)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from sdk.decoding.formats._base import (
    CallFormat,
    ParsedCall,
    lark_literal,
    parse_named_calls,
)

__all__ = ["DEEPSEEK_V3", "MISTRAL_ARGS", "DeepSeekV3Format", "MistralArgsFormat"]


class MistralArgsFormat(CallFormat):
    """`[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}`; parallel calls follow each other."""

    name = "mistral_args"
    body = "named"
    opener = "[TOOL_CALLS]"
    markers = ("[TOOL_CALLS]", "[ARGS]")
    reserved = ("[TOOL_CALLS]",)
    family = "Mistral Small 3.1/3.2, Magistral, Devstral (tekken v11+)"
    spec = "mistral-common v11 tokenizer"
    _HEAD = re.compile(r"\[TOOL_CALLS\]([^\[\]\s]+)\[ARGS\]")

    def named_call_rule(self, name: str, args_rule: str) -> str:
        return f"{lark_literal(self.opener + name + '[ARGS]')} {args_rule}"

    def separator_rule(self) -> str:
        return ""

    def render_call(self, name: str, arguments: Any) -> str:
        return f"{self.opener}{name}[ARGS]{self.style.dumps(arguments)}"

    def render_calls(self, calls: Sequence[tuple[str, Any]]) -> str:
        return "".join(self.render_call(n, a) for n, a in calls)

    def parse_calls(self, text: str) -> list[ParsedCall]:
        return parse_named_calls(self._HEAD, text)


_B, _E = "<\uff5ctool\u2581calls\u2581begin\uff5c>", "<\uff5ctool\u2581calls\u2581end\uff5c>"
_CB, _CE = "<\uff5ctool\u2581call\u2581begin\uff5c>", "<\uff5ctool\u2581call\u2581end\uff5c>"
_SEP = "<\uff5ctool\u2581sep\uff5c>"


class DeepSeekV3Format(CallFormat):
    """DeepSeek V3 / R1: `<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME`
    + a fenced JSON block + `<｜tool▁call▁end｜>`, calls separated by a newline, then
    `<｜tool▁calls▁end｜>`."""

    name = "deepseek_v3"
    body = "named"
    opener = _B
    markers = (_B, _E, _CB, _CE, _SEP)
    reserved = (_CB,)
    family = "DeepSeek V3, DeepSeek R1 (0528)"
    spec = "DeepSeek-V3 chat template"
    _HEAD = re.compile(re.escape(_CB) + r"function" + re.escape(_SEP) + r"([^\n]+)\n```json\n")

    def named_call_rule(self, name: str, args_rule: str) -> str:
        head = f"{_CB}function{_SEP}{name}\n```json\n"
        return f"{lark_literal(head)} {args_rule} {lark_literal(chr(10) + '```' + _CE)}"

    def calls_rule(self, call: str, parallel: bool) -> str:
        inner = super().calls_rule(call, parallel)
        return f"{lark_literal(_B)} {inner} {lark_literal(_E)}"

    def render_call(self, name: str, arguments: Any) -> str:
        return self.render_calls([(name, arguments)])

    def render_calls(self, calls: Sequence[tuple[str, Any]]) -> str:
        one = [
            f"{_CB}function{_SEP}{n}\n```json\n{self.style.dumps(a)}\n```{_CE}" for n, a in calls
        ]
        return _B + "\n".join(one) + _E

    def parse_calls(self, text: str) -> list[ParsedCall]:
        return parse_named_calls(self._HEAD, text)


MISTRAL_ARGS = MistralArgsFormat()
DEEPSEEK_V3 = DeepSeekV3Format()
