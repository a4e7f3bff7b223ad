"""IR → Lark text: one rule per object/array/definition, one terminal per distinct leaf regex.

Why explicit structure: the dialect has no `%ignore`, so punctuation terminals carry the
whitespace policy, and object members are laid out in declaration order with commas placed
exactly (`first`/`rest` decomposition of a sequence of optional members).
"""

from __future__ import annotations

import json
import keyword
import re
from collections.abc import Sequence
from typing import Any, cast

from sdk.errors import SchemaError
from sdk.schema import NEVER as NEVER_NODE
from sdk.schema import (
    AnyValue,
    Arr,
    Consts,
    Node,
    Normalized,
    Obj,
    Ref,
    Str,
    Typed,
    Union,
    is_any,
)

from . import _trees
from ._leaves import INTEGER, NUMBER, STRING, Leaves, is_plain_key, literal_number, literal_string
from ._names import Names
from ._trees import ALT, ATOM, SEQ, E

MAX_REPEAT = 1000  # larger item-count bounds are validated instead of counted
INLINE_LIMIT = 48  # object layouts bigger than this use one rule per suffix
MAX_INLINE_OPTIONAL = 3
#: Optional tuple items (`prefixItems` past `minItems`) per rule; the rest is a rule of its own
TUPLE_CHUNK = 64
# `member_order="any"`: one rule per set of members already written (2^n, each with up to n
# alternatives) up to this many declared members; bigger objects get one rule for the member
# list and a `//@any_order` line, and the matcher tracks the set (`sdk.engine._any_order`).
MAX_ANY_ORDER = 3
#: The line that tells the engine which rules an any-order member list is made of.
ANY_ORDER_NOTE = "//@any_order "
# Dependencies (`a` present ⇒ `b` present) are tracked over at most this many members: the
# rules of an object multiply by 2 per tracked member.
MAX_TRACKED = 6
_WS = r"[ \t]{0,16}(?:\r?\n[ \t]{0,64})?"
GEMMA_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
XML_END = "\n</parameter>"
GEMMA_ESC = "<escape>"
PUNCT = {"LBRACE": "{", "RBRACE": "}", "LSQB": "[", "RSQB": "]", "COMMA": ",", "COLON": ":"}


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


def subtracted(
    regex: str, literals: Sequence[str] | None, reserved: Sequence[str], python: bool
) -> str:
    """A string lexeme's regex minus every string whose encoded text holds a reserved text
    (and, on the Python surface, the escapes Python reads otherwise): a head lookahead. The
    unit is looser than JSON's (any escape pair) so that no encoding slips past; a reserved
    text never starts inside an escape (`check_reserved`). `literals`: the strings a
    constant's regex spells, which need no subtraction unless they hold one."""
    if '"' not in regex:  # only string lexemes hold `"`; numbers stay as they are
        return regex
    avoid = [re.escape(t) for t in reserved]
    if python:
        avoid += [r"\\/", r"\\u[dD][89a-fA-F]"]
    if not avoid:
        return regex
    if literals is not None and not (
        any(t in v for v in literals for t in reserved)
        or (python and any("/" in v for v in literals))
    ):
        return regex
    return r'(?!"(?:[^"\\]|\\.)*(?:' + "|".join(avoid) + "))" + regex


def punct_literal(ch: str, flexible: bool, fixed: dict[str, str]) -> str:
    """The Lark literal of one punctuation terminal: the fixed separator text (`fixed`, for
    `,` and `:`), or the character with bounded whitespace around it (`flexible`)."""
    if not flexible:
        return json.dumps(fixed.get(ch, ch))
    esc = "\\" + ch if ch in "{}[]" else ch
    if ch in "{[":
        return lark_regex(esc + _WS)
    if ch in "}]":
        return lark_regex(_WS + esc)
    return lark_regex(_WS + esc + _WS)


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


