"""Lark definition trees for the emitter's expressions, built alongside their text.

The engine compiles Lark trees. Reading the emitted text back into them (a line reader in
`sdk.engine._lark_lines`) was a seventh of a median schema's compile, so the emitter builds
each expression's tree with its text: exactly the tree Lark's grammar reader gives for that
text (after its `PrepareGrammar` pass), which `tests/test_trees.py` checks against Lark on real
schemas. An expression whose text was written by hand has no tree (None): its line is read.

A tree form is the alternatives, each a tuple of items (Lark trees).
"""

from __future__ import annotations

import re
from typing import Any, cast

from lark import Token, Tree
from lark.grammar import NonTerminal, Terminal

Alts = tuple[tuple[Any, ...], ...]
# An expression: its text, its precedence, and how it was made (its form): "sym" for a name or
# string literal, ("seq" | "alt", parts), ("op", e, "?" | "*" | "+"), ("count", e, lo, hi),
# ("more", e, lo) for `e ~ lo e*`, ("same", e) for `e` as an atom; None for text written by
# hand. Forms are cheap tuples: most expressions never reach a rule, so trees are only built
# for those that do, once the rules are known.
E = tuple[str, int, Any]
ALT, SEQ, ATOM = 0, 1, 2

_RULE = re.compile(r"_?[a-z][a-z0-9_]*")
_TERMINAL = re.compile(r"_?[A-Z][A-Z0-9_]*")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
EMPTY = ("seq", ())


class Trees:
    """Builds the tree form of expressions, each once (by identity: an expression is often
    part of several rules)."""

    def __init__(self) -> None:
        self._alts: dict[int, Alts | None] = {}
        self._leaves: dict[str, Alts | None] = {}

    def rule(self, name: str, e: E) -> Any | None:
        """The statement `name: ...` (None when the body has no tree)."""
        alts = self.alts(e)
        if alts is None:
            return None
        return Tree(
            "rule",
            [_NO_MODIFIERS, Token("RULE", name), _NO_PARAMS, _NO_PRIORITY, _expansions(alts)],
        )

    def alts(self, e: E) -> Alts | None:
        form = e[2]
        if form == "sym":
            return self._leaf(e[0])
        key = id(e)
        got = self._alts.get(key, _MISSING)
        if got is _MISSING:
            got = self._alts[key] = self._make(form)
        return cast("Alts | None", got)

    def _leaf(self, text: str) -> Alts | None:
        got = self._leaves.get(text, _MISSING)
        if got is _MISSING:
            got = self._leaves[text] = _leaf(text)
        return cast("Alts | None", got)

    def _make(self, form: Any) -> Alts | None:
        if form is None:
            return None
        kind = form[0]
        if kind == "seq":
            one: list[Any] = []
            for p in form[1]:
                a = self.alts(p)
                if a is None:
                    return None
                if p[1] >= SEQ:
                    one.extend(a[0])
                else:
                    one.append(_expansions(a))
            return (tuple(one),)
        if kind == "alt":
            alts: list[tuple[Any, ...]] = []
            for p in form[1]:
                a = self.alts(p)
                if a is None:
                    return None
                alts.extend(a)
            return tuple(alts)
        e = form[1]
        a = self.alts(e)
        if a is None:
            return None
        g = a[0][0] if e[1] == ATOM else _expansions(a)
        if kind == "op":
            return ((Tree("expr", [g, _OPS[form[2]]]),),)
        if kind == "count":
            return ((_counted(g, form[2], form[3]),),)
        if kind == "more":
            return ((_counted(g, form[2], None), Tree("expr", [g, _OPS["*"]])),)
        assert kind == "same"
        return ((g,),)


def _leaf(text: str) -> Alts | None:
    """A rule name, terminal name or string literal; None for any other text."""
    if _RULE.fullmatch(text):
        return ((Tree("value", [NonTerminal(text)]),),)
    if _TERMINAL.fullmatch(text):
        return ((Tree("value", [Terminal(text, filter_out=text.startswith("_"))]),),)
    if _STRING.fullmatch(text):
        return ((Tree("value", [Tree("literal", [Token("STRING", text)])]),),)
    if not text:
        return ((),)
    return None


def _expansions(alts: Alts) -> Any:
    return Tree("expansions", [Tree("expansion", list(a)) for a in alts])


def _counted(item: Any, lo: int, hi: int | None) -> Any:
    """`item ~ lo` or `item ~ lo..hi`."""
    parts = [item, _TILDE, Token("NUMBER", str(lo))]
    if hi is not None:
        parts.append(Token("NUMBER", str(hi)))
    return Tree("expr", parts)


# Tokens are immutable strings (with a type): the same ones serve every tree. (Lark builds a
# token in Python code, a third of a small tree's cost.)
_OPS = {o: Token("OP", o) for o in "?*+"}
_TILDE = Token("TILDE", "~")
# A plain rule's empty heads, shared too: nothing writes to a definition's tree.
_NO_MODIFIERS: Any = Tree("rule_modifiers", [])
_NO_PARAMS: Any = Tree("template_params", [])
_NO_PRIORITY: Any = Tree("priority", [])
_MISSING = object()


def terminal(name: str, literal: str) -> Any | None:
    """The statement `NAME: "..."` (as `json.dumps` writes it) or `NAME: /.../` (as
    `lark_regex` writes it: every `/` and line break inside escaped)."""
    if literal[:1] == '"':
        token = Token("STRING", literal)
    elif len(literal) > 2 and literal[-1] == "/":
        # The reader takes a backslash and any character but a line break as a pair.
        body = literal[1:-1]
        if (len(body) - len(body.rstrip("\\"))) % 2 or "\\\n" in body or "\\\r" in body:
            return None
        token = Token("REGEXP", literal)
    else:
        return None
    item: Any = Tree("value", [Tree("literal", [token])])
    return Tree("term", [Token("TERMINAL", name), _expansions(((item,),))])
