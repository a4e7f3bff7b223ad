"""Lark grammar text → `CompiledGrammar`: terminal DFAs plus rule automata over symbols.

Lark parses the grammar (its EBNF trees are the input); we then build two layers:
- every terminal becomes a trimmed byte-level DFA (`_automata`), memoised per process so that
  the same terminal in many grammars shares one set of precomputed token masks;
- every rule becomes a DFA over symbols (terminals and rule calls), a recursive transition
  network. Repetition stays a loop (no left-recursive BNF), so the parser is a plain stack
  machine whose configurations are tuples of ints.
Parallel terminal edges into the same target are merged into one union terminal: the parser
does not care which literal of an enum was written, and the mask then walks one DFA.
"""

from __future__ import annotations

import itertools
import re
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

from lark import Token, Tree
from lark.exceptions import LarkError
from lark.grammar import NonTerminal, Terminal
from lark.grammar import Symbol as LarkSymbol
from lark.lexer import PatternRE, PatternStr
from lark.load_grammar import GrammarBuilder, _parse_grammar

from sdk._ast_lock import AST_LOCK
from sdk.engine._lark_literals import literal_pattern

from ..errors import GrammarError, RegexError, SDKError, TooComplexError
from . import _any_order, _rule_shapes
from . import _automata as au
from . import _regex as rx
from ._cache import BoundedCache
from ._gc_pause import gc_paused
from ._lark_lines import parse_line
from ._positions import Position

Symbol = tuple[str, int]  # ("T", terminal id) | ("R", rule id)

#: Caps on one rule's automata: `X ~ n` copies X n times, and the subset construction of a
#: rule can in principle blow up; past these a grammar is `TooComplexError`, not a hang.
MAX_RULE_NFA_STATES = 2_000_000
MAX_RULE_DFA_STATES = 200_000
MAX_RULE_SUBSET_WORK = 10_000_000


class CompiledGrammar:
    """An immutable compiled grammar; one instance serves any number of matchers."""

    def __init__(
        self,
        lark_text: str,
        terminals: list[au.AnyDfa],
        terminal_names: list[str],
        positions: list[Position],
        rule_names: list[str],
        rule_starts: list[int],
        start_rule: int,
        dynamic: _any_order.DynamicPositions | None = None,
    ) -> None:
        self.lark_text = lark_text
        self.terminals = terminals
        self.terminal_names = terminal_names
        self.positions = positions
        self.rule_names = rule_names
        self.rule_starts = rule_starts
        self.start_rule = start_rule
        #: positions numbered after `positions`, built as parses reach them (members in any
        #: order: `_any_order`)
        self.dynamic = dynamic
        self.validated: tuple[tuple[str, str], ...] = ()
        self.enforced: tuple[tuple[str, str], ...] = ()
        self.schema: Any = None

    def __repr__(self) -> str:
        return (
            f"CompiledGrammar(rules={len(self.rule_names)}, terminals={len(self.terminals)}, "
            f"positions={len(self.positions)})"
        )

    @classmethod
    def from_lark(
        cls, text: str, *, start: str = "start", statements: Mapping[str, Any] | None = None
    ) -> CompiledGrammar:
        """Compile Lark grammar text in the dialect of docs/internals/grammar-dialect.md.

        `statements`: Lark statement trees of some of the text's definitions by name, exactly
        what Lark reads from their lines (`SchemaGrammar.statements`): taken instead of
        reading those lines."""
        au.work_budget.left = au.MAX_GRAMMAR_WORK
        try:
            with gc_paused():
                return _Builder(text, start, statements or {}).build()
        except SDKError:
            raise
        except LarkError as e:
            raise GrammarError(f"invalid Lark grammar: {e}") from e
        except RecursionError as e:
            raise GrammarError("grammar nests too deeply") from e
        finally:
            au.work_budget.left = None

    @classmethod
    def from_schema(
        cls,
        schema: Any,
        *,
        strict: bool = False,
        whitespace: Literal["compact", "flexible"] = "compact",
        close_objects: bool = False,
        member_order: Literal["declared", "any"] = "declared",
    ) -> CompiledGrammar:
        """JSON Schema → grammar text (`sdk.grammar.compile_schema`, whose options these are)
        → compiled grammar."""
        from ..grammar import compile_schema

        with gc_paused():
            sg = compile_schema(
                schema,
                strict=strict,
                whitespace=whitespace,
                close_objects=close_objects,
                member_order=member_order,
            )
            g = cls.from_lark(sg.lark, statements=sg.statements)
            g.validated = tuple(sg.validated)
            g.enforced = tuple(sg.enforced)
            # Freed while the collector is still off: the collection that follows the pause
            # (at the next allocation) would otherwise walk every Lark tree of the statements.
            del sg
        g.schema = schema
        return g


