"""Vocabulary arrays for vectorised automaton walks, and per-DFA-state token classification.

`classify(dfa, state)` is the precomputation that does not depend on the parser stack: for one
lexer state it splits the whole vocabulary into tokens that stay inside the lexeme (allowed
whatever the stack), tokens that die (never allowed) and the few that finish the lexeme in
their middle (checked against the stack at run time). One numpy pass over a length-sorted byte
matrix does it; the result is cached across grammars by the language of the state.
"""

from __future__ import annotations

import hashlib
import itertools
import threading
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import _automata as au
from ._cache import BoundedCache


@dataclass(frozen=True, eq=False)
class Vocab:
    size: int  # mask length (ids >= len(token_bytes) are never allowed)
    token_bytes: tuple[bytes, ...]
    ids: np.ndarray  # int64 [N]: non-empty token ids sorted by byte length, descending
    matrix: np.ndarray  # uint8 [N, L]: their bytes, zero padded
    longer_than: np.ndarray  # int64 [L + 1]: count of tokens with length > j
    eos_ids: tuple[int, ...]
    packed_len: int
    by_first_byte: tuple[np.ndarray, ...]  # matrix rows (ascending) whose first byte is b
    row_lengths: np.ndarray  # int64 [N]: byte length of each matrix row
    rest: np.ndarray  # uint8: the rows' bytes back to back, without each row's first byte
    row_of_rest: np.ndarray  # int32: the matrix row of every byte of `rest`


_vocabs: weakref.WeakKeyDictionary[Any, Vocab] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def vocab_of(index: Any) -> Vocab:
    """Arrays for a tokenizer index (anything with token_bytes, vocab_size, eos_ids)."""
    with _lock:
        v = _vocabs.get(index)
        if v is None:
            v = _build(index)
            _vocabs[index] = v
        return v


def _build(index: Any) -> Vocab:
    tb = tuple(index.token_bytes)
    size = max(int(getattr(index, "vocab_size", len(tb))), len(tb))
    lens = np.fromiter((len(b) for b in tb), dtype=np.int64, count=len(tb))
    nonempty = np.nonzero(lens > 0)[0]
    order = nonempty[np.argsort(-lens[nonempty], kind="stable")]
    max_len = int(lens.max()) if len(tb) else 0
    sorted_lens = lens[order]
    # Vectorised: the rows' bytes back to back, scattered into the padded matrix.
    flat = np.frombuffer(b"".join([tb[i] for i in order.tolist()]), dtype=np.uint8)
    row_of_flat = np.repeat(np.arange(len(order), dtype=np.int32), sorted_lens)
    starts = np.cumsum(sorted_lens) - sorted_lens
    col_of_flat = np.arange(len(flat), dtype=np.int64) - np.repeat(starts, sorted_lens)
    matrix = np.zeros((len(order), max_len), dtype=np.uint8)
    matrix[row_of_flat, col_of_flat] = flat
    # count of lengths > j; lengths are sorted descending
    longer = np.searchsorted(-sorted_lens, -np.arange(max_len + 1), side="left").astype(np.int64)
    eos = tuple(sorted(int(e) for e in getattr(index, "eos_ids", ())))
    first = matrix[:, 0] if max_len else np.zeros(0, dtype=np.uint8)
    first_order = np.argsort(first, kind="stable")
    bounds = np.searchsorted(first[first_order], np.arange(257))
    by_first = tuple(first_order[bounds[b] : bounds[b + 1]].astype(np.int64) for b in range(256))
    return Vocab(
        size,
        tb,
        order,
        matrix,
        longer,
        eos,
        (size + 7) // 8,
        by_first,
        sorted_lens,
        flat[col_of_flat > 0],
        row_of_flat[col_of_flat > 0],
    )


Event = tuple[int, np.ndarray, int]  # (column, matrix rows, unique key of this row set)
Events = tuple[Event, ...]


@dataclass(frozen=True, eq=False)
class Walk:
    """Tokens walked through one lexer state: those that stay inside the lexeme to their last
    byte (`accepted`, matrix rows; `packed` as a bitmask for whole-vocabulary walks), and the
    boundary events of the others: (c, rows, key) where the lexeme was complete after byte c
    and the rest must be checked against whatever the parser allows next."""

    accepted: np.ndarray
    events: Events
    packed: np.ndarray | None


