"""Shared run-time tables of one (compiled grammar, vocabulary) pair.

A matcher state is a set of configurations `(stack, lex)`: `stack` is a sequence of global
rule positions (return addresses, then the current position) at which the terminal of lexer
state `lex` may be shifted, and `lex` is a global lexer state (terminal DFA state). Sets make
the parser exact for ambiguous grammars (overlapping anyOf branches, keys that match both a
declared name and a pattern) without backtracking.

States are interned too: a state is the int naming its set (0 is the empty set, the dead
state), so the step memo is keyed by one int (`state << 8 | byte`) and holds ints. Keys of
tuples holding frozensets were hashed per lookup, and every memo entry was a container the
garbage collector tracked: two thirds of the full collections of a MaskBench run came from
them. The table of sets grows with the distinct states the parses visit, as the stacks do.

Stacks are interned: a stack is an int naming (the stack below it, its top position), so a
push, a pop or a replaced top costs one dict lookup whatever the depth (JSON nests rules
dozens deep, and tuples were copied and hashed whole at every shift), and a configuration is
the single int `stack * n_lex + lex`. The table grows with the distinct stacks the parses
visit: bounded for a schema without recursion, and by the nesting written otherwise.

Everything here is memoised: stack expansions, lexeme completions, byte steps, token steps and
whole masks. Per-token work on a cache miss is: OR the precomputed masks of the configurations'
lexer states, then simulate only the handful of tokens that cross a lexeme boundary.

Terminals too big to tabulate (`_lazy.LazyDfa`) are numbered after the tables, and a state's row
is computed the first time the parse reaches it (kept in a byte-bounded cache): memory follows
the states a generation visits, not the size of the automaton.
"""

from __future__ import annotations

import bisect
import threading
from typing import TYPE_CHECKING, cast

import numpy as np

from ..errors import TooComplexError
from . import _vocab
from ._cache import BoundedCache
from ._dfa import Dfa
from ._lazy import LazyDfa
from ._owner import OWNER
from ._vocab import Vocab

if TYPE_CHECKING:
    from .grammar import CompiledGrammar

Stack = int  # an interned stack (`Runtime.push`); 0 is the empty stack
Config = int  # stack * n_lex + lexer state
Shift = tuple[Stack, int]  # a stack after a shift, not yet interned: (below, top position)
State = int  # an interned set of configurations (`Runtime.intern`); 0 is the empty set
Configs = tuple[Config, ...]  # a state's configurations, sorted

MAX_CACHE = 100_000
#: The runtime's memo dicts: recomputable from the interned tables, each already emptied
#: whenever it outgrows `MAX_CACHE` (`Runtime.clear_memos`).
_MEMOS = (
    "_expand",
    "_completions",
    "_first_bytes",
    "_step",
    "_token_step",
    "_after",
    "_follow",
    "_has_token",
)
#: Per (grammar, vocabulary) and per kind. A mask recomputed is an OR of cached walks; with
#: 64 MiB one big schema held 77 MB of masks on top of the full shared tables (the run's
#: peak), and 16 MiB gave the same mask times on the dev MaskBench run.
MASK_CACHE_BYTES = 16 << 20
_NO_ROWS = np.zeros(0, dtype=np.int64)
_DEAD_ROW = memoryview(np.zeros(256, dtype=np.int32).data)  # moves of a terminal not yet read
#: A lazy lexer state's row: byte → slot, slot → global target, whether it accepts.
LazyRow = tuple[bytes, tuple[int, ...], bool]
#: Rows of lazy states kept per runtime (recomputed when evicted: they are pure).
LAZY_ROW_BYTES = 32 << 20


