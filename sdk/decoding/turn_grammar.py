"""One grammar per assistant turn, built from the offered tools, `tool_choice` and output type.

A call body is `{"name": NAME, "arguments": ARGS}` for one of the offered tools (the
language of `call_body_schema`): the tool name selects the arguments grammar, and a name that
was not offered cannot be written. Each schema's grammar is a piece (`sdk.grammar.pieces`),
compiled once per schema under a namespace of its own (usually when the tool is defined) and
joined here as statement trees, never re-read as text; the turn writes only its own rules,
the call object around the pieces and the punctuation in its layout. Modes:

- `"required"` / a tool name: `start: call (SEP call)*` (a name offers that tool only;
  without parallel calls, `start: call`); with reasoning, `start: TEXT? call ...`;
- `"auto"`: `start: HEAD? (call TEXT?)*`, where TEXT is any text that does not contain the
  call opener: free text is unconstrained, writing the opener enters the call grammar, and a
  call once opened must be completed validly. HEAD, the reply's opening text, is TEXT that
  does not open as JSON either: a call without its envelope is no answer
  (`_answer_regex`). With an `output_type`: `start: calls | output`;
- `"none"`: tools are not offered; the reply is an answer under HEAD's rule (no grammar
  without tools), or the `output_type`'s JSON.

The JSON of call bodies and typed outputs is laid out in the format's `CallStyle` (compact,
`json.dumps` spacing, bounded flexible or custom separators), exactly. Compiled grammars are
cached per (format, style, mode, tool schemas, output schema).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, cast

from sdk.decoding.call_style import COMPACT, CallStyle
from sdk.decoding.formats import (
    HERMES,
    CallFormat,
    ToolCallFormat,
    format_traits,
    lark_literal,
    tagged_result_text,
)
from sdk.engine.caches import BoundedCache
from sdk.errors import GrammarError
from sdk.grammar.pieces import (
    SchemaPiece,
    prefix_lark_names,
    punct_definitions,
    string_constant,
)

if TYPE_CHECKING:
    from sdk.engine.grammar import CompiledGrammar

__all__ = [
    "ToolChoice",
    "ToolSpec",
    "TurnGrammar",
    "arguments_lark",
    "build_turn_grammar",
    "call_body_schema",
    "prefix_lark_names",
]

ToolChoice = Literal["auto", "required", "none"] | str


class ToolSpec(Protocol):
    """What the grammar needs of a tool (`sdk.tools.Tool` and raw-schema adapters have it)."""

    @property
    def name(self) -> str: ...

    @property
    def json_schema(self) -> dict[str, Any]: ...

    def to_openai(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class TurnGrammar:
    """The grammar of one assistant turn; `compiled is None` means unconstrained generation."""

    mode: str  # "auto" | "required" | "output" | "none"
    lark: str | None
    compiled: CompiledGrammar | None
    tool_names: tuple[str, ...]
    has_output: bool
    #: a `"required"` turn that may open with free text (a reasoning budget: `reasoning=`)
    text_first: bool = False

    @property
    def constrained(self) -> bool:
        return self.compiled is not None


# ------------------------------------------------------------------------------ schema merging

_REF_PREFIXES = ("#/$defs/", "#/definitions/")


def _rewrite_refs(node: Any, prefix: str, root_name: str, used_root: list[bool]) -> Any:
    if isinstance(node, dict):
        out: dict[str, Any] = {}
        for k, v in node.items():
            if k == "$ref" and isinstance(v, str):
                out[k] = _rewrite_ref(v, prefix, root_name, used_root)
            elif k in ("properties", "patternProperties", "$defs", "definitions") and isinstance(
                v, dict
            ):
                # Keys here are names, never keywords: only rewrite the values.
                out[k] = {n: _rewrite_refs(s, prefix, root_name, used_root) for n, s in v.items()}
            else:
                out[k] = _rewrite_refs(v, prefix, root_name, used_root)
        return out
    if isinstance(node, list):
        return [_rewrite_refs(v, prefix, root_name, used_root) for v in node]
    return node


def _rewrite_ref(ref: str, prefix: str, root_name: str, used_root: list[bool]) -> str:
    for p in _REF_PREFIXES:
        if ref.startswith(p):
            return f"#/$defs/{prefix}{ref[len(p) :]}"
    if ref == "#" or ref.startswith("#/"):
        used_root[0] = True  # a reference into the tool's own root: hoist the root too
        return f"#/$defs/{root_name}{ref[1:]}"
    return ref  # remote refs: left for the compiler to report


def _grammar_schema(t: ToolSpec) -> dict[str, Any]:
    """What the grammar enforces of a tool's arguments: its schema, unless the tool carries a
    looser one because the grammar cannot express its schema (`Tool.grammar_schema`)."""
    loose = getattr(t, "grammar_schema", None)
    return loose if isinstance(loose, dict) else t.json_schema


def call_body_schema(
    tools: Sequence[ToolSpec],
    arguments_key: str = "arguments",
    extra_members: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The single JSON Schema of a call body `{"name":..,"arguments":..}` over all tools
    (`arguments_key` names the arguments member; `extra_members` are optional members after
    it, such as Mistral's call id)."""
    defs: dict[str, Any] = {}
    variants: list[dict[str, Any]] = []
    for i, t in enumerate(tools):
        schema = dict(_grammar_schema(t))
        prefix = f"t{i}_"
        root_name = f"t{i}__root"
        local_defs = {
            **(schema.pop("definitions", None) or {}),
            **(schema.pop("$defs", None) or {}),
        }
        used_root = [False]
        for name, sub in local_defs.items():
            defs[prefix + name] = _rewrite_refs(sub, prefix, root_name, used_root)
        args = _rewrite_refs(schema, prefix, root_name, used_root)
        if used_root[0]:
            defs[root_name] = args
            args = {"$ref": f"#/$defs/{root_name}"}
        variants.append(
            {
                "type": "object",
                "properties": {
                    "name": {"const": t.name},
                    arguments_key: args,
                    **(extra_members or {}),
                },
                "required": ["name", arguments_key],
                "additionalProperties": False,
            }
        )
    body: dict[str, Any] = {"anyOf": variants} if len(variants) > 1 else variants[0]
    if defs:
        body = {"$defs": defs, **body}
    return body


