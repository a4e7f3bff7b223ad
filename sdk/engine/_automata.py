"""Byte-level automata: regex AST → NFA → trimmed DFA, with intersection for lookaheads.

A `Dfa` is a dense table `trans[state, byte]` with state 0 the dead state and state 1 the
start, so that vectorised walks over a whole vocabulary are plain numpy indexing. Every state
but 0 can still reach an accepting state (trimmed): "live" therefore means "can complete",
which is what exact masks need.

This module compiles regexes (`compile_node`, `compile_regex`): the Thompson NFA, counted
repeats, lookaheads and gluing DFAs of parts, all recursive through `compile_node`. The
pieces that do not recurse live apart: table operations (`_dfa_ops`), subset constructions
(`_subsets`), products (`_products`) and the DFAs of literals and word sets (`_word_dfas`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import cast

import numpy as np

from ..errors import TooComplexError
from . import _regex as rx
from ._cache import BoundedCache
from ._dfa import IDENTITY, Dfa, empty_dfa
from ._dfa_ops import (
    AnyDfa,
    _classes_of,
    _joint_classes,
    _segments,
    cache_size,
    columns_at,
    compacted,
    minimize,
    table,
    with_classes,
)
from ._lazy import (
    LazyDfa,
    alternation,
    concatenation,
    counted,
    item_moves,
    item_width,
)
from ._owner import OWNER
from ._products import DENSE_PAIRS, excluding_prefixes, prefix_closed, product
from ._subsets import _concat_sets, _countable, _counted_sets, determinize
from ._word_dfas import _chain, _finite_words, _literal_bytes, _trie

#: Counted repeats with more states than this are built lazily (`_lazy`): the table of a
#: 65,535-character string would take a gigabyte, and even a 300-character one costs more to
#: build (and to copy into the runtime) than a generation visits. Constructions that need a
#: table (products, subset construction) still get one up to `Limits.dfa_states`.
LAZY_MIN_STATES = 4096
#: A·B where A's accepting states go on with B's first bytes: up to this many B states, the
#: sets of B's states are bit masks of one int64 (`_pairs.concat_bfs`); beyond, NFA + subsets.
SET_CONCAT_MAX = 63


# ---------------------------------------------------------------- UTF-8 ranges


def utf8_sequences(lo: int, hi: int) -> list[list[tuple[int, int]]]:
    """Split a code-point range into byte-range sequences (surrogates excluded)."""
    out: list[list[tuple[int, int]]] = []
    stack = [(lo, hi)]
    while stack:
        lo, hi = stack.pop()
        if lo > hi:
            continue
        if lo <= 0xDFFF and hi >= 0xD800:
            stack.append((0xE000, hi))
            stack.append((lo, 0xD7FF))
            continue
        split = False
        for b in (0x7F, 0x7FF, 0xFFFF):
            if lo <= b < hi:
                stack.append((b + 1, hi))
                stack.append((lo, b))
                split = True
                break
        if split:
            continue
        if hi <= 0x7F:
            out.append([(lo, hi)])
            continue
        for i in range(1, 4):
            m = (1 << (6 * i)) - 1
            if (lo & ~m) != (hi & ~m):
                if (lo & m) != 0:
                    stack.append(((lo | m) + 1, hi))
                    stack.append((lo, lo | m))
                    split = True
                    break
                if (hi & m) != m:
                    stack.append((hi & ~m, hi))
                    stack.append((lo, (hi & ~m) - 1))
                    split = True
                    break
        if split:
            continue
        a = chr(lo).encode("utf-8")
        b2 = chr(hi).encode("utf-8")
        out.append(list(zip(a, b2, strict=True)))
    return out


_seq_cache: BoundedCache[rx.Ranges, list[list[tuple[int, int]]]] = BoundedCache(
    "UTF-8 sequences", 8 << 20
)


def _cached_sequences(ranges: rx.Ranges) -> list[list[tuple[int, int]]]:
    seqs = _seq_cache.get(ranges)
    if seqs is None:
        seqs = [seq for lo, hi in ranges for seq in utf8_sequences(lo, hi)]
        _seq_cache.put(ranges, seqs, 120 * sum(len(q) + 1 for q in seqs) + 64 * len(ranges))
    return seqs


# ---------------------------------------------------------------- NFA


class Nfa:
    def __init__(self, counted: dict[rx.Repeat, Dfa | None] | None = None) -> None:
        self.eps: list[list[int]] = []
        self.edges: list[list[tuple[int, int, int]]] = []
        self.cap = OWNER.limits.nfa_states
        #: Per counted repeat, its direct table (None: it has none), worked out once for all
        #: the copies a build makes: `(?:(?:(?:é){1,10}){2,11}){3,12}` made 12 copies of the
        #: middle repeat, each compiling it (and its item) again.
        self.counted: dict[rx.Repeat, Dfa | None] = {} if counted is None else counted

    def state(self) -> int:
        if len(self.eps) >= self.cap:
            raise TooComplexError(f"automaton exceeds {self.cap} NFA states (Limits.nfa_states)")
        self.eps.append([])
        self.edges.append([])
        return len(self.eps) - 1

    def build(self, node: rx.Node) -> tuple[int, int]:
        """Thompson construction; returns (start, end)."""
        if isinstance(node, rx.Chars):
            s, e = self.state(), self.state()
            for seq in _cached_sequences(node.ranges):
                cur = s
                for k, (lo, hi) in enumerate(seq):
                    nxt = e if k == len(seq) - 1 else self.state()
                    self.edges[cur].append((lo, hi, nxt))
                    cur = nxt
            return s, e
        if isinstance(node, rx.Seq):
            return self.build_seq(node.items)
        if isinstance(node, rx.Alt):
            s, e = self.state(), self.state()
            for item in node.items:
                a, b = self.build(item)
                self.eps[s].append(a)
                self.eps[b].append(e)
            return s, e
        if isinstance(node, rx.Repeat):
            return self.build_repeat(node)
        if isinstance(node, rx.Look):
            return self.build_seq((node,))
        raise TypeError(node)

    def build_seq(self, items: tuple[rx.Node, ...]) -> tuple[int, int]:
        s = cur = self.state()
        for k, item in enumerate(items):
            if isinstance(item, rx.Look):
                rest = rx.Seq(items[k + 1 :])
                dfa = table(look_intersection(item, rest))
                a, b = self.embed(dfa)
                self.eps[cur].append(a)
                return s, b
            a, b = self.build(item)
            self.eps[cur].append(a)
            cur = b
        return s, cur

    def build_repeat(self, node: rx.Repeat) -> tuple[int, int]:
        if node.max is not None and node.max > 4:
            if node in self.counted:
                direct = self.counted[node]
            else:
                got = _counted_repeat(node)
                direct = self.counted[node] = None if got is None else table(got)
            if direct is not None:
                return self.embed(direct)
        s = cur = self.state()
        for _ in range(node.min):
            a, b = self.build(node.item)
            self.eps[cur].append(a)
            cur = b
        if node.max is None:
            a, b = self.build(node.item)
            loop = self.state()
            self.eps[cur].append(loop)
            self.eps[loop].append(a)
            self.eps[b].append(loop)
            return s, loop
        end = self.state()
        self.eps[cur].append(end)
        for _ in range(node.max - node.min):
            a, b = self.build(node.item)
            self.eps[cur].append(a)
            self.eps[b].append(end)
            cur = b
        return s, end

    def embed(self, dfa: Dfa) -> tuple[int, int]:
        base = len(self.eps)
        for _ in range(dfa.n_states):
            self.state()
        end = self.state()
        states, los, his, targets = _segments(dfa)
        edges = self.edges
        for q, lo, hi, tgt in zip(
            states.tolist(), los.tolist(), his.tolist(), targets.tolist(), strict=True
        ):
            edges[base + q].append((lo, hi, base + tgt))
        for q in np.nonzero(dfa.accepting)[0].tolist():
            self.eps[base + q].append(end)
        return base + 1, end


def _counted_repeat(node: rx.Repeat) -> AnyDfa | None:
    """`X{lo,hi}` built directly as (count × X-state) when X is prefix-free (a character, an
    escape): linear in hi, where Thompson copies + subset construction are quadratic-ish.
    Above LAZY_MIN_STATES states the same automaton is lazy."""
    assert node.max is not None
    lo, hi = node.min, node.max
    x = compile_node(node.item)
    if not isinstance(x, Dfa):
        # A lazy item (a counted repeat itself): counted on its table, which the NFA path
        # would embed once per copy anyway. Refused, every copy rebuilt from its own parts
        # (`(?:(?:é{1,10}){2,11}){3,12}` lazily: 132 Thompson copies of `é{1,10}`, not 12 of
        # the 222-state `(?:é{1,10}){2,11}`) ran subset construction past its budget.
        if x.nullable:
            return None  # neither construction takes it: the NFA path, as before
        try:
            x = table(x)
        except TooComplexError:
            return None
    if not _countable(x):
        return None if x.nullable or hi < 1 else _counted_sets(x, lo, hi)
    width = item_width(x)
    if hi * width + 2 > LAZY_MIN_STATES:
        return counted(x, lo, hi)
    # Blocks k < hi hold every X-state; after the hi-th item only its (accepting) start is
    # left, with no moves. Every state is then reachable and can finish (X is trimmed and
    # not nullable), so the table needs no trimming pass.
    live, target, inc = item_moves(x)
    trans = np.zeros((hi * width + 2, 256), dtype=np.int32)
    accepting = np.zeros(len(trans), dtype=bool)
    for k in range(hi):
        newk = k + inc
        trans[1 + k * width : 1 + (k + 1) * width] = np.where(live, 1 + newk * width + target, 0)
        accepting[1 + k * width] = lo <= k
    accepting[1 + hi * width] = True  # lo <= hi
    return Dfa(trans, accepting)


_rest_cache: BoundedCache[rx.Node, Dfa] = BoundedCache("lookahead continuations", 32 << 20)


def look_intersection(look: rx.Look, rest: rx.Node) -> AnyDfa:
    # The continuation recurs across terminals (a JSON string after "not one of the declared
    # keys"): built once, whatever the lookahead in front of it.
    after = _rest_cache.get(rest)
    if after is None:
        after = table(compile_node(rest))
        _rest_cache.put(rest, after, cache_size(after))
    if look.negative:
        words = _finite_words(look.body)
        if words is not None:
            return excluding_prefixes(after, words)
    else:
        bounded = _bounded_length(look, after)
        if bounded is not None:
            return bounded
    return _look_product(look, after)


def _look_product(look: rx.Look, after: Dfa) -> Dfa:
    return product(after, prefix_closed(table(compile_node(look.body))), negate_b=look.negative)


#: A length bound on a pattern (`(?=u X{lo,hi} v)R`) whose product may have more pairs than this
#: is built on demand (`_length_product`); below, the table is tried first (its reachable part
#: is often small) and the lazy automaton is the fallback when it is refused for size.
LENGTH_PRODUCT_MIN_PAIRS = 4 * DENSE_PAIRS


def _bounded_length(look: rx.Look, after: Dfa) -> AnyDfa | None:
    """`(?=u X{lo,hi} v)after`, lazily, for literal u and v around one counted repeat of a
    prefix-free X (`maxLength` on a JSON string with a `pattern`), when the table is too big;
    None for other lookaheads."""
    body = look.body
    items = body.items if isinstance(body, rx.Seq) else (body,)
    counts = [i for i, item in enumerate(items) if isinstance(item, rx.Repeat)]
    if len(counts) != 1:
        return None
    i = counts[0]
    rep = items[i]
    assert isinstance(rep, rx.Repeat)
    u = _literal_bytes(rx.Seq(items[:i])) if i else b""
    v = _literal_bytes(rx.Seq(items[i + 1 :])) if i + 1 < len(items) else None
    if rep.max is None or u is None or not v:
        return None
    x = compile_node(rep.item)
    if not isinstance(x, Dfa) or not _countable(x) or x.move(1, v[0]) != 0:
        return None
    width = item_width(x)
    table_tried = (rep.max + 1) * width * (after.n_states - 1) <= LENGTH_PRODUCT_MIN_PAIRS
    if table_tried:
        try:
            return _look_product(look, after)
        except TooComplexError:
            pass
    from ._length_product import length_product

    try:
        lazy = length_product(after, u, x, rep.min, rep.max, v, _joint_classes(x, after)[0])
    except TooComplexError:
        if table_tried:
            raise
        return _look_product(look, after)
    if isinstance(lazy, LazyDfa):
        # what needs a table (a union, an NFA around it) gets the product, if it fits
        lazy.tabulate = functools.cache(lambda: _look_product(look, after))
    return lazy


#: Above this many states in all, unions are built as pairwise products (numpy, level by
#: level) instead of through the NFA (Python subset construction, cheap for many literals).
UNION_PRODUCT_MIN_STATES = 512


#: Bigger unions are left unminimized: they are length counters that minimization cannot
#: shrink, and trying costs seconds.
UNION_MINIMIZE_MAX_STATES = 4096


def union(any_dfas: Sequence[AnyDfa]) -> Dfa:
    """L(d1) ∪ L(d2) ∪ ..."""
    dfas = [table(d) for d in any_dfas]
    if sum(d.n_states for d in dfas) > UNION_PRODUCT_MIN_STATES:
        parts = sorted(dfas, key=lambda d: d.n_states)
        out = parts[0]
        for d in parts[1:]:
            out = product(out, d, union=True)
            if out.n_states <= UNION_MINIMIZE_MAX_STATES:
                out = minimize(out)
        return out
    nfa = Nfa()
    s, e = nfa.state(), nfa.state()
    for d in dfas:
        a, b = nfa.embed(d)
        nfa.eps[s].append(a)
        nfa.eps[b].append(e)
    return determinize(nfa, s, e)


def concat(any_a: AnyDfa, any_b: AnyDfa) -> AnyDfa:
    """L(a)·L(b). Built directly (A's table, then B's) when no accepting state of A can go on
    with a byte that B can start with: each accepting state of A then simply also takes B's
    first moves. Otherwise through the NFA and subset construction."""
    if any_a.is_empty or any_b.is_empty:
        return any_a if any_a.is_empty else any_b
    if not (isinstance(any_a, Dfa) and isinstance(any_b, Dfa)):
        lazy = concatenation(any_a, any_b)
        if lazy is not None:
            return lazy
    a, b = table(any_a), table(any_b)
    acc_a = a.accepting
    if a.dense and b.dense:  # small parts: no classes to work out
        reps, joint = IDENTITY, None
        ta, tb = a.table, b.table
    else:
        reps, joint = _joint_classes(a, b)
        ta, tb = columns_at(a, reps), columns_at(b, reps)
    b_first = tb[1] != 0
    if (ta[acc_a][:, b_first] != 0).any():
        if b.n_states <= SET_CONCAT_MAX:
            return _concat_sets(a, b)
        nfa = Nfa()
        s1, e1 = nfa.embed(a)
        s2, e2 = nfa.embed(b)
        nfa.eps[e1].append(s2)
        return determinize(nfa, s1, e2)
    off = a.n_states - 1
    trans = np.empty((a.n_states + b.n_states - 1, len(reps)), dtype=np.int32)
    trans[: a.n_states] = ta
    moved = trans[a.n_states :]
    moved[:] = tb[1:]
    np.add(moved, off, out=moved, where=moved > 0)
    rows = np.nonzero(acc_a)[0]
    trans[rows] = np.where(trans[rows] != 0, trans[rows], moved[0][None, :])
    acc = np.concatenate([acc_a & bool(b.accepting[1]), b.accepting[1:]])
    # Both parts are trimmed and non-empty, so every state still reaches acceptance; only
    # B's own start may have become unreachable, which is harmless.
    return Dfa(trans, acc) if joint is None else with_classes(trans, acc, joint)


def alternate(any_dfas: list[AnyDfa]) -> AnyDfa:
    """L(d1) ∪ L(d2) ∪ ...: side by side under a fresh start state when their first bytes are
    disjoint (then the start's row is just the union of theirs), else via `union`."""
    nonempty = [d for d in any_dfas if not d.is_empty]
    if len(nonempty) <= 1:
        return nonempty[0] if nonempty else empty_dfa()
    if not all(isinstance(d, Dfa) for d in nonempty):
        return alternation(nonempty) or union(nonempty)
    dfas = [table(d) for d in nonempty]
    seen = np.zeros(256, dtype=bool)
    for d in dfas:
        first = d.first
        if (seen & first).any():
            return union(dfas)
        seen |= first
    # one column per class of bytes that no part tells apart (per byte if all are small)
    joint: np.ndarray | None = None
    reps: np.ndarray = IDENTITY
    if not all(d.dense for d in dfas):
        joint = np.zeros(256, dtype=np.int64)
        for d in dfas:
            _, joint = np.unique(joint * 256 + _classes_of(d), return_inverse=True)
            joint = joint.reshape(-1)
        _, reps = np.unique(joint, return_index=True)
    trans = np.zeros((2 + sum(d.n_states - 1 for d in dfas), len(reps)), dtype=np.int32)
    accs = [np.zeros(2, dtype=bool)]
    off = 1
    for d in dfas:
        part = trans[off + 1 : off + d.n_states]
        part[:] = (d.table if joint is None else columns_at(d, reps))[1:]
        np.add(part, off, out=part, where=part > 0)
        accs.append(d.accepting[1:])
        trans[1] += part[0]  # disjoint first bytes: rows add without clashing
        accs[0][1] |= bool(d.accepting[1])
        off += d.n_states - 1
    acc = np.concatenate(accs)
    # parts trimmed: so is this
    return Dfa(trans, acc) if joint is None else with_classes(trans, acc, joint)


#: Above this estimated size a sequence or alternation is built from the DFAs of its parts
#: (numpy tables glued together) instead of one Thompson NFA and a Python subset construction.
DIRECT_WEIGHT = 256


def _weight(node: rx.Node) -> int:
    if isinstance(node, rx.Chars):
        return 1
    if isinstance(node, rx.Seq | rx.Alt):
        return sum(_weight(i) for i in node.items)
    if isinstance(node, rx.Repeat):
        item = node.item
        # a class's automaton grows with its ranges: Unicode `\w` (734 of them) is ~310
        # UTF-8 states, and `[\w-]{5,96}` weighed as 96 bytes went through subset
        # construction (2.5 s) where the counted construction takes 40 ms (Lark grammars:
        # schemas map `\w` to ASCII)
        if isinstance(item, rx.Chars) and node.max is not None:
            one = len(item.ranges)
        else:
            one = _weight(item)
        return one * max(node.max or 0, node.min, 1)
    if isinstance(node, rx.Look):
        return DIRECT_WEIGHT + 1
    return 1


def compile_node(node: rx.Node) -> AnyDfa:
    words = _finite_words(node)
    if words is not None:
        return _chain(words[0]) if len(words) == 1 else _trie(words)
    counted: dict[rx.Repeat, Dfa | None] = {}
    if _weight(node) > DIRECT_WEIGHT:
        direct = _compile_direct(node)
        if direct is not None:
            return direct
        if isinstance(node, rx.Repeat) and node.max is not None:
            counted[node] = None  # `_counted_repeat` refused it just now: not twice
    nfa = Nfa(counted)
    s, e = nfa.build(node)
    dfa = determinize(nfa, s, e)
    return minimize(dfa) if dfa.n_states <= 20_000 else dfa


def _excluding_run(looks: Sequence[rx.Node], rest: rx.Node) -> AnyDfa:
    """`(?!a)(?!b)...rest` as `(?!w)(?!p)rest`: w the union of the bodies that are finite word
    sets (the declared keys: their trie, `excluding_prefixes`), p of the others (patterns: one
    product)."""
    finite = [(b, _finite_words(b) is not None) for b in (cast("rx.Look", i).body for i in looks)]
    words = tuple(b for b, is_words in finite if is_words)
    others = tuple(b for b, is_words in finite if not is_words)
    if not words or not others:
        return look_intersection(rx.Look(rx.Alt(words or others), negative=True), rest)
    inner = look_intersection(rx.Look(rx.Alt(words), negative=True), rest)
    return _look_product(rx.Look(rx.Alt(others), negative=True), table(inner))


def _glued(glue: Callable[[], AnyDfa]) -> AnyDfa | None:
    """The parts' automata glued (concatenated, alternated), or None (the node's own Thompson
    NFA, as `compile_node` builds light nodes) when that is refused. Gluing tables runs subset
    construction over sets of the parts' DFA states, which can be far more than the sets of
    NFA states they stand for: `c?(?:X){1,7}`, X `[^a]{2,5}(?:a|[^a]){0,6}`, reached 100,000
    (Limits.dfa_states) gluing `c?` to the 30,648-state table of the repeat, where the whole
    pattern's NFA gives 31,793. The parts take what the whole takes. Only gluing falls back: a
    part refused on its own stands (its `compile_node` had this fallback already), so nesting
    does not retry a deep refusal at every level above it."""
    try:
        return glue()
    except TooComplexError:
        return None


def _compile_direct(node: rx.Node) -> AnyDfa | None:
    if isinstance(node, rx.Seq):
        items = node.items
        parts: list[AnyDfa] = []
        light: list[rx.Node] = []
        for k, item in enumerate(items):
            if isinstance(item, rx.Look):
                if light:
                    parts.append(compile_node(rx.Seq(tuple(light))))
                    light = []
                # A run of negative lookaheads is one: (?!a)(?!b)R is (?!a|b)R. One product
                # with the union, not a chain nested as deep as the run (the keys of an open
                # object with n patternProperties: quadratic, and refused past ~400).
                j = k + 1
                while item.negative and j < len(items):
                    nxt = items[j]
                    if not (isinstance(nxt, rx.Look) and nxt.negative):
                        break
                    j += 1
                if j > k + 1:
                    parts.append(_excluding_run(items[k:j], rx.Seq(items[j:])))
                else:
                    parts.append(look_intersection(item, rx.Seq(items[j:])))
                break
            if _weight(item) > DIRECT_WEIGHT:
                if light:
                    parts.append(compile_node(rx.Seq(tuple(light))))
                    light = []
                parts.append(compile_node(item))
            else:
                light.append(item)
        if light:
            if not parts:  # every item light, however heavy together: one NFA
                return None
            parts.append(compile_node(rx.Seq(tuple(light))))
        return _glued(lambda: functools.reduce(concat, parts))
    if isinstance(node, rx.Alt):
        heavy = [i for i in node.items if _weight(i) > DIRECT_WEIGHT]
        if not heavy:
            # Many small alternatives (an enum): one NFA and subset construction is ~6x faster
            # than a DFA per alternative, and `alternate` falls back to `union` anyway when
            # their first bytes overlap.
            return None
        small = tuple(i for i in node.items if _weight(i) <= DIRECT_WEIGHT)
        parts = [compile_node(i) for i in heavy]
        if small:
            parts.append(compile_node(small[0] if len(small) == 1 else rx.Alt(small)))
        return _glued(lambda: alternate(parts))
    if isinstance(node, rx.Repeat) and node.max is not None:
        return _counted_repeat(node)
    return None


_regex_cache: BoundedCache[tuple[str, bool], AnyDfa] = BoundedCache("regex DFAs", 64 << 20)


def compile_regex(text: str, *, ignore_case: bool = False) -> AnyDfa:
    """Regex text → DFA, memoised per process (shared terminals share mask caches)."""
    key = (text, ignore_case)
    dfa = _regex_cache.get(key)
    if dfa is None:
        dfa = compacted(compile_node(rx.parse(text, ignore_case=ignore_case)))
        _regex_cache.put(key, dfa, cache_size(dfa))
    return dfa
