"""Our Lark text in llguidance's dialect (vLLM's `guidance` structured-output backend).

llguidance reads Lark but not the lookaheads of our regex dialect (`(?!...)`, `(?=...)`:
free text that never holds the call opener, strings that never hold the closer, keys other
than the declared ones). It has what they mean instead: terminal expressions joined with
`&` (both) and `~` (not). In our dialect a lookahead intersects the rest of its group with
`A.*` or with its complement (docs/internals/grammar-dialect.md), so `X(?!A)R` is exactly
`X (R & ~(A .*))` there: every terminal that holds a lookahead is rewritten so, and the
others are left as written. The language is the same; `python -m sdk.bench servers` checks
it against llguidance itself.
"""

from __future__ import annotations

import ast
import json
import logging
import os
import re
from collections.abc import Callable, Iterator

from sdk.errors import GrammarError

from . import _regex as rx

__all__ = ["lark_for_guidance"]

_log = logging.getLogger("sdk.engine")

_TERMINAL = re.compile(r"([A-Z_][A-Z0-9_]*)(\.-?\d+)?\s*:\s*(.*)")
_REGEX = re.compile(r"/((?:\\.|[^/\\\n])+)/([imslux]*)")
_ANY = rx.Repeat(rx.Chars(((0, 0x10FFFF),)), 0, None)
_SURROGATES = (0xD800, 0xDFFF)


def lark_for_guidance(text: str) -> str:
    """`text` with each regex that holds a lookahead written with `&` and `~`, and free text
    before a call written as a lazy lexeme that ends with the call's opener (`_lazy_text`)."""
    return _lazy_text(_rewrite_regexes(text))


def _rewrite_regexes(text: str) -> str:
    """Every regex reprinted in Rust's syntax (Python's `re.escape` writes `\\<`, a word
    boundary there), with `&` and `~` for lookaheads; an inline regex with a lookahead
    becomes a terminal of its own."""
    out: list[str] = []
    extra: list[str] = []
    for line in text.split("\n"):
        m = _TERMINAL.fullmatch(line) if line[:1].isupper() or line[:1] == "_" else None
        whole = _REGEX.fullmatch(m.group(3).strip()) if m else None
        if m and whole and not whole.group(2):
            out.append(f"{m.group(1)}{m.group(2) or ''}: {_expr(rx.parse(whole.group(1)))}")
        else:
            out.append(_each_regex(line, lambda body: _inline(body, extra)))
    return "\n".join(out + extra) + ("\n" if extra and not text.endswith("\n") else "")


_PIECE = re.compile(r'"(?:\\.|[^"\\])*"i?|//[^\n]*|/((?:\\.|[^/\\\n])+)/([imslux]*)|[^"/]+|.', re.S)


def _each_regex(line: str, rewrite: Callable[[str], str]) -> str:
    """`line` with each regex literal `/body/` (no flags) replaced by `rewrite(body)`;
    string literals and comments are left alone."""
    out: list[str] = []
    for m in _PIECE.finditer(line):
        body = m.group(1)
        out.append(rewrite(body) if body is not None and not m.group(2) else m.group(0))
    return "".join(out)


def _inline(body: str, extra: list[str]) -> str:
    node = rx.parse(body)
    if not _has_look(node):
        return _expr(node)
    name = f"LOOKAHEAD_{len(extra)}"
    extra.append(f"{name}: {_expr(node)}")
    return name


# ------------------------------------------------------------------ free text before a call

#: The turn grammars' free-text shapes (`sdk.decoding.turn_grammar`), by the call unit `U`
#: (`call`, or `envelope` for formats whose calls share one): llguidance's lexer is greedy, so
#: text that may be followed by a call's opener would read on into the opener and fail. Written
#: as one lazy lexeme, text and opener end at the opener's first occurrence, as ours do.
_SHAPES = (
    ("HEAD? ({u} TEXT?)*", "(HEAD? | head_{u} {u}_rest (text_{u} {u}_rest)* TEXT?)"),
    ("HEAD | HEAD? {u}", "(HEAD | head_{u} {u}_rest)"),
    ("TEXT? {u}", "text_{u} {u}_rest"),
)
_STRING = re.compile(r'"(?:\\.|[^"\\])*"')