# ------------------------------------------------------------------------------ Lark text


def format_style(fmt: ToolCallFormat) -> CallStyle:
    """The body layout of `fmt` (formats without a `style` write compact JSON)."""
    style = format_traits(fmt).style
    return style if isinstance(style, CallStyle) else COMPACT


class _Parts:
    """A turn grammar's own lines, its pieces' definitions (as lines and statement trees),
    and the punctuation its JSON uses (defined once, in the turn's layout)."""

    def __init__(self, style: CallStyle) -> None:
        self.lines: list[str] = []
        self.piece_lines: list[str] = []
        self.statements: dict[str, Any] = {}
        self.style = style
        self.punct: set[str] = set()
        self._pieces: dict[str, tuple[SchemaPiece, tuple[str, ...]]] = {}  # by namespace

    def piece(
        self,
        schema: Any,
        reserved: Sequence[str | None] = (),
        surface: Literal["json", "python", "xml", "gemma"] = "json",
    ) -> str:
        """Add the definitions of `schema`'s piece (compiled once per schema: `@tool` has
        usually compiled it already); returns its entry rule."""
        from sdk.engine.pieces import schema_piece

        kept = tuple(_checked_reserved(reserved))
        piece = schema_piece(schema, surface=surface, reserved=kept)
        seen = self._pieces.get(piece.namespace)
        if seen is not None and seen != (piece, kept):
            # The same schema under other reserved texts (a tool's and the typed output's:
            # its terminals differ), or another schema whose name hashes alike: a piece
            # under names of its own.
            piece = schema_piece(schema, surface=surface, reserved=kept, own=True)
            seen = self._pieces.get(piece.namespace)
            if seen is not None and seen != (piece, kept):
                raise GrammarError(f"two grammar pieces share the names {piece.namespace}_*")
        if seen is None:  # two tools with one schema share its piece
            self._pieces[piece.namespace] = (piece, kept)
            defs = piece.definitions(kept)
            self.piece_lines += defs.lines
            self.statements.update(defs.statements)
            self.punct |= piece.punct
        return piece.start

    def text(self) -> str:
        punct = punct_definitions(self.punct, self.style.whitespace, self.style.separators)
        self.statements.update(punct.statements)
        return "\n".join([*self.lines, *self.piece_lines, *punct.lines]) + "\n"