def _per_vocab(registry: weakref.WeakKeyDictionary[Vocab, Any], vocab: Vocab, size: int) -> Any:
    """The byte-bounded cache of `vocab` in `registry` (created on first use; it lives and
    dies with the vocabulary)."""
    cache = registry.get(vocab)
    if cache is None:
        cache = registry.setdefault(vocab, BoundedCache(size))
    return cache


_walk_cache: weakref.WeakKeyDictionary[Vocab, BoundedCache[Any, Walk]] = weakref.WeakKeyDictionary()
_row_keys = itertools.count(1)
WALK_CACHE_BYTES = 160 << 20


def classify(vocab: Vocab, dfa: au.Dfa, state: int) -> Walk:
    """The stack-independent split of the whole vocabulary at one lexer state (cached).

    Big DFAs are also cached by `horizon_classes`: states that no token can tell apart (a
    length counter's states far from its bounds) share one walk.
    """
    if dfa.n_states < HORIZON_MIN_STATES:
        return cached_walk(vocab, dfa, state, 0, None, 0)
    cache = _per_vocab(_walk_cache, vocab, WALK_CACHE_BYTES)
    key = (state_key(dfa, state), 0, 0)
    got = cache.get(key)
    if got is not None:
        return got
    hkey = ("horizon", dfa.serial, int(horizon_classes(dfa, vocab.matrix.shape[1])[state]))
    got = cache.get(hkey)
    if got is None:
        got = cached_walk(vocab, dfa, state, 0, None, 0)
        cache.put(hkey, got, 64)
    else:
        cache.put(key, got, 64)
    return got


#: States with more reachable states than this are keyed by (DFA, state) instead of by
#: language: the signature's cost grows with the reachable part.
SIGNATURE_MAX_STATES = 64


def state_key(dfa: au.Dfa, state: int) -> Any:
    """A cache key for the language of `state`: equal keys, equal languages, so walks are
    shared across DFAs (a key-exclusion string's body is the plain string body; the same
    enum tail recurs in many schemas). (serial, state) where the signature is too costly."""
    sigs: dict[int, Any] = dfa.__dict__.setdefault("_state_keys", {})
    got = sigs.get(state)
    if got is None:
        got = _signature(dfa, state)
        if got is None:
            got = (dfa.serial, state)
        sigs[state] = got
    return got


def _signature(dfa: au.Dfa, start: int) -> bytes | None:
    """Digest of the sub-automaton reachable from `start`, states numbered in breadth-first
    order with successors taken by first byte: isomorphic parts (same language, for minimal
    DFAs) get the same digest."""
    succ = dfa.successors
    order = [start]
    number = {start: 0}
    i = 0
    while i < len(order):
        for v in succ[order[i]]:
            if v not in number:
                if len(order) >= SIGNATURE_MAX_STATES:
                    return None
                number[v] = len(order)
                order.append(v)
        i += 1
    lut = np.zeros(dfa.n_states, dtype=np.int32)
    lut[order] = np.arange(1, len(order) + 1, dtype=np.int32)
    h = hashlib.blake2b(lut[dfa.trans[order]].tobytes(), digest_size=20)
    h.update(dfa.accepting[order].tobytes())
    return h.digest()


#: Sharing walks between look-alike states pays where one DFA has many of them: length
#: counters (a string of at most N characters has ~N × 18 states).
HORIZON_MIN_STATES = 512


_horizon_cache: weakref.WeakKeyDictionary[au.Dfa, tuple[int, np.ndarray]] = (
    weakref.WeakKeyDictionary()
)


def horizon_classes(dfa: au.Dfa, depth: int) -> np.ndarray:
    """Class of every state such that states of one class accept the same strings of at
    most `depth` bytes and go through accepting states at the same positions: Moore
    refinement stopped after `depth` rounds. A whole-vocabulary walk (tokens are at most
    `depth` bytes) is therefore the same from every state of a class."""
    got = _horizon_cache.get(dfa)
    if got is not None and got[0] == depth:
        return got[1]
    reps, _ = au.byte_classes(dfa.trans)
    t = dfa.trans[:, reps].astype(np.int64)
    n = t.shape[0]
    cls = dfa.accepting.astype(np.int64)
    cls[0] = 2  # the dead state is alone
    count = len(np.unique(cls))
    sig = np.empty((n, t.shape[1] + 1), dtype=np.int32)
    width = sig.shape[1] * 4
    for _ in range(depth):
        sig[:, 0] = cls
        sig[:, 1:] = cls[t]
        rows = np.ascontiguousarray(sig).view(np.dtype((np.void, width))).reshape(-1)
        _, key = np.unique(rows, return_inverse=True)
        key = key.reshape(-1).astype(np.int64)
        new_count = int(key.max()) + 1
        cls = key
        if new_count == count:
            break
        count = new_count
    _horizon_cache[dfa] = (depth, cls)
    return cls