def _lazy_text(text: str) -> str:
    lines = text.split("\n")
    at = {line.split(":", 1)[0]: k for k, line in enumerate(lines) if ":" in line}
    if "start" not in at:
        return text
    start = lines[at["start"]]
    if "REASONING?" in start:
        _log.warning(
            "llguidance grammar: a reasoning span that may open without its marker reads "
            "on greedily there, into what follows it: a reply without the span may be refused"
        )
    for unit in ("call", "envelope"):
        shape = next((s for s in _SHAPES if s[0].format(u=unit) in start), None)
        if shape is None or unit not in at:
            continue
        defs = {line.split(":", 1)[0]: line.split(":", 1)[1] for line in lines if ":" in line}
        split = _opener_split(defs[unit], defs)
        if split is None:
            _log.warning(
                "llguidance grammar: the %s rule opens with no literal; free text before it "
                "is left greedy (a text then a call may be refused)",
                unit,
            )
            return text
        opener, rest = split
        lines[at["start"]] = start.replace(shape[0].format(u=unit), shape[1].format(u=unit), 1)
        name = unit.upper()
        lines += [
            f"{unit}_rest: {rest}",
            f"head_{unit}[lazy]: HEAD_{name}",
            f"HEAD_{name}: HEAD? {json.dumps(opener)}",
            f"text_{unit}[lazy]: TEXT_{name}",
            f"TEXT_{name}: TEXT? {json.dumps(opener)}",
        ]
        return "\n".join(lines)
    return text


def _opener_split(body: str, defs: dict[str, str]) -> tuple[str, str] | None:
    """The literal every alternative of a rule opens with (the call's opener and what the
    alternatives share after it), and the rule without it; None where one opens otherwise.
    A body that is one rule's name is that rule's body (`call: cb_start`), and a terminal
    defined as one string (`LBRACE: "{"`) counts as that string."""
    body = body.strip()
    for _ in range(4):
        if not re.fullmatch(r"[a-z_][a-z0-9_]*", body) or body not in defs:
            break
        body = defs[body].strip()
    firsts: list[str] = []
    tails: list[str] = []
    for alt in _top_level_alternatives(body):
        inner = alt.strip()
        if inner.startswith("(") and inner.endswith(")") and _closes_at_end(inner):
            inner = inner[1:-1].strip()
        first, tail = _leading_text(inner, defs)
        firsts.append(first)
        tails.append(tail)
    opener = os.path.commonprefix(firsts)
    if not opener:
        return None
    rest = []
    for first, tail in zip(firsts, tails, strict=True):
        lead = first[len(opener) :]
        rest.append("(" + " ".join(p for p in (json.dumps(lead) if lead else "", tail) if p) + ")")
    return opener, " | ".join(rest)


_ITEM = re.compile(r'\s*(?:("(?:\\.|[^"\\])*")|([A-Z_][A-Z0-9_]*)(?![A-Za-z0-9_]))')


def _leading_text(expansion: str, defs: dict[str, str]) -> tuple[str, str]:
    """The text the items at the head of `expansion` spell when each is a string or a
    terminal defined as one (and what follows them)."""
    text, at = "", 0
    while True:
        m = _ITEM.match(expansion, at)
        if m is None:
            break
        literal = m.group(1) or defs.get(m.group(2) or "", "").strip()
        if not _STRING.fullmatch(literal) or expansion[m.end() : m.end() + 1] in "?*+~":
            break
        text += ast.literal_eval(literal)
        at = m.end()
    return text, expansion[at:].strip()


def _scan(text: str) -> Iterator[tuple[int, str, int]]:
    """(position, character, depth of parentheses after it) of each character outside
    string literals and regexes."""
    depth, k = 0, 0
    while k < len(text):
        c = text[k]
        m = _STRING.match(text, k) if c == '"' else _REGEX.match(text, k) if c == "/" else None
        if m is not None:
            k = m.end()
            continue
        depth += (c == "(") - (c == ")")
        yield k, c, depth
        k += 1


def _top_level_alternatives(body: str) -> list[str]:
    cuts = [k for k, c, depth in _scan(body) if c == "|" and depth == 0]
    return [body[i + 1 : j] for i, j in zip([-1, *cuts], [*cuts, len(body)], strict=True)]