def _checked_reserved(reserved: Sequence[str | None]) -> list[str]:
    from sdk.errors import SchemaError
    from sdk.grammar.compiler import check_reserved

    kept: list[str] = []
    for text in reserved:
        # A custom format's delimiter JSON could hold outside strings (`[/CALL]`) cannot be
        # subtracted this way; such formats keep the plain string grammar.
        with contextlib.suppress(SchemaError):
            kept.append(check_reserved(text))
    return kept


def _lark_regex(pattern: str) -> str:
    return "/" + pattern.replace("/", "\\/") + "/"


def _text_regex(fmt: ToolCallFormat) -> str:
    """Any non-empty text that never contains the call opener (a lookahead subtracts it)."""
    return _lark_regex(r"(?![\s\S]*" + re.escape(fmt.opener) + r")[\s\S]+")


_JSON_START = r"(?:```[A-Za-z]*[ \t\r\n]*)?(?:\{|\[[ \t\r\n]*[\[{\"\]0-9-])"
JSON_LEAD = r"[ \t\r\n]*" + _JSON_START
"""How a reply opens when it is JSON (an object, a list of values), bare or in a Markdown
fence of any language."""


def _answer_regex(fmt: ToolCallFormat, *, nonblank: bool = False) -> str:
    """A text reply next to tools: never the opener, and never opening as JSON (`nonblank`:
    and not blank either, for a turn that must answer).

    Tool-trained models write calls without their envelope when the envelope is not forced
    (Qwen2.5-Coder-0.5B answers a tool result with `{"name": "get_weather", "arguments":
    ...}` again and again until `max_tokens`); such text is a call in disguise, never an
    answer. The gate sees the model's mass on that start as a call being considered
    (`CallGate.untagged`) and decides it as one. A JSON reply is asked for with
    `output_type`, which has its own grammar."""
    no_opener = r"(?![\s\S]*" + re.escape(fmt.opener) + r")"
    starts = [_JSON_START]
    # Nor as a tool result, nor with a made-up kin of the call's or the result's tag (small
    # models answer `<tool_call_result>`, `<tool_response_text>`, `<tool_answer>`, `<tool>`):
    # no answer starts with their stems (`<tool_call`, `<tool_response`) or the word they share.
    stems = [t[:-1] for t in (_tag(fmt.opener.strip()), _result_tag(fmt)) if t]
    shared = os.path.commonprefix(stems).rstrip("_-.:| ") if len(stems) == 2 else ""
    if len(shared) >= 4:
        stems = [shared]  # `<tool`
    starts[:0] = [re.escape(stem) for stem in stems]
    lead = r"[ \t\r\n]*(?:" + "|".join(starts) + ")"
    blank = r"(?=[\s\S]*[^ \t\r\n])" if nonblank else ""
    return _lark_regex(no_opener + r"(?!" + lead + r")" + blank + r"[\s\S]+")


def _result_tag(fmt: ToolCallFormat) -> str | None:
    """The tag a tool result opens with where the prompt shows results as text: the
    format's own (`tool_result_text`), else `<tool_response>`, which tool-trained templates'
    answer turns show (`tagged_result_text`)."""
    try:
        head = str(fmt.tool_result_text("x", "y")).lstrip().split("\n", 1)[0]
    except Exception:  # noqa: BLE001 - a format of the user's own: no tag then
        head = ""
    return _tag(head) or _tag(tagged_result_text("x", "y").split("\n", 1)[0])


