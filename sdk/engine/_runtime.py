"""Shared run-time tables of one (compiled grammar, vocabulary) pair.

A matcher state is a frozenset of configurations `(stack, lex)`: `stack` is a tuple of global
rule positions (return addresses, then the current position) at which the terminal of lexer
state `lex` may be shifted, and `lex` is a global lexer state (terminal DFA state). Sets make
the parser exact for ambiguous grammars (overlapping anyOf branches, keys that match both a
declared name and a pattern) without backtracking.

Everything here is memoised: stack expansions, lexeme completions, byte steps, token steps and
whole masks. Per-token work on a cache miss is: OR the precomputed masks of the configurations'
lexer states, then simulate only the handful of tokens that cross a lexeme boundary.
"""

from __future__ import annotations

import threading
from array import array
from typing import TYPE_CHECKING, cast

import numpy as np

from .._cache import BoundedCache
from ..errors import TooComplexError
from . import _vocab
from ._vocab import Vocab

if TYPE_CHECKING:
    from .grammar import CompiledGrammar

Stack = tuple[int, ...]
Config = tuple[Stack, int]
State = frozenset[Config]

MAX_STACK_DEPTH = 1000
MAX_CONFIGS = 5000
MAX_CACHE = 100_000
MASK_CACHE_BYTES = 64 << 20  # per (grammar, vocabulary) and per kind
_NO_ROWS = np.zeros(0, dtype=np.int64)