# ------------------------------------------------------------------ building


class _SymNfa:
    """Edges by source state; most of a rule's NFA states have no edge of one kind or the
    other, so the lists are only made for those that do."""

    __slots__ = ("eps", "edges", "n")

    def __init__(self) -> None:
        self.eps: defaultdict[int, list[int]] = defaultdict(list)
        self.edges: defaultdict[int, list[tuple[Symbol, int]]] = defaultdict(list)
        self.n = 0

    def state(self) -> int:
        n = self.n
        if n >= MAX_RULE_NFA_STATES:
            raise TooComplexError(f"a rule's automaton exceeds {MAX_RULE_NFA_STATES} states")
        self.n = n + 1
        return n


class _Builder:
    def __init__(self, text: str, start: str, statements: Mapping[str, Any]) -> None:
        self.text = text
        self.start = start
        self.statements = statements
        self.term_ids: dict[Any, int] = {}  # AST or name -> id
        self.terminals: list[au.AnyDfa] = []
        self.term_names: list[str] = []
        self.term_live: dict[int, bool] = {}  # terminal id -> it matches a non-empty string
        self.term_defs: dict[str, Tree] = {}
        self.rule_ids: dict[str, int] = {}
        self.rule_trees: list[Tree] = []
        self.anon = itertools.count()
        self.any_order: list[_any_order.Spec] = []

    # ---- terminals

    def term_ast(self, tree: Any, depth: int = 0) -> rx.Node:
        if depth > 200:
            raise GrammarError("terminal definitions nest too deeply")
        if isinstance(tree, Terminal):
            return self.named_term_ast(tree.name, depth)
        if isinstance(tree, (Token, NonTerminal)):
            raise GrammarError(f"unexpected {tree!r} in a terminal")
        data = tree.data
        ch = tree.children
        if data == "expansions":
            items = [self.term_ast(c, depth + 1) for c in ch]
            return items[0] if len(items) == 1 else rx.Alt(tuple(items))
        if data == "expansion":
            items = [self.term_ast(c, depth + 1) for c in ch]
            return items[0] if len(items) == 1 else rx.Seq(tuple(items))
        if data == "value":
            return self.term_ast(ch[0], depth + 1)
        if data == "literal":
            return self.literal_ast(ch[0])
        if data == "range":
            lo = literal_pattern(ch[0]).value
            hi = literal_pattern(ch[1]).value
            if len(lo) != 1 or len(hi) != 1 or lo > hi:
                raise GrammarError(f"bad range {ch[0]}..{ch[1]}")
            return rx.chars(((ord(lo), ord(hi)),))
        if data == "expr":
            return self.repeat(self.term_ast(ch[0], depth + 1), ch[1:])
        if data == "maybe":
            return rx.Repeat(self.term_ast(ch[0], depth + 1), 0, 1)
        if data == "alias":
            return self.term_ast(ch[0], depth + 1)
        raise GrammarError(f"unsupported construct {data!r} in a terminal")

    def named_term_ast(self, name: str, depth: int) -> rx.Node:
        tree = self.term_defs.get(name)
        if tree is None:
            raise GrammarError(f"undefined terminal {name}")
        return self.term_ast(tree, depth + 1)

    def literal_ast(self, tok: Token) -> rx.Node:
        pat = literal_pattern(tok)
        flags = set(pat.flags)
        ignore_case = "i" in flags
        if flags - {"i"}:
            raise GrammarError(f"unsupported regex flags {sorted(flags - {'i'})} in {tok}")
        if isinstance(pat, PatternStr):
            if not pat.value:
                return rx.EMPTY
            return rx.literal(pat.value, ignore_case=ignore_case)
        assert isinstance(pat, PatternRE)
        return rx.parse(pat.value, ignore_case=ignore_case)

    @staticmethod
    def repeat(node: rx.Node, ops: list[Any]) -> rx.Node:
        op = str(ops[0])
        if op == "?":
            return rx.Repeat(node, 0, 1)
        if op == "*":
            return rx.Repeat(node, 0, None)
        if op == "+":
            return rx.Repeat(node, 1, None)
        if op == "~":
            lo = int(ops[1])
            hi = int(ops[2]) if len(ops) > 2 else lo
            if hi < lo:
                raise GrammarError(f"bad repetition ~ {lo}..{hi}")
            return rx.Repeat(node, lo, hi)
        raise GrammarError(f"unsupported operator {op!r}")

    def term_id(
        self,
        key: Any,
        name: str,
        ast: Callable[[], rx.Node] | None = None,
        literal: Token | None = None,
    ) -> int:
        """The id of terminal `key`, built from `ast()` or, for a terminal that is one
        literal, from the literal's text (memoised across grammars by that text: most
        terminals of a schema's grammar are literals seen before, and their AST alone cost
        more than the lookup)."""
        tid = self.term_ids.get(key)
        if tid is None:
            try:
                if literal is not None:
                    text = str(literal)
                    dfa = _literal_dfas.get(text)
                    if dfa is None:
                        dfa = _compile_ast(self.literal_ast(literal))
                        _literal_dfas.put(text, dfa, au.cache_size(dfa))
                else:
                    assert ast is not None
                    dfa = _compile_ast(ast())
            except RegexError as e:
                raise RegexError(f"terminal {name}: {e}") from e
            tid = len(self.terminals)
            self.terminals.append(dfa)
            self.term_names.append(name)
            self.term_ids[key] = tid
        return tid

    # ---- rules

    def build(self) -> CompiledGrammar:
        gb = _CheckedBuilder()
        text, notes = _any_order.read_notes(self.text)
        with AST_LOCK:  # Lark evaluates the grammar's string literals with ast
            _load_definitions(gb, text, self.statements)
        grammar = gb.build()
        if grammar.ignore:
            raise GrammarError("%ignore is not supported: write whitespace into the grammar")
        for name, (tree, _prio) in grammar.term_defs:
            self.term_defs[str(name)] = tree
        for name, params, tree, _opts in grammar.rule_defs:
            if params:
                raise GrammarError(f"rule templates are not supported ({name})")
            self.rule_ids[str(name)] = len(self.rule_trees)
            self.rule_trees.append(tree)
        if self.start not in self.rule_ids:
            raise GrammarError(f"the grammar has no {self.start!r} rule")
        self.any_order = [_any_order.make_spec(note, self.rule_ids) for note in notes]
        rule_dfas = []
        for name, rid in self.rule_ids.items():
            nfa = _SymNfa()
            s = nfa.state()
            e = self.rule_nfa(nfa, self.rule_trees[rid], name, s)
            trans, final = _rule_shapes.rule_dfa(nfa, s, e, partial(_rule_dfa, nfa, s, e))
            rule_dfas.append(_SymDfa(trans, final))
        names = list(self.rule_ids)
        return _link(self, rule_dfas, names)

    def rule_nfa(self, nfa: _SymNfa, tree: Any, rule: str, s: int, depth: int = 0) -> int:
        """The automaton of `tree` entered at state `s`; returns its exit state.

        Built from `s` itself, not from a fresh state behind an epsilon edge: no construct
        adds an edge into the state it starts from (a loop re-enters a fresh state of its
        own), so sequences, alternatives and counted copies can share their entry states:
        a state and an epsilon edge fewer per item, and smaller closures to determinise. The
        exit state may get more edges out of it from the caller.
        """
        if depth > 500:
            raise GrammarError(f"rule {rule} nests too deeply")
        if isinstance(tree, NonTerminal):
            e = nfa.state()
            rid = self.rule_ids.get(tree.name)
            if rid is None:
                raise GrammarError(f"undefined rule {tree.name} (used in {rule})")
            nfa.edges[s].append((("R", rid), e))
            return e
        if isinstance(tree, Terminal):
            e = nfa.state()
            name = tree.name
            key = ("name", name)
            # `NAME: "..."` or `NAME: /.../` (what the compiler writes) goes by its literal
            lit = None if key in self.term_ids else _single_literal(self.term_defs.get(name))
            self.term_edge(nfa, s, e, key, name, lambda: self.named_term_ast(name, 0), lit)
            return e
        if isinstance(tree, Token):
            raise GrammarError(f"unexpected token {tree!r} in rule {rule}")
        data, ch = tree.data, tree.children
        if data == "expansions":
            if len(ch) == 1:
                return self.rule_nfa(nfa, ch[0], rule, s, depth + 1)
            e = nfa.state()
            for c in ch:
                nfa.eps[self.rule_nfa(nfa, c, rule, s, depth + 1)].append(e)
            return e
        if data == "expansion":
            cur = s
            for c in ch:
                cur = self.rule_nfa(nfa, c, rule, cur, depth + 1)
            return cur
        if data in ("value", "alias"):
            return self.rule_nfa(nfa, ch[0], rule, s, depth + 1)
        if data == "literal":
            e = nfa.state()
            lit = ch[0]
            key = ("lit", str(lit))
            self.term_edge(nfa, s, e, key, f"__ANON_{next(self.anon)}", literal=lit)
            return e
        if data == "range":
            e = nfa.state()
            ast = self.term_ast(tree)
            self.term_edge(nfa, s, e, ast, f"__ANON_{next(self.anon)}", lambda: ast)
            return e
        if data == "maybe":
            return self.rule_maybe(nfa, ch[0], rule, s, depth)
        if data == "expr":
            return self.rule_repeat(nfa, s, ch, rule, depth)
        raise GrammarError(f"unsupported construct {data!r} in rule {rule}")

    def rule_maybe(self, nfa: _SymNfa, item: Any, rule: str, s: int, depth: int) -> int:
        b = self.rule_nfa(nfa, item, rule, s, depth + 1)
        if b != s:
            nfa.eps[s].append(b)
        return b

    def rule_repeat(self, nfa: _SymNfa, s: int, ch: list[Any], rule: str, depth: int) -> int:
        op = str(ch[1])
        item = ch[0]
        if op in ("?", "*", "+"):
            if op == "?":
                return self.rule_maybe(nfa, item, rule, s, depth)
            a = nfa.state()  # the loop's own entry: the loop edge must not lead back to `s`
            nfa.eps[s].append(a)
            b = self.rule_nfa(nfa, item, rule, a, depth + 1)
            e = nfa.state()
            nfa.eps[b].append(e)
            nfa.eps[b].append(a)
            if op == "*":
                nfa.eps[s].append(e)
            return e
        if op != "~":
            raise GrammarError(f"unsupported operator {op!r} in rule {rule}")
        lo = int(ch[2])
        hi = int(ch[3]) if len(ch) > 3 else lo
        if hi < lo:
            raise GrammarError(f"bad repetition ~ {lo}..{hi} in rule {rule}")
        if hi > 100_000:
            raise GrammarError(f"repetition bound {hi} is too large in rule {rule}")
        cur = s
        e = nfa.state()
        for k in range(hi):
            if k >= lo:
                nfa.eps[cur].append(e)
            cur = self.rule_nfa(nfa, item, rule, cur, depth + 1)
        nfa.eps[cur].append(e)
        return e

    def term_edge(
        self,
        nfa: _SymNfa,
        s: int,
        e: int,
        key: Any,
        name: str,
        ast: Callable[[], rx.Node] | None = None,
        literal: Token | None = None,
    ) -> None:
        """An edge for terminal `key`; its AST is only built (`ast()`) the first time: big
        schemas reference the same few hundred terminals thousands of times."""
        tid = self.term_id(key, name, ast, literal)
        dfa = self.terminals[tid]
        if dfa.nullable:
            nfa.eps[s].append(e)
            key2 = ("nonempty", key)
            if key2 not in self.term_ids:
                self.term_ids[key2] = len(self.terminals)
                self.terminals.append(dfa.without_empty())
                self.term_names.append(name)
            tid = self.term_ids[key2]
        live = self.term_live.get(tid)
        if live is None:
            dfa = self.terminals[tid]
            live = self.term_live[tid] = dfa.n_states > 1 and dfa.takes_a_byte
        if live:
            nfa.edges[s].append((("T", tid), e))


