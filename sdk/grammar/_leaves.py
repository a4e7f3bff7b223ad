"""Leaf regexes for IR nodes (strings, numbers, object keys, constants) via `_lexemes`.

Why a wrapper: the lexeme functions are exact but may refuse a constraint
(`UnsupportedSchemaError`); here such a constraint is dropped (a superset) and reported as
validated, so a refused `pattern` never makes the whole schema fail in non-strict mode.
"""

from __future__ import annotations

import json
import re
from typing import Any

from sdk.errors import UnsupportedSchemaError
from sdk.schema import Num, Str, Usage

from . import _lexemes as lex
from ._ecma_regex import NEVER as NEVER_REGEX

STRING = lex.string_regex()
NUMBER = lex.number_regex()
INTEGER = lex.integer_regex()


def _group(regex: str) -> str:
    return f"(?:{regex})"


class Leaves:
    def __init__(self, usage: Usage) -> None:
        self.usage = usage

    def _try(self, fn: Any, keyword: str, where: str, /, **kwargs: Any) -> str | None:
        """Call a lexeme function; on refusal report the keyword and return None."""
        try:
            result: str = fn(**kwargs)
        except UnsupportedSchemaError as exc:
            self.usage.validate(exc.keyword or keyword, exc.pointer or where, exc.detail)
            return None
        return result

    def string(self, s: Str) -> str | None:
        """Regex for the strings `s` allows; None if there are none."""
        pattern_tails: list[str] = []
        enforced: list[str] = []
        for pattern, ptr in s.patterns:
            r = self._try(lex.string_regex, "pattern", ptr, pattern=pattern, pointer=ptr)
            if r is not None:
                pattern_tails.append(r)
                enforced.append(pattern)
        # lengths an enforced pattern already implies need no intersection of their own
        lo, hi = lex.lengths_left(s.min_length, s.max_length, enforced)
        tails: list[str] = []
        if lo or hi is not None:
            r = self._try(
                lex.string_regex,
                "maxLength",
                s.pointer,
                min_length=lo,
                max_length=hi,
                pointer=s.pointer,
            )
            if r is not None:
                tails.append(r)
        for fmt, ptr in s.formats:
            if not lex.format_known(fmt):
                continue  # unknown formats are annotations
            r = self._try(lex.string_regex, "format", ptr, fmt=fmt, pointer=ptr)
            if r is not None:
                tails.append(r)
        tails += pattern_tails
        if any(t == NEVER_REGEX for t in tails):
            return None
        main = tails.pop() if tails else STRING
        if s.excluded:
            tails.append(lex.string_excluding_regex(sorted(s.excluded)))
        return "".join(f"(?={t})" for t in tails) + main if tails else main

    def key(
        self,
        excluded: list[str],
        include: str | None,
        exclude: list[str],
        names: Str | None,
        pointer: str,
    ) -> str | None:
        """Regex for extra member names: not declared, matching `include`, none of `exclude`."""
        base: str | None = None
        if include is not None:
            base = self._try(
                lex.string_excluding_regex,
                "patternProperties",
                pointer,
                excluded=excluded,
                pattern=include,
                pointer=pointer,
            )
        if base is None:
            base = lex.string_excluding_regex(excluded) if excluded else STRING
        heads = []
        for p in exclude:
            r = self._try(
                lex.string_regex, "patternProperties", pointer, pattern=p, pointer=pointer
            )
            if r is not None:
                heads.append(f"(?!{r})")
        if names is not None:
            r = self.string(names)
            if r is None:
                return None
            if r != STRING:
                heads.append(f"(?={r})")
        return "".join(heads) + base

    def number(self, n: Num) -> str | None:
        if n.integer:
            lo = hi = None
            if n.minimum is not None:
                lo = (
                    int(n.minimum) + 1
                    if n.exclusive_minimum and float(n.minimum).is_integer()
                    else n.minimum
                )
                if not isinstance(lo, int):
                    lo = int(-(-lo // 1))
            if n.maximum is not None:
                hi = (
                    int(n.maximum) - 1
                    if n.exclusive_maximum and float(n.maximum).is_integer()
                    else n.maximum
                )
                if not isinstance(hi, int):
                    hi = int(hi // 1)
            r = self._try(
                lex.integer_regex,
                "multipleOf",
                n.pointer,
                minimum=lo,
                maximum=hi,
                multiple_of=n.multiple_of,
            )
            if r is None:
                r = lex.integer_regex(minimum=lo, maximum=hi)
        else:
            bounds = {
                "minimum": n.minimum,
                "maximum": n.maximum,
                "exclusive_minimum": n.exclusive_minimum,
                "exclusive_maximum": n.exclusive_maximum,
            }
            r = None
            if n.multiple_of is not None:
                r = self._try(
                    lex.number_multiple_regex, "multipleOf", n.pointer, step=n.multiple_of, **bounds
                )
            if r is None:
                r = self._try(lex.number_regex, "minimum", n.pointer, **bounds)
            if r is None:
                r = NUMBER
        return None if r == NEVER_REGEX else r


def literal_string(value: str) -> str:
    return lex.string_literal_regex(value)


def literal_number(value: int | float) -> str:
    """The JSON texts of a number constant as json.dumps writes it (2 and 2.0 both for 2)."""
    if isinstance(value, int) or value.is_integer():
        return re.escape(str(int(value))) + r"(?:\.0+)?"
    return re.escape(json.dumps(value))


def is_plain_key(name: str) -> bool:
    """Keys that can be written as a readable Lark string literal."""
    return re.fullmatch(r"[A-Za-z0-9_\-.$@#:+* ]*", name) is not None
