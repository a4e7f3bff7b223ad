"""Linking a grammar's rule automata into the parser's tables: productive rules only, no left
recursion, parallel terminals merged into unions, and every rule state numbered as a global
position (`Position`), any-order member lists numbered after them (`_any_order`).
"""

from __future__ import annotations

from ..errors import GrammarError
from . import _any_order
from ._automata import alternate
from ._cache import BoundedCache
from ._dfa_ops import AnyDfa, cache_size, compacted
from ._positions import Position
from ._rule_automata import _SymDfa


def link(
    rules: list[_SymDfa],
    names: list[str],
    start: int,
    any_order: list[_any_order.Spec],
    terminals: list[AnyDfa],
    term_names: list[str],
) -> tuple[list[Position], list[int], _any_order.DynamicPositions | None]:
    """Trim unproductive parts, reject left recursion, merge parallel terminals (their unions
    appended to `terminals` and `term_names`), number positions. Returns the positions, each
    rule's first position, and the dynamic positions of any-order member lists (if any)."""
    productive = _productive_rules(rules, any_order)
    if not productive[start]:
        raise GrammarError("the grammar's language is empty")
    _drop_unproductive(rules, productive)
    nullable = _nullable_rules(rules)
    _check_left_recursion(rules, names, nullable)
    _merge_parallel_terminals(rules, terminals, term_names)
    positions, offsets = _number_positions(rules)
    extra = None
    if any_order:
        extra = _any_order.DynamicPositions(len(positions), any_order, productive)
        for k, spec in enumerate(any_order):
            offsets[spec.rule] = extra.start(k)
    return positions, offsets, extra


def _productive_rules(rules: list[_SymDfa], any_order: list[_any_order.Spec]) -> list[bool]:
    """Per rule: a final state is reachable using productive symbols (a fixpoint)."""
    n = len(rules)
    # an any-order member list's own rule only stands in for its dynamic positions
    dynamic = {spec.rule: spec for spec in any_order}
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
    return productive


def _drop_unproductive(rules: list[_SymDfa], productive: list[bool]) -> None:
    """Drop edges into unproductive rules, then states that cannot reach a final state."""
    for rule in rules:
        for row in rule.trans:
            for sym in [s for s in row if s[0] == "R" and not productive[s[1]]]:
                del row[sym]
        _trim_symbols(rule)


def _merge_parallel_terminals(
    rules: list[_SymDfa], terminals: list[AnyDfa], term_names: list[str]
) -> None:
    """Parallel terminal edges (same source, same target) become one union terminal: the
    parser does not care which literal was written, and a mask then walks one DFA."""
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
                    uid = len(terminals)
                    terminals.append(_union_dfa([terminals[t] for t in tids]))
                    term_names.append("|".join(term_names[t] for t in sorted(tids)))
                    union_ids[key] = uid
                for t in tids:
                    del row[("T", t)]
                row[("T", uid)] = tgt


def _number_positions(rules: list[_SymDfa]) -> tuple[list[Position], list[int]]:
    """Global numbering: every rule state is a position, rule by rule; and each rule's first."""
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
    return positions, offsets


#: Union terminals by their members' serials: the same union (an enum, the scalars of a JSON
#: value) in another grammar is the same DFA object, so it shares its vocabulary walks too.
_union_dfas: BoundedCache[tuple[int, ...], AnyDfa] = BoundedCache("union terminal DFAs", 32 << 20)


def _union_dfa(members: list[AnyDfa]) -> AnyDfa:
    members = sorted(members, key=lambda d: d.serial)
    key = tuple(d.serial for d in members)
    dfa = _union_dfas.get(key)
    if dfa is None:
        dfa = compacted(alternate(members))
        _union_dfas.put(key, dfa, cache_size(dfa))
    return dfa


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
        for r in reversed(range(n)):  # callees first, as in `_productive_rules`
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