class Emitter:
    def __init__(
        self,
        norm: Normalized,
        whitespace: str,
        separators: tuple[str, str] = (",", ":"),
        reserved: tuple[str, ...] = (),
        surface: str = "json",
        member_order: str = "declared",
    ) -> None:
        self.defs = norm.defs
        self.any_order = member_order == "any"
        # Texts no JSON string may contain raw (see `compile_schema(reserved=...)`): a head
        # lookahead subtracts every string whose encoded text contains one.
        # The unit is looser than JSON's (any escape pair) so that no encoding slips past;
        # a reserved text never starts inside an escape (`_check_reserved`).
        self.reserved = reserved
        # The Python surface (pythonic calls): the same values, written as Python literals.
        # Strings keep JSON's double-quoted form minus the two escapes Python reads otherwise:
        # `\/` (a backslash and a slash there) and surrogate `\uD8xx` pairs (two lone
        # surrogates there); the root object is the call's keyword arguments.
        self.python = surface == "python"
        # The XML-parameter surface (Qwen3-Coder): the root object's members are
        # `<parameter=NAME>\nVALUE\n</parameter>\n` blocks; string values are raw text.
        self.xml = surface == "xml"
        # FunctionGemma's surface: keys bare, strings raw between `<escape>` tokens.
        self.gemma = surface == "gemma"
        self.kw = (
            {"null": "None", "true": "True", "false": "False"}
            if self.python
            else {"null": "null", "true": "true", "false": "false"}
        )
        self.kwargs: Obj | None = None
        self.usage = norm.usage
        self.leaves = Leaves(norm.usage)
        self.flexible = whitespace == "flexible"
        # Fixed text of the item (",") and key (":") separators when not flexible.
        self.fixed = {",": separators[0], ":": separators[1]}
        self.names = Names()
        for n in ("start", "json_value", "json_object", "json_array"):
            self.names.reserve(n)
        for n in (*PUNCT, "STRING", "NUMBER", "INTEGER", "NEVER"):
            self.names.reserve(n)
        self.rules: dict[str, E] = {}  # in the order written; bodies filled in later
        self.notes: list[str] = []  # `//@any_order` lines, after the definitions
        # The Lark statement of each definition `run` wrote by name (those written by hand
        # have none: their lines are read).
        self.statements: dict[str, Any] = {}
        self.terminals: dict[str, str] = {}
        #: Each terminal `term` made, before any reserved-text subtraction: its regex and the
        #: constant strings it spells (None: not constants), so that a piece compiled without
        #: reserved texts can be finished for others (`sdk.grammar.pieces`).
        self.raw_terminals: dict[str, tuple[str, tuple[str, ...] | None]] = {}
        #: Keys written as plain literals in rules: the one place a reserved text changes a
        #: rule rather than a terminal.
        self.plain_keys: set[str] = set()
        self.term_by_regex: dict[str, str] = {}
        self.rule_by_node: dict[Any, str] = {}
        self.def_rules: dict[str, str] = {}
        self.pending: list[str] = []
        self.nonempty = self._nonempty_defs()
        self.generic = False

    # -- driver ---------------------------------------------------------------------------
    def run(self, root: Node) -> str:
        self.rules["start"] = _PENDING
        if self.python or self.xml:
            if not (
                isinstance(root, Typed)
                and root.obj is not None
                and root.arr is None
                and root.string is None
                and root.number is None
                and not root.null
                and not root.boolean
            ):
                raise SchemaError(
                    f"{'pythonic' if self.python else 'XML'} calls need object arguments", ""
                )
            self.kwargs = root.obj
        e = self.expr(root, "root")
        if e is None:
            raise SchemaError("the schema admits no value", "")
        self.rules["start"] = e
        while self.pending:
            key = self.pending.pop(0)
            self.define(self.def_rules[key], self.defs.nodes[key])
        if self.generic:
            self._generic_rules()
        lines = [f"{name}: {body[0]}" for name, body in self.rules.items()]
        trees = _trees.Trees()
        statements = {name: trees.rule(name, body) for name, body in self.rules.items()}
        used = [t for t in PUNCT if any(t in b[0] for b in self.rules.values())]
        for name, literal in [(t, self._punct(PUNCT[t])) for t in used] + [
            (name, lark_regex(rx)) for name, rx in self.terminals.items()
        ]:
            lines.append(f"{name}: {literal}")
            statements[name] = _trees.terminal(name, literal)
        self.statements = {k: v for k, v in statements.items() if v is not None}
        lines += self.notes
        return "\n".join(lines) + "\n"

    def _punct(self, ch: str) -> str:
        return punct_literal(ch, self.flexible, self.fixed)

    def _generic_rules(self) -> None:
        if self.gemma:
            raise SchemaError("values of any JSON type have no FunctionGemma form here", "")
        self.term(STRING, "STRING")
        self.term(NUMBER, "NUMBER")
        k = self.kw
        value = sym("json_value")
        self.rules["json_value"] = cast(
            E,
            alt(
                [
                    *map(sym, ("json_object", "json_array", "STRING", "NUMBER")),
                    *(sym(f'"{k[w]}"') for w in ("true", "false", "null")),
                ]
            ),
        )
        pair = seq([sym("STRING"), sym("COLON"), value])
        more = cast(E, rep(seq([sym("COMMA"), pair]), 0, None))
        self.rules["json_object"] = seq([sym("LBRACE"), opt(seq([pair, more])), sym("RBRACE")])
        more = cast(E, rep(seq([sym("COMMA"), value]), 0, None))
        self.rules["json_array"] = seq([sym("LSQB"), opt(seq([value, more])), sym("RSQB")])

    def term(self, regex: str, hint: str, literals: list[str] | None = None) -> E:
        """The terminal for `regex` (shared by equal regexes). `literals`: the strings a
        constant's regex spells, which need no reserved-text subtraction unless they hold one."""
        name = self.term_by_regex.get(regex)
        if name is None:
            name = (
                self.names.reserve(hint)
                if hint in ("STRING", "NUMBER", "INTEGER")
                else self.names.terminal(hint)
            )
            self.term_by_regex[regex] = name
            self.raw_terminals[name] = (regex, None if literals is None else tuple(literals))
            self.terminals[name] = subtracted(regex, literals, self.reserved, self.python)
        return sym(name)

    def define(self, name: str, node: Node) -> None:
        """Emit `name: ...` for a node; objects and arrays get their layout directly."""
        self.rules[name] = _PENDING
        body: E | None
        if isinstance(node, Typed) and _single(node) == "obj" and node.obj is not None:
            self.rule_by_node[node.obj] = name
            body = self.obj_body(node.obj, name)
        elif isinstance(node, Typed) and _single(node) == "arr" and node.arr is not None:
            self.rule_by_node[node.arr] = name
            body = self.arr_body(node.arr, name)
        else:
            body = self.expr(node, name)
        if body is None:
            self.names.reserve("NEVER")
            self.terminals["NEVER"] = "[^\\x00-\\U0010ffff]"
            body = sym("NEVER")
        self.rules[name] = body

    # -- emptiness ------------------------------------------------------------------------
    def _nonempty_defs(self) -> set[str]:
        known: set[str] = set()
        changed = True
        while changed:
            changed = False
            for key, node in self.defs.nodes.items():
                if key not in known and _ne(node, known, 0):
                    known.add(key)
                    changed = True
        return known

    # -- nodes ----------------------------------------------------------------------------
    def expr(self, node: Node, hint: str) -> E | None:
        if isinstance(node, AnyValue) or is_any(node):
            self.generic = True
            return sym("json_value")
        if isinstance(node, Ref):
            if node.key not in self.nonempty:
                return None
            if node.key not in self.def_rules:
                self.def_rules[node.key] = self.names.rule(self.defs.names[node.key])
                self.pending.append(node.key)
            return sym(self.def_rules[node.key])
        if isinstance(node, Union):
            return alt([e for e in (self.expr(a, hint) for a in node.alts) if e is not None])
        if isinstance(node, Consts):
            return self.consts(node, hint)
        assert isinstance(node, Typed)
        parts: list[E | None] = []
        if node.null:
            parts.append(sym(f'"{self.kw["null"]}"'))
        if node.boolean:
            parts += [sym(f'"{self.kw["true"]}"'), sym(f'"{self.kw["false"]}"')]
        if node.number is not None:
            r = self.leaves.number(node.number)
            if r is not None:
                base = "INTEGER" if r == INTEGER else "NUMBER" if r == NUMBER else hint
                parts.append(self.term(r, base))
        if node.string is not None and self.gemma:
            parts.append(self.gemma_string(node.string, hint))
        elif node.string is not None:
            r = self.leaves.string(node.string)
            if r is not None:
                parts.append(self.term(r, "STRING" if r == STRING else hint))
        if node.obj is not None:
            parts.append(self.composite(node.obj, hint))
        if node.arr is not None:
            parts.append(self.composite(node.arr, hint))
        return alt([p for p in parts if p is not None])

    def composite(self, node: Obj | Arr, hint: str) -> E | None:
        if node in self.rule_by_node:
            name = self.rule_by_node[node]
            return sym(name) if name in self.rules else None
        name = self.names.rule(hint)
        self.rule_by_node[node] = name
        self.rules[name] = _PENDING
        body = self.obj_body(node, name) if isinstance(node, Obj) else self.arr_body(node, name)
        if body is None:
            del self.rules[name]
            return None
        self.rules[name] = body
        return sym(name)

    # -- constants ------------------------------------------------------------------------
    def consts(self, node: Consts, hint: str) -> E | None:
        values = [json.loads(t) for t in node.texts]
        strings = [v for v in values if isinstance(v, str)]
        parts: list[E] = []
        if strings and self.gemma:
            parts += [self.gemma_text(v) for v in strings]
        elif strings:
            rx = "|".join(literal_string(s) for s in strings)
            parts.append(self.term(rx if len(strings) == 1 else f"(?:{rx})", hint, strings))
        for v in values:
            if not isinstance(v, str):
                parts.append(self.value(v, hint))
        return alt(parts)

    def value(self, v: Any, hint: str) -> E:
        """The grammar for exactly one JSON value (objects keep the constant's key order)."""
        if v is None or isinstance(v, bool):
            return sym(json.dumps(self.kw[json.dumps(v)]))
        if isinstance(v, int | float):
            return self.term(literal_number(v), hint)
        if isinstance(v, str):
            if self.gemma:
                return self.gemma_text(v)
            return self.term(literal_string(v), hint, [v])
        if isinstance(v, list):
            items: list[E | None] = []
            for i, x in enumerate(v):
                if i:
                    items.append(sym("COMMA"))
                items.append(self.value(x, hint))
            return seq([sym("LSQB"), *items, sym("RSQB")])
        members: list[E | None] = []
        for i, (k, x) in enumerate(v.items()):
            if i:
                members.append(sym("COMMA"))
            members += [self.key(k, hint), sym("COLON"), self.value(x, hint)]
        return seq([sym("LBRACE"), *members, sym("RBRACE")])

    def key(self, name: str, hint: str) -> E:
        if self.gemma:  # bare keys: they end at the `:` that follows
            if not name or not GEMMA_KEY.fullmatch(name):
                raise SchemaError(f"property {name!r} cannot be a bare FunctionGemma key", "")
            return sym(json.dumps(name))
        if is_plain_key(name) and not any(t in name for t in self.reserved):
            self.plain_keys.add(name)
            return sym(json.dumps(json.dumps(name)))
        return self.term(literal_string(name), hint + "_key", [name])

    # -- objects --------------------------------------------------------------------------
    def obj_body(self, o: Obj, name: str) -> E | None:
        kwargs = o is self.kwargs
        if kwargs and self.xml:
            return self.xml_params(o, name)
        lb, rb, colon = (
            (sym('"("'), sym('")"'), sym('"="'))
            if kwargs
            else (sym("LBRACE"), sym("RBRACE"), sym("COLON"))
        )
        members: list[tuple[E, bool]] = []
        kept: list[str] = []
        for pname, v in o.props:
            ve = self.expr(v, f"{name}_{pname}")
            if ve is None:
                if pname in o.required:
                    return None
                continue
            if kwargs and not (pname.isidentifier() and not keyword.iskeyword(pname)):
                raise SchemaError(
                    f"property {pname!r} is not a Python identifier: it cannot be a keyword "
                    "argument of a pythonic call",
                    o.pointer,
                )
            key = sym(json.dumps(pname)) if kwargs else self.key(pname, f"{name}_{pname}")
            pair = seq([key, colon, ve])
            members.append((pair, pname in o.required))
            kept.append(pname)
        extra = self.extras(o, name)
        if kwargs and extra is not None:
            raise SchemaError(
                "arguments beyond the declared properties (additionalProperties, "
                "patternProperties) cannot be keyword arguments of a pythonic call",
                o.pointer,
            )
        n_req = sum(1 for _, r in members if r)
        n_opt = len(members) - n_req
        lo, hi = o.min_props, o.max_props
        if (hi is not None and hi < n_req) or (extra is None and lo > n_req + n_opt):
            return None
        if hi == 0:
            return seq([lb, rb])
        ex_lo, ex_hi, nonempty = 0, None, False
        need_lo = lo > n_req
        need_hi = hi is not None and (extra is not None or hi < n_req + n_opt)
        if need_lo or need_hi:
            if (
                n_opt == 0
                and extra is not None
                and max(lo - n_req, 0) <= MAX_REPEAT
                and (hi is None or hi - n_req <= MAX_REPEAT)
            ):
                ex_lo, ex_hi = max(lo - n_req, 0), None if hi is None else hi - n_req
            elif lo == 1 and n_req == 0 and not need_hi:
                nonempty = True
            else:
                for k, needed in (("minProperties", need_lo), ("maxProperties", need_hi)):
                    if needed:
                        self.usage.validate(k, o.pointer, "member counting with optional members")
        deps = self._dependencies(o, kept)
        if deps and not (self.any_order and len(members) > 1):
            got = self._members_tracked(members, extra, ex_lo, ex_hi, name, deps)
        else:
            got = self._members(members, extra, ex_lo, ex_hi, name, deps)
        if got is _DEAD:
            return None
        inner = cast("tuple[E, bool] | None", got)
        if inner is None:
            return seq([lb, rb])
        body, may_be_empty = inner
        if may_be_empty and not nonempty:
            body = opt(body)
        return seq([lb, body, rb])

    # -- XML parameters ---------------------------------------------------------------------
    def xml_params(self, o: Obj, name: str) -> E | None:
        """The root object as `<parameter=NAME>` blocks in declaration order. Each block is
        self-delimiting, so optional ones need no separators; one rule per optional block
        keeps Lark from expanding 2^k alternatives."""
        if self.extras(o, name) is not None:
            raise SchemaError(
                "arguments beyond the declared properties (additionalProperties, "
                "patternProperties) cannot be XML parameters",
                o.pointer,
            )
        if o.min_props > len([p for p, _ in o.props if p in o.required]) or (
            o.max_props is not None and o.max_props < len(o.props)
        ):
            for k in ("minProperties", "maxProperties"):
                self.usage.validate(k, o.pointer, "counted by validation for XML parameters")
        for kw in dict.fromkeys(kw for kw, _, _ in o.depends):
            self.usage.validate(kw, o.pointer, "checked by validation for XML parameters")
        blocks: list[tuple[E, bool]] = []
        for pname, v in o.props:
            if "<" in pname or ">" in pname or "\n" in pname or not pname:
                raise SchemaError(f"property {pname!r} cannot be an XML parameter name", o.pointer)
            ve = self.xml_value(v, f"{name}_{pname}")
            if ve is None:
                if pname in o.required:
                    return None
                continue
            head = json.dumps(f"<parameter={pname}>\n")
            block = seq([sym(head), ve, sym(json.dumps(XML_END + "\n"))])
            blocks.append((block, pname in o.required))
        out: E | None = None
        for i in range(len(blocks) - 1, -1, -1):
            block, required = blocks[i]
            piece = seq([block if required else opt(block), out])
            if i:  # one rule per suffix
                rule = self.names.rule(f"{name}_params{i}")
                self.rules[rule] = piece
                piece = sym(rule)
            out = piece
        return out if out is not None else ("", SEQ, _trees.EMPTY)

    def xml_value(self, node: Node, hint: str) -> E | None:
        """Raw text for string parameters (their `null` is the text `null`), JSON otherwise."""
        target = node
        if isinstance(target, Ref):
            target = self.defs.nodes.get(target.key, target)
        raw = self.raw_text(target)
        if raw is None:
            return self.expr(node, hint)
        return self.term(raw, hint)

    def raw_text(self, node: Node) -> str | None:
        """The raw-text regex of a string-only parameter (None: not string-only)."""
        ban = "|".join(re.escape(t) for t in (XML_END, *self.reserved))
        if isinstance(node, Union):  # Optional[str] and the like: raw text, or `null`
            alts: list[str] = []
            for a in node.alts:
                if isinstance(a, Typed) and a == Typed(null=True):
                    alts.append("null")
                    continue
                r = self.raw_text(a)
                if r is None:
                    return None
                alts.append(r)
            return "(?:" + "|".join(alts) + ")"
        if isinstance(node, Consts):
            values = [json.loads(t) for t in node.texts]
            if not values or not all(isinstance(v, str) or v is None for v in values):
                return None
            texts = sorted({"null" if v is None else v for v in values})
            if any(re.search(ban, t) for t in texts):
                raise SchemaError("an enum value holds the XML parameter end", "")
            return "(?:" + "|".join(re.escape(t) for t in texts) + ")"
        if not isinstance(node, Typed) or node.string is None:
            return None
        if node.number is not None or node.boolean or node.obj is not None or node.arr is not None:
            return None
        text = self.raw_string(node.string, (XML_END, *self.reserved))
        return f"(?:{text}|null)" if node.null else text

    def raw_string(self, st: Str, ban: tuple[str, ...]) -> str:
        """Regex of the raw (unescaped) texts of strings `st` allows, none holding a `ban`
        text. Length is counted in the grammar; `pattern`, `format` and `not` are left to
        validation (their machinery works over JSON-escaped text)."""
        for kw, items in (("pattern", st.patterns), ("format", st.formats)):
            for _, ptr in items:
                self.usage.validate(kw, ptr, "raw string values are checked by validation")
        if st.excluded:
            self.usage.validate("not", st.pointer, "raw string values")
        alts = "|".join(re.escape(t).replace("\\\n", "\\n") for t in ban)
        avoid = rf"(?![\s\S]*(?:{alts}))" if alts else ""
        lo, hi = st.min_length, st.max_length
        if (lo, hi) == (0, None):
            return avoid + r"[\s\S]*"
        q = f"{{{lo},}}" if hi is None else f"{{{lo},{hi}}}"
        return avoid + r"[\s\S]" + q

    # -- the FunctionGemma surface ----------------------------------------------------------
    def gemma_text(self, text: str) -> E:
        """One constant string, between `<escape>` markers."""
        if GEMMA_ESC in text:
            raise SchemaError(f"a constant string holds {GEMMA_ESC!r}", "")
        return sym(json.dumps(GEMMA_ESC + text + GEMMA_ESC))

    def gemma_string(self, st: Str, hint: str) -> E:
        body = self.term(self.raw_string(st, (GEMMA_ESC, *self.reserved)), hint)
        esc = sym(json.dumps(GEMMA_ESC))
        return seq([esc, body, esc])

    def _members(
        self,
        members: list[tuple[E, bool]],
        extra: E | None,
        ex_lo: int,
        ex_hi: int | None,
        name: str,
        deps: list[tuple[int, tuple[int | None, ...]]] | None = None,
    ) -> tuple[E, bool] | None | object:
        """The member list between braces, and whether it may be empty (`_DEAD`: none).

        Declared members come in declaration order. Extra members (undeclared names, so the
        layout stays unambiguous) may follow any member, or come first, unless their number is
        bounded, in which case they all come after the declared ones.
        """
        n = len(members)
        if self.any_order and 1 < n <= MAX_ANY_ORDER:
            return self._members_any_order(members, extra, ex_lo, ex_hi, name, deps or [])
        if self.any_order and n > MAX_ANY_ORDER:
            return self._members_seen_set(members, extra, ex_lo, ex_hi, name, deps or [])
        comma = sym("COMMA")
        extra, star, tail, interleave = self._extras_layout(extra, ex_lo, ex_hi, name, n)
        first_req = next((i for i, (_, r) in enumerate(members) if r), n)
        # Lark expands every optional group of a rule into alternatives (2^k), so layouts with
        # more than a few optional members get one rule per suffix instead of inline groups.
        n_opt = sum(1 for _, r in members if not r)
        chained = n_opt > MAX_INLINE_OPTIONAL or (first_req + 2) * n > INLINE_LIMIT
        rest_names: dict[int, str] = {}
        if chained:  # reserve the suffix rules in reading order
            for i in range(0 if interleave else 1, n - 1):
                rest_names[i] = self.names.rule(f"{name}_rest{i}")
                self.rules[rest_names[i]] = _PENDING

        # rest[i]: members i.. (each with its leading comma) and the extra members. Built from
        # the end (a recursive closure would be a reference cycle holding the emitter).
        rest: list[E | None] = [None] * (n + 1)
        rest[n] = tail
        for i in range(n - 1, -1 if interleave else 0, -1):
            m, req = members[i]
            piece = seq([comma, m, star])
            out = seq([piece if req else opt(piece), rest[i + 1]])
            if i in rest_names:
                self.rules[rest_names[i]] = out
                out = sym(rest_names[i])
            rest[i] = out

        alts: list[E] = []
        for j in range(min(first_req + 1, n)):
            alts.append(seq([members[j][0], star, rest[j + 1]]))
        may_be_empty = first_req == n
        if interleave and extra is not None:
            alts.append(seq([extra, star, rest[0]]))
        elif first_req == n and extra is not None:
            if ex_hi != 0:
                alts.append(_extras_only(extra, ex_lo, ex_hi))
            may_be_empty = may_be_empty and ex_lo == 0
        body = alt(alts)
        if body is None:
            return None
        return body, may_be_empty

    def _extras_layout(
        self, extra: E | None, ex_lo: int, ex_hi: int | None, name: str, n: int
    ) -> tuple[E | None, E | None, E | None, bool]:
        """Where extra members go: `star`, any number of them after every member (and first),
        when their number is unbounded; else `tail`, their bounded number after all the
        declared ones. `extra` comes back named when it is repeated that way."""
        interleave = extra is not None and ex_lo == 0 and ex_hi is None and n > 0
        star: E | None = None
        if interleave and extra is not None:
            if extra[1] != ATOM:
                rule = self.names.rule(f"{name}_extra")
                self.rules[rule] = extra
                extra = sym(rule)
            star = rep(seq([sym("COMMA"), extra]), 0, None)
        tail = (
            None if interleave or extra is None else rep(seq([sym("COMMA"), extra]), ex_lo, ex_hi)
        )
        return extra, star, tail, interleave

    def _shared_pairs(self, members: list[tuple[E, bool]], name: str, shared: set[int]) -> list[E]:
        """The members' `key: value` pairs, those in `shared` (written in several rules)
        named once as rules of their own."""
        pairs: list[E] = []
        for i, (m, _) in enumerate(members):
            if i in shared and m[1] != ATOM:
                rule = self.names.rule(f"{name}_member{i}")
                self.rules[rule] = m
                m = sym(rule)
            pairs.append(m)
        return pairs

    def _members_any_order(
        self,
        members: list[tuple[E, bool]],
        extra: E | None,
        ex_lo: int,
        ex_hi: int | None,
        name: str,
        deps: list[tuple[int, tuple[int | None, ...]]],
    ) -> tuple[E, bool] | None | object:
        """`_members` with the declared members in any order, each at most once: one rule
        per set of members written so far, which ends only once every required member is in
        it and every dependency of those in it is met. Extra members go where `_members` puts
        them (anywhere when their number is unbounded, else after all the declared ones)."""
        n = len(members)
        comma = sym("COMMA")
        extra, star, tail, interleave = self._extras_layout(extra, ex_lo, ex_hi, name, n)
        pairs = self._shared_pairs(members, name, set(range(n)))  # each in 2^(n-1) rules
        required = sum(1 << i for i, (_, r) in enumerate(members) if r)
        after: dict[int, E | None | object] = {}

        def following(seen: int) -> E | None | object:
            """What may follow once the members in `seen` (a bit set) are written: None for
            nothing, `_DEAD` when no continuation makes a valid object."""
            if seen in after:
                return after[seen]
            alts: list[E] = []
            for i in range(n):
                if not seen >> i & 1:
                    nxt = following(seen | 1 << i)
                    if nxt is not _DEAD:
                        alts.append(seq([comma, pairs[i], cast(E | None, nxt)]))
            done = seen & required == required and _deps_met(deps, seen)
            if done and tail is not None:
                alts.append(tail)
            body = alt(alts)
            if body is None and not done:
                after[seen] = _DEAD
                return _DEAD
            if body is not None and done and tail is None:
                body = opt(body)
            if star is not None:  # extra members first, wherever the object may go on
                body = seq([star, body])
            if body is not None and not re.fullmatch(r"\w+", body[0]):  # shared: a rule
                rule = self.names.rule(f"{name}_seen{seen}")
                self.rules[rule] = body
                body = sym(rule)
            after[seen] = body
            return body

        alts: list[E] = []
        for i in range(n):
            nxt = following(1 << i)
            if nxt is not _DEAD:
                alts.append(seq([pairs[i], cast(E | None, nxt)]))
        if interleave and extra is not None:
            nxt = following(0)
            if nxt is not _DEAD:
                alts.append(seq([extra, cast(E | None, nxt)]))
        elif not required and extra is not None and ex_hi != 0:
            alts.append(_extras_only(extra, ex_lo, ex_hi))
        may_be_empty = not required and (extra is None or interleave or ex_lo == 0)
        body = alt(alts)
        if body is None:
            return None if may_be_empty else _DEAD
        return body, may_be_empty

    def _members_seen_set(
        self,
        members: list[tuple[E, bool]],
        extra: E | None,
        ex_lo: int,
        ex_hi: int | None,
        name: str,
        deps: list[tuple[int, tuple[int | None, ...]]],
    ) -> tuple[E, bool] | object:
        """`_members_any_order` for objects too big for a rule per subset: one rule,
        `NAME_any`, stands for the non-empty member list, and an `//@any_order` line names its
        parts (member rules, comma, extra members, bounded tail) and constraints (required,
        dependencies), from which the engine builds the positions "members S written" as the
        parse reaches them. Lark, which ignores the line, reads the rule as a superset (members
        repeated); `gbnf` refuses it."""
        n = len(members)
        if _needs_the_impossible(deps, {i for i, (_, r) in enumerate(members) if r}):
            return _DEAD
        extra, _star, tail, interleave = self._extras_layout(extra, ex_lo, ex_hi, name, n)
        pairs = [self._rule_for(m, f"{name}_member{i}") for i, (m, _) in enumerate(members)]
        comma = self._rule_for(sym("COMMA"), f"{name}_comma")
        extra_rule = self._rule_for(extra, f"{name}_extra") if interleave and extra else None
        tail_rule = self._rule_for(tail, f"{name}_tail") if tail is not None else None
        required = [i for i, (_, r) in enumerate(members) if r]
        items = " | ".join(pairs + ([extra_rule] if extra_rule else []))
        rule = self.names.rule(f"{name}_any")
        text = f"({items}) ({comma} ({items}))*" + (f" {tail_rule}?" if tail_rule else "")
        self.rules[rule] = (text, SEQ, None)
        spec = {
            "rule": rule,
            "members": pairs,
            "comma": comma,
            "required": required,
            "extra": extra_rule,
            "tail": tail_rule,
            "deps": [[t, list(need)] for t, need in deps],
        }
        self.notes.append(ANY_ORDER_NOTE + json.dumps(spec, separators=(",", ":")))
        alts: list[E] = [sym(rule)]
        if not interleave and not required and extra is not None and ex_hi != 0:
            alts.append(_extras_only(extra, ex_lo, ex_hi))
        body = alt(alts)
        assert body is not None
        return body, not required and (extra is None or interleave or ex_lo == 0)

    def _rule_for(self, e: E, base: str) -> str:
        """`e` as a rule name: itself when it is one, else a new rule `base`."""
        if re.fullmatch(r"[a-z_][a-z0-9_]*", e[0]):
            return e[0]
        rule = self.names.rule(base)
        self.rules[rule] = e
        return rule

    def _dependencies(
        self, o: Obj, kept: list[str]
    ) -> list[tuple[int, tuple[int | None, ...]]] | None:
        """`o.depends` over member indices (None: a needed member that can never be
        written); None when there is nothing to track or too much (then validated)."""
        if not o.depends:
            return None
        index = {n: i for i, n in enumerate(kept)}
        deps = [
            (index[t], tuple(index.get(x) for x in need)) for _, t, need in o.depends if t in index
        ]
        tracked = {t for t, _ in deps} | {x for _, need in deps for x in need if x is not None}
        if len(tracked) > MAX_TRACKED:
            for kw in dict.fromkeys(kw for kw, _, _ in o.depends):
                self.usage.validate(kw, o.pointer, "conditional requirements")
            return None
        return deps or None

    def _members_tracked(
        self,
        members: list[tuple[E, bool]],
        extra: E | None,
        ex_lo: int,
        ex_hi: int | None,
        name: str,
        deps: list[tuple[int, tuple[int | None, ...]]],
    ) -> tuple[E, bool] | None | object:
        """`_members` in declaration order for objects with dependencies (`a` present ⇒ `b`
        present): one rule per (next member, set of tracked members written so far), so the
        object can only end once every dependency of what it holds is met. `_DEAD` when no
        member list satisfies them (a required trigger whose needed member cannot exist)."""
        n = len(members)
        comma = sym("COMMA")
        extra, star, tail, interleave = self._extras_layout(extra, ex_lo, ex_hi, name, n)
        tracked = {t for t, _ in deps} | {x for _, need in deps for x in need if x is not None}
        pairs = self._shared_pairs(members, name, tracked)
        memo: dict[tuple[int, int], E | None | object] = {}
        # From member i on, a dependency whose members all lie before i is decided: met (it no
        # longer matters) or broken (nothing can follow). Only the undecided ones tell states
        # apart, so equal futures share one rule.
        last = [max(t, *(n if x is None else x for x in need)) for t, need in deps]
        relevant = [
            _mask(
                {
                    b
                    for k, (t, need) in enumerate(deps)
                    if last[k] >= i
                    for b in (t, *need)
                    if b is not None
                }
            )
            for i in range(n + 1)
        ]

        def rest(i: int, seen: int) -> E | None | object:
            """Members i.. (each with its leading comma) and the end, after `seen`."""
            decided = [dep for k, dep in enumerate(deps) if last[k] < i]
            if not _deps_met(decided, seen):
                return _DEAD
            key = (i, seen & relevant[i])
            if key in memo:
                return memo[key]
            if i == n:
                out: E | None | object = tail if _deps_met(deps, seen) else _DEAD
            else:
                m, req = members[i]
                take = rest(i + 1, seen | 1 << i)
                skip = _DEAD if req else rest(i + 1, seen)
                alts: list[E] = []
                if take is not _DEAD:
                    alts.append(seq([comma, pairs[i], star, cast(E | None, take)]))
                empty = skip is None
                if skip is not _DEAD and skip is not None:
                    alts.append(cast(E, skip))
                body = alt(alts)
                if body is None:
                    out = None if empty else _DEAD
                else:
                    out = opt(body) if empty else body
                    if not re.fullmatch(r"\w+", out[0]):
                        rule = self.names.rule(f"{name}_rest{i}")
                        self.rules[rule] = out
                        out = sym(rule)
            memo[key] = out
            return out

        first_req = next((i for i, (_, r) in enumerate(members) if r), n)
        alts: list[E] = []
        for j in range(min(first_req + 1, n)):
            after = rest(j + 1, 1 << j)
            if after is not _DEAD:
                alts.append(seq([pairs[j], star, cast(E | None, after)]))
        may_be_empty = first_req == n
        if interleave and extra is not None:
            after = rest(0, 0)
            if after is not _DEAD:
                alts.append(seq([extra, star, cast(E | None, after)]))
        elif first_req == n and extra is not None:
            if ex_hi != 0:
                alts.append(_extras_only(extra, ex_lo, ex_hi))
            may_be_empty = may_be_empty and ex_lo == 0
        body = alt(alts)
        if body is None:
            return None if may_be_empty else _DEAD
        return body, may_be_empty

    def extras(self, o: Obj, name: str) -> E | None:
        """Members beyond the declared ones: patternProperties, then additionalProperties."""
        if self.gemma and (o.patterns or o.additional != NEVER_NODE):
            raise SchemaError(
                "members beyond the declared properties have no FunctionGemma form (bare keys)",
                o.pointer,
            )
        declared = [n for n, _ in o.props]
        parts: list[E] = []
        schemas = {v for _, v in o.patterns}
        if len(o.patterns) > 1 and len(schemas) > 1:
            self.usage.validate("patternProperties", o.pointer, "overlapping patterns")
        for i, (p, v) in enumerate(o.patterns):
            ve = self.expr(v, f"{name}_pattern{i if i else ''}")
            if ve is None:
                continue
            k = self.leaves.key(declared, p, [], o.names, o.pointer)
            if k is not None:
                parts.append(seq([self.term(k, f"{name}_pattern_key"), sym("COLON"), ve]))
        ve = self.expr(o.additional, f"{name}_value")
        if ve is not None:
            k = self.leaves.key(declared, None, [p for p, _ in o.patterns], o.names, o.pointer)
            if k is not None:
                key = sym("STRING") if k == STRING else self.term(k, f"{name}_key")
                if k == STRING:
                    self.term(STRING, "STRING")
                parts.append(seq([key, sym("COLON"), ve]))
        return alt(parts)

    # -- arrays ---------------------------------------------------------------------------
    def arr_body(self, a: Arr, name: str) -> E | None:
        lo, hi = a.min_items, a.max_items
        if lo > MAX_REPEAT:
            self.usage.validate("minItems", a.pointer, "bound too large to count")
            lo = 0
        if hi is not None and hi > MAX_REPEAT:
            self.usage.validate("maxItems", a.pointer, "bound too large to count")
            hi = None
        comma = sym("COMMA")
        if a.contains is not None:
            item = self.expr(a.items, f"{name}_item")
            c = self.expr(a.contains, f"{name}_contains")
            if c is None:
                return None
            before = rep(seq([item, comma]), 0, None) if item else None
            after = rep(seq([comma, item]), 0, None) if item else None
            return seq([sym("LSQB"), before, c, after, sym("RSQB")])
        k = len(a.prefix) if hi is None else min(len(a.prefix), hi)
        pe: list[E] = []
        rest_ok = True
        for i in range(k):
            e = self.expr(a.prefix[i], f"{name}_{i}")
            if e is None:
                if i < lo:
                    return None
                rest_ok = False
                break
            pe.append(e)
        k = len(pe)
        r = self.expr(a.items, f"{name}_item") if rest_ok and (hi is None or hi > k) else None
        ex_lo = max(lo - k, 0)
        ex_hi = None if hi is None else max(hi - k, 0)
        if r is None:
            if ex_lo > 0:
                return None
            ex_hi = 0
        cur: E | None
        if k == 0:
            cur = None
            if ex_hi != 0 and r is not None:
                more = rep(seq([comma, r]), max(ex_lo - 1, 0), None if ex_hi is None else ex_hi - 1)
                cur = seq([r, more])
                if ex_lo == 0:
                    cur = opt(cur)
        else:
            # Optional items nest, each in the one before (`(, a (, b ...)?)?`): past
            # TUPLE_CHUNK of them the rest of the tail is a rule of its own, called last (a
            # tail call, no deeper parser stack), so no expression nests deeper than that
            tails: dict[int, str] = {}
            for i in range(max(lo, 1), k):  # reserved in reading order
                if (k - i) % TUPLE_CHUNK == 0:
                    tails[i] = self.names.rule(f"{name}_tail{i}")
                    self.rules[tails[i]] = _PENDING
            cur = rep(seq([comma, r]), ex_lo, ex_hi) if r is not None else None
            for i in reversed(range(k)):
                cur = seq([comma if i else None, pe[i], cur])
                if i >= lo:
                    cur = opt(cur)
                if i in tails:
                    self.rules[tails[i]] = cur
                    cur = sym(tails[i])
        return seq([sym("LSQB"), cur, sym("RSQB")])