def cached_walk(
    vocab: Vocab, dfa: au.Dfa, state: int, col: int, rows: np.ndarray | None, rows_key: int
) -> Walk:
    """`walk`, memoised across grammars: row sets are named by the key of the event that
    produced them, so the same boundary crossing is never walked twice."""
    cache = _per_vocab(_walk_cache, vocab, WALK_CACHE_BYTES)
    key = (state_key(dfa, state), col, rows_key)
    got = cache.get(key)
    if got is None:
        if rows is not None and len(rows) > BUCKET_MIN_ROWS and rows_key:
            # a big boundary event (tokens after a whitespace run, say) meets many follow-up
            # terminals: look only at the rows whose next byte this state takes
            rows = _rows_starting_with(vocab, rows, col, rows_key, dfa.trans[state] != 0)
        accepted, events = walk(vocab, dfa, state, rows, col)
        if rows is None:  # whole-vocabulary walks are only ever used as a bitmask
            got = Walk(_NO_ROWS, events, pack_rows(vocab, accepted))
        else:
            got = Walk(accepted.astype(np.int32), events, None)
        size = 200 + got.accepted.nbytes + sum(r.nbytes + 64 for _, r, _ in events)
        cache.put(key, got, size + (got.packed.nbytes if got.packed is not None else 0))
    return got


_NO_ROWS = np.zeros(0, dtype=np.int32)

#: One entry per distinct rest of the tokens of a walk's small events: (the bytes after the
#: lexeme's end, length of the prefix shared with the previous entry, their matrix rows).
SuffixPlan = tuple[tuple[bytes, int, np.ndarray], ...]
_plans: weakref.WeakKeyDictionary[Walk, SuffixPlan] = weakref.WeakKeyDictionary()


def suffix_plan(vocab: Vocab, walk: Walk, max_rows: int) -> SuffixPlan:
    """The small events (at most `max_rows` rows) of `walk`, regrouped by what follows the
    lexeme's end in each token, sorted so that shared prefixes are adjacent. Whether a row is
    allowed depends only on these bytes (all events of a configuration continue from the same
    parser state), so each distinct rest is checked once and a dead prefix skips its run.
    Cached per walk: every configuration of its lexer state uses the same plan."""
    got = _plans.get(walk)
    if got is None:
        tb = vocab.token_bytes
        by_rest: dict[bytes, list[int]] = {}
        for col, rows, _ in walk.events:
            if len(rows) <= max_rows:
                for row, tid in zip(rows.tolist(), vocab.ids[rows].tolist(), strict=True):
                    by_rest.setdefault(tb[tid][col:], []).append(row)
        plan: list[tuple[bytes, int, np.ndarray]] = []
        prev = b""
        for rest in sorted(by_rest):
            lcp = 0
            for a, b in zip(prev, rest, strict=False):
                if a != b:
                    break
                lcp += 1
            plan.append((rest, lcp, np.asarray(by_rest[rest], dtype=np.int64)))
            prev = rest
        got = tuple(plan)
        with _lock:
            _plans[walk] = got
    return got


def pack_rows(vocab: Vocab, rows: np.ndarray) -> np.ndarray:
    bits = np.zeros(vocab.packed_len * 8, dtype=bool)
    bits[vocab.ids[rows]] = True
    return np.packbits(bits, bitorder="little")