#: Terminal DFAs by AST. Few recur across grammars (16% of lookups hit on the dev MaskBench
#: run): a 128 MiB cap filled it with 103 MB of them and raised the peak RSS by 60 MB, with the
#: same compile times as 32 MiB (those that recur are mostly the recent ones).
_ast_cache: BoundedCache[rx.Node, au.AnyDfa] = BoundedCache("terminal DFAs", 32 << 20)
#: Literal terminals by their Lark text (`"..."`, `/.../i`): the same DFA objects as in
#: `_ast_cache`, reached without building and hashing the AST.
_literal_dfas: BoundedCache[str, au.AnyDfa] = BoundedCache("literal terminal DFAs", 32 << 20)


#: Union terminals by their members' serials: the same union (an enum, the scalars of a JSON
#: value) in another grammar is the same DFA object, so it shares its vocabulary walks too.
_union_dfas: BoundedCache[tuple[int, ...], au.AnyDfa] = BoundedCache(
    "union terminal DFAs", 32 << 20
)


def _union_dfa(members: list[au.AnyDfa]) -> au.AnyDfa:
    members = sorted(members, key=lambda d: d.serial)
    key = tuple(d.serial for d in members)
    dfa = _union_dfas.get(key)
    if dfa is None:
        dfa = au.compacted(au.alternate(members))
        _union_dfas.put(key, dfa, au.cache_size(dfa))
    return dfa


