"""The protocol every call format implements, and the base class the built-in ones share.

A format is everything about a call that is not the schema of its arguments: the envelope
(opener, closer, separators, how several calls share a turn), where the tool name goes, how
calls are parsed back out of text, and how tools and results are described to templates
without tool support. The arguments are always compiled from the tool's JSON Schema by the
one schema compiler, laid out in the format's `CallStyle`.

Two body kinds cover the JSON families:

- `"object"`: the name and the arguments share one JSON object, `{"name": N, KEY: ARGS}`
  (Hermes / Qwen, Llama 3.1, Mistral's JSON list, Granite), compiled as one schema over all
  tools so that the name selects the arguments grammar;
- `"named"`: the name is envelope text and the arguments are a JSON object after it
  (Mistral's `[TOOL_CALLS]name[ARGS]{...}`, DeepSeek's `function<sep>name` + fenced JSON):
  one call rule per tool, `named_call_rule(name, args_rule)`.
"""

from __future__ import annotations

import contextlib
import copy
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, ClassVar, Literal, Protocol, runtime_checkable

from sdk.decoding.call_style import SPACED, CallStyle

__all__ = [
    "CallFormat",
    "FormatTraits",
    "ParsedCall",
    "ToolCallFormat",
    "format_traits",
    "lark_literal",
    "tagged_result_text",
]


@dataclass(frozen=True)
class ParsedCall:
    """A call found in text; `error` says why it could not be decoded (then name may be "")."""

    name: str
    arguments: Any
    raw: str  # the arguments as JSON text
    error: str | None = None
    # Formats that write values as raw text (XML parameters): the texts, typed against the
    # tool's schema by the format's `resolve_arguments`.
    texts: Mapping[str, str] | None = None


def lark_literal(text: str) -> str:
    """`text` as a Lark string literal (JSON escaping is a subset Lark accepts)."""
    return json.dumps(text, ensure_ascii=True)


@runtime_checkable
class ToolCallFormat(Protocol):
    """The envelope of tool calls in generated text (see `CallFormat` for the optional parts)."""

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


@dataclass(frozen=True)
class FormatTraits:
    """What a format may say beyond the `ToolCallFormat` protocol, each with its default.

    The built-in formats (`CallFormat`) declare all of it; a format of your own that
    implements only the protocol gets the defaults: calls in JSON objects, not closed one by
    one, no reasoning span. Read through `format_traits(fmt)`, the one place that looks.
    """

    closer: str | None = None  # text that ends ONE call
    body: str = "object"  # "object": {"name", KEY: args}; "named": name in the envelope
    arguments_key: str = "arguments"
    extra_members: Mapping[str, Any] | None = None  # more members of the call object
    markers: tuple[str, ...] = ()  # special tokens the format writes as text
    reserved: tuple[str, ...] = ()  # texts no argument string may contain unescaped
    reasoning: tuple[str, str] | None = None  # the reasoning span's start and end markers
    surface: str = "json"  # how argument values are written: json, python, xml, gemma
    whole_reply: bool = False  # calls are the whole reply or absent (no text around them)
    text_prefix: str = ""  # what a text reply opens with (harmony's final channel)
    style: Any = None  # the body's `CallStyle` (None: compact JSON)
    with_style: Callable[..., Any] | None = None
    calls_rule: Callable[[str, bool], str] | None = None
    find_calls: Callable[[str], list[ParsedCall]] | None = None
    resolve_arguments: Callable[[ParsedCall, Mapping[str, Any]], ParsedCall] | None = None
    split_reasoning: Callable[[str], tuple[str, str]] | None = None
    answer_text: Callable[[str], Any] | None = None
    history_dict: Callable[[Any], dict[str, Any]] | None = None
    render_calls: Callable[[Sequence[tuple[str, Any]]], str] | None = None


_TRAITS: tuple[tuple[str, Any], ...] = tuple((f.name, f.default) for f in fields(FormatTraits))


def format_traits(obj: object) -> FormatTraits:
    """The format `obj`'s optional attributes and methods, defaults where it has none."""
    return FormatTraits(**{name: getattr(obj, name, default) for name, default in _TRAITS})


