"""`compile_schema`: JSON Schema → Lark grammar text (in the engine's dialect) plus bookkeeping.

The grammar's language is exactly the schema's for every keyword listed in `enforced`; keywords
listed in `validated` are only approximated (the grammar accepts a superset) and must be
checked after parsing, e.g. with `jsonschema`.

Documented choices:
* Object members are generated in the schema's declaration order (required ones mandatory);
  undeclared members allowed by `additionalProperties`/`patternProperties` may come first or
  after any member (when their count is unbounded) or after the declared ones.
* `integer` accepts only integer literals (`-?(0|[1-9][0-9]*)`), not `1.0`.
* `oneOf` is emitted as `anyOf`; it is reported as validated unless the alternatives are
  provably disjoint (different types, distinct constants, required discriminator constants).
* `format` names the lexeme module does not know are annotations (ignored); known ones are
  enforced exactly or reported as validated.
* "flexible" whitespace is bounded: at most one line break and 16+64 blanks per gap.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from sdk.errors import SchemaError, SDKError, TooComplexError
from sdk.schema import KeywordUse, normalize

from ._emit import Emitter

MAX_GRAMMAR_CHARS = 16_000_000
_SEPARATORS = {"compact": (",", ":"), "spaced": (", ", ": "), "flexible": (",", ":")}
_JSON_WS = " \t\n\r"


def check_separators(separators: Any) -> tuple[str, str]:
    """`(item, key)` separators as `json.dumps` takes them; each must be its punctuation
    (`,` / `:`) with only JSON whitespace around it, or the output would not be JSON."""
    try:
        item, key = separators
    except (TypeError, ValueError):
        raise SchemaError(f"separators must be an (item, key) pair, not {separators!r}") from None
    for sep, ch in ((item, ","), (key, ":")):
        if not isinstance(sep, str) or sep.strip(_JSON_WS) != ch:
            raise SchemaError(
                f"separator {sep!r} must be {ch!r} with only JSON whitespace around it"
            )
    return item, key


def check_reserved(text: Any) -> str:
    """A reserved text must begin where only string content can be, outside any escape, and
    hold no `"`: then each occurrence lies inside one string and starts at a character
    boundary, which is what the grammar's lookahead subtracts."""
    if (
        not isinstance(text, str)
        or not text
        or '"' in text
        or "\\" in text
        or text[0].isalnum()
        or text[0] in "{}[],:/.+-_ \t\n\r"
    ):
        raise SchemaError(
            f"reserved text {text!r} must be non-empty, hold no quote or backslash, and start "
            "with a character JSON only allows inside strings (such as '<')"
        )
    return text


@dataclass(frozen=True)
class SchemaGrammar:
    """A compiled schema: Lark text, and which keywords the grammar enforces or leaves to
    post-validation (`KeywordUse(keyword, pointer)`, pointer of the schema holding the keyword)."""

    lark: str
    enforced: tuple[KeywordUse, ...]
    validated: tuple[KeywordUse, ...]
    schema: Any
    #: The Lark statement tree of the definitions of `lark` by name (a rule or terminal
    #: written by hand has none), exactly what Lark reads from their lines: the engine takes
    #: them instead of reading the text back (`CompiledGrammar.from_lark(statements=)`).
    statements: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)


