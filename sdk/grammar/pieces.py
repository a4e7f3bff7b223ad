"""Schema pieces: a schema compiled once under a namespace of its own, finished per turn.

A turn grammar joins the argument grammars of the offered tools and the typed output's.
Compiling each schema again for every new turn, then renaming its text and reading it back,
was half the cost of a 20-tool turn grammar. The rules a schema compiles to depend on neither
the separators (only the punctuation terminals do) nor the reserved texts (only the string
terminals do, and a key that holds one), so a piece keeps its rules as statement trees under
its namespace and the raw form of its terminals, and `definitions` writes the few
style-dependent lines for a turn. Every name of a piece starts with its namespace, which is
derived from what was compiled: pieces never collide, in any turn, and the text is the same in
every process.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from lark import Token, Tree
from lark.grammar import NonTerminal, Terminal

from . import _trees
from ._emit import PUNCT, lark_regex, punct_literal, subtracted
from ._leaves import is_plain_key, literal_string
from .compiler import _SEPARATORS, SchemaGrammar, check_separators, compile_parts

__all__ = [
    "Definitions",
    "SchemaPiece",
    "compile_piece",
    "piece_key",
    "prefix_lark_names",
    "punct_definitions",
    "namespace",
    "string_constant",
]

Surface = Literal["json", "python", "xml", "gemma"]
Whitespace = Literal["compact", "spaced", "flexible"]
#: Surfaces whose rules hold reserved texts (raw string parameters ban them): their pieces
#: are compiled for the reserved texts of the turn, not finished for any.
_RESERVED_IN_RULES = ("xml", "gemma")


@dataclass(frozen=True)
class Definitions:
    """Grammar lines and the statement tree of each definition by name (for
    `CompiledGrammar.from_lark(text, statements=)`)."""

    lines: tuple[str, ...]
    statements: Mapping[str, Any]


@dataclass(frozen=True, eq=False)
class SchemaPiece:
    """One schema's grammar, every name under `namespace`; `start` is its entry rule.

    `reserved`: the reserved texts it was compiled with; () means it can be finished for
    any (`definitions`)."""

    namespace: str
    surface: str
    reserved: tuple[str, ...]
    rules: Definitions
    #: (name, raw regex, the constant strings it spells or None; "fixed": taken as it is)
    terminals: tuple[tuple[str, str, tuple[str, ...] | None | Literal["fixed"]], ...]
    #: The punctuation terminals its rules use (`LBRACE`, `COMMA`, ...): not namespaced, as
    #: every piece of one grammar shares the layout (`punct_definitions`).
    punct: frozenset[str]
    plain_keys: frozenset[str]
    grammar: SchemaGrammar = field(repr=False)

    @property
    def start(self) -> str:
        return f"{self.namespace}_start"

    def fits(self, reserved: Sequence[str]) -> bool:
        """Whether `definitions(reserved=...)` gives this schema's exact grammar: a piece
        compiled without reserved texts fits any set that no key written in its rules holds."""
        if self.reserved:
            return tuple(reserved) == self.reserved
        return not any(t in k for k in self.plain_keys for t in reserved)

    def definitions(self, reserved: Sequence[str] = ()) -> Definitions:
        """The piece's own lines for a set of reserved texts (see `fits`); the punctuation
        it uses comes from `punct_definitions`."""
        if not self.fits(reserved):
            raise ValueError("the piece was compiled for other reserved texts")
        lines = list(self.rules.lines)
        statements = dict(self.rules.statements)
        python = self.surface == "python"
        for name, regex, literals in self.terminals:
            if literals != "fixed":
                regex = subtracted(regex, literals, tuple(reserved), python)
            _define(name, lark_regex(regex), lines, statements)
        return Definitions(tuple(lines), statements)


def punct_definitions(
    names: Iterable[str],
    whitespace: Whitespace = "compact",
    separators: tuple[str, str] | None = None,
) -> Definitions:
    """The punctuation terminals `names` (`LBRACE`, `COMMA`, ...) in one layout, as
    `compile_schema(whitespace=, separators=)` writes them."""
    item, key = check_separators(separators or _SEPARATORS[whitespace])
    fixed = {",": item, ":": key}
    lines: list[str] = []
    statements: dict[str, Any] = {}
    for name in PUNCT:
        if name in names:
            _define(
                name, punct_literal(PUNCT[name], whitespace == "flexible", fixed), lines, statements
            )
    return Definitions(tuple(lines), statements)


def string_constant(text: str, reserved: Sequence[str], name: str) -> tuple[str, Definitions]:
    """One JSON string constant as the schema compiler writes a key: a readable literal, or
    the terminal `name` where it needs escapes or holds a reserved text (whose string is then
    subtracted). Returns the symbol to write and the definitions it needs."""
    lines: list[str] = []
    statements: dict[str, Any] = {}
    if is_plain_key(text) and not any(t in text for t in reserved):
        return json.dumps(json.dumps(text)), Definitions((), {})
    regex = subtracted(literal_string(text), [text], reserved, False)
    _define(name, lark_regex(regex), lines, statements)
    return name, Definitions(tuple(lines), statements)


def _define(name: str, literal: str, lines: list[str], statements: dict[str, Any]) -> None:
    lines.append(f"{name}: {literal}")
    stmt = _trees.terminal(name, literal)
    if stmt is not None:
        statements[name] = stmt


def piece_key(schema: Any, surface: str, reserved: Sequence[str]) -> str:
    """What a piece is compiled from, as text (member order kept: it is the grammar's)."""
    kept = tuple(reserved) if surface in _RESERVED_IN_RULES else ()
    return json.dumps([schema, surface, kept], default=repr)


def compile_piece(
    schema: Any, *, surface: Surface = "json", reserved: Sequence[str] = (), fit: bool = False
) -> SchemaPiece:
    """Compile `schema` (objects closed, as tool arguments are) into a piece.

    `reserved` is only compiled in where the surface's rules need it, or with `fit=True` (a
    key holds a reserved text: see `SchemaPiece.fits`). Raises what `compile_schema` raises."""
    kept = tuple(reserved) if (fit or surface in _RESERVED_IN_RULES) else ()
    parts = compile_parts(schema, close_objects=True, reserved=kept, surface=surface)
    sg = parts.grammar
    # Named for everything its grammar depends on: equal names, equal definitions.
    key = json.dumps([schema, surface, list(kept), fit], default=repr)
    ns = namespace(schema, key)
    rule_lines: list[str] = []
    statements: dict[str, Any] = {}
    terminals: list[tuple[str, str, tuple[str, ...] | None | Literal["fixed"]]] = []
    punct: set[str] = set()
    for line in sg.lark.splitlines():
        name, _, body = line.partition(":")
        if not _NAME.fullmatch(name):
            raise ValueError(f"a piece holds a line it cannot namespace: {line[:60]!r}")
        new = _renamed_name(name, ns)
        if name in PUNCT:
            punct.add(name)
        elif name in parts.raw_terminals:
            terminals.append((new, *parts.raw_terminals[name]))
        elif name in parts.terminals:  # written as it is (`NEVER`)
            terminals.append((new, parts.terminals[name], "fixed"))
        else:
            rule_lines.append(new + ":" + prefix_lark_names(body, ns + "_", keep=PUNCT))
            stmt = sg.statements.get(name)
            if stmt is not None:
                statements[new] = _renamed(stmt, ns)
    return SchemaPiece(
        namespace=ns,
        surface=surface,
        reserved=kept,
        rules=Definitions(tuple(rule_lines), statements),
        terminals=tuple(terminals),
        punct=frozenset(punct),
        plain_keys=parts.plain_keys,
        grammar=sg,
    )


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def namespace(schema: Any, key: str) -> str:
    """`{title}_{hash}`: the schema's title in lowercase letters (at most 16; a tool's is its
    name), then 8 hex digits of the hash of `key`. The title holds no `_`, so the first `_`
    of a name ends it and the hash follows: no name of one piece can be a name of another
    with other namespaces. Equal hashes (one in 2^32) are caught where pieces are joined."""
    title = schema.get("title") if isinstance(schema, dict) else None
    slug = re.sub(r"[^a-z]", "", title.lower())[:16] if isinstance(title, str) else ""
    return f"{slug or 's'}_{hashlib.blake2b(key.encode(), digest_size=4).hexdigest()}"


# ------------------------------------------------------------------------------ namespaces

_LARK_TOKEN = re.compile(
    r"""
    (?P<comment>//[^\n]*)
  | (?P<string>"(?:\\.|[^"\\])*"i?)
  | (?P<regex>/(?!/)(?:\\.|[^/\\\n])+/[imslux]*)
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<other>.)
    """,
    re.VERBOSE | re.DOTALL,
)


def prefix_lark_names(text: str, prefix: str, keep: Container[str] = ()) -> str:
    """Prefix every rule (`prefix`) and terminal (`PREFIX`) name but those in `keep`, outside
    literals and regexes."""
    out: list[str] = []
    for m in _LARK_TOKEN.finditer(text):
        name = m.group("name")
        if name is None or name in keep:
            out.append(m.group(0))
        elif name.lstrip("_")[:1].isupper():
            out.append(prefix.upper() + name)
        else:
            out.append(prefix + name)
    return "".join(out)


def _renamed_name(name: str, ns: str) -> str:
    if name in PUNCT:
        return name
    return (ns.upper() if name.lstrip("_")[:1].isupper() else ns) + "_" + name


def _renamed(node: Any, ns: str) -> Any:
    """The statement tree Lark reads from the renamed text (`prefix_lark_names`)."""
    if isinstance(node, Tree):
        return Tree(node.data, [_renamed(c, ns) for c in node.children])
    if isinstance(node, NonTerminal):
        return NonTerminal(_renamed_name(node.name, ns))
    if isinstance(node, Terminal):
        new = _renamed_name(node.name, ns)
        return Terminal(new, filter_out=new.startswith("_"))
    if isinstance(node, Token) and node.type in ("RULE", "TERMINAL"):
        return Token(node.type, _renamed_name(str(node), ns))
    return node
