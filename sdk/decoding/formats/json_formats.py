"""Formats whose calls are JSON objects `{"name": ..., <arguments>: ...}` in another envelope:
Llama 3.1's bare object, and the JSON list of Mistral (v0.3 tokenizers) and Granite."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sdk.decoding.formats._base import (
    CallFormat,
    ParsedCall,
    call_from_object,
    decode_json_at,
    lark_literal,
)

__all__ = ["GRANITE", "LLAMA3_JSON", "MISTRAL_LIST", "JsonListFormat", "Llama3JsonFormat"]


class Llama3JsonFormat(CallFormat):
    """Llama 3.1-3.3: the reply is one JSON object `{"name": ..., "parameters": ...}`, ended by
    the end-of-turn token. One call per turn (the template refuses several)."""

    name = "llama3_json"
    opener = '{"name"'
    arguments_key = "parameters"
    parallel = False
    family = "Llama 3.1, 3.2 (JSON mode), 3.3"
    spec = "Meta Llama 3.1 model card: JSON based tool calling"

    def parse_calls(self, text: str) -> list[ParsedCall]:
        calls: list[ParsedCall] = []
        at = text.find(self.opener)
        while at >= 0:
            found = decode_json_at(text, at)
            if found is None:
                calls.append(ParsedCall("", None, text[at:], "invalid JSON in tool call"))
                at = text.find(self.opener, at + 1)
                continue
            data, end = found
            calls.append(call_from_object(data, text[at:end], ("parameters", "arguments")))
            at = text.find(self.opener, end)
        return calls

    def render_call(self, name: str, arguments: Any) -> str:
        return self.body_text(name, arguments)


class JsonListFormat(CallFormat):
    """A marker, then ALL the turn's calls as one JSON list of `{"name", "arguments"}` objects:
    `[TOOL_CALLS] [{...}, {...}]` (Mistral v0.3), `<|tool_call|>[{...}]` (Granite)."""

    name = "json_list"
    gap = " "  # between the marker and the list

    def calls_rule(self, call: str, parallel: bool) -> str:
        item = self.style.separators[0] if self.style.separators else ", "
        rest = f" ({lark_literal(item)} {call})*" if parallel and self.parallel else ""
        return f'{lark_literal(self.opener + self.gap + "[")} {call}{rest} "]"'

    def render_call(self, name: str, arguments: Any) -> str:
        return self.render_calls([(name, arguments)])

    def render_calls(self, calls: Sequence[tuple[str, Any]]) -> str:
        item = self.style.separators[0] if self.style.separators else ", "
        body = item.join(self.body_text(n, a) for n, a in calls)
        return f"{self.opener}{self.gap}[{body}]"

    def parse_calls(self, text: str) -> list[ParsedCall]:
        calls: list[ParsedCall] = []
        at = text.find(self.opener)
        while at >= 0:
            start = at + len(self.opener)
            found = decode_json_at(text, start)
            if found is None or not isinstance(found[0], list):
                calls.append(ParsedCall("", None, text[start:], "expected a JSON list of calls"))
                at = text.find(self.opener, start)
                continue
            data, end = found
            calls += [call_from_object(item, text[start:end], ("arguments",)) for item in data]
            at = text.find(self.opener, end)
        return calls


class MistralListFormat(JsonListFormat):
    name = "mistral"
    opener = "[TOOL_CALLS]"
    markers = ("[TOOL_CALLS]",)
    # The v0.3 template writes each call's 9-character id after its arguments.
    extra_members = {"id": {"type": "string", "pattern": "^[A-Za-z0-9]{9}$"}}
    family = "Mistral 7B Instruct v0.3, Mixtral 8x22B Instruct, Mistral Nemo"
    spec = "mistral-common v3 tokenizer; Mistral-7B-Instruct-v0.3 chat template"


class GraniteFormat(JsonListFormat):
    name = "granite"
    opener = "<|tool_call|>"
    gap = ""
    markers = ("<|tool_call|>",)
    family = "IBM Granite 3.x"
    spec = "IBM Granite 3 documentation: function calling"


LLAMA3_JSON = Llama3JsonFormat()
MISTRAL_LIST = MistralListFormat()
GRANITE = GraniteFormat()