def _tag(text: str) -> str | None:
    """`text` where it is one XML-like tag (`<tool_call>`), else None."""
    return text if re.fullmatch(r"<[A-Za-z_|][^<>\s]{1,40}>", text) else None


_TRAILING = lark_literal("\n")


def _own_calls_rule(fmt: ToolCallFormat) -> bool:
    """Does `fmt` wrap its calls its own way (one envelope around them all)?"""
    return getattr(type(fmt), "calls_rule", CallFormat.calls_rule) is not CallFormat.calls_rule


def _trailing_newline(fmt: ToolCallFormat) -> bool:
    """Does `fmt` separate its calls with a bare newline, each call on its own?"""
    return not _own_calls_rule(fmt) and fmt.separator_rule() == _TRAILING


def _turn_parts(
    tools: Sequence[ToolSpec],
    mode: str,
    output_schema: Mapping[str, Any] | None,
    fmt: ToolCallFormat,
    parallel: bool,
    reasoning: bool = False,
) -> _Parts:
    turn = _Parts(format_style(fmt))
    parts = turn.lines
    out_start = ""
    if output_schema is not None:
        # Next to tools, a typed reply holding the opener would be read as a call.
        out_start = turn.piece(dict(output_schema), [fmt.opener] if mode != "output" else [])
    # Formats whose text replies open with a header (harmony's final channel).
    traits = format_traits(fmt)
    prefix = traits.text_prefix
    out_start = f"{lark_literal(prefix)} {out_start}" if prefix else out_start
    if mode == "output":
        parts.append(f"start: {out_start}")
    elif mode == "none":  # tools exist but are not offered: the reply is an answer, not blank
        parts.append("start: ANSWER")
        parts.append("ANSWER: " + _answer_regex(fmt, nonblank=True))
    else:
        if traits.calls_rule is not None:
            calls = traits.calls_rule("call", parallel)
        else:
            calls = f"call ({fmt.separator_rule()} call)*" if parallel else "call"
        if mode == "required" and reasoning:
            # Free text first (never containing the opener), then the call(s); the decoding
            # loop bounds the text by a token budget (`CallGate.budget`).
            parts.append(f"start: TEXT? {calls}")
            parts.append("TEXT: " + _text_regex(fmt))
        elif mode == "required":
            parts.append(f"start: {calls}")
        elif output_schema is not None:
            # Next to a typed output, as in text replies, the newline a model writes after a
            # call may end the turn, then it decides between another call and its end
            # (Qwen2.5-Coder-0.5B: `\n` 0.999 after `</tool_call>`, then its end token
            # 0.9999); without it, the newline committed to a call it never meant. "required"
            # keeps the commitment: Qwen ends its turn there even where the question needs more
            # calls (BFCL "parallel", first 12: no turn right when it may end, 4 when it commits).
            if parallel and getattr(fmt, "parallel", True) and _trailing_newline(fmt):
                calls = f"{calls} {_TRAILING}?"
            parts.append(f"start: {calls} | {out_start}")
        else:
            # A format whose calls share one envelope (a JSON list after a marker) repeats the
            # envelope; the others repeat single calls (and so need no separator rule here).
            unit = "call"
            if _own_calls_rule(fmt):
                parts.append(f"envelope: {calls}")
                unit = "envelope"
            if traits.whole_reply:
                # The reply is either text or the calls; text never opens like a call.
                parts.append(f"start: TEXT | {unit}")
                head = r"(?![ \t\r\n]*" + re.escape(fmt.opener) + r")(?!" + JSON_LEAD + r")"
                head += r"[\s\S]+"
                if prefix:
                    head = re.escape(prefix) + r"[\s\S]*"
                parts.append("TEXT: " + _lark_regex(head))
            elif parallel:
                # HEAD: the reply's opening text (an answer, or what precedes the calls);
                # TEXT: text after a call. Neither contains the opener (grammar-dialect.md,
                # lookahead); HEAD never opens like a call without its envelope.
                parts.append(f"start: HEAD? ({unit} TEXT?)*")
                parts.append("HEAD: " + _answer_regex(fmt))
                parts.append("TEXT: " + _text_regex(fmt))
            else:  # the turn ends with its one call
                parts.append(f"start: HEAD | HEAD? {unit}")
                parts.append("HEAD: " + _answer_regex(fmt))
        _call_rules(tools, fmt, turn)
    markers = traits.reasoning
    if markers:
        # The reasoning span opens the turn (or continues one the prompt opened); it is free
        # text up to its end marker, which no call inside it can pass.
        start, end = markers
        at = next(i for i, p in enumerate(parts) if p.startswith("start: "))
        parts[at] = parts[at].replace("start: ", "start: REASONING? (", 1) + ")"
        body = rf"(?:(?![\s\S]*{re.escape(end)})[\s\S]*)"  # text without the end marker
        think = rf"(?:{re.escape(start)})?{body}{re.escape(end)}\s*"
        parts.insert(1, "REASONING: " + _lark_regex(think))
    return turn