def _single_literal(tree: Any) -> Token | None:
    """The literal a terminal definition consists of (through one-child wrappers), if any."""
    while isinstance(tree, Tree) and len(tree.children) == 1:
        if tree.data == "literal":
            tok = tree.children[0]
            return tok if isinstance(tok, Token) else None
        if tree.data not in ("expansions", "expansion", "value"):
            return None
        tree = tree.children[0]
    return None


#: One definition per line, as the schema compiler writes them (`name: ...`, `NAME.2: ...`).
_DEFINITION_LINE = re.compile(r"[?!]?[A-Za-z_][A-Za-z_0-9]*(?:\.-?[0-9]+)?\s*:")
_NO_STATEMENTS: Mapping[str, Any] = {}  # every line is read


class _CheckedBuilder(GrammarBuilder):
    """Lark's grammar builder with a one-pass check that every used symbol is defined. Lark's
    own `validate` walks each definition's tree twice through generic iterators (a seventh of
    a big schema's compile); any finding (or a template, or an `%ignore`) goes to it, so errors
    read as Lark's."""

    def validate(self) -> None:
        defined = self._definitions
        if self._ignore_names:
            return super().validate()
        for d in defined.values():
            if d.params or d.tree is None:
                return super().validate()
            stack = [d.tree]
            while stack:
                t = stack.pop()
                if t.data == "template_usage":
                    return super().validate()
                for c in t.children:
                    if isinstance(c, Tree):
                        stack.append(c)
                    elif isinstance(c, LarkSymbol) and c.name not in defined:
                        return super().validate()