class Runtime:
    def __init__(self, grammar: CompiledGrammar, vocab: Vocab) -> None:
        # The grammar's parts, not the grammar: it holds its runtimes, and a reference back
        # would make each grammar a cycle that only a full garbage collection frees.
        self.terminals = grammar.terminals
        self.rule_starts = grammar.rule_starts
        self.start_rule = grammar.start_rule
        self.vocab = vocab
        self.positions = grammar.positions
        self._dynamic = grammar.dynamic
        self._n_static = len(grammar.positions)
        #: positions that only end their rule (final, nothing shiftable, nothing called): a
        #: call returning to one is a jump, its return address not pushed. Optional members
        #: in declared order are a chain of such calls (`rest_k: (, key_k ...)? rest_k+1`):
        #: with the addresses pushed, a key's stack grew by one per member skipped before it
        #: (an object of more optional members than `Limits.stack_depth` was refused), and each
        #: key had a new stack, so new masks, after every member
        self._tail = [p.final and not p.terms and not p.calls for p in grammar.positions]
        limits = OWNER.limits
        self._max_depth, self._max_parses = limits.stack_depth, limits.live_parses
        self._number_lexer_states(grammar)
        self._init_tables(vocab)
        eos = np.zeros(vocab.packed_len * 8, dtype=bool)
        eos[list(vocab.eos_ids)] = True
        self.eos_bits = np.packbits(eos, bitorder="little")
        self.initial = self._initial()

    def _number_lexer_states(self, grammar: CompiledGrammar) -> None:
        """Global lexer states: one block of numbers per terminal, 0 = dead. A table
        terminal's state q > 0 is `term_base[t] + q - 1`, and its moves are read from the
        terminal's own table (shared by every grammar that has it: no per-grammar copy);
        lazy terminals (numbered after the tables) get their rows as the parse reaches them
        (`_lazy_row`). A table terminal's numbers are written when the parse first expects
        it (`starts`): the first mask does not wait for every terminal."""
        bases: list[int] = []
        total = 1
        for dfa in grammar.terminals:
            bases.append(total)
            total += dfa.n_states - 1 if isinstance(dfa, Dfa) else 0
        self.term_base = bases
        #: the terminal of every table state: the one list per state (filled in one C-speed
        #: slice per terminal); a state's local number, row and acceptance are read from its
        #: terminal's entries below (per-state lists of those cost a terminal of thousands
        #: of states as much to number as its first walk)
        self.lex_term: list[int] = [0] * total
        #: per table terminal: its moves as a flat memoryview (indexes like array("i")), a row
        #: of `term_width` entries per local state, the column of every byte, and whether
        #: each local state accepts (a byte per state, 0 the dead one)
        self.term_moves: list[memoryview] = [_DEAD_ROW] * len(grammar.terminals)
        self.term_classes: list[bytes] = [bytes(256)] * len(grammar.terminals)
        self.term_width: list[int] = [0] * len(grammar.terminals)
        self.term_acc: list[bytes] = [bytes(1)] * len(grammar.terminals)
        self._filled = bytearray(len(grammar.terminals))
        self.n_table = total  # lexer states below this come from table terminals
        self._lazy_bases: list[int] = []  # global number of each lazy terminal's state 0
        self._lazy_terms: list[int] = []
        for t, dfa in enumerate(grammar.terminals):
            if isinstance(dfa, LazyDfa):
                self._lazy_bases.append(total)
                self._lazy_terms.append(t)
                self.term_base[t] = total + 1
                total += dfa.n_states
        #: local state q of terminal t is global q + term_shift[t] (the hot path's subtraction)
        self.term_shift: list[int] = [b - 1 for b in self.term_base]
        self.n_lex = total  # configurations are stack * n_lex + lex
        self._n_terms = len(grammar.terminals)

    def _init_tables(self, vocab: Vocab) -> None:
        """The interned stacks and states and every memo, empty: filled as parses go."""
        self.lock = threading.Lock()  # writers of the stack table
        # interned stacks: id -> (stack below, top position, depth); id 0 is the empty stack
        self._below: list[int] = [0]
        self._top: list[int] = [-1]
        self._depth: list[int] = [0]
        self._stack_ids: dict[tuple[int, int], int] = {}
        self._lazy_rows: BoundedCache[int, LazyRow] = BoundedCache(
            "lazy lexer rows", LAZY_ROW_BYTES
        )
        self._expand: dict[Stack, tuple[dict[int, tuple[Shift, ...]], bool]] = {}
        self._completions: dict[int, tuple[Config, ...]] = {}
        # interned states: id -> its configurations; id 0 is the empty set (the dead state)
        self._sets: list[Configs] = [()]
        self._set_ids: dict[Configs, State] = {(): 0}
        self._step: dict[int, State] = {}  # state << 8 | byte
        self._token_step: dict[int, State] = {}  # state * n_tokens + token
        self._n_tokens = len(vocab.token_bytes)
        self._after: dict[int, State] = {}  # the state right after a lexeme (`event_rows`)
        #: per such state: (bytes checked, bytes that may follow) as 256-bit ints; all known
        #: (-1) where no lexer of it may end before its first byte
        self._follow: dict[State, tuple[int, int]] = {}
        self._config_mask: BoundedCache[Config, np.ndarray] = BoundedCache(
            "masks by configuration", MASK_CACHE_BYTES
        )
        self._state_mask: BoundedCache[State, np.ndarray] = BoundedCache(
            "masks by lexer state", MASK_CACHE_BYTES
        )
        self._accepting: dict[State, bool] = {}
        self._has_token: dict[State, bool] = {}
        self._first_bytes: dict[int, int] = {}

    def memo_entries(self) -> int:
        """Entries in the memo dicts (~100 bytes each): what this runtime holds beyond its
        tables, outside the cache budget's tables."""
        return sum(len(getattr(self, name)) for name in _MEMOS)

    def clear_memos(self) -> int:
        """Empty the memo dicts (they refill as masks are asked for); the entries freed."""
        freed = self.memo_entries()
        for name in _MEMOS:
            getattr(self, name).clear()
        return freed

    # ------------------------------------------------------------ parser side

    def expand(self, stack: Stack) -> tuple[dict[int, tuple[Shift, ...]], bool]:
        """Terminals shiftable from `stack` (→ the stacks after the shift, as (below, top)
        pairs: interned only when that terminal is read, `completions`; most of a value's
        alternatives never are), and whether it may end."""
        got = self._expand.get(stack)
        if got is not None:
            return got
        positions, n_static, dynamic = self.positions, self._n_static, self._dynamic
        below, top_of, depth = self._below, self._top, self._depth
        ids, push, rule_starts = self._stack_ids.get, self.push, self.rule_starts
        tail = self._tail
        shifts: dict[int, set[Shift]] = {}
        accept = False
        seen = {stack}
        todo = [stack]
        while todo:
            st = todo.pop()
            if depth[st] > self._max_depth:
                raise TooComplexError(
                    f"parser stack deeper than {self._max_depth} (Limits.stack_depth)"
                )
            i = top_of[st]
            top = positions[i] if i < n_static or dynamic is None else dynamic.get(i)
            rest = below[st]
            for term, nxt in top.terms.items():
                shifts.setdefault(term, set()).add((rest, nxt))
            for rule, ret in top.calls:
                if ret < n_static and tail[ret]:
                    called = rest  # a tail call: returning there only returns further
                else:
                    called = ids((rest, ret)) or push(rest, ret)
                start = rule_starts[rule]
                pushed = ids((called, start)) or push(called, start)
                if pushed not in seen:
                    seen.add(pushed)
                    todo.append(pushed)
            if top.final:
                if not rest:
                    accept = True
                elif rest not in seen:
                    seen.add(rest)
                    todo.append(rest)
        result = ({t: tuple(s) for t, s in shifts.items()}, accept)
        if len(self._expand) > MAX_CACHE:
            self._expand.clear()
        self._expand[stack] = result
        return result

    def push(self, below: Stack, top: int) -> Stack:
        """The interned stack `below` + [`top`] (ids start at 1: a hit is never falsy)."""
        key = (below, top)
        got = self._stack_ids.get(key)
        if got is None:
            with self.lock:
                got = self._stack_ids.get(key)
                if got is None:
                    got = len(self._top)
                    self._below.append(below)
                    self._top.append(top)
                    self._depth.append(self._depth[below] + 1)
                    self._stack_ids[key] = got  # published last: readers see whole rows
        return got

    def starts(self, stack: Stack) -> list[Config]:
        shifts, _ = self.expand(stack)
        filled = self._filled
        for t in shifts:
            if not filled[t]:
                self._fill(t)
        base, term_base = stack * self.n_lex, self.term_base
        return [base + term_base[t] for t in shifts]

    def _fill(self, t: int) -> None:
        """Number table terminal `t`'s states in the global lexer (every lexer state of a
        configuration starts at its terminal's first state, which `starts` hands out, so no
        state is read before this). Idempotent: two threads may both write the same values,
        and the flag is set only once the block is whole."""
        dfa = self.terminals[t]
        if isinstance(dfa, Dfa):
            base = self.term_base[t]
            n = dfa.n_states - 1
            moves = dfa.table  # C-ordered int32, as every Dfa's
            self.term_classes[t] = dfa.classes.tobytes()
            self.term_moves[t] = moves.reshape(-1).data
            self.term_width[t] = dfa.n_classes
            self.term_acc[t] = dfa.accepting.tobytes()
            self.lex_term[base : base + n] = [t] * n
        self._filled[t] = 1

    def completions(self, stack: Stack, lex: int) -> tuple[Config, ...]:
        """Configurations right after the lexeme of `lex` ends (its terminal shifted)."""
        term = self.term_of(lex)
        key = stack * self._n_terms + term
        got = self._completions.get(key)
        if got is None:
            out: list[Config] = []
            push = self.push
            for below, top in self.expand(stack)[0].get(term, ()):
                out.extend(self.starts(push(below, top)))
            got = tuple(out)
            if len(self._completions) > MAX_CACHE:
                self._completions.clear()
            self._completions[key] = got
        return got

    def _initial(self) -> State:
        root = self.push(0, self.rule_starts[self.start_rule])
        # Only the initial state holds lexers that have read nothing, so whether the empty
        # string is complete is decided here once.
        self.initial_accepts = self.expand(root)[1]
        return self.intern(set(self.starts(root)))

    def intern(self, configs: set[Config]) -> State:
        """The id of a set of configurations (ids start at 1 for non-empty sets: a live
        state is never falsy). A set is kept as its sorted tuple, not a frozenset: a tuple of
        ints is untracked by the first garbage collection it meets, a frozenset never is."""
        key = tuple(sorted(configs))
        got = self._set_ids.get(key)
        if got is None:
            with self.lock:
                got = self._set_ids.get(key)
                if got is None:
                    got = len(self._sets)
                    self._sets.append(key)
                    self._set_ids[key] = got  # published last: readers see the set
        return got

    # ------------------------------------------------------------ lexer side

    def term_of(self, lex: int) -> int:
        return self.lex_term[lex] if lex < self.n_table else self._lazy_of(lex)[0]

    def local_of(self, lex: int) -> int:
        if lex < self.n_table:
            return lex - self.term_shift[self.lex_term[lex]]
        return self._lazy_of(lex)[1]

    def accepts(self, lex: int) -> bool:
        if lex < self.n_table:
            t = self.lex_term[lex]
            return self.term_acc[t][lex - self.term_shift[t]] == 1
        return self._lazy_row(lex)[2]

    def target(self, lex: int, byte: int) -> int:
        if lex < self.n_table:
            t = self.lex_term[lex]
            shift = self.term_shift[t]
            row = (lex - shift) * self.term_width[t]
            nxt = self.term_moves[t][row + self.term_classes[t][byte]]
            return nxt + shift if nxt else 0
        classes, targets, _ = self._lazy_row(lex)
        return targets[classes[byte]]

    def first_bytes(self, lex: int) -> int:
        """The bytes `lex` takes, as a 256-bit integer (bit b: byte b)."""
        got = self._first_bytes.get(lex)
        if got is None:
            if lex < self.n_table:
                dfa = cast("Dfa", self.terminals[self.lex_term[lex]])
                got = dfa.live_bits(self.local_of(lex))
            else:
                classes, targets, _ = self._lazy_row(lex)
                row = np.asarray(targets)[np.frombuffer(classes, dtype=np.uint8)]
                got = int.from_bytes(np.packbits(row != 0, bitorder="little").tobytes(), "little")
            if len(self._first_bytes) > MAX_CACHE:
                self._first_bytes.clear()
            self._first_bytes[lex] = got
        return got

    def _lazy_of(self, lex: int) -> tuple[int, int]:
        i = bisect.bisect_right(self._lazy_bases, lex) - 1
        return self._lazy_terms[i], lex - self._lazy_bases[i]

    def _lazy_row(self, lex: int) -> LazyRow:
        """A lazy state's row, compact: byte → slot (256 bytes), slot → global target."""
        got = self._lazy_rows.get(lex)
        if got is None:
            term, local = self._lazy_of(lex)
            dfa = cast("LazyDfa", self.terminals[term])
            classes, targets = dfa.row1(local)
            base = lex - local
            glob = tuple([t + base if t else 0 for t in targets])
            got = (classes, glob, dfa.acc1(local))
            # the byte map is shared by every state of the same shape: counted once, small
            self._lazy_rows.put(lex, got, 200 + 16 * len(glob))
        return got

    def step(self, state: State, byte: int) -> State:
        key = state << 8 | byte
        got = self._step.get(key)
        if got is not None:
            return got
        n_table, n_lex = self.n_table, self.n_lex
        lex_term, moves, shift, columns, width, accs = (
            self.lex_term,
            self.term_moves,
            self.term_shift,
            self.term_classes,
            self.term_width,
            self.term_acc,
        )
        out: set[Config] = set()
        for config in self._sets[state]:
            lex = config % n_lex
            if lex < n_table:
                t = lex_term[lex]
                local = lex - shift[t]
                nxt = moves[t][local * width[t] + columns[t][byte]]
                if nxt:
                    nxt += shift[t]
                final = accs[t][local]
            else:
                classes, targets, final = self._lazy_row(lex)
                nxt = targets[classes[byte]]
            if nxt:
                out.add(config - lex + nxt)
            if final:
                for config2 in self.completions(config // n_lex, lex):
                    lex2 = config2 % n_lex
                    if lex2 < n_table:  # `target`, inline: a cold step's innermost loop
                        t = lex_term[lex2]
                        # a completion's lexer has read nothing: its terminal's first state,
                        # whose row is the table's second
                        nxt = moves[t][width[t] + columns[t][byte]]
                        if nxt:
                            out.add(config2 - lex2 + nxt + shift[t])
                    else:
                        nxt = self.target(lex2, byte)
                        if nxt:
                            out.add(config2 - lex2 + nxt)
        if len(out) > self._max_parses:
            raise TooComplexError(f"more than {self._max_parses} live parses (Limits.live_parses)")
        got = self.intern(out) if out else 0
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
        if not 0 <= token < self._n_tokens:
            return 0
        key = state * self._n_tokens + token
        got = self._token_step.get(key)
        if got is None:
            data = self.vocab.token_bytes[token]
            got = self.feed(state, data) if data else 0
            if len(self._token_step) > MAX_CACHE:
                self._token_step.clear()
            self._token_step[key] = got
        return got

    def accepting(self, state: State) -> bool:
        got = self._accepting.get(state)
        if got is None:
            got = self.initial_accepts and state == self.initial
            for config in self._sets[state]:
                stack, lex = divmod(config, self.n_lex)
                if self.accepts(lex):
                    term = self.term_of(lex)
                    for below, top in self.expand(stack)[0].get(term, ()):
                        if self.expand(self.push(below, top))[1]:
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
        stack, lex = divmod(config, self.n_lex)
        term = self.term_of(lex)
        classes = _vocab.classify(self.vocab, self.terminals[term], self.local_of(lex))
        # the walk's kept tokens are its bitmask, or a few rows packed with the events' rows
        rows = [classes.accepted] if classes.packed is None else []
        shared = [classes.packed] if classes.packed is not None else []
        if classes.ranges is not None and len(classes.ranges):
            # big events (tokens after a whitespace run) are walked per follow-up terminal,
            # small ones checked token by token (see event_rows)
            rows.extend(self.rows_after(stack, lex, ev) for ev in classes.events)
            plan = _vocab.suffix_plan(self.vocab, classes)
            if len(plan.ranges):
                rows.append(self.event_rows(stack, lex, plan))
        if self.accepts(lex):
            shared.extend(self.config_mask(nxt) for nxt in self.completions(stack, lex))
        # the walk's and the cached masks are shared: OR them into a new array, if any
        if rows:
            mask, rest = _vocab.pack_rows(self.vocab, np.concatenate(rows)), shared
        elif len(shared) == 1:
            mask, rest = shared[0], []
        else:
            mask, rest = np.bitwise_or(shared[0], shared[1]), shared[2:]
        for part in rest:
            np.bitwise_or(mask, part, out=mask)
        return self._config_mask.put(config, mask, mask.nbytes + 200)

    def event_rows(self, stack: Stack, lex: int, plan: _vocab.SuffixPlan) -> np.ndarray:
        """Of the small events' token rows, those allowed after `lex` ends: each is fed byte by
        byte to the configurations after the lexeme (memoised steps, all follow-up terminals
        at once), ranges whose first byte cannot follow skipped whole, and within a range the
        steps of a shared prefix taken once."""
        term_key = stack * self._n_terms + self.term_of(lex)
        after = self._after.get(term_key)
        if after is None:
            after = self.intern(set(self.completions(stack, lex)))
            if len(self._after) > MAX_CACHE:
                self._after.clear()
            self._after[term_key] = after
        if not after:
            return _NO_ROWS
        step = self.step
        memo = self._step
        firsts = plan.first_bits
        follow = self._follow.get(after)
        if follow is None:
            lexes = [c % self.n_lex for c in self._sets[after]]
            if any(self.accepts(lex2) for lex2 in lexes):
                # a lexer may end before any byte: which bytes follow is found by stepping,
                # a byte at a time as plans ask for them (known, allowed)
                follow = (0, 0)
            else:  # every lexer has read nothing: a byte can follow iff one of them takes it
                taken = 0
                for lx in lexes:
                    taken |= self.first_bytes(lx)
                follow = (-1, taken)
            if len(self._follow) > MAX_CACHE:
                self._follow.clear()
            self._follow[after] = follow
        known, allowed = follow
        todo = firsts & ~known
        if todo:
            known |= todo
            while todo:
                low = todo & -todo
                todo ^= low
                if step(after, low.bit_length() - 1):
                    allowed |= low
            self._follow[after] = (known, allowed)
        alive = firsts & allowed
        if not alive:
            return _NO_ROWS
        vocab = self.vocab
        out: list[int] = []
        offsets = plan.offsets
        while alive:
            low = alive & -alive
            alive ^= low
            b = low.bit_length() - 1
            for c, lo, hi in plan.ranges[offsets[b] : offsets[b + 1]].tolist():
                states = [after]  # states[k]: after the first k bytes of the current rest
                for rest, lcp, row in _vocab.range_entries(vocab, c, lo, hi):
                    if len(states) <= lcp:  # the shared prefix already died
                        continue
                    del states[lcp + 1 :]
                    st = states[-1]
                    for byte in rest[lcp:]:
                        nxt = memo.get(st << 8 | byte)
                        st = step(st, byte) if nxt is None else nxt
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
        for config2 in self.completions(stack, lex):
            stack2, lex2 = divmod(config2, self.n_lex)
            dfa = self.terminals[self.term_of(lex2)]
            w = _vocab.cached_walk(self.vocab, dfa, self.local_of(lex2), col, rows, key)
            out.append(w.accepted)
            for ev in w.events:
                out.append(self.rows_after(stack2, lex2, ev))
        return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)

    def state_mask(self, state: State) -> np.ndarray:
        got = self._state_mask.get(state)
        if got is not None:
            return got
        mask: np.ndarray | None = None
        for config in self._sets[state]:
            m = self.config_mask(config)
            mask = m if mask is None else mask | m
        if mask is None:
            mask = np.zeros(self.vocab.packed_len, dtype=np.uint8)
        if self.accepting(state):
            mask = mask | self.eos_bits
        return self._state_mask.put(state, mask, mask.nbytes + 200)

    def has_token(self, state: State) -> bool:
        """Whether `state_mask(state)` allows any token (EOS included), remembered per state:
        the check scans the whole mask, a sixth of a cached mask's step on SmolLM2."""
        got = self._has_token.get(state)
        if got is None:
            got = bool(self.state_mask(state).any())
            if len(self._has_token) > MAX_CACHE:
                self._has_token.clear()
            self._has_token[state] = got
        return got

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