def strip_property_titles(schema: Any) -> Any:
    """Drop Pydantic's generated `title`s (prompt tokens that say nothing new); keys inside
    `properties`/`$defs` are names, not keywords, so a property called "title" survives."""
    if isinstance(schema, dict):
        out: dict[str, Any] = {}
        for k, v in schema.items():
            if k == "title" and isinstance(v, str):
                continue
            if k in ("properties", "$defs", "definitions") and isinstance(v, dict):
                out[k] = {name: strip_property_titles(sub) for name, sub in v.items()}
            else:
                out[k] = strip_property_titles(v)
        return out
    if isinstance(schema, list):
        return [strip_property_titles(v) for v in schema]
    return schema


def tagged_result_text(name: str, content: str) -> str:
    """A tool result the way tool-trained ChatML templates show it (`<tool_response>` in a user
    turn): what their answer turns, rendered without tools, show."""
    body = json.dumps({"name": name, "content": content}, ensure_ascii=False)
    return f"<tool_response>\n{body}\n</tool_response>"


def decode_json_at(text: str, pos: int) -> tuple[Any, int] | None:
    """The JSON value starting at `pos` (whitespace skipped) and where it ends, or None."""
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    try:
        return json.JSONDecoder().raw_decode(text, pos)
    except ValueError:
        return None


def call_from_object(data: Any, body: str, keys: Sequence[str]) -> ParsedCall:
    """A `ParsedCall` from a decoded `{"name": ..., <key>: ...}` object (first key found)."""
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        want = f'{{"name": ..., "{keys[0]}": ...}}'
        return ParsedCall("", None, body, f"expected {want}")
    args: Any = next((data[k] for k in keys if k in data), {})
    return call_from_args(data["name"], args)


def call_from_args(name: str, args: Any) -> ParsedCall:
    if isinstance(args, str):  # some models double-encode the arguments
        with contextlib.suppress(ValueError):
            args = json.loads(args)
    return ParsedCall(name, args, json.dumps(args, ensure_ascii=False))


def parse_named_calls(head: re.Pattern[str], text: str) -> list[ParsedCall]:
    """Calls whose `head` match captures the tool name, JSON arguments right after it."""
    calls: list[ParsedCall] = []
    for m in head.finditer(text):
        found = decode_json_at(text, m.end())
        if found is None:
            calls.append(ParsedCall(m[1], None, text[m.end() :], "invalid JSON arguments"))
            continue
        calls.append(call_from_args(m[1], found[0]))
    return calls