def _single(node: Typed) -> str | None:
    kinds = [
        k
        for k, v in (
            ("null", node.null),
            ("boolean", node.boolean),
            ("number", node.number),
            ("string", node.string),
            ("obj", node.obj),
            ("arr", node.arr),
        )
        if v
    ]
    return kinds[0] if len(kinds) == 1 else None


def _ne(node: Node, known: set[str], depth: int) -> bool:
    """Whether a node admits some value, given the definitions already known to."""
    if depth > 100:
        return True
    if isinstance(node, AnyValue):
        return True
    if isinstance(node, Ref):
        return node.key in known
    if isinstance(node, Union):
        return any(_ne(a, known, depth + 1) for a in node.alts)
    if isinstance(node, Consts):
        return bool(node.texts)
    assert isinstance(node, Typed)
    if node.null or node.boolean or node.number is not None or node.string is not None:
        return True
    if node.obj is not None:
        o = node.obj
        if all(_ne(v, known, depth + 1) for n, v in o.props if n in o.required):
            return True
    if node.arr is not None:
        a = node.arr
        need = a.prefix[: a.min_items]
        if all(_ne(p, known, depth + 1) for p in need) and (
            a.min_items <= len(a.prefix) or _ne(a.items, known, depth + 1)
        ):
            return True
    return False