def walk(
    vocab: Vocab, dfa: au.Dfa, state: int, rows: np.ndarray | None, col: int
) -> tuple[np.ndarray, Events]:
    """Run the lexer from `state` over tokens `rows` (all if None) starting at byte `col`.

    Returns the rows that are still inside the lexeme at their last byte, and the boundary
    events of the rows that die: (c, rows, key) where the lexeme was complete after byte c and
    more bytes followed (a row can appear under several c).
    """
    if rows is not None and len(rows) <= SMALL_WALK:
        return _walk_small(vocab, dfa, state, rows, col)
    trans = dfa.trans
    acc = dfa.accepting
    matrix = vocab.matrix
    longer = vocab.longer_than
    allowed_first = trans[state] != 0
    if rows is None:
        # Only tokens whose first byte can start here: literal-like states touch few rows.
        n_first = int(allowed_first.sum())
        if n_first <= 32:
            picked = [vocab.by_first_byte[b] for b in np.nonzero(allowed_first)[0]]
            rows = np.sort(np.concatenate(picked)) if picked else np.zeros(0, dtype=np.int64)
        elif (split := _split_by_main_target(vocab, dfa, state)) is not None:
            stays, others = split
            rest, rest_events = walk(vocab, dfa, state, others, col)
            return np.concatenate([stays, rest]), rest_events
        else:
            groups = _groups(vocab, dfa)
            if groups is not None:
                return _walk_grouped(vocab, dfa, state, groups)
            rows = np.arange(len(vocab.ids), dtype=np.int64)
    elif len(rows) > 64:
        rows = rows[allowed_first[matrix[rows, col]]]
    s = np.full(len(rows), state, dtype=np.int32)
    survivors: list[np.ndarray] = []
    candidates: list[tuple[int, np.ndarray]] = []
    died = np.zeros(len(vocab.ids), dtype=bool) if rows.size else None
    for j in range(col, matrix.shape[1]):
        n = int(np.searchsorted(rows, longer[j]))  # rows[:n] still have a byte at column j
        if n < len(rows):
            survivors.append(rows[n:])
            rows, s = rows[:n], s[:n]
        if n == 0:
            break
        if n <= SMALL_WALK:  # a few long tokens left: finish them without numpy's overhead
            kept, ended_at = _step_rows(vocab, dfa, rows.tolist(), s.tolist(), j)
            kept_rows = np.asarray(kept, dtype=np.int64)
            survivors.append(kept_rows)
            assert died is not None
            died[rows] = True  # all of them were alive up to here: the ones not kept died
            died[kept_rows] = False
            candidates.extend((c, np.asarray(r, dtype=np.int64)) for c, r in ended_at.items())
            rows = rows[:0]
            break
        s = trans[s, matrix[rows, j]]
        alive = s != 0
        if not alive.all():
            assert died is not None
            died[rows[~alive]] = True
            rows, s = rows[alive], s[alive]
            if len(rows) == 0:
                break
        ended = acc[s] & (rows < longer[j + 1])
        if ended.any():
            candidates.append((j + 1, rows[ended]))
    if len(rows):
        survivors.append(rows)
    accepted = np.concatenate(survivors) if survivors else np.zeros(0, dtype=np.int64)
    events: list[Event] = []
    if died is not None:
        by_col: dict[int, list[np.ndarray]] = {}
        for c, cand in candidates:
            keep = cand[died[cand]]
            if len(keep):
                by_col.setdefault(c, []).append(keep)
        for c in sorted(by_col):
            parts = by_col[c]
            events.append(
                (c, parts[0] if len(parts) == 1 else np.concatenate(parts), next(_row_keys))
            )
    return accepted, tuple(events)


SMALL_WALK = 48
BUCKET_MIN_ROWS = 512

_bucket_cache: weakref.WeakKeyDictionary[
    Vocab, BoundedCache[Any, tuple[np.ndarray, np.ndarray]]
] = weakref.WeakKeyDictionary()


def _rows_starting_with(
    vocab: Vocab, rows: np.ndarray, col: int, rows_key: Any, allowed: np.ndarray
) -> np.ndarray:
    """`rows` whose byte at `col` is `allowed` (ascending); the rows are bucketed by that byte
    once per row set, so each follow-up terminal costs only its own buckets."""
    cache = _per_vocab(_bucket_cache, vocab, 32 << 20)
    key = (rows_key, col)
    got = cache.get(key)
    if got is None:
        byte = vocab.matrix[rows, col]
        order = np.argsort(byte, kind="stable")  # stable: ascending rows within a bucket
        bounds = np.searchsorted(byte[order], np.arange(257))
        got = (rows[order], bounds)
        cache.put(key, got, rows.nbytes + bounds.nbytes + 128)
    by_byte, bounds = got
    picked = [by_byte[bounds[b] : bounds[b + 1]] for b in np.nonzero(allowed)[0].tolist()]
    picked = [p for p in picked if len(p)]
    if not picked:
        return rows[:0]
    return picked[0] if len(picked) == 1 else np.sort(np.concatenate(picked))