class Runtime:
    def __init__(self, grammar: CompiledGrammar, vocab: Vocab) -> None:
        self.grammar = grammar
        self.vocab = vocab
        self.positions = grammar.positions
        # global lexer states: one block per terminal, 0 = dead
        bases: list[int] = []
        total = 1
        for dfa in grammar.terminals:
            bases.append(total)
            total += dfa.n_states - 1
        self.term_base = bases
        trans = np.zeros((total, 256), dtype=np.int32)
        acc = np.zeros(total, dtype=bool)
        lex_term = np.zeros(total, dtype=np.int64)
        lex_local = np.zeros(total, dtype=np.int64)
        for t, dfa in enumerate(grammar.terminals):
            base = bases[t]
            n = dfa.n_states - 1
            local = dfa.trans[1:]
            trans[base : base + n] = np.where(local > 0, local + base - 1, 0)
            acc[base : base + n] = dfa.accepting[1:]
            lex_term[base : base + n] = t
            lex_local[base : base + n] = np.arange(1, n + 1)
        self.lex_term: list[int] = lex_term.tolist()
        self.lex_local: list[int] = lex_local.tolist()
        self.trans = array("i", trans.tobytes())
        # the same table as a 2-D view (no copy), for row lookups of several states at once
        self.trans_rows = np.frombuffer(self.trans, dtype=np.int32).reshape(total, 256)
        self.acc = acc.tolist()
        self._expand: dict[Stack, tuple[dict[int, tuple[Stack, ...]], bool]] = {}
        self._completions: dict[tuple[Stack, int], tuple[Config, ...]] = {}
        self._step: dict[tuple[State, int], State] = {}
        self._token_step: dict[tuple[State, int], State] = {}
        self._config_mask: BoundedCache[Config, np.ndarray] = BoundedCache(
            "masks by configuration", MASK_CACHE_BYTES
        )
        self._state_mask: BoundedCache[State, np.ndarray] = BoundedCache(
            "masks by lexer state", MASK_CACHE_BYTES
        )
        self._accepting: dict[State, bool] = {}
        self.lock = threading.Lock()
        eos = np.zeros(vocab.packed_len * 8, dtype=bool)
        eos[list(vocab.eos_ids)] = True
        self.eos_bits = np.packbits(eos, bitorder="little")
        self.initial = self._initial()

    # ------------------------------------------------------------ parser side

    def expand(self, stack: Stack) -> tuple[dict[int, tuple[Stack, ...]], bool]:
        """Terminals shiftable from `stack` (→ stacks after the shift), and whether it may end."""
        got = self._expand.get(stack)
        if got is not None:
            return got
        positions = self.positions
        shifts: dict[int, set[Stack]] = {}
        accept = False
        seen = {stack}
        todo = [stack]
        while todo:
            st = todo.pop()
            if len(st) > MAX_STACK_DEPTH:
                raise TooComplexError(f"parser stack deeper than {MAX_STACK_DEPTH}")
            top = positions[st[-1]]
            rest = st[:-1]
            for term, nxt in top.terms.items():
                shifts.setdefault(term, set()).add((*rest, nxt))
            for rule, ret in top.calls:
                pushed = (*rest, ret, self.grammar.rule_starts[rule])
                if pushed not in seen:
                    seen.add(pushed)
                    todo.append(pushed)
            if top.final:
                if not rest:
                    accept = True
                elif rest not in seen:
                    seen.add(rest)
                    todo.append(rest)
        result = ({t: tuple(sorted(s)) for t, s in shifts.items()}, accept)
        if len(self._expand) > MAX_CACHE:
            self._expand.clear()
        self._expand[stack] = result
        return result

    def starts(self, stack: Stack) -> list[Config]:
        shifts, _ = self.expand(stack)
        return [(stack, self.term_base[t]) for t in shifts]

    def completions(self, stack: Stack, lex: int) -> tuple[Config, ...]:
        """Configurations right after the lexeme of `lex` ends (its terminal shifted)."""
        term = self.lex_term[lex]
        key = (stack, term)
        got = self._completions.get(key)
        if got is None:
            out: list[Config] = []
            for nxt in self.expand(stack)[0].get(term, ()):
                out.extend(self.starts(nxt))
            got = tuple(out)
            if len(self._completions) > MAX_CACHE:
                self._completions.clear()
            self._completions[key] = got
        return got

    def _initial(self) -> State:
        root: Stack = (self.grammar.rule_starts[self.grammar.start_rule],)
        # Only the initial state holds lexers that have read nothing, so whether the empty
        # string is complete is decided here once.
        self.initial_accepts = self.expand(root)[1]
        return frozenset(self.starts(root))

    # ------------------------------------------------------------ lexer side

    def step(self, state: State, byte: int) -> State:
        key = (state, byte)
        got = self._step.get(key)
        if got is not None:
            return got
        trans, acc = self.trans, self.acc
        out: set[Config] = set()
        for stack, lex in state:
            nxt = trans[lex * 256 + byte]
            if nxt:
                out.add((stack, nxt))
            if acc[lex]:
                for stack2, lex2 in self.completions(stack, lex):
                    nxt = trans[lex2 * 256 + byte]
                    if nxt:
                        out.add((stack2, nxt))
        if len(out) > MAX_CONFIGS:
            raise TooComplexError(f"more than {MAX_CONFIGS} live parses")
        got = frozenset(out)
        if len(self._step) > MAX_CACHE:
            self._step.clear()
        self._step[key] = got
        return got

    def feed(self, state: State, data: bytes) -> State:
        for b in data:
            state = self.step(state, b)
            if not state:
                break
        return state

    def advance(self, state: State, token: int) -> State:
        key = (state, token)
        got = self._token_step.get(key)
        if got is None:
            tb = self.vocab.token_bytes
            data = tb[token] if 0 <= token < len(tb) else b""
            got = self.feed(state, data) if data else frozenset()
            if len(self._token_step) > MAX_CACHE:
                self._token_step.clear()
            self._token_step[key] = got
        return got

    def accepting(self, state: State) -> bool:
        got = self._accepting.get(state)
        if got is None:
            got = self.initial_accepts and state == self.initial
            for stack, lex in state:
                if self.acc[lex]:
                    term = self.lex_term[lex]
                    for nxt in self.expand(stack)[0].get(term, ()):
                        if self.expand(nxt)[1]:
                            got = True
                            break
                if got:
                    break
            self._accepting[state] = got
        return got

    # ------------------------------------------------------------ masks

    def config_mask(self, config: Config) -> np.ndarray:
        got = self._config_mask.get(config)
        if got is not None:
            return got
        stack, lex = config
        term = self.lex_term[lex]
        classes = _vocab.classify(self.vocab, self.grammar.terminals[term], self.lex_local[lex])
        assert classes.packed is not None
        mask = classes.packed
        if classes.ranges is not None and len(classes.ranges):
            # big events (tokens after a whitespace run) are walked per follow-up terminal,
            # small ones checked token by token (see event_rows)
            rows = [self.rows_after(stack, lex, ev) for ev in classes.events]
            plan = _vocab.suffix_plan(self.vocab, classes)
            if plan.ranges:
                rows.append(self.event_rows(stack, lex, plan))
            if rows:
                mask = mask | _vocab.pack_rows(self.vocab, np.concatenate(rows))
        if self.acc[lex]:
            for nxt in self.completions(stack, lex):
                mask = mask | self.config_mask(nxt)
        return self._config_mask.put(config, mask, mask.nbytes + 200)

    def event_rows(self, stack: Stack, lex: int, plan: _vocab.SuffixPlan) -> np.ndarray:
        """Of the small events' token rows, those allowed after `lex` ends: each is fed byte by
        byte to the configurations after the lexeme (memoised steps, all follow-up terminals
        at once), ranges whose first byte cannot follow skipped whole, and within a range the
        steps of a shared prefix taken once."""
        after = frozenset(self.completions(stack, lex))
        if not after:
            return _NO_ROWS
        step = self.step
        memo = self._step
        lexes = [lex2 for _, lex2 in after]
        if any(self.acc[lex2] for lex2 in lexes):  # a lexer that may end before any byte
            alive = {b for b in plan.firsts if step(after, b)}
        else:  # every lexer has read nothing: a byte can follow iff one of them takes it
            can = cast("list[bool]", self.trans_rows[lexes].any(axis=0).tolist())
            alive = {b for b in plan.firsts if can[b]}
        if not alive:
            return _NO_ROWS
        vocab = self.vocab
        out: list[int] = []
        for (c, lo, hi), first in zip(plan.ranges, plan.first, strict=True):
            if first not in alive:
                continue
            states = [after]  # states[k]: after the first k bytes of the current rest
            for rest, lcp, row in _vocab.range_entries(vocab, c, lo, hi):
                if len(states) <= lcp:  # the shared prefix already died
                    continue
                del states[lcp + 1 :]
                st = states[-1]
                for b in rest[lcp:]:
                    nxt = memo.get((st, b))
                    st = step(st, b) if nxt is None else nxt
                    if not st:
                        break
                    states.append(st)
                else:
                    out.append(row)
        return np.asarray(out, dtype=np.int64)

    def rows_after(self, stack: Stack, lex: int, event: _vocab.Event) -> np.ndarray:
        """Of the event's token rows, those whose remaining bytes continue after `lex` ends."""
        col, rows, key = event
        out: list[np.ndarray] = []
        for stack2, lex2 in self.completions(stack, lex):
            dfa = self.grammar.terminals[self.lex_term[lex2]]
            w = _vocab.cached_walk(self.vocab, dfa, self.lex_local[lex2], col, rows, key)
            out.append(w.accepted)
            for ev in w.events:
                out.append(self.rows_after(stack2, lex2, ev))
        return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)

    def state_mask(self, state: State) -> np.ndarray:
        got = self._state_mask.get(state)
        if got is not None:
            return got
        mask: np.ndarray | None = None
        for config in state:
            m = self.config_mask(config)
            mask = m if mask is None else mask | m
        if mask is None:
            mask = np.zeros(self.vocab.packed_len, dtype=np.uint8)
        if self.accepting(state):
            mask = mask | self.eos_bits
        return self._state_mask.put(state, mask, mask.nbytes + 200)

    def forced_bytes(self, state: State, limit: int = 256) -> bytes:
        """Bytes every continuation must start with (for fast-forward), stopping where it may end."""
        out = bytearray()
        while len(out) < limit and state and not self.accepting(state):
            options = [b for b in range(256) if self.step(state, b)]
            if len(options) != 1:
                break
            out.append(options[0])
            state = self.step(state, options[0])
        return bytes(out)