class CallFormat:
    """Shared machinery of the built-in formats (subclass it for a format of your own).

    Class attributes describe the format; `registry.FORMATS` lists the built-in ones with how
    each is detected from a chat template.
    """

    name: str = "custom"
    opener: str = ""
    closer: str | None = None  # text that ends ONE call (None: calls are not closed one by one)
    body: Literal["object", "named"] = "object"
    arguments_key: ClassVar[str] = "arguments"
    # Optional members after the arguments that a model may write (Mistral's call "id").
    extra_members: ClassVar[Mapping[str, Any]] = {}
    # Texts the model writes as special tokens; the grammar matches them as text (the index
    # gives those tokens their text, `TokenizerIndex.with_token_text`).
    markers: ClassVar[tuple[str, ...]] = ()
    # Several calls in one turn possible in this format.
    parallel: ClassVar[bool] = True
    # Texts no JSON string of a call may hold raw (they would end or start a call early).
    reserved: ClassVar[tuple[str, ...]] = ()
    # (open, close) of the model's reasoning span, e.g. ("<think>", "</think>"); None: none.
    reasoning: tuple[str, str] | None = None
    # How the arguments are written: "json", or "python" literals (pythonic calls).
    surface: ClassVar[str] = "json"
    # Calls are the whole reply (text replies never start with the opener) instead of
    # following text anywhere in it.
    whole_reply: ClassVar[bool] = False
    family: ClassVar[str] = ""  # the model families that write this format (docs)
    spec: ClassVar[str] = ""  # where the format is published (docs)

    def __init__(self, style: CallStyle = SPACED) -> None:
        self.style = style

    # -- variants ------------------------------------------------------------------------
    def with_style(self, style: CallStyle) -> CallFormat:
        """A copy of this format whose calls are laid out in `style`."""
        if style == self.style:
            return self
        other = copy.copy(self)
        other.style = style
        return other

    def with_reasoning(self, markers: tuple[str, str] | None) -> CallFormat:
        """A copy whose turns may open with a reasoning span between `markers`."""
        if markers == self.reasoning:
            return self
        other = copy.copy(self)
        other.reasoning = markers
        return other

    # -- grammar -------------------------------------------------------------------------
    def call_rule(self, body_rule: str) -> str:
        """`"object"` formats: one call around the JSON body rule."""
        return body_rule

    def named_call_rule(self, name: str, args_rule: str) -> str:
        """`"named"` formats: one call of tool `name` around its arguments rule."""
        raise NotImplementedError(f"{type(self).__name__} has no named calls")

    def separator_rule(self) -> str:
        return lark_literal("\n")

    def calls_rule(self, call: str, parallel: bool) -> str:
        """The Lark expression of a turn's calls, `call` being the rule of one."""
        if not (parallel and self.parallel):
            return call
        sep = self.separator_rule()
        return f"{call} ({sep} {call})*" if sep else f"{call}+"

    # -- text ----------------------------------------------------------------------------
    def body_text(self, name: str, arguments: Any) -> str:
        """The JSON body of an `"object"` call in this format's layout."""
        return self.style.dumps({"name": name, self.arguments_key: arguments})

    def render_call(self, name: str, arguments: Any) -> str:
        raise NotImplementedError

    def render_calls(self, calls: Sequence[tuple[str, Any]]) -> str:
        """Several calls of one turn, as the grammar accepts them."""
        return "\n".join(self.render_call(n, a) for n, a in calls)

    def split_reasoning(self, text: str) -> tuple[str, str]:
        """`(reasoning, rest)`: the turn's reasoning span (markers included) and what follows.
        Calls written inside the reasoning are never parsed. A turn reasons only when its text
        opens with the start marker (a prompt that opened the span itself: prepend the marker,
        as the agent does)."""
        if self.reasoning is None:
            return "", text
        start, end = self.reasoning
        if not text.lstrip().startswith(start):
            return "", text
        at = text.find(end)
        if at < 0:
            return text, ""
        return text[: at + len(end)], text[at + len(end) :]

    def parse(self, text: str) -> list[ParsedCall]:
        return self.parse_calls(self.split_reasoning(text)[1])

    def parse_calls(self, text: str) -> list[ParsedCall]:
        raise NotImplementedError

    def tools_prompt(self, tools: Sequence[Mapping[str, Any]]) -> str:
        lines = "\n".join(
            json.dumps(strip_property_titles(dict(t)), ensure_ascii=False) for t in tools
        )
        example = (
            self.render_call("<function-name>", "<args-dict>")
            .replace('"<function-name>"', "<function-name>")
            .replace('"<args-dict>"', "<args-dict>")
        )
        return (
            "You are a function calling AI model. You are provided with function signatures "
            "within <tools></tools> XML tags. You may call one or more functions to assist with "
            "the user query. Don't make assumptions about what values to plug into functions.\n"
            f"<tools>\n{lines}\n</tools>\n"
            f"To call a function, write it like this:\n{example}"
        )

    def tool_result_text(self, name: str, content: str) -> str:
        """Plain words, no tags: a chat model never trained on tools reads a tagged result
        as markup to continue (the embedded SmolLM2 answered `<script>...`, `<string>42`).
        After one forced call on 30 questions its answer used the result in 20 cases
        against 13 with `<tool_response>` tags (docs/concepts/call-quality.md)."""
        return f"Result of {name}: {content}" if name else f"Tool result: {content}"

    def __repr__(self) -> str:
        extra = f", reasoning={self.reasoning!r}" if self.reasoning else ""
        return f"{type(self).__name__}(style={self.style.name!r}{extra})"
