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
  nothing is ever dropped or approximated. A lookahead that admits no text is pruned with
  every alternative that needs it. One whose automaton is too big (`MAX_LOOKAHEAD_STATES`)
  is refused, or with `export_gbnf(..., loosen=True)` dropped and named in `loosened`;
- counted repeats stay within llama.cpp's cap (`LLAMA_REPEAT_CAP`), which refuses some and
  silently widens others: a repeated group is a rule of its own, and counts above the cap
  are blocks of repeats (`x{0,2500}` as at most two blocks of 1,000 and a rest), exactly.

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

__all__ = [
    "MAX_LOOKAHEAD_STATES",
    "GbnfExport",
    "export_gbnf",
    "lark_to_gbnf",
    "regex_to_gbnf",
    "to_gbnf",
]

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
    if body == NEVER:
        raise GrammarError(f"the regex {pattern!r} admits no text")
    return w.render([(root, body)])


def lark_to_gbnf(text: str, *, start: str = "start") -> str:
    """GBNF text for Lark grammar `text`, the same language (see the module docstring).

    Raises:
        GrammarError: a construct with no GBNF form, or a grammar that admits no text.
        TooComplexError: a lookahead whose automaton would exceed `MAX_LOOKAHEAD_STATES`.
    """
    return export_gbnf(text, start=start).text


@dataclass(frozen=True)
class GbnfExport:
    """A GBNF export and what it loosened (empty: the same language as the Lark text)."""

    text: str
    loosened: tuple[str, ...] = ()


def export_gbnf(text: str, *, start: str = "start", loosen: bool = False) -> GbnfExport:
    """GBNF for Lark grammar `text`; with `loosen`, a lookahead too big to write out is dropped
    (its `R` kept: a looser language) and named in `loosened`, instead of refused. The remote
    backend sends that, and checks each reply with the agent's own parse and validation."""
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
    names: list[str] = []
    for name, params, _tree, _opts in grammar.rule_defs:
        if params:
            raise GrammarError(f"rule templates are not supported ({name})")
        names.append(str(name))
    for name, _ in grammar.term_defs:
        names.append(str(name))
    if start not in names:
        raise GrammarError(f"the grammar has no {start!r} rule")
    defs = [(str(n), tree) for n, _p, tree, _o in grammar.rule_defs]
    defs += [(str(n), tree) for n, (tree, _prio) in grammar.term_defs]
    # Definitions that admit no text (a lookahead excluding everything) are pruned, with every
    # alternative that needs them, until none is left: the language is unchanged.
    never: frozenset[str] = frozenset()
    while True:
        w = _Writer(never=never, loosen=loosen)
        w.reserve(["root"])
        for n in names:
            w.name(n)
        try:
            bodies = [(n, w.tree(tree, n)) for n, tree in defs]
        except SDKError:
            raise
        except (LarkError, RecursionError) as e:
            raise GrammarError(f"cannot export to GBNF: {e}") from e
        empty = never | {n for n, body in bodies if body == NEVER}
        if empty == never:
            break
        never = empty
    if start in never:
        raise GrammarError(f"the grammar admits no text (its {start!r} rule is empty)")
    rules = [("root", w.name(start))] + [(w.name(n), body) for n, body in bodies]
    return GbnfExport(w.render(rules), tuple(w.loosened))


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


def _repeat(item: str, lo: int, hi: int | None) -> str:
    """`item` (already an atom) repeated `lo`..`hi` times (`hi` None: no bound)."""
    if lo == 1 and hi == 1:
        return item
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


def _join(*parts: str) -> str:
    kept = [p for p in parts if p != '""']
    return " ".join(kept) if kept else '""'


LLAMA_REPEAT_CAP = 2000
"""llama.cpp's `MAX_REPETITION_THRESHOLD`: it refuses `x{m,}` with m above it, reads `x{m,n}`
with n above it as `x{m,}` (silently looser), and refuses a repeated group whose sub-rules
times the count exceed it (`(a | "\\" (b | c)){0,1024}`: a JSON string with `maxLength`)."""

_CHUNK = 1000  # counted repeats above the cap are written in blocks of this many

NEVER = "\x00never\x00"
"""What the writer returns for an expression that matches no text (an empty character class,
a lookahead that excludes everything): never in the output, pruned where it appears."""