def _load_definitions(
    gb: GrammarBuilder, text: str, statements: Mapping[str, Any] = _NO_STATEMENTS
) -> None:
    """`gb.load_grammar(text)`, with one-line definitions taken from `statements` (by name)
    or read by `parse_line` instead of Lark's pure-Python grammar parser, which dominated the
    compile of big schemas.

    Text in any other layout (continuation lines, comments, directives), or that fails to
    parse here, goes to Lark whole, so its errors read exactly as before. The definitions are
    not memoised: their Lark trees were a third of the process's tracked objects after the dev
    MaskBench run, which every full garbage collection walks, and re-reading a line costs
    less than those walks saved (TTFM p50 unchanged, p99 lower without the memo).
    """
    lines = [line for line in text.split("\n") if line.strip()]
    if not lines or not all(_DEFINITION_LINE.match(line) for line in lines):
        gb.load_grammar(text)
        return
    defs: list[tuple[Any, ...]] = []
    try:
        for line in lines:
            stmt = statements.get(line[: line.index(":")]) if statements else None
            if stmt is None:
                stmt = parse_line(line)
            if stmt is None:
                stmts = _parse_grammar(line, "<?>").children
                if len(stmts) != 1 or stmts[0].data not in ("rule", "term"):
                    gb.load_grammar(text)
                    return
                stmt = stmts[0]
            defs.append(tuple(gb._unpack_definition(stmt, None)))
    except LarkError:
        gb.load_grammar(text)
        return
    for d in defs:
        gb._define(*d)


