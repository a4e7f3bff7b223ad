"""Export grammars in the engine's Lark dialect to GBNF (llama.cpp grammars).

llama.cpp (`grammar` request field, `--grammar-file`), SGLang's `ebnf` field and xgrammar take
GBNF: BNF rules `name ::= ...` over Unicode code points, with string literals, character
classes, grouping, alternation and `? * + {m} {m,} {m,n}` repetition. Our Lark dialect
(docs/internals/grammar-dialect.md) maps onto it rule for rule, terminal for terminal:

- rules and terminals become GBNF rules (`_` → `-`: GBNF names are letters, digits and `-`);
  `root ::= <start>` is added;
- string literals stay literals (`"..."i` becomes per-character classes);
- regex terminals are parsed with the engine's own regex parser (`_regex`) and
  written out node by node: character sets as classes, groups, alternation, repetition;
- GBNF has no lookahead. A sequence `P (?=A) R` / `P (?!A) R` is exported *exactly*: the
  engine's automaton for "R intersected with (or minus) A.*" is converted from UTF-8 bytes to
  code points and written as right-linear rules, one per state. The language is unchanged;
  nothing is ever dropped or approximated.

Every construct of the dialect is exported; anything else raises `GrammarError` (naming it),
as does an `//@any_order` line (members in any order, tracked as a set by the engine).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sdk._ast_lock import AST_LOCK
from sdk._regex_ast import MAX_CODEPOINT
from sdk.engine._lark_literals import literal_pattern
from sdk.errors import GrammarError, SDKError, TooComplexError

if TYPE_CHECKING:
    from . import _regex as rx
    from ._dfa import Dfa
    from .grammar import CompiledGrammar

__all__ = ["MAX_LOOKAHEAD_STATES", "lark_to_gbnf", "regex_to_gbnf", "to_gbnf"]

MAX_LOOKAHEAD_STATES = 20_000
"""Cap on the states of one exported lookahead automaton (each becomes a GBNF rule)."""


def to_gbnf(grammar: str | CompiledGrammar | Any, *, start: str = "start") -> str:
    """GBNF text for a grammar: Lark text, a `CompiledGrammar`, a `SchemaGrammar` (`.lark`) or
    a `TurnGrammar` (`.lark`). The entry rule `start` becomes GBNF's `root`."""
    if isinstance(grammar, str):
        return lark_to_gbnf(grammar, start=start)
    text = getattr(grammar, "lark_text", None) or getattr(grammar, "lark", None)
    if not isinstance(text, str):
        raise TypeError(f"to_gbnf: expected Lark text or a compiled grammar, got {grammar!r}")
    return lark_to_gbnf(text, start=start)


def regex_to_gbnf(pattern: str, *, root: str = "root") -> str:
    """GBNF for one regex of the dialect (fully matched), as a grammar whose entry is `root`."""
    from . import _regex as rx

    w = _Writer()
    body = w.node(rx.parse(pattern), root)
    return w.render([(root, body)])


def lark_to_gbnf(text: str, *, start: str = "start") -> str:
    """GBNF text for Lark grammar `text` (see the module docstring)."""
    from lark.exceptions import LarkError
    from lark.load_grammar import GrammarBuilder

    from ._any_order import NOTE

    if any(line.lstrip().startswith(NOTE) for line in text.split("\n")):
        raise GrammarError(
            "members in any order of an object with more than 3 of them (an //@any_order "
            "line) have no GBNF form: GBNF cannot track which members were written; "
            "compile the schema with member_order='declared'"
        )
    try:
        gb = GrammarBuilder()
        with AST_LOCK:  # Lark evaluates the grammar's string literals with ast
            gb.load_grammar(text)
        grammar = gb.build()
    except LarkError as e:
        raise GrammarError(f"invalid Lark grammar: {e}") from e
    if grammar.ignore:
        raise GrammarError("%ignore is not supported: write whitespace into the grammar")
    w = _Writer()
    names: list[str] = []
    for name, params, _tree, _opts in grammar.rule_defs:
        if params:
            raise GrammarError(f"rule templates are not supported ({name})")
        names.append(str(name))
    for name, _ in grammar.term_defs:
        names.append(str(name))
    if start not in names:
        raise GrammarError(f"the grammar has no {start!r} rule")
    w.reserve(["root"])
    for n in names:
        w.name(n)
    rules: list[tuple[str, str]] = [("root", w.name(start))]
    try:
        for name, _params, tree, _opts in grammar.rule_defs:
            rules.append((w.name(str(name)), w.tree(tree, str(name))))
        for name, (tree, _prio) in grammar.term_defs:
            rules.append((w.name(str(name)), w.tree(tree, str(name))))
    except SDKError:
        raise
    except (LarkError, RecursionError) as e:
        raise GrammarError(f"cannot export to GBNF: {e}") from e
    return w.render(rules)