_PENDING: E = ("", SEQ, None)  # a rule named, its body not written yet
_DEAD = object()  # no member list can follow: the object is impossible from here


def _mask(bits: set[int]) -> int:
    return sum(1 << b for b in bits)


def _deps_met(deps: list[tuple[int, tuple[int | None, ...]]], seen: int) -> bool:
    """Every dependency whose trigger is in `seen` has its needed members there too."""
    return all(
        not seen >> t & 1 or all(x is not None and seen >> x & 1 for x in need) for t, need in deps
    )


def _needs_the_impossible(
    deps: list[tuple[int, tuple[int | None, ...]]], members: set[int]
) -> bool:
    """Whether `members`, with every member their dependencies then need, includes a member
    that can never be written (None)."""
    todo = list(members)
    while todo:
        t = todo.pop()
        for trigger, need in deps:
            if trigger == t:
                for x in need:
                    if x is None:
                        return True
                    if x not in members:
                        members.add(x)
                        todo.append(x)
    return False


def _extras_only(extra: E, ex_lo: int, ex_hi: int | None) -> E:
    """An object of extra members only: the first without a comma, then the rest."""
    more = rep(seq([sym("COMMA"), extra]), max(ex_lo - 1, 0), None if ex_hi is None else ex_hi - 1)
    return seq([extra, more])
