"""A fast reader for one-line Lark definitions, the layout the schema compiler writes.

Lark parses grammar text with its own LALR parser, in pure Python: for a schema of a few
thousand lines that is most of the compile. This reader builds exactly the trees Lark's
`_parse_grammar` builds (after its `PrepareGrammar` pass) for the subset the compiler emits:
`name: ...` / `NAME(.N): ...` with alternatives, groups, `[...]`, `? * +`, `~ n(..m)`,
strings (with `i`), regexps (with flags), ranges and plain names. Anything else (rule
modifiers, aliases, templates, comments, directives, an unterminated literal) returns None
and the line goes to Lark, so errors read as Lark's. `tests/test_engine.py` checks the trees
against Lark's on every dev-schema grammar.
"""

from __future__ import annotations

import re
from typing import Any

from lark import Token, Tree
from lark.grammar import NonTerminal, Terminal

_LOWER = frozenset("abcdefghijklmnopqrstuvwxyz")
_RULE_NAME = re.compile(r"_?[a-z][a-z0-9_]*")
_TERM_NAME = re.compile(r"_?[A-Z][A-Z0-9_]*")

# One token at a time after optional blanks: a name (or number), a string literal with at most
# one `i` flag, a regex literal with its flags (neither may run into a name: Lark would read
# that differently), `..`, or one punctuation mark. Anything else stops the scan.
_TOKEN = re.compile(
    r"""[ \t]*(?:
      (?P<name>[A-Za-z0-9_]+)
    | (?P<str>"(?:[^"\\]|\\.)*"i?)(?![A-Za-z0-9_])
    | (?P<re>/(?!/)(?:[^/\\]|\\.)*/[imslux]*)(?![A-Za-z0-9_])
    | (?P<dots>\.\.)
    | (?P<punct>[():|\[\]*+?~.{])
    )""",
    re.VERBOSE,
)
_BLANK = re.compile(r"[ \t]*")


class _Unsupported(Exception):
    """Outside the subset: let Lark read the line."""


def parse_line(line: str) -> Any | None:
    """The definition statement Lark would build for `line` (a `rule` or `term` tree), or
    None when the line is outside the subset this reader knows."""
    if line[:1] in (" ", "\t"):
        return None
    reader = _Reader(line)
    if not reader.kinds:
        return None
    try:
        return reader.definition()
    except _Unsupported:
        return None


_KIND: dict[str, str] = {}  # name -> "RULE" / "TERMINAL" / "" (neither); names repeat a lot


def _kind(name: str) -> str:
    """RULE or TERMINAL, when `name` is one whole token of that kind."""
    got = _KIND.get(name)
    if got is None:
        got = (
            "RULE"
            if _RULE_NAME.fullmatch(name)
            else "TERMINAL"
            if _TERM_NAME.fullmatch(name)
            else ""
        )
        if len(_KIND) > 50_000:
            _KIND.clear()
        _KIND[name] = got
    if not got:
        raise _Unsupported
    return got