def _step_rows(
    vocab: Vocab, dfa: au.Dfa, rows: list[int], states: list[int], col: int
) -> tuple[list[int], dict[int, list[int]]]:
    """Plain-Python walk of `rows`, each from its own state at byte `col`: the rows still
    inside the lexeme at their last byte, and per column c the rows that died after the
    lexeme was complete at c. Cheaper than numpy's per-call overhead for few rows."""
    table = dfa.table
    acc = dfa.accepting_list
    tb = vocab.token_bytes
    kept: list[int] = []
    by_col: dict[int, list[int]] = {}
    for row, tid, q in zip(rows, vocab.ids[rows].tolist(), states, strict=True):
        data = tb[tid]
        last = len(data) - 1
        ends: list[int] = []
        for k in range(col, len(data)):
            q = table[q * 256 + data[k]]
            if not q:
                break
            if k < last and acc[q]:
                ends.append(k + 1)
        else:
            kept.append(row)
            continue
        for c in ends:
            by_col.setdefault(c, []).append(row)
    return kept, by_col


def _split_by_main_target(
    vocab: Vocab, dfa: au.Dfa, state: int
) -> tuple[np.ndarray, np.ndarray] | None:
    """For a wide state, the tokens whose fate is known without walking them.

    Most bytes P0 lead from `state` to one state c1, and from there most bytes P lead on to
    one state again, for a while: the chain `state → c1 → c2 → ...` (a string body loops on
    P; a length counter steps to its next count; a key-exclusion string leaves its key
    prefix for the plain body on P0, then loops on P). A token whose first byte is in P0 and
    whose other bytes are in P, of length m, ends in c_m. If no state of the chain accepts,
    nothing can end inside it: the token is allowed when c_m is alive and dead otherwise.
    Returns (allowed rows, rows still to walk), or None when not worth it. Rows with other
    bytes, or longer than the chain is known, are walked.
    """
    trans = dfa.trans
    first = _main_target(trans[state])
    if first is None or dfa.accepting[first]:
        return None
    plain0 = trans[state] == first
    body = _main_target(trans[first])
    plain = trans[first] == body if body is not None else plain0
    depth = vocab.matrix.shape[1]
    chain = [state, first]
    while len(chain) <= depth and chain[-1] != 0:
        if dfa.accepting[chain[-1]]:
            return _split_chain(vocab, plain0, plain, chain[:-1])
        nxt = trans[chain[-1]][plain]
        if (nxt != nxt[0]).any():
            break
        if nxt[0] == chain[-1]:  # a loop (a string body): the chain stays here
            chain.extend([chain[-1]] * (depth + 1 - len(chain)))
            break
        chain.append(int(nxt[0]))
    return _split_chain(vocab, plain0, plain, chain)


def _main_target(row: np.ndarray) -> int | None:
    """The live state most bytes of a transition row lead to, if at least 32 do."""
    counts = np.bincount(row)
    counts[0] = 0
    top = int(counts.argmax())
    return top if counts[top] >= 32 else None


_only_cache: weakref.WeakKeyDictionary[Vocab, BoundedCache[bytes, np.ndarray]] = (
    weakref.WeakKeyDictionary()
)


def _only_bytes_of(vocab: Vocab, allowed: np.ndarray) -> np.ndarray:
    """Rows whose bytes after the first are all `allowed` bytes (cached per byte set: most
    are JSON string bodies)."""
    cache = _per_vocab(_only_cache, vocab, 16 << 20)
    key = np.packbits(allowed).tobytes()
    got = cache.get(key)
    if got is None:
        got = np.ones(len(vocab.ids), dtype=bool)
        got[vocab.row_of_rest[~allowed[vocab.rest]]] = False
        cache.put(key, got, got.nbytes + 64)
    return got


