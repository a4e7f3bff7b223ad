"""Lark statement trees compared exactly (token types and symbol kinds too: Lark's own `==`
compares tokens as plain strings)."""

from __future__ import annotations

from typing import Any


def same_tree(a: Any, b: Any) -> bool:
    from lark import Token, Tree
    from lark.grammar import Symbol

    if isinstance(a, Tree):
        return (
            isinstance(b, Tree)
            and a.data == b.data
            and len(a.children) == len(b.children)
            and all(same_tree(x, y) for x, y in zip(a.children, b.children, strict=True))
        )
    if isinstance(a, Token):
        return isinstance(b, Token) and a.type == b.type and str(a) == str(b)
    if isinstance(a, Symbol):
        return (
            type(a) is type(b)
            and a.name == b.name
            and getattr(a, "filter_out", None) == getattr(b, "filter_out", None)
        )
    return bool(a == b)


def lark_statement(line: str) -> Any:
    from lark.load_grammar import _parse_grammar

    try:
        stmts = _parse_grammar(line, "<?>").children
    except Exception:
        return None
    return stmts[0] if len(stmts) == 1 else None