class _Reader:
    """Recursive descent over the line's tokens (kinds, texts, end offsets, with an end
    sentinel), so no step looks at single characters."""

    __slots__ = ("ends", "i", "kinds", "s", "texts")

    def __init__(self, s: str) -> None:
        self.s = s
        self.i = 0
        kinds: list[str] = []
        texts: list[str] = []
        ends: list[int] = []
        pos, n = 0, len(s)
        match = _TOKEN.match
        while True:
            m = match(s, pos)
            if m is None:
                break
            kind = m.lastgroup
            assert kind is not None
            kinds.append(kind)
            texts.append(m.group(kind))
            pos = m.end()
            ends.append(pos)
        if _BLANK.match(s, pos).end() != n:  # type: ignore[union-attr]
            kinds = []  # some text is not a token
        kinds.append("")
        texts.append("")
        ends.append(-1)
        self.kinds, self.texts, self.ends = kinds, texts, ends

    def _number(self) -> str:
        i = self.i
        text = self.texts[i]
        if self.kinds[i] != "name" or not text.isdigit() or not text.isascii():
            raise _Unsupported
        self.i = i + 1
        return text

    # ---- grammar

    def definition(self) -> Any:
        kinds, texts = self.kinds, self.texts
        if kinds[0] != "name":
            raise _Unsupported
        name = texts[0]
        what = _kind(name)
        self.i = 1
        prio: str | None = None
        if texts[1] == "." and kinds[1] == "punct" and self.ends[1] - 1 == self.ends[0]:
            self.i = 2  # `NAME.2:`, the dot right after the name
            prio = self._number()
        if texts[self.i] != ":" or kinds[self.i] != "punct":
            raise _Unsupported
        self.i += 1
        body = self._expansions()
        if kinds[self.i]:
            raise _Unsupported
        if what == "RULE":
            if prio is not None:
                raise _Unsupported
            return Tree(
                "rule",
                [
                    Tree("rule_modifiers", []),
                    Token("RULE", name),
                    Tree("template_params", []),
                    Tree("priority", []),
                    body,
                ],
            )
        head: list[Any] = [Token("TERMINAL", name)]
        if prio is not None:
            head.append(Token("NUMBER", prio))
        return Tree("term", [*head, body])

    def _expansions(self) -> Any:
        alts = [self._expansion()]
        kinds, texts = self.kinds, self.texts
        while texts[self.i] == "|" and kinds[self.i] == "punct":
            self.i += 1
            alts.append(self._expansion())
        return Tree("expansions", alts)

    def _expansion(self) -> Any:
        items: list[Any] = []
        kinds, texts = self.kinds, self.texts
        while True:
            kind = kinds[self.i]
            if not kind or (kind == "punct" and texts[self.i] in "|)]"):
                return Tree("expansion", items)
            items.append(self._expr())

    def _expr(self) -> Any:
        atom = self._atom()
        i = self.i
        if self.kinds[i] != "punct":
            return atom
        c = self.texts[i]
        if c == "*" or c == "+":
            self.i = i + 1
            return Tree("expr", [atom, Token("OP", c)])
        if c == "?":
            end = self.ends[i]
            nxt = self.s[end] if end < len(self.s) else ""
            if nxt in _LOWER or nxt == "_":
                raise _Unsupported  # `?name`: a RULE token in Lark's lexer
            self.i = i + 1
            return Tree("expr", [atom, Token("OP", "?")])
        if c == "~":
            self.i = i + 1
            parts = [atom, Token("TILDE", "~"), Token("NUMBER", self._number())]
            j = self.i
            if self.kinds[j] == "dots" and self.ends[j] - 2 == self.ends[j - 1]:  # `~ 1..3`
                self.i = j + 1
                parts.append(Token("NUMBER", self._number()))
            return Tree("expr", parts)
        return atom

    def _atom(self) -> Any:
        i = self.i
        kind, text = self.kinds[i], self.texts[i]
        self.i = i + 1
        if kind == "name":
            what = _kind(text)
            if self.texts[i + 1] == "{":
                raise _Unsupported  # template usage
            if what == "TERMINAL":
                return Tree("value", [Terminal(text, filter_out=text.startswith("_"))])
            return Tree("value", [NonTerminal(text)])
        if kind == "str":
            if self.kinds[i + 1] == "dots":
                if self.kinds[i + 2] != "str":
                    raise _Unsupported
                self.i = i + 3
                end = self.texts[i + 2]
                return Tree("value", [Tree("range", [Token("STRING", text), Token("STRING", end)])])
            return Tree("value", [Tree("literal", [Token("STRING", text)])])
        if kind == "re":
            return Tree("value", [Tree("literal", [Token("REGEXP", text)])])
        if kind == "punct" and (text == "(" or text == "["):  # a group, or an optional group
            inner = self._expansions()
            j = self.i
            if self.kinds[j] != "punct" or self.texts[j] != (")" if text == "(" else "]"):
                raise _Unsupported
            self.i = j + 1
            return inner if text == "(" else Tree("maybe", [inner])
        raise _Unsupported