def _split_chain(
    vocab: Vocab, plain0: np.ndarray, plain: np.ndarray, chain: list[int]
) -> tuple[np.ndarray, np.ndarray]:
    """`chain[m]` is where a token of m bytes ends (0: dead), for m < len(chain), when its
    first byte is in `plain0` and the others in `plain`."""
    longest = vocab.matrix.shape[1]
    known = len(chain) - 1  # token lengths whose end state is known
    if chain[-1] == 0:
        known = longest  # dead stays dead
    simple = plain0[vocab.matrix[:, 0]] & _only_bytes_of(vocab, plain)
    if known < longest:
        simple &= vocab.row_lengths <= known
    if 0 in chain[1:] or len(chain) <= longest:
        ends = np.asarray(chain + [0], dtype=np.int64)[np.minimum(vocab.row_lengths, len(chain))]
        allowed = simple & (ends != 0)
    else:  # every length ends alive
        allowed = simple
    return np.nonzero(allowed)[0], np.nonzero(~simple)[0]


def _walk_small(
    vocab: Vocab, dfa: au.Dfa, state: int, rows: np.ndarray, col: int
) -> tuple[np.ndarray, Events]:
    """`walk` for few rows, in plain Python."""
    row_list = rows.tolist()
    kept, by_col = _step_rows(vocab, dfa, row_list, [state] * len(row_list), col)
    events = tuple(
        (c, np.asarray(r, dtype=np.int64), next(_row_keys)) for c, r in sorted(by_col.items())
    )
    return np.asarray(kept, dtype=np.int64), events


@dataclass(frozen=True, eq=False)
class _Groups:
    """Tokens the DFA cannot tell apart: same length, same byte class at every position."""

    reps: np.ndarray  # one matrix row per group, ascending
    group_of_row: np.ndarray  # group index of every matrix row


_group_cache: weakref.WeakKeyDictionary[Vocab, BoundedCache[Any, _Groups | None]] = (
    weakref.WeakKeyDictionary()
)
MAX_GROUPED_STATES = 4096


def _groups(vocab: Vocab, dfa: au.Dfa) -> _Groups | None:
    """Group the vocabulary by the DFA's byte classes: a string-body state then walks a few
    hundred representatives instead of every token. Cached per byte partition, which many
    DFAs share (every JSON string DFA splits bytes the same way)."""
    cache = _per_vocab(_group_cache, vocab, 64 << 20)
    if dfa.serial in cache:
        return cache.get(dfa.serial)
    got: _Groups | None = None
    if dfa.n_states <= MAX_GROUPED_STATES and len(vocab.ids):
        byte_class = au.byte_classes(dfa.trans)[1].astype(np.uint8)
        partition = byte_class.tobytes()
        if partition in cache:
            got = cache.get(partition)
        else:
            got = _group_rows(vocab, byte_class)
            cache.put(partition, got, got.reps.nbytes + got.group_of_row.nbytes)
    cache.put(dfa.serial, got, 64)
    return got


def _group_rows(vocab: Vocab, byte_class: np.ndarray) -> _Groups:
    n, width = vocab.matrix.shape
    keys = np.empty((n, width + 2), dtype=np.uint8)
    keys[:, 0] = vocab.row_lengths >> 8
    keys[:, 1] = vocab.row_lengths & 0xFF
    keys[:, 2:] = byte_class[vocab.matrix]
    void = np.ascontiguousarray(keys).view(np.dtype((np.void, width + 2))).reshape(-1)
    _, first, inverse = np.unique(void, return_index=True, return_inverse=True)
    reps, group_of_row = au.in_first_seen_order(first, inverse)
    return _Groups(reps.astype(np.int64), group_of_row)


def _walk_grouped(
    vocab: Vocab, dfa: au.Dfa, state: int, groups: _Groups
) -> tuple[np.ndarray, Events]:
    accepted, events = walk(vocab, dfa, state, groups.reps, 0)
    hit = np.zeros(len(groups.reps), dtype=bool)
    rep_index = np.searchsorted(groups.reps, accepted)
    hit[rep_index] = True
    rows = np.nonzero(hit[groups.group_of_row])[0]
    out: list[Event] = []
    for c, ev_rows, _ in events:
        hit[:] = False
        hit[np.searchsorted(groups.reps, ev_rows)] = True
        out.append((c, np.nonzero(hit[groups.group_of_row])[0], next(_row_keys)))
    return rows, tuple(out)