def _call_rules(tools: Sequence[ToolSpec], fmt: ToolCallFormat, turn: _Parts) -> None:
    """`call: ...` and the argument grammars, for the format's body kind."""
    # A string holding the closer would end the call early for every parser (ours
    # included); it stays writable escaped, `<\/tool_call>`.
    traits = format_traits(fmt)
    reserved = [t for t in (traits.closer, *traits.reserved) if t]
    if traits.body == "named":
        declared = traits.surface
        surface = cast(
            'Literal["json", "python", "xml", "gemma"]',
            declared if declared in ("python", "xml", "gemma") else "json",
        )
        named = cast(Any, fmt).named_call_rule
        starts = [turn.piece(_grammar_schema(t), reserved, surface) for t in tools]
        alts = [named(t.name, start) for t, start in zip(tools, starts, strict=True)]
        turn.lines.append("call: " + " | ".join(f"({a})" for a in alts))
        return
    turn.lines.append(f"call: {fmt.call_rule('cb_start')}")
    _call_body(tools, traits.arguments_key, traits.extra_members or {}, reserved, turn)


def _call_body(
    tools: Sequence[ToolSpec],
    arguments_key: str,
    extra_members: Mapping[str, Any],
    reserved: Sequence[str],
    turn: _Parts,
) -> None:
    """`cb_start`: the call object `{"name": NAME, KEY: ARGUMENTS, EXTRA...}` of each tool,
    with NAME that tool's name and ARGUMENTS its piece (`call_body_schema`'s language, laid
    out as the schema compiler lays out that object: members in declared order, the extra
    ones optional)."""
    kept = _checked_reserved(reserved)
    turn.punct |= {"LBRACE", "RBRACE", "COMMA", "COLON"}
    names: dict[str, str] = {}

    def const(text: str) -> str:
        if text not in names:
            names[text], defs = string_constant(text, kept, f"CB_S{len(names)}")
            turn.lines += defs.lines
            turn.statements.update(defs.statements)
        return names[text]

    extras = "".join(
        f" (COMMA {const(k)} COLON {turn.piece(v, kept)})?" for k, v in extra_members.items()
    )
    variants = [
        f"{const(t.name)} COMMA {const(arguments_key)} COLON "
        + turn.piece(_grammar_schema(t), kept)
        for t in tools
    ]
    turn.lines.append(
        f"cb_start: LBRACE {const('name')} COLON ({' | '.join(variants)}){extras} RBRACE"
    )