# ------------------------------------------------------------------ writing


_SHORT_ESCAPES = {0x09: "\\t", 0x0A: "\\n", 0x0D: "\\r", 0x22: '\\"', 0x5C: "\\\\"}


def _escape_cp(cp: int, *, in_class: bool) -> str:
    """One code point, ASCII-only output: letters, digits, space (and in literals printable
    punctuation) as themselves; llama.cpp's escapes `\\n \\t \\r \\" \\\\ \\[ \\]` and
    `\\uNNNN` / `\\UNNNNNNNN` for the rest. Never `\\xNN`: llama.cpp reads two hex digits
    after it, XGrammar's EBNF parser (vLLM, SGLang) as many as follow, so `[\\x3CA]` is `<` or
    `A` to one and U+03CA to the other; four and eight digits read the same in both."""
    ch = chr(cp)
    if ch.isascii() and (ch.isalnum() or ch == " "):
        return ch
    short = _SHORT_ESCAPES.get(cp)
    if short is not None:
        return short
    if in_class and ch in "[]":
        return "\\" + ch
    if not in_class and 0x20 < cp < 0x7F:
        return ch
    if cp <= 0xFFFF:
        return f"\\u{cp:04X}"
    return f"\\U{cp:08X}"


def _literal(text: str) -> str:
    return '"' + "".join(_escape_cp(ord(c), in_class=False) for c in text) + '"'


def _char_class(ranges: rx.Ranges) -> str:
    if len(ranges) == 1 and ranges[0][0] == ranges[0][1]:
        return _literal(chr(ranges[0][0]))
    negated = False
    if ranges and ranges[0][0] == 0 and ranges[-1][1] == MAX_CODEPOINT and len(ranges) > 1:
        from . import _regex as rx

        ranges, negated = rx.negate(ranges), True
    parts = []
    for lo, hi in ranges:
        if lo == hi:
            parts.append(_escape_cp(lo, in_class=True))
        elif hi == lo + 1:
            parts.append(_escape_cp(lo, in_class=True) + _escape_cp(hi, in_class=True))
        else:
            parts.append(f"{_escape_cp(lo, in_class=True)}-{_escape_cp(hi, in_class=True)}")
    return "[" + ("^" if negated else "") + "".join(parts) + "]"


_ATOM = re.compile(r'^(?:[A-Za-z0-9-]+|"(?:\\.|[^"\\])*"|\[(?:\\.|[^\]\\])*\]|\(.*\))$', re.S)


_POSTFIX = re.compile(r"(?:[?*+]|\{\d+(?:,\d*)?\})$")


def _is_atom(expr: str) -> bool:
    m = _POSTFIX.search(expr)
    if m and m.start() > 0 and (expr[m.start() - 1] in '")]-' or expr[m.start() - 1].isalnum()):
        expr = expr[: m.start()]
    if not _ATOM.match(expr):
        return False
    if expr.startswith("("):  # "(a) (b)" is not one group
        depth = 0
        in_str = in_cls = False
        i = 0
        while i < len(expr):
            c = expr[i]
            if c == "\\":
                i += 2
                continue
            if in_str:
                in_str = c != '"'
            elif in_cls:
                in_cls = c != "]"
            elif c == '"':
                in_str = True
            elif c == "[":
                in_cls = True
            elif c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
                if depth == 0 and i != len(expr) - 1:
                    return False
            i += 1
    return True


def _group(expr: str) -> str:
    return expr if _is_atom(expr) else f"({expr})"


def _repeat(expr: str, lo: int, hi: int | None) -> str:
    if lo == 1 and hi == 1:
        return expr
    # An item that already ends in a repeat is grouped: `(x*)*`, never `x**` (which neither
    # llama.cpp nor XGrammar parses: a MaskBench URL pattern `(?:[a-z]|\/)*` inside a
    # repeat did that).
    item = f"({expr})" if _POSTFIX.search(expr) and not expr.endswith('"') else _group(expr)
    if (lo, hi) == (0, 1):
        return f"{item}?"
    if hi is None:
        if lo == 0:
            return f"{item}*"
        if lo == 1:
            return f"{item}+"
        return f"{item}{{{lo},}}"
    if hi == 0:
        return '""'
    if lo == hi:
        return f"{item}{{{lo}}}"
    return f"{item}{{{lo},{hi}}}"