def _closes_at_end(text: str) -> bool:
    """Whether the parenthesis opening `text` is the one closing it."""
    return all(depth >= 1 for k, _, depth in _scan(text) if k < len(text) - 1)


def _has_look(node: rx.Node) -> bool:
    if isinstance(node, rx.Look):
        return True
    if isinstance(node, rx.Seq | rx.Alt):
        return any(_has_look(i) for i in node.items)
    if isinstance(node, rx.Repeat):
        return _has_look(node.item)
    return False


def _expr(node: rx.Node) -> str:
    """A Lark terminal expression for `node` (lookaheads as `&` / `~`)."""
    if not _has_look(node):
        return "/" + _regex(node).replace("/", "\\/") + "/"
    if isinstance(node, rx.Seq):
        items = node.items
        parts: list[str] = []
        plain: list[rx.Node] = []  # a run of items without lookaheads: one regex
        for k, item in enumerate(items):
            if not _has_look(item):
                plain.append(item)
                continue
            if plain:
                parts.append(_expr(rx.Seq(tuple(plain))))
                plain = []
            if isinstance(item, rx.Look):
                rest = _expr(rx.Seq(items[k + 1 :]))
                look = _expr(rx.Seq((item.body, _ANY)))
                parts.append(f"(({rest}) & {'~' if item.negative else ''}({look}))")
                return " ".join(parts)
            parts.append(_expr(item))
        if plain:
            parts.append(_expr(rx.Seq(tuple(plain))))
        return " ".join(parts)
    if isinstance(node, rx.Alt):
        return "(" + " | ".join(_expr(i) for i in node.items) + ")"
    if isinstance(node, rx.Repeat):
        inner = f"({_expr(node.item)})"
        lo, hi = node.min, node.max
        if (lo, hi) == (0, None):
            return inner + "*"
        if (lo, hi) == (1, None):
            return inner + "+"
        if (lo, hi) == (0, 1):
            return inner + "?"
        if hi is None:
            return f"{inner} ~ {lo} {inner}*"
        return f"{inner} ~ {lo}..{hi}" if lo != hi else f"{inner} ~ {lo}"
    if isinstance(node, rx.Look):  # alone: the rest of its group is empty
        return _expr(rx.Seq((node,)))
    raise GrammarError(f"regex construct {node!r} has no llguidance form")


# ------------------------------------------------------------------ regex text (Rust syntax)


def _regex(node: rx.Node) -> str:
    if isinstance(node, rx.Chars):
        return _chars(node.ranges)
    if isinstance(node, rx.Seq):
        if not node.items:
            return "(?:)"
        return "".join(
            f"(?:{_regex(i)})" if isinstance(i, rx.Alt) else _regex(i) for i in node.items
        )
    if isinstance(node, rx.Alt):
        return "(?:" + "|".join(_regex(i) for i in node.items) + ")"
    if isinstance(node, rx.Repeat):
        item = f"(?:{_regex(node.item)})"
        lo, hi = node.min, node.max
        if hi is None:
            return item + ("*" if lo == 0 else "+" if lo == 1 else f"{{{lo},}}")
        return item + ("?" if (lo, hi) == (0, 1) else f"{{{lo}}}" if lo == hi else f"{{{lo},{hi}}}")
    raise GrammarError(f"regex construct {node!r} has no llguidance form")


def _chars(ranges: rx.Ranges) -> str:
    kept: list[tuple[int, int]] = []
    for lo, hi in ranges:  # a class of Rust's regex holds scalar values only
        if lo < _SURROGATES[0]:
            kept.append((lo, min(hi, _SURROGATES[0] - 1)))
        if hi > _SURROGATES[1]:
            kept.append((max(lo, _SURROGATES[1] + 1), hi))
    if not kept:
        return "[^\\x{0}-\\x{10FFFF}]"
    if len(kept) == 1 and kept[0][0] == kept[0][1]:
        return _cp(kept[0][0])
    return "[" + "".join(_cp(lo) if lo == hi else f"{_cp(lo)}-{_cp(hi)}" for lo, hi in kept) + "]"


def _cp(cp: int) -> str:
    ch = chr(cp)
    if ch.isascii() and ch.isalnum():
        return ch
    return f"\\x{{{cp:X}}}"