def _compile_ast(ast: rx.Node) -> au.AnyDfa:
    dfa = _ast_cache.get(ast)
    if dfa is None:
        dfa = au.compacted(au.compile_node(ast))
        _ast_cache.put(ast, dfa, au.cache_size(dfa))
    return dfa


@dataclass
class _SymDfa:
    trans: list[dict[Symbol, int]]
    final: list[bool]


def _determinize_symbols(nfa: _SymNfa, start: int, end: int) -> _SymDfa:
    cache: dict[int, frozenset[int]] = {}
    eps, edges = nfa.eps, nfa.edges  # read with .get: a read must not add an empty list

    def closure(states: set[int]) -> frozenset[int]:
        out: set[int] = set()
        for q in states:
            c = cache.get(q)
            if c is None:
                seen = {q}
                todo = [q]
                while todo:
                    x = todo.pop()
                    for y in eps.get(x, ()):
                        if y not in seen:
                            seen.add(y)
                            todo.append(y)
                c = frozenset(seen)
                cache[q] = c
            out |= c
        return frozenset(out)

    first = closure({start})
    ids = {first: 0}
    order = [first]
    trans: list[dict[Symbol, int]] = []
    final: list[bool] = []
    k = 0
    work = 0
    while k < len(order):
        cur = order[k]
        k += 1
        work += len(cur)
        if work > MAX_RULE_SUBSET_WORK:
            raise TooComplexError(f"a rule's automaton is too complex ({len(order)} states)")
        moves: dict[Symbol, set[int]] = {}
        for q in cur:
            for sym, tgt in edges.get(q, ()):
                moves.setdefault(sym, set()).add(tgt)
        row: dict[Symbol, int] = {}
        for sym, tgts in moves.items():
            key = closure(tgts)
            work += len(tgts)
            d = ids.get(key)
            if d is None:
                d = len(order)
                if d >= MAX_RULE_DFA_STATES:
                    raise TooComplexError(
                        f"a rule's automaton exceeds {MAX_RULE_DFA_STATES} states"
                    )
                ids[key] = d
                order.append(key)
            row[sym] = d
        trans.append(row)
        final.append(end in cur)
    return _SymDfa(trans, final)


def _rule_dfa(nfa: _SymNfa, start: int, end: int) -> tuple[list[dict[Symbol, int]], list[bool]]:
    d = _minimize_symbols(_determinize_symbols(nfa, start, end))
    return d.trans, d.final


