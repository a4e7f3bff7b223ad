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

from typing import Any

from lark import Token, Tree
from lark.grammar import NonTerminal, Terminal

_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_LOWER = frozenset("abcdefghijklmnopqrstuvwxyz")
_UPPER = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
_RULE_REST = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_")
_TERM_REST = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_RE_FLAGS = frozenset("imslux")
_DIGITS = frozenset("0123456789")
_STRING_FLAGS = frozenset("i")


class _Unsupported(Exception):
    """Outside the subset: let Lark read the line."""


def parse_line(line: str) -> Any | None:
    """The definition statement Lark would build for `line` (a `rule` or `term` tree), or
    None when the line is outside the subset this reader knows."""
    try:
        return _Reader(line).definition()
    except _Unsupported:
        return None


class _Reader:
    __slots__ = ("s", "i", "n")

    def __init__(self, s: str) -> None:
        self.s = s
        self.i = 0
        self.n = len(s)

    # ---- lexing helpers

    def _ws(self) -> None:
        s, i, n = self.s, self.i, self.n
        while i < n and s[i] in " \t":
            i += 1
        self.i = i

    def _peek(self) -> str:
        self._ws()
        return self.s[self.i] if self.i < self.n else ""

    def _name(self) -> str:
        s, i, n = self.s, self.i, self.n
        j = i
        while j < n and s[j] in _NAME_CHARS:
            j += 1
        self.i = j
        return s[i:j]

    def _kind(self, name: str) -> str:
        """RULE or TERMINAL, when `name` is one whole token of that kind."""
        body = name[1:] if name.startswith("_") else name
        if body and body[0] in _LOWER and all(c in _RULE_REST for c in body):
            return "RULE"
        if body and body[0] in _UPPER and all(c in _TERM_REST for c in body):
            return "TERMINAL"
        raise _Unsupported

    def _number(self) -> str:
        self._ws()
        s, i, n = self.s, self.i, self.n
        j = i
        if j < n and s[j] in "+-":
            j += 1
        k = j
        while k < n and s[k] in _DIGITS:
            k += 1
        if k == j:
            raise _Unsupported
        self.i = k
        return s[i:k]

    def _quoted(self, quote: str, flags: frozenset[str]) -> str:
        """A STRING or REGEXP token's text: up to the first unescaped `quote`, plus flags."""
        s, n = self.s, self.n
        start = self.i
        i = start + 1
        if quote == "/" and i < n and s[i] == "/":
            raise _Unsupported  # `//` is a comment
        while True:
            if i >= n or s[i] == "\n":
                raise _Unsupported
            c = s[i]
            if c == "\\" and i + 1 < n and s[i + 1] in (quote, "\\"):
                i += 2
            elif c == quote:
                i += 1
                break
            else:
                i += 1
        if quote == '"':
            if i < n and s[i] in flags:  # `"..."i`: one flag at most
                i += 1
        else:
            while i < n and s[i] in flags:
                i += 1
        if i < n and s[i] in _NAME_CHARS:
            raise _Unsupported  # flags run into a name: leave the tokenising to Lark
        self.i = i
        return s[start:i]

    # ---- grammar

    def definition(self) -> Any:
        name = self._name()
        kind = self._kind(name)
        prio: str | None = None
        if self.s.startswith(".", self.i) and not self.s.startswith("..", self.i):
            self.i += 1
            prio = self._number()
        if self._peek() != ":":
            raise _Unsupported
        self.i += 1
        body = self._expansions()
        if self._peek() != "":
            raise _Unsupported
        if kind == "RULE":
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
        while self._peek() == "|":
            self.i += 1
            alts.append(self._expansion())
        return Tree("expansions", alts)

    def _expansion(self) -> Any:
        items: list[Any] = []
        while True:
            c = self._peek()
            if c in ("|", ")", "]", ""):
                return Tree("expansion", items)
            items.append(self._expr())

    def _expr(self) -> Any:
        atom = self._atom()
        c = self._peek()
        if c in ("*", "+"):
            self.i += 1
            return Tree("expr", [atom, Token("OP", c)])
        if c == "?":
            nxt = self.s[self.i + 1] if self.i + 1 < self.n else ""
            if nxt in _LOWER or nxt == "_":
                raise _Unsupported  # `?name`: a RULE token in Lark's lexer
            self.i += 1
            return Tree("expr", [atom, Token("OP", "?")])
        if c == "~":
            self.i += 1
            parts = [atom, Token("TILDE", "~"), Token("NUMBER", self._number())]
            if self.s.startswith("..", self.i):
                self.i += 2
                parts.append(Token("NUMBER", self._number()))
            return Tree("expr", parts)
        return atom

    def _atom(self) -> Any:
        c = self._peek()
        if c in ("(", "["):  # a group, or an optional group
            self.i += 1
            inner = self._expansions()
            if self._peek() != (")" if c == "(" else "]"):
                raise _Unsupported
            self.i += 1
            return inner if c == "(" else Tree("maybe", [inner])
        if c == '"':
            text = self._quoted('"', _STRING_FLAGS)
            self._ws()
            if self.s.startswith("..", self.i):
                self.i += 2
                if self._peek() != '"':
                    raise _Unsupported
                end = self._quoted('"', _STRING_FLAGS)
                return Tree("value", [Tree("range", [Token("STRING", text), Token("STRING", end)])])
            return Tree("value", [Tree("literal", [Token("STRING", text)])])
        if c == "/":
            return Tree("value", [Tree("literal", [Token("REGEXP", self._quoted("/", _RE_FLAGS))])])
        if c in _NAME_CHARS:
            name = self._name()
            kind = self._kind(name)
            if self._peek() == "{":
                raise _Unsupported  # template usage
            if kind == "TERMINAL":
                return Tree("value", [Terminal(name, filter_out=name.startswith("_"))])
            return Tree("value", [NonTerminal(name)])
        raise _Unsupported