@dataclass
class _Writer:
    names: dict[str, str] = field(default_factory=dict)
    used: set[str] = field(default_factory=set)
    extra: list[tuple[str, str]] = field(default_factory=list)
    dfa_rules: dict[int, str] = field(default_factory=dict)

    def reserve(self, names: list[str]) -> None:
        self.used.update(names)

    def name(self, lark_name: str) -> str:
        got = self.names.get(lark_name)
        if got is None:
            got = self.fresh(lark_name)
            self.names[lark_name] = got
        return got

    def fresh(self, base: str) -> str:
        clean = re.sub(r"[^A-Za-z0-9-]", "-", base).strip("-") or "r"
        if not clean[0].isalpha():
            clean = "r" + clean
        cand, k = clean, 1
        while cand in self.used:
            k += 1
            cand = f"{clean}-{k}"
        self.used.add(cand)
        return cand

    def render(self, rules: list[tuple[str, str]]) -> str:
        lines = [f"{n} ::= {body}" for n, body in rules + self.extra]
        return "\n".join(lines) + "\n"

    # ---- Lark trees (rules and terminals)

    def tree(self, tree: Any, where: str, depth: int = 0) -> str:
        from lark import Token, Tree
        from lark.grammar import NonTerminal, Terminal

        if depth > 500:
            raise GrammarError(f"{where} nests too deeply")
        if isinstance(tree, (NonTerminal, Terminal)):
            if tree.name not in self.names:
                raise GrammarError(f"undefined symbol {tree.name} (used in {where})")
            return self.names[tree.name]
        if isinstance(tree, Token) or not isinstance(tree, Tree):
            raise GrammarError(f"unexpected {tree!r} in {where}")
        data, ch = tree.data, tree.children
        if data == "expansions":
            alts = [self.tree(c, where, depth + 1) for c in ch]
            return " | ".join(alts)
        if data == "expansion":
            items = [_group(self.tree(c, where, depth + 1)) for c in ch]
            return " ".join(items) if items else '""'
        if data in ("value", "alias"):
            return self.tree(ch[0], where, depth + 1)
        if data == "literal":
            return self.literal(ch[0], where)
        if data == "range":
            lo = literal_pattern(ch[0]).value
            hi = literal_pattern(ch[1]).value
            if len(lo) != 1 or len(hi) != 1 or lo > hi:
                raise GrammarError(f"bad range {ch[0]}..{ch[1]} in {where}")
            return _char_class(((ord(lo), ord(hi)),))
        if data == "maybe":
            return _repeat(self.tree(ch[0], where, depth + 1), 0, 1)
        if data == "expr":
            item = self.tree(ch[0], where, depth + 1)
            op = str(ch[1])
            if op == "?":
                return _repeat(item, 0, 1)
            if op == "*":
                return _repeat(item, 0, None)
            if op == "+":
                return _repeat(item, 1, None)
            if op == "~":
                lo = int(str(ch[2]))
                hi = int(str(ch[3])) if len(ch) > 3 else lo
                if hi < lo:
                    raise GrammarError(f"bad repetition ~ {lo}..{hi} in {where}")
                return _repeat(item, lo, hi)
            raise GrammarError(f"operator {op!r} (in {where}) has no GBNF form")
        raise GrammarError(f"construct {data!r} (in {where}) has no GBNF form")

    def literal(self, tok: Any, where: str) -> str:
        from lark.lexer import PatternRE, PatternStr

        from . import _regex as rx

        pat = literal_pattern(tok)
        flags = set(pat.flags)
        if flags - {"i"}:
            raise GrammarError(f"regex flags {sorted(flags - {'i'})} in {where} have no GBNF form")
        ignore_case = "i" in flags
        if isinstance(pat, PatternStr):
            if not pat.value:
                return '""'
            if not ignore_case:
                return _literal(pat.value)
            return self.node(rx.literal(pat.value, ignore_case=True), where)
        assert isinstance(pat, PatternRE)
        return self.node(rx.parse(pat.value, ignore_case=ignore_case), where)

    # ---- regex ASTs

    def node(self, node: rx.Node, where: str) -> str:
        from . import _regex as rx

        if isinstance(node, rx.Chars):
            if not node.ranges:
                raise GrammarError(f"an empty character class (in {where}) has no GBNF form")
            return _char_class(node.ranges)
        if isinstance(node, rx.Seq):
            out: list[str] = []
            run: list[str] = []
            for k, item in enumerate(node.items):
                if isinstance(item, rx.Chars) and len(item.ranges) == 1:
                    lo, hi = item.ranges[0]
                    if lo == hi:
                        run.append(chr(lo))
                        continue
                if run:
                    out.append(_literal("".join(run)))
                    run = []
                if isinstance(item, rx.Look):
                    out.append(self.lookahead(item, rx.Seq(node.items[k + 1 :]), where))
                    break
                out.append(_group(self.node(item, where)))
            if run:
                out.append(_literal("".join(run)))
            return " ".join(out) if out else '""'
        if isinstance(node, rx.Alt):
            return "(" + " | ".join(self.node(i, where) for i in node.items) + ")"
        if isinstance(node, rx.Repeat):
            return _repeat(self.node(node.item, where), node.min, node.max)
        if isinstance(node, rx.Look):
            return self.lookahead(node, rx.EMPTY, where)
        raise GrammarError(f"regex construct {node!r} (in {where}) has no GBNF form")

    def lookahead(self, look: rx.Look, rest: rx.Node, where: str) -> str:
        """`(?=A)R` / `(?!A)R` exactly, as right-linear rules over the code-point automaton."""
        from ._automata import look_intersection
        from ._dfa import Dfa
        from ._dfa_ops import minimize

        got = look_intersection(look, rest)
        if isinstance(got, Dfa) and got.n_states <= MAX_LOOKAHEAD_STATES:
            got = minimize(got)  # fewer states, fewer GBNF rules; the language is the same
        dfa = got if isinstance(got, Dfa) else None  # a lazy one is far over the limit
        if dfa is None or dfa.n_states > MAX_LOOKAHEAD_STATES:
            raise TooComplexError(
                f"the lookahead in {where} needs {got.n_states} automaton states in GBNF "
                f"(limit {MAX_LOOKAHEAD_STATES})"
            )
        cached = self.dfa_rules.get(dfa.serial)
        if cached is not None:
            return cached
        if dfa.n_states < 2 or not (dfa.table[1].any() or dfa.accepting[1]):
            raise GrammarError(f"the lookahead in {where} admits no text (empty language)")
        base = self.fresh(f"{where}-la")
        state_names = {1: base}
        pending = [1]
        bodies: dict[int, str] = {}
        while pending:
            q = pending.pop()
            alts: list[str] = []
            for tgt, ranges in _codepoint_edges(dfa, q):
                if tgt not in state_names:
                    state_names[tgt] = f"{base}-{len(state_names)}"
                    self.used.add(state_names[tgt])
                    pending.append(tgt)
                alts.append(f"{_char_class(ranges)} {state_names[tgt]}")
            if dfa.accepting[q]:
                alts.append('""')
            bodies[q] = " | ".join(alts)
        for q, body in sorted(bodies.items(), key=lambda kv: kv[0] != 1):
            self.extra.append((state_names[q], body))
        self.dfa_rules[dfa.serial] = base
        return base