def _minimize_symbols(d: _SymDfa) -> _SymDfa:
    """Hopcroft refinement: equal futures share a state, so parallel edges can merge later.

    O(m log n), where Moore's round-by-round refinement is quadratic on the long chains that
    counted repetitions (`minItems: 1000`) produce. The DFA is partial, so every initial block
    starts on the worklist (Valmari & Lehtinen); afterwards the smaller half suffices.
    """
    n = len(d.trans)
    inv: list[list[tuple[Symbol, int]]] = [[] for _ in range(n)]  # target -> (symbol, source)
    for src, row in enumerate(d.trans):
        for sym, tgt in row.items():
            inv[tgt].append((sym, src))
    finals = [q for q in range(n) if d.final[q]]
    others = [q for q in range(n) if not d.final[q]]
    blocks: list[set[int]] = [set(b) for b in (finals, others) if b]
    block_of = [0] * n
    for bid, members in enumerate(blocks):
        for q in members:
            block_of[q] = bid
    pending = list(range(len(blocks)))
    while pending:
        splitter = pending.pop()
        by_symbol: dict[Symbol, list[int]] = {}
        for t in blocks[splitter]:
            for sym, q in inv[t]:
                by_symbol.setdefault(sym, []).append(q)
        for sources in by_symbol.values():
            hit: dict[int, set[int]] = {}
            for q in sources:
                hit.setdefault(block_of[q], set()).add(q)
            for bid, part in hit.items():
                block = blocks[bid]
                if len(part) == len(block):
                    continue
                rest = block - part
                small, big = (part, rest) if len(part) <= len(rest) else (rest, part)
                blocks[bid] = big
                new = len(blocks)
                blocks.append(small)
                for q in small:
                    block_of[q] = new
                # `bid` (now the bigger half) stays queued if it was; either way the smaller
                # half is a new splitter.
                pending.append(new)
    cls = block_of
    count = len(blocks)
    if count == n:
        return d
    # renumber so the start state stays 0
    order: dict[int, int] = {cls[0]: 0}
    for c in cls:
        order.setdefault(c, len(order))
    trans: list[dict[Symbol, int]] = [{} for _ in range(count)]
    final = [False] * count
    for s in range(n):
        c = order[cls[s]]
        final[c] = d.final[s]
        trans[c] = {sym: order[cls[t]] for sym, t in d.trans[s].items()}
    return _SymDfa(trans, final)


def _link(b: _Builder, rules: list[_SymDfa], names: list[str]) -> CompiledGrammar:
    """Trim unproductive parts, reject left recursion, merge parallel terminals, number positions."""
    n = len(rules)
    # an any-order member list's own rule only stands in for its dynamic positions
    dynamic = {spec.rule: spec for spec in b.any_order}
    # productive rules: fixpoint over "a final state is reachable using productive symbols"
    productive = [False] * n
    changed = True
    while changed:
        changed = False
        # the compiler defines a rule before the rules it calls: settle those first, so most
        # grammars need one pass (the fixpoint does not depend on the order)
        for r in reversed(range(n)):
            if productive[r]:
                continue
            spec = dynamic.get(r)
            if (
                _any_order.productive(spec, productive)
                if spec is not None
                else _reaches_final(rules[r], productive)
            ):
                productive[r] = True
                changed = True
    start = b.rule_ids[b.start]
    if not productive[start]:
        raise GrammarError("the grammar's language is empty")
    # drop edges into unproductive rules, then states that cannot reach a final state
    for r in range(n):
        for row in rules[r].trans:
            for sym in [s for s in row if s[0] == "R" and not productive[s[1]]]:
                del row[sym]
        _trim_symbols(rules[r])
    nullable = _nullable_rules(rules)
    _check_left_recursion(rules, names, nullable)
    # merge parallel terminal edges (same source, same target) into one union terminal
    union_ids: dict[frozenset[int], int] = {}
    for rule in rules:
        for row in rule.trans:
            by_target: dict[int, list[int]] = {}
            for sym, tgt in row.items():
                if sym[0] == "T":
                    by_target.setdefault(tgt, []).append(sym[1])
            for tgt, tids in by_target.items():
                if len(tids) < 2:
                    continue
                key = frozenset(tids)
                uid = union_ids.get(key)
                if uid is None:
                    uid = len(b.terminals)
                    b.terminals.append(_union_dfa([b.terminals[t] for t in tids]))
                    b.term_names.append("|".join(b.term_names[t] for t in sorted(tids)))
                    union_ids[key] = uid
                for t in tids:
                    del row[("T", t)]
                row[("T", uid)] = tgt
    # global numbering
    offsets = []
    total = 0
    for rule in rules:
        offsets.append(total)
        total += len(rule.trans)
    positions: list[Position] = []
    for r, rule in enumerate(rules):
        for st, row in enumerate(rule.trans):
            terms = {sym[1]: offsets[r] + tgt for sym, tgt in row.items() if sym[0] == "T"}
            calls = tuple((sym[1], offsets[r] + tgt) for sym, tgt in row.items() if sym[0] == "R")
            positions.append(Position(r, terms, calls, rule.final[st]))
    extra = None
    if b.any_order:
        extra = _any_order.DynamicPositions(len(positions), b.any_order, productive)
        for k, spec in enumerate(b.any_order):
            offsets[spec.rule] = extra.start(k)
    return CompiledGrammar(
        b.text,
        b.terminals,
        b.term_names,
        positions,
        names,
        offsets,
        start,
        extra,
    )


