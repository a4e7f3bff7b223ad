"""IR → Lark text: one rule per object/array/definition, one terminal per distinct leaf regex.

Why explicit structure: the dialect has no `%ignore`, so punctuation terminals carry the
whitespace policy, and object members are laid out in declaration order with commas placed
exactly (`first`/`rest` decomposition of a sequence of optional members).
"""

from __future__ import annotations

import json
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
    Typed,
    Union,
    is_any,
)

from . import _trees
from ._any_order import members_any_order, members_seen_set
from ._arrays import MAX_REPEAT, arr_body
from ._arrays import TUPLE_CHUNK as TUPLE_CHUNK
from ._depends import dependencies, members_tracked
from ._exprs import DEAD, PENDING, alt, extras_only, lark_regex, opt, rep, seq, sym
from ._leaves import INTEGER, NUMBER, STRING, Leaves, is_plain_key, literal_number, literal_string
from ._names import Names
from ._surfaces import (
    call_arguments,
    check_keyword_argument,
    gemma_key,
    gemma_string,
    gemma_text,
    xml_params,
)
from ._trees import ATOM, E

INLINE_LIMIT = 48  # object layouts bigger than this use one rule per suffix
MAX_INLINE_OPTIONAL = 3
# `member_order="any"`: one rule per set of members already written (2^n, each with up to n
# alternatives) up to this many declared members; bigger objects get one rule for the member
# list and a `//@any_order` line, and the matcher tracks the set (`sdk.engine._any_order`).
MAX_ANY_ORDER = 3
_WS = r"[ \t]{0,16}(?:\r?\n[ \t]{0,64})?"
PUNCT = {"LBRACE": "{", "RBRACE": "}", "LSQB": "[", "RSQB": "]", "COMMA": ",", "COLON": ":"}


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
        self.rules["start"] = PENDING
        if self.python or self.xml:
            self.kwargs = call_arguments(self, root)
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
        self.rules[name] = PENDING
        body: E | None
        if isinstance(node, Typed) and _single(node) == "obj" and node.obj is not None:
            self.rule_by_node[node.obj] = name
            body = self.obj_body(node.obj, name)
        elif isinstance(node, Typed) and _single(node) == "arr" and node.arr is not None:
            self.rule_by_node[node.arr] = name
            body = arr_body(self, node.arr, name)
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
            parts.append(gemma_string(self, node.string, hint))
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
        self.rules[name] = PENDING
        body = self.obj_body(node, name) if isinstance(node, Obj) else arr_body(self, node, name)
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
            parts += [gemma_text(v) for v in strings]
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
                return gemma_text(v)
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
            return gemma_key(name)
        if is_plain_key(name) and not any(t in name for t in self.reserved):
            self.plain_keys.add(name)
            return sym(json.dumps(json.dumps(name)))
        return self.term(literal_string(name), hint + "_key", [name])

    # -- objects --------------------------------------------------------------------------
    def obj_body(self, o: Obj, name: str) -> E | None:
        kwargs = o is self.kwargs
        if kwargs and self.xml:
            return xml_params(self, o, name)
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
            if kwargs:
                check_keyword_argument(pname, o.pointer)
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
        deps = dependencies(self, o, kept)
        if deps and not (self.any_order and len(members) > 1):
            got = members_tracked(self, members, extra, ex_lo, ex_hi, name, deps)
        else:
            got = self._members(members, extra, ex_lo, ex_hi, name, deps)
        if got is DEAD:
            return None
        inner = cast("tuple[E, bool] | None", got)
        if inner is None:
            return seq([lb, rb])
        body, may_be_empty = inner
        if may_be_empty and not nonempty:
            body = opt(body)
        return seq([lb, body, rb])

    def _members(
        self,
        members: list[tuple[E, bool]],
        extra: E | None,
        ex_lo: int,
        ex_hi: int | None,
        name: str,
        deps: list[tuple[int, tuple[int | None, ...]]] | None = None,
    ) -> tuple[E, bool] | None | object:
        """The member list between braces, and whether it may be empty (`DEAD`: none).

        Declared members come in declaration order. Extra members (undeclared names, so the
        layout stays unambiguous) may follow any member, or come first, unless their number is
        bounded, in which case they all come after the declared ones.
        """
        n = len(members)
        if self.any_order and 1 < n <= MAX_ANY_ORDER:
            return members_any_order(self, members, extra, ex_lo, ex_hi, name, deps or [])
        if self.any_order and n > MAX_ANY_ORDER:
            return members_seen_set(self, members, extra, ex_lo, ex_hi, name, deps or [])
        comma = sym("COMMA")
        extra, star, tail, interleave = self.extras_layout(extra, ex_lo, ex_hi, name, n)
        first_req = next((i for i, (_, r) in enumerate(members) if r), n)
        # Lark expands every optional group of a rule into alternatives (2^k), so layouts with
        # more than a few optional members get one rule per suffix instead of inline groups.
        n_opt = sum(1 for _, r in members if not r)
        chained = n_opt > MAX_INLINE_OPTIONAL or (first_req + 2) * n > INLINE_LIMIT
        rest_names: dict[int, str] = {}
        if chained:  # reserve the suffix rules in reading order
            for i in range(0 if interleave else 1, n - 1):
                rest_names[i] = self.names.rule(f"{name}_rest{i}")
                self.rules[rest_names[i]] = PENDING

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
                alts.append(extras_only(extra, ex_lo, ex_hi))
            may_be_empty = may_be_empty and ex_lo == 0
        body = alt(alts)
        if body is None:
            return None
        return body, may_be_empty

    def extras_layout(
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

    def shared_pairs(self, members: list[tuple[E, bool]], name: str, shared: set[int]) -> list[E]:
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

    def extras(self, o: Obj, name: str) -> E | None:
        """Members beyond the declared ones: patternProperties, then additionalProperties."""
        if self.gemma and (o.patterns or o.extra != NEVER_NODE):
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
        ve = self.expr(o.extra, f"{name}_value")
        if ve is not None:
            k = self.leaves.key(declared, None, [p for p, _ in o.patterns], o.names, o.pointer)
            if k is not None:
                key = sym("STRING") if k == STRING else self.term(k, f"{name}_key")
                if k == STRING:
                    self.term(STRING, "STRING")
                parts.append(seq([key, sym("COLON"), ve]))
        return alt(parts)


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