# ------------------------------------------------------------------ bytes -> code points


def _codepoint_edges(dfa: Dfa, state: int) -> Iterator[tuple[int, rx.Ranges]]:
    """The transitions of `state` over whole UTF-8 characters: (target, code-point ranges)."""
    from . import _regex as rx

    memo: dict[tuple[int, int], list[tuple[int, int, int]]] = {}
    by_target: dict[int, list[tuple[int, int]]] = {}
    row = dfa.row(state)
    leads = (
        (0x00, 0x7F, 0, 0x7F),
        (0xC2, 0xDF, 1, 0x1F),
        (0xE0, 0xEF, 2, 0x0F),
        (0xF0, 0xF4, 3, 0x07),
    )
    for first, last, k, mask in leads:
        for b in range(first, last + 1):
            t = int(row[b])
            if t == 0:
                continue
            hi_bits = (b & mask) << (6 * k)
            for lo, hi, tgt in _suffixes(dfa, t, k, memo):
                by_target.setdefault(tgt, []).append((hi_bits | lo, hi_bits | hi))
    for tgt, ranges in by_target.items():
        yield tgt, rx.normalize(ranges)


def _suffixes(
    dfa: Dfa, state: int, k: int, memo: dict[tuple[int, int], list[tuple[int, int, int]]]
) -> list[tuple[int, int, int]]:
    """(lo, hi, target) over the values of `k` continuation bytes read from `state`."""
    if k == 0:
        return [(0, 0, state)]
    got = memo.get((state, k))
    if got is not None:
        return got
    out: list[tuple[int, int, int]] = []
    row = dfa.row(state)
    shift = 6 * (k - 1)
    for b in range(0x80, 0xC0):
        t = int(row[b])
        if t == 0:
            continue
        top = (b - 0x80) << shift
        for lo, hi, tgt in _suffixes(dfa, t, k - 1, memo):
            if out and out[-1][2] == tgt and out[-1][1] + 1 == top | lo:
                out[-1] = (out[-1][0], top | hi, tgt)
            else:
                out.append((top | lo, top | hi, tgt))
    memo[(state, k)] = out
    return out
