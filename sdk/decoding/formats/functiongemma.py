"""FunctionGemma (Gemma 3 270M tuned for calls): `<start_function_call>call:NAME{ARGS}
<end_function_call>`, ARGS in its own syntax: bare keys, strings between `<escape>` tokens,
numbers, `true`/`false`/`null`, `{...}` and `[...]` nested, no spaces
(`{location:<escape>Paris<escape>,days:2}`). Compiled by the schema compiler's Gemma surface
(`compile_schema(surface="gemma")`); parsed by the small reader below."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from sdk.decoding.call_style import COMPACT, CallStyle
from sdk.decoding.formats._base import CallFormat, ParsedCall, lark_literal

__all__ = ["FUNCTIONGEMMA", "FunctionGemmaFormat", "gemma_literal", "read_gemma_value"]

ESC = "<escape>"
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")


def gemma_literal(value: Any, separators: tuple[str, str] = (",", ":")) -> str:
    """`value` (JSON data) written in FunctionGemma's syntax."""
    item, key = separators
    if isinstance(value, str):
        return ESC + value + ESC
    if isinstance(value, dict):
        return (
            "{"
            + item.join(f"{k}{key}{gemma_literal(v, separators)}" for k, v in value.items())
            + "}"
        )
    if isinstance(value, list | tuple):
        return "[" + item.join(gemma_literal(v, separators) for v in value) + "]"
    return json.dumps(value)


def read_gemma_value(text: str, pos: int) -> tuple[Any, int]:
    """The value at `pos` and where it ends; `ValueError` where there is none."""
    while pos < len(text) and text[pos] in " \n":
        pos += 1
    if text.startswith(ESC, pos):
        end = text.find(ESC, pos + len(ESC))
        if end < 0:
            raise ValueError("unterminated <escape> string")
        return text[pos + len(ESC) : end], end + len(ESC)
    if text.startswith("{", pos):
        out: dict[str, Any] = {}
        pos += 1
        while True:
            pos = _skip(text, pos)
            if text.startswith("}", pos):
                return out, pos + 1
            m = _KEY.match(text, pos)
            if m is None:
                raise ValueError(f"expected a key at {pos}")
            pos = _skip(text, m.end())
            if not text.startswith(":", pos):
                raise ValueError(f"expected ':' at {pos}")
            out[m.group(0)], pos = read_gemma_value(text, pos + 1)
            pos = _skip(text, pos)
            if text.startswith(",", pos):
                pos += 1
    if text.startswith("[", pos):
        items: list[Any] = []
        pos += 1
        while True:
            pos = _skip(text, pos)
            if text.startswith("]", pos):
                return items, pos + 1
            value, pos = read_gemma_value(text, pos)
            items.append(value)
            pos = _skip(text, pos)
            if text.startswith(",", pos):
                pos += 1
    for word, value in (("true", True), ("false", False), ("null", None)):
        if text.startswith(word, pos):
            return value, pos + len(word)
    m = _NUMBER.match(text, pos)
    if m is None:
        raise ValueError(f"expected a value at {pos}")
    return json.loads(m.group(0)), m.end()


def _skip(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \n":
        pos += 1
    return pos


class FunctionGemmaFormat(CallFormat):
    """`<start_function_call>call:get_weather{city:<escape>Paris<escape>}<end_function_call>`."""

    name = "functiongemma"
    body = "named"
    opener = "<start_function_call>"
    closer: str | None = "<end_function_call>"
    surface = "gemma"
    markers = ("<start_function_call>", "<end_function_call>", ESC)
    reserved = (ESC,)  # a raw string cannot hold its own delimiter
    family = "FunctionGemma (Gemma 3 270M)"
    spec = "Google AI for Developers: FunctionGemma formatting and best practices"
    _HEAD = re.compile(r"<start_function_call>call:([^{\s<]+)(?=\{)")

    def __init__(self, style: CallStyle = COMPACT) -> None:
        super().__init__(style)

    def _seps(self) -> tuple[str, str]:
        return self.style.separators or (",", ":")

    def named_call_rule(self, name: str, args_rule: str) -> str:
        head = lark_literal(f"{self.opener}call:{name}")
        return f"{head} {args_rule} {lark_literal(self.closer or '')}"

    def separator_rule(self) -> str:
        return ""

    def render_call(self, name: str, arguments: Any) -> str:
        args = (
            gemma_literal(arguments, self._seps())
            if isinstance(arguments, dict)
            else "{" + str(arguments) + "}"
        )
        return f"{self.opener}call:{name}{args}{self.closer}"

    def render_calls(self, calls: Sequence[tuple[str, Any]]) -> str:
        return "".join(self.render_call(n, a) for n, a in calls)

    def parse_calls(self, text: str) -> list[ParsedCall]:
        calls: list[ParsedCall] = []
        for m in self._HEAD.finditer(text):
            try:
                args, end = read_gemma_value(text, m.end())
            except ValueError as exc:
                calls.append(ParsedCall(m[1], None, text[m.end() :], f"invalid arguments: {exc}"))
                continue
            if not text.startswith(self.closer or "", end) or not isinstance(args, dict):
                calls.append(ParsedCall(m[1], None, text[m.end() : end], "unterminated call"))
                continue
            calls.append(ParsedCall(m[1], args, json.dumps(args, ensure_ascii=False)))
        return calls


FUNCTIONGEMMA = FunctionGemmaFormat()