def _reaches_final(rule: _SymDfa, productive: list[bool]) -> bool:
    seen = {0}
    todo = [0]
    while todo:
        s = todo.pop()
        if rule.final[s]:
            return True
        for sym, t in rule.trans[s].items():
            if (sym[0] == "T" or productive[sym[1]]) and t not in seen:
                seen.add(t)
                todo.append(t)
    return False


def _trim_symbols(rule: _SymDfa) -> None:
    n = len(rule.trans)
    preds: list[list[int]] = [[] for _ in range(n)]
    for s, row in enumerate(rule.trans):
        for t in row.values():
            preds[t].append(s)
    live = [rule.final[s] for s in range(n)]
    todo = [s for s in range(n) if live[s]]
    while todo:
        for p in preds[todo.pop()]:
            if not live[p]:
                live[p] = True
                todo.append(p)
    for row in rule.trans:
        for sym in [s for s, t in row.items() if not live[t]]:
            del row[sym]


def _nullable_rules(rules: list[_SymDfa]) -> list[bool]:
    n = len(rules)
    nullable = [False] * n
    changed = True
    while changed:
        changed = False
        for r in reversed(range(n)):  # callees first, as in `_link`
            if nullable[r]:
                continue
            seen = {0}
            todo = [0]
            while todo:
                s = todo.pop()
                if rules[r].final[s]:
                    nullable[r] = True
                    changed = True
                    break
                for sym, t in rules[r].trans[s].items():
                    if sym[0] == "R" and nullable[sym[1]] and t not in seen:
                        seen.add(t)
                        todo.append(t)
    return nullable


def _check_left_recursion(rules: list[_SymDfa], names: list[str], nullable: list[bool]) -> None:
    # left-calls[r] = rules callable from r's start through nullable rule edges only
    left: list[set[int]] = []
    for rule in rules:
        calls: set[int] = set()
        seen = {0}
        todo = [0]
        while todo:
            s = todo.pop()
            for sym, t in rule.trans[s].items():
                if sym[0] == "R":
                    calls.add(sym[1])
                    if nullable[sym[1]] and t not in seen:
                        seen.add(t)
                        todo.append(t)
        left.append(calls)
    color = [0] * len(rules)
    for root in range(len(rules)):
        if color[root]:
            continue
        stack: list[tuple[int, list[int]]] = [(root, sorted(left[root]))]
        color[root] = 1
        path = [root]
        while stack:
            node, pending = stack[-1]
            if not pending:
                color[node] = 2
                stack.pop()
                path.pop()
                continue
            nxt = pending.pop()
            if color[nxt] == 1:
                cycle = path[path.index(nxt) :] + [nxt]
                raise GrammarError(
                    "left recursion is not supported: " + " -> ".join(names[c] for c in cycle)
                )
            if color[nxt] == 0:
                color[nxt] = 1
                path.append(nxt)
                stack.append((nxt, sorted(left[nxt])))