def _llama_symbols(item: str) -> int:
    """At least the sub-rules llama.cpp makes for a group: its nested groups and repeats
    (counted on the text, so a quote or class holding `(` or `*` only overcounts)."""
    counted = sum(int(m.group(1) or 1) for m in re.finditer(r"\{\d+(?:,(\d*))?\}", item))
    return 1 + item.count("(") + sum(item.count(c) for c in "*+?") + counted


@dataclass
class _Writer:
    names: dict[str, str] = field(default_factory=dict)
    used: set[str] = field(default_factory=set)
    extra: list[tuple[str, str]] = field(default_factory=list)
    dfa_rules: dict[int, str] = field(default_factory=dict)
    never: frozenset[str] = frozenset()  # Lark names whose language is empty: pruned
    loosen: bool = False  # an oversize lookahead is dropped (recorded) instead of refused
    loosened: list[str] = field(default_factory=list)
    hoisted: dict[str, str] = field(default_factory=dict)

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
        lines = [f"{n} ::= {body}" for n, body in rules + self.extra if body != NEVER]
        return "\n".join(lines) + "\n"

    # ---- repeats, within llama.cpp's cap

    def repeat(self, expr: str, lo: int, hi: int | None) -> str:
        if expr == NEVER:
            return '""' if lo == 0 else NEVER
        if lo == 1 and hi == 1:
            return expr
        # An item that already ends in a repeat is grouped: `(x*)*`, never `x**` (which
        # neither llama.cpp nor XGrammar parses: a MaskBench URL pattern `(?:[a-z]|\/)*`
        # inside a repeat did that).
        item = f"({expr})" if _POSTFIX.search(expr) and not expr.endswith('"') else _group(expr)
        count = hi if hi else max(lo, 1)
        if item.startswith("(") and _llama_symbols(item) * count > LLAMA_REPEAT_CAP:
            item = self.hoist(item)  # a rule reference: llama.cpp counts it as one
        if lo > LLAMA_REPEAT_CAP or (hi is not None and hi > LLAMA_REPEAT_CAP):
            return self.long_repeat(item, lo, hi)
        return _repeat(item, lo, hi)

    def hoist(self, item: str) -> str:
        got = self.hoisted.get(item)
        if got is None:
            got = self.hoisted[item] = self.fresh("rep")
            self.extra.append((got, item))
        return got

    def long_repeat(self, item: str, lo: int, hi: int | None) -> str:
        """`item{lo,hi}` past the cap, exactly, as repeats of `_CHUNK`-item blocks."""

        def exact(x: str, k: int) -> str:
            if k <= _CHUNK:
                return _repeat(x, k, k)
            block = self.hoist(_repeat(x, _CHUNK, _CHUNK))
            return _join(exact(block, k // _CHUNK), _repeat(x, k % _CHUNK, k % _CHUNK))

        def upto(x: str, n: int) -> str:
            if n <= _CHUNK:
                return _repeat(x, 0, n)
            q, r = divmod(n, _CHUNK)
            block = self.hoist(_repeat(x, _CHUNK, _CHUNK))
            # [0, q*CHUNK - 1] as (q-1 blocks at most, then under a block), or q blocks and r
            below = _join(upto(block, q - 1), upto(x, _CHUNK - 1))
            return f"({below} | {_join(exact(block, q), upto(x, r))})"

        if hi is None:
            return _join(exact(item, lo), _repeat(item, 0, None))
        return _join(exact(item, lo), upto(item, hi - lo))

    # ---- Lark trees (rules and terminals)

    def tree(self, tree: Any, where: str, depth: int = 0) -> str:
        from lark import Token, Tree
        from lark.grammar import NonTerminal, Terminal

        if depth > 500:
            raise GrammarError(f"{where} nests too deeply")
        if isinstance(tree, (NonTerminal, Terminal)):
            if tree.name not in self.names:
                raise GrammarError(f"undefined symbol {tree.name} (used in {where})")
            return NEVER if tree.name in self.never else self.names[tree.name]
        if isinstance(tree, Token) or not isinstance(tree, Tree):
            raise GrammarError(f"unexpected {tree!r} in {where}")
        data, ch = tree.data, tree.children
        if data == "expansions":
            alts = [a for a in (self.tree(c, where, depth + 1) for c in ch) if a != NEVER]
            return " | ".join(alts) if alts else NEVER
        if data == "expansion":
            items = [self.tree(c, where, depth + 1) for c in ch]
            if NEVER in items:
                return NEVER
            return " ".join(_group(i) for i in items) if items else '""'
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
            return self.repeat(self.tree(ch[0], where, depth + 1), 0, 1)
        if data == "expr":
            item = self.tree(ch[0], where, depth + 1)
            op = str(ch[1])
            if op == "?":
                return self.repeat(item, 0, 1)
            if op == "*":
                return self.repeat(item, 0, None)
            if op == "+":
                return self.repeat(item, 1, None)
            if op == "~":
                lo = int(str(ch[2]))
                hi = int(str(ch[3])) if len(ch) > 3 else lo
                if hi < lo:
                    raise GrammarError(f"bad repetition ~ {lo}..{hi} in {where}")
                return self.repeat(item, lo, hi)
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
            return _char_class(node.ranges) if node.ranges else NEVER
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
                got = (
                    self.lookahead(item, rx.Seq(node.items[k + 1 :]), where)
                    if isinstance(item, rx.Look)
                    else self.node(item, where)
                )
                if got == NEVER:
                    return NEVER
                out.append(_group(got))
                if isinstance(item, rx.Look):
                    break
            if run:
                out.append(_literal("".join(run)))
            return " ".join(out) if out else '""'
        if isinstance(node, rx.Alt):
            alts = [a for a in (self.node(i, where) for i in node.items) if a != NEVER]
            return "(" + " | ".join(alts) + ")" if alts else NEVER
        if isinstance(node, rx.Repeat):
            if node.max is None and _nullable(node.item):
                # `x*` over an `x` that may be empty is left recursion to llama.cpp (refused);
                # it is the same language as `x'*`, `x'` being `x` without the empty text.
                lead = _nonempty(node.item)
                if lead is not None:
                    return self.repeat(self.node(lead, where), 0, None)
            return self.repeat(self.node(node.item, where), node.min, node.max)
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
            if self.loosen:  # the looser `R`: the agent's own checks enforce the rest
                self.loosened.append(
                    f"{where}: a lookahead needing {got.n_states} automaton states "
                    f"(limit {MAX_LOOKAHEAD_STATES})"
                )
                return self.node(rest, where)
            raise TooComplexError(
                f"the lookahead in {where} needs {got.n_states} automaton states in GBNF "
                f"(limit {MAX_LOOKAHEAD_STATES})"
            )
        cached = self.dfa_rules.get(dfa.serial)
        if cached is not None:
            return cached
        if dfa.n_states < 2 or not (dfa.table[1].any() or dfa.accepting[1]):
            return NEVER  # it admits no text: pruned where it is used
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


def _nullable(node: rx.Node) -> bool | None:
    """Does the regex match the empty text? (None: it holds a lookahead or an anchor.)"""
    from . import _regex as rx

    if isinstance(node, rx.Chars):
        return False
    if isinstance(node, rx.Seq | rx.Alt):
        got = [_nullable(i) for i in node.items]
        if None in got:
            return None
        return all(got) if isinstance(node, rx.Seq) else any(got)
    if isinstance(node, rx.Repeat):
        return True if node.min == 0 else _nullable(node.item)
    return None


def _nonempty(node: rx.Node) -> rx.Node | None:
    """The regex's language without the empty text (None where `_nullable` cannot tell)."""
    from . import _regex as rx

    nullable = _nullable(node)
    if nullable is None:
        return None
    if not nullable:
        return node
    if isinstance(node, rx.Alt):
        alts = [_nonempty(i) for i in node.items]
        return None if None in alts else rx.Alt(tuple(a for a in alts if a is not None))
    if isinstance(node, rx.Seq):  # every item may be empty: the first non-empty one leads
        out: list[rx.Node] = []
        for k, item in enumerate(node.items):
            lead = _nonempty(item)
            if lead is None:
                return None
            out.append(rx.Seq((lead, *node.items[k + 1 :])))
        return rx.Alt(tuple(out))
    if isinstance(node, rx.Repeat):
        if node.max == 0:
            return rx.Alt(())
        rest = _nonempty(node.item)
        return None if rest is None else rx.Repeat(rest, 1, node.max)
    return None


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
