"""Lark expressions as the emitter builds them: `(text, precedence, tree)` triples (`E`,
`sdk.grammar._trees`) whose text is what a rule's line says and whose tree is what Lark would
read from it, plus the markers shared by the emitter's modules."""

from __future__ import annotations

import re

from ._trees import ALT, ATOM, SEQ, E

PENDING: E = ("", SEQ, None)  # a rule named, its body not written yet
DEAD = object()  # no member list can follow: the object is impossible from here


def sym(text: str) -> E:
    """An atom: a rule or terminal name, or a string literal's Lark text."""
    return (text, ATOM, "sym")


def seq(parts: list[E | None]) -> E:
    items: list[E] = []
    for p in parts:
        if p is None or not p[0]:
            continue
        if p[1] == SEQ and isinstance(p[2], tuple) and p[2][0] == "seq":
            # a sequence inside a sequence is its items (as Lark reads the text): a tuple's
            # items nested one in the next overflowed the compilers' recursion at ~500
            items.extend(p[2][1])
        else:
            items.append(p)
    if len(items) == 1:
        return items[0]
    text = " ".join(t if p >= SEQ else f"({t})" for t, p, _ in items)
    return (text, SEQ, ("seq", items))


def alt(parts: list[E]) -> E | None:
    seen: dict[str, E] = {}
    for e in parts:
        seen.setdefault(e[0], e)
    if not seen:
        return None
    if len(seen) == 1:
        return next(iter(seen.values()))
    return (" | ".join(seen), ALT, ("alt", list(seen.values())))


def atom(e: E) -> str:
    return e[0] if e[1] == ATOM else f"({e[0]})"


def opt(e: E) -> E:
    return (atom(e) + "?", ATOM, ("op", e, "?"))


def rep(e: E, lo: int, hi: int | None) -> E | None:
    """`e` repeated lo..hi times (hi None: unbounded); None for zero repetitions."""
    a = atom(e)
    if hi == 0:
        return None
    if hi is None:
        if lo == 0:
            return (a + "*", ATOM, ("op", e, "*"))
        if lo == 1:
            return (a + "+", ATOM, ("op", e, "+"))
        return (f"{a} ~ {lo} {a}*", SEQ, ("more", e, lo))
    if (lo, hi) == (0, 1):
        return (a + "?", ATOM, ("op", e, "?"))
    if lo == hi:
        if lo == 1:
            return (a, ATOM, ("same", e))
        return (f"{a} ~ {lo}", SEQ, ("count", e, lo, None))
    return (f"{a} ~ {lo}..{hi}", SEQ, ("count", e, lo, hi))


def lark_regex(regex: str) -> str:
    """A Lark regex literal: `/` escaped, raw line breaks written as escapes (escapes kept)."""
    if "/" in regex or "\n" in regex or "\r" in regex:
        regex = _LARK_REGEX_CHARS.sub(_lark_regex_char, regex)
    return "/" + regex + "/"


_LARK_REGEX_CHARS = re.compile(r"\\.|[/\n\r]", re.DOTALL)
_LARK_REGEX_ESCAPES = {"/": "\\/", "\n": "\\n", "\r": "\\r"}


def _lark_regex_char(m: re.Match[str]) -> str:
    c = m.group()
    return _LARK_REGEX_ESCAPES.get(c, c)


def extras_only(extra: E, ex_lo: int, ex_hi: int | None) -> E:
    """An object of extra members only: the first without a comma, then the rest."""
    more = rep(seq([sym("COMMA"), extra]), max(ex_lo - 1, 0), None if ex_hi is None else ex_hi - 1)
    return seq([extra, more])
