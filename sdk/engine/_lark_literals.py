"""Lark's reading of grammar literals (`"a"i`, `/x+/`), done here for the common ones: Lark's
own reader evaluates each with `ast.literal_eval`, which must hold the process-wide AST lock
and leaves a reference cycle per call. The grammar compiler and the GBNF writer share it.
"""

from __future__ import annotations

from typing import Any

from sdk._ast_lock import AST_LOCK

__all__ = ["literal_pattern", "unescape_literal"]

_SIMPLE_ESCAPES = {
    "\\": "\\", "'": "'", '"': '"', "a": "\a", "b": "\b", "f": "\f", "n": "\n",
    "r": "\r", "t": "\t", "v": "\v",
}  # fmt: skip
_HEX_DIGITS = {"x": 2, "u": 4, "U": 8}
_HEX = frozenset("0123456789abcdefABCDEF")
_OCTAL = frozenset("01234567")


def unescape_literal(body: str) -> str | None:
    """What Lark's `eval_escaping` makes of a literal's body, without `ast.literal_eval`
    (which takes the lock, and leaves four closures in a reference cycle per call); None
    where the body needs Lark's own reading (line breaks, NUL, `\\N{...}`, a malformed
    escape).

    Lark doubles every backslash that does not start `\\\\ \\U \\u \\x \\n \\f \\t \\r`,
    un-escapes `\\"`, escapes `'`, and evaluates the result as a Python string literal; this
    applies the same steps and Python's escape rules."""
    if "\n" in body or "\r" in body or "\0" in body:
        return None  # Python's reading of source text changes or refuses these
    if "\\" not in body:
        return body
    w: list[str] = []
    it = iter(body)
    for ch in it:
        w.append(ch)
        if ch == "\\":
            nxt = next(it, None)
            if nxt is None:
                return None
            if nxt == "\\":
                w.append("\\\\")
            elif nxt not in "Uuxnftr":
                w.append("\\")
            w.append(nxt)
    text = "".join(w).replace('\\"', '"').replace("'", "\\'")
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        if i + 1 >= n:
            return None  # it would escape the closing quote
        esc = text[i + 1]
        if esc in _SIMPLE_ESCAPES:
            out.append(_SIMPLE_ESCAPES[esc])
            i += 2
        elif esc in _HEX_DIGITS:
            digits = text[i + 2 : i + 2 + _HEX_DIGITS[esc]]
            if len(digits) != _HEX_DIGITS[esc] or not set(digits) <= _HEX:
                return None
            code = int(digits, 16)
            if code > 0x10FFFF:
                return None
            out.append(chr(code))
            i += 2 + len(digits)
        elif esc in _OCTAL:
            j = i + 1
            while j < min(n, i + 4) and text[j] in _OCTAL:
                j += 1
            code = int(text[i + 1 : j], 8)
            if code > 0o377:
                return None  # Python warns on these: leave them to Lark
            out.append(chr(code))
            i = j
        elif esc == "N":
            return None
        else:  # not an escape: both characters stay
            out.append("\\" + esc)
            i += 2
    return "".join(out)


def literal_pattern(tok: Any) -> Any:
    """Lark's reading of a grammar literal (`"a"i`, `/x+/`) as a pattern. Common literals are
    read here (`unescape_literal`); the rest go to Lark under the lock, since it evaluates the
    text with `ast.literal_eval`."""
    from lark.lexer import PatternRE, PatternStr
    from lark.load_grammar import _literal_to_pattern

    v = tok.value
    flag_start = max(v.rfind("/"), v.rfind('"')) + 1
    flags = v[flag_start:]
    body = v[1 : flag_start - 1]
    if (
        flag_start > 1
        and v[0] == v[flag_start - 1]
        and (v[0], tok.type) in (('"', "STRING"), ("/", "REGEXP"))
        and all(f in "imslux" for f in flags)
    ):
        s = unescape_literal(body)
        if s:
            if tok.type == "STRING":
                return PatternStr(s.replace("\\\\", "\\"), flags, raw=v)
            return PatternRE(s, flags, raw=v)
    with AST_LOCK:
        return _literal_to_pattern(tok)
