"""Leaf regexes for the schema compiler: constrained JSON strings, integers and numbers.

Every function returns a regex in the dialect of docs/internals/grammar-dialect.md that is also a
valid Python regex, so `re.fullmatch(regex, json_text)` is an oracle for it. String regexes match
the whole JSON string, quotes included; the encoding accepted is the dialect's (json.dumps with
`ensure_ascii=False`, plus `\\/` and either hex case in `\\u00XX`).

Constraints on a string combine by the dialect's lookahead intersection: each constraint is a
*tail* regex for `content"` and the result is `"(?=T1)(?=T2)T3`. Tails end with the closing
quote, which is what makes the intersection semantics exact.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import SchemaError
from ._ecma_regex import ANY_UNIT, NEVER, encode_literal, pattern_lengths, pattern_tail
from ._formats import format_known, format_tail
from ._numeric import integer_multiple_of, integer_regex, number_multiple_regex, number_regex

__all__ = [
    "format_known",
    "integer_multiple_of",
    "integer_regex",
    "lengths_left",
    "number_multiple_regex",
    "number_regex",
    "string_excluding_regex",
    "string_literal_regex",
    "string_regex",
]

_ANY_TAIL = f'{ANY_UNIT}*"'
# The unconstrained string: as the dialect says, it also accepts any `\uXXXX` escape.
JSON_STRING = r'"(?:[^\x00-\x1f\"\\]|\\(?:[\"\/\\bfnrt]|u[0-9A-Fa-f]{4}))*"'


def _length_tail(min_length: int, max_length: int | None) -> str:
    if max_length is None:
        q = "*" if min_length == 0 else "+" if min_length == 1 else f"{{{min_length},}}"
    elif min_length == max_length:
        q = f"{{{min_length}}}"
    else:
        q = "?" if (min_length, max_length) == (0, 1) else f"{{{min_length},{max_length}}}"
    return f'{ANY_UNIT}{q}"'


def _combine(tails: list[str]) -> str:
    """`"` then all tails intersected; the last one is matched, the others are lookaheads."""
    if not tails:
        tails = [_ANY_TAIL]
    return '"' + "".join(f"(?={t})" for t in tails[:-1]) + tails[-1]


def string_regex(
    *,
    pattern: str | None = None,
    fmt: str | None = None,
    min_length: int = 0,
    max_length: int | None = None,
    pointer: str = "",
) -> str:
    """Regex for a whole JSON string whose decoded value satisfies every given constraint.

    Lengths count code points of the decoded value; `pattern` has ECMA-262 search semantics;
    `fmt` must be `format_known` (else `UnsupportedSchemaError("format")`). Contradictory
    lengths give `NEVER` (matches nothing). Without any constraint this is the plain JSON string
    (any `\\uXXXX` escape allowed); constrained strings accept only the dialect's encoding.
    """
    if isinstance(min_length, bool) or not isinstance(min_length, int) or min_length < 0:
        raise SchemaError("minLength must be a non-negative integer", pointer)
    if max_length is not None and (
        isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 0
    ):
        raise SchemaError("maxLength must be a non-negative integer", pointer)
    if max_length is not None and max_length < min_length:
        return NEVER
    if pattern is None and fmt is None and min_length == 0 and max_length is None:
        return JSON_STRING
    if pattern is not None:
        min_length, max_length = lengths_left(min_length, max_length, [pattern])
    tails: list[str] = []
    if min_length > 0 or max_length is not None:
        tails.append(_length_tail(min_length, max_length))
    if fmt is not None:
        tails.append(format_tail(fmt, pointer))
    if pattern is not None:
        tails.append(pattern_tail(pattern, pointer))
    return _combine(tails)


def lengths_left(
    min_length: int, max_length: int | None, patterns: Sequence[str]
) -> tuple[int, int | None]:
    """`minLength`/`maxLength` minus what the (enforced) `patterns` already imply: an implied
    bound costs an intersection, a product automaton, for nothing (`minLength: 1` beside a
    pattern that needs a character is common). A pattern that cannot be parsed implies
    nothing here; its own lexeme reports it."""
    for pattern in patterns:
        if not min_length and max_length is None:
            break
        try:
            lo, hi = pattern_lengths(pattern)
        except SchemaError:
            continue
        if min_length <= lo:
            min_length = 0
        if max_length is not None and hi is not None and hi <= max_length:
            max_length = None
    return min_length, max_length


def string_literal_regex(value: str) -> str:
    """Exactly the JSON string `value` (canonical json.dumps encoding, `\\/`, either hex case)."""
    return '"' + encode_literal(value) + '"'


def _has_surrogate(value: str) -> bool:
    return any(0xD800 <= ord(ch) <= 0xDFFF for ch in value)


def string_excluding_regex(
    excluded: Sequence[str], *, pattern: str | None = None, pointer: str = ""
) -> str:
    """A whole JSON string whose value is none of `excluded` (and matches `pattern` if given)."""
    main = pattern_tail(pattern, pointer) if pattern is not None else _ANY_TAIL
    # a value with a lone surrogate has no UTF-8 encoding: it can never occur, nothing to exclude
    words = sorted({encode_literal(v) for v in excluded if not _has_surrogate(v)})
    if not words:
        return '"' + main
    body = words[0] if len(words) == 1 else "(?:" + "|".join(words) + ")"
    return f'"(?!{body}"){main}'