def arguments_lark(schema: Any, fmt: ToolCallFormat, *, extras: bool = False) -> str:
    """One tool's arguments as a whole Lark grammar, as the format's calls hold them (its
    surface, layout and reserved texts); `extras`: then the format's optional extra members
    (Mistral's call id), as the call object continues after the arguments. For servers that
    take a grammar per call (`constraint="structural_tag"`)."""
    traits = format_traits(fmt)
    declared = traits.surface
    surface = cast(
        'Literal["json", "python", "xml", "gemma"]',
        declared if declared in ("python", "xml", "gemma") else "json",
    )
    reserved = [t for t in (traits.closer, *traits.reserved) if t]
    parts = _Parts(format_style(fmt))
    start = parts.piece(schema, reserved, surface)
    tail = ""
    if extras and traits.extra_members:
        kept = _checked_reserved(reserved)
        parts.punct |= {"COMMA", "COLON"}
        for k, (key, sub) in enumerate(traits.extra_members.items()):
            symbol, defs = string_constant(key, kept, f"EXTRA_KEY{k}")
            parts.lines += defs.lines
            parts.statements.update(defs.statements)
            tail += f" (COMMA {symbol} COLON {parts.piece(sub, kept)})?"
    parts.lines.insert(0, f"start: {start}{tail}")
    return parts.text()


# ------------------------------------------------------------------------------ entry point

_log = logging.getLogger("sdk.grammar")
#: Turn grammars by what they were built from, under the engine's one byte budget (a
#: grammar's text and parse positions; its terminals' automata count in their own tables).
_TURNS: BoundedCache[str, TurnGrammar] = BoundedCache("turn grammars", 32 << 20)


def build_turn_grammar(
    tools: Sequence[ToolSpec],
    tool_choice: ToolChoice = "auto",
    output_schema: Mapping[str, Any] | None = None,
    fmt: ToolCallFormat = HERMES,
    *,
    parallel_tool_calls: bool = True,
    reasoning: bool = False,
) -> TurnGrammar:
    """The (cached) grammar of one assistant turn. Raises `ValueError` for a bad `tool_choice`.

    `output_schema` is the JSON Schema of a structured final reply (None: free text).
    `parallel_tool_calls=False` allows at most one call per turn (the turn ends after it).
    `reasoning`: a required call may follow free text (the caller bounds its length).
    """
    names = tuple(t.name for t in tools)
    guarded = False
    if tool_choice not in ("auto", "required", "none"):
        if tool_choice not in names:
            raise ValueError(f"tool_choice={tool_choice!r} names no offered tool {list(names)}")
        tools = [t for t in tools if t.name == tool_choice]
        mode = "required"
    elif tool_choice == "none" or not tools:
        if tool_choice == "required":
            raise ValueError('tool_choice="required" needs at least one tool')
        # With tools in the conversation, a text reply is still kept from being a call.
        guarded = bool(tools) and not format_traits(fmt).text_prefix
        tools, mode = [], "output" if output_schema is not None else "none"
    else:
        mode = tool_choice
    names = tuple(t.name for t in tools)
    if mode == "none" and not guarded:
        return TurnGrammar("none", None, None, (), False)

    traits = format_traits(fmt)
    key = json.dumps(
        [
            type(fmt).__module__ + "." + type(fmt).__qualname__,
            fmt.name,
            fmt.opener,
            traits.closer,
            traits.reasoning,
            traits.surface,
            format_style(fmt),
            mode,
            parallel_tool_calls,
            reasoning and mode == "required",
            [[t.name, _grammar_schema(t)] for t in tools],
            output_schema,
        ],
        default=repr,  # keys unsorted: the order of a schema's properties is the grammar's
    )
    hit = _TURNS.lookup(key)
    if hit is not None:
        _log.debug("turn grammar: cache hit (%s, %d tools)", mode, len(names))
        return hit
    from sdk.engine.grammar import CompiledGrammar

    t0 = time.perf_counter()
    parts = _turn_parts(tools, mode, output_schema, fmt, parallel_tool_calls, reasoning)
    text = parts.text()
    compiled = CompiledGrammar.from_lark(text, statements=parts.statements)
    text_first = reasoning and mode == "required"
    turn = TurnGrammar(mode, text, compiled, names, output_schema is not None, text_first)
    _log.debug(
        "turn grammar: compiled (%s, %d tools, %d chars of Lark) in %.3f s",
        mode,
        len(names),
        len(text),
        time.perf_counter() - t0,
    )
    return _TURNS.put(key, turn, 64 * len(text) + 256 * len(compiled.positions))