def compile_schema(
    schema: Any,
    *,
    strict: bool = False,
    whitespace: Literal["compact", "spaced", "flexible"] = "compact",
    close_objects: bool = False,
    separators: tuple[str, str] | None = None,
    reserved: Sequence[str] = (),
    surface: Literal["json", "python", "xml", "gemma"] = "json",
    member_order: Literal["declared", "any"] = "declared",
) -> SchemaGrammar:
    """Compile a JSON Schema (drafts 04–2020-12, local refs only) to a Lark grammar.

    `strict`: raise `UnsupportedSchemaError` instead of reporting a keyword as validated.
    `whitespace`: "compact" (none), "spaced" (`json.dumps`' default `", "` and `": "`, how chat
    templates' `tojson` writes tool calls) or "flexible" (bounded whitespace wherever JSON
    allows it). `separators`: an explicit `(item, key)` pair such as `(", ", ": ")`, like
    `json.dumps`' argument; each must be its character with optional whitespace around it.
    `reserved`: texts that no JSON string in the value may contain raw, such as the tool-call
    closer `</tool_call>`: a value embedded in an envelope must not end it early (its own
    parser, and every regex-based one, would cut the call there). Such text stays writable
    escaped (`<\\/tool_call>`). Each must start with a character JSON can only hold raw inside
    a string content (not `"`, `\\`, `/`, a letter, a digit, punctuation or whitespace of JSON).
    `close_objects`: objects declaring `properties` default to `additionalProperties: false`.
    `surface="python"`: the value as the keyword arguments of a Python call, `(a=1, b=None)`,
    values as Python literals (`None`/`True`/`False`; strings double-quoted without the `\\/`
    and surrogate escapes Python reads differently), for pythonic tool calls; the schema must
    be an object whose properties are identifiers, with no undeclared members.
    `surface="xml"`: the value as Qwen3-Coder's `<parameter=NAME>` blocks, string parameters as
    raw text (their `pattern`/`format` then checked by validation), others as JSON.
    `surface="gemma"`: FunctionGemma's syntax, `{key:<escape>text<escape>,n:1}` (bare keys,
    raw strings between `<escape>` markers, `pattern`/`format` checked by validation).
    `member_order="any"`: an object's declared members in any order (each at most once,
    the required ones all present) instead of declaration order, exactly. Objects with more
    than 3 declared members get an `//@any_order` line that the engine reads (it tracks the
    set of members written; Lark sees a comment, GBNF export refuses it). For checking outputs
    written by others; generation wants the default, the order the model reads in the schema.
    Errors: `SchemaError` (with pointer) for malformed or empty schemas, `TooComplexError`.
    """
    return compile_parts(
        schema,
        strict=strict,
        whitespace=whitespace,
        close_objects=close_objects,
        separators=separators,
        reserved=reserved,
        surface=surface,
        member_order=member_order,
    ).grammar


@dataclass(frozen=True)
class SchemaParts:
    """`compile_schema`'s result and what the emitter knew of its terminals and keys, for
    pieces (`sdk.grammar.pieces`): each terminal's regex before reserved texts were
    subtracted and the constants it spells, the final regex of each, and the keys written
    as plain literals."""

    grammar: SchemaGrammar
    raw_terminals: Mapping[str, tuple[str, tuple[str, ...] | None]]
    terminals: Mapping[str, str]
    plain_keys: frozenset[str]


def compile_parts(
    schema: Any,
    *,
    strict: bool = False,
    whitespace: Literal["compact", "spaced", "flexible"] = "compact",
    close_objects: bool = False,
    separators: tuple[str, str] | None = None,
    reserved: Sequence[str] = (),
    surface: Literal["json", "python", "xml", "gemma"] = "json",
    member_order: Literal["declared", "any"] = "declared",
) -> SchemaParts:
    """`compile_schema` (same arguments and errors), with the emitter's parts."""
    if whitespace not in ("compact", "spaced", "flexible"):
        raise SchemaError(
            f"whitespace must be 'compact', 'spaced' or 'flexible', not {whitespace!r}"
        )
    seps = check_separators(separators or _SEPARATORS[whitespace])
    reserved = tuple(check_reserved(t) for t in reserved)
    if member_order not in ("declared", "any"):
        raise SchemaError(f"member_order must be 'declared' or 'any', not {member_order!r}")
    try:
        norm = normalize(schema, strict=strict, close_objects=close_objects)
        if surface not in ("json", "python", "xml", "gemma"):
            raise SchemaError(
                f"surface must be 'json', 'python', 'xml' or 'gemma', not {surface!r}"
            )
        emitter = Emitter(norm, whitespace, seps, reserved, surface, member_order)
        text = emitter.run(norm.root)
    except SDKError:
        raise
    except RecursionError:
        raise TooComplexError("schema too deeply nested or recursive") from None
    except Exception as exc:  # noqa: BLE001 - the contract: only SDK errors escape
        raise SchemaError(f"cannot compile schema: {type(exc).__name__}: {exc}") from exc
    if len(text) > MAX_GRAMMAR_CHARS:
        raise TooComplexError(f"grammar of {len(text)} characters exceeds the limit")
    grammar = SchemaGrammar(
        text, norm.usage.enforced, norm.usage.validated, schema, emitter.statements
    )
    return SchemaParts(
        grammar, emitter.raw_terminals, emitter.terminals, frozenset(emitter.plain_keys)
    )
