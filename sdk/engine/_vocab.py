"""Vocabulary arrays for automaton walks, and per-DFA-state token classification.

`classify(dfa, state)` is the precomputation that does not depend on the parser stack: for one
lexer state it splits the whole vocabulary into tokens that stay inside the lexeme (allowed
whatever the stack), tokens that die (never allowed) and the few that finish the lexeme in
their middle (checked against the stack at run time). A compiled walk of the vocabulary's trie
does it (`_trie`); the result is cached per (DFA, state), and DFAs of equal regexes are one
object across grammars.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import _dfa_kernels, _row_walks, _trie
from ._cache import BoundedCache
from ._dfa import Dfa
from ._dfa_ops import AnyDfa
from ._gc_pause import trim_heap
from ._lazy import LazyDfa
from ._owner import OWNER


@dataclass(frozen=True, eq=False)
class Vocab:
    size: int  # mask length (ids >= len(token_bytes) are never allowed)
    token_bytes: tuple[bytes, ...]
    ids: np.ndarray  # int64 [N]: non-empty token ids sorted by byte length, descending
    matrix: np.ndarray  # uint8 [N, L]: their bytes, zero padded
    eos_ids: tuple[int, ...]
    packed_len: int
    row_lengths: np.ndarray  # int64 [N]: byte length of each matrix row
    trie: _trie.Trie  # the rows as a trie, for whole-vocabulary walks
    #: the byte-bounded memo tables of this vocabulary by name (`_per_vocab`), and arrays
    #: derived from it once (`trie_levels`)
    caches: dict[str, Any] = field(default_factory=dict, repr=False)


_lock = threading.Lock()


def vocab_of(index: Any) -> Vocab:
    """Arrays for a tokenizer index (anything with token_bytes, vocab_size, eos_ids), in the
    owner's table keyed weakly by index (`Owner.vocabs`)."""
    with _lock:
        v: Vocab | None = OWNER.vocabs.get(index)
        if v is None:
            v = _build(index)
            OWNER.vocabs[index] = v
            # The build's temporaries (tens of MB at 152k tokens) were freed into glibc's
            # heap, which keeps them: that is 24 MB of Qwen2.5's steady RSS without this.
            trim_heap()
        return v


def _build(index: Any) -> Vocab:
    tb = tuple(index.token_bytes)
    size = max(int(getattr(index, "vocab_size", len(tb))), len(tb))
    lens = np.fromiter((len(b) for b in tb), dtype=np.int64, count=len(tb))
    nonempty = np.nonzero(lens > 0)[0]
    order = nonempty[np.argsort(-lens[nonempty], kind="stable")]
    max_len = int(lens.max()) if len(tb) else 0
    sorted_lens = lens[order]
    rows = [tb[i] for i in order.tolist()]
    flat = np.frombuffer(b"".join(rows), dtype=np.uint8)
    # Rows run longest first, so each length's rows are one block of `flat`: filled block by
    # block, with no index arrays as long as `flat` (they were 3x the matrix at 152k tokens).
    matrix = np.zeros((len(order), max_len), dtype=np.uint8)
    cuts = [0, *(np.flatnonzero(np.diff(sorted_lens)) + 1).tolist(), len(order)]
    offset = 0
    for lo, hi in zip(cuts, cuts[1:], strict=False):
        width = int(sorted_lens[lo]) if hi > lo else 0
        block = (hi - lo) * width
        matrix[lo:hi, :width] = flat[offset : offset + block].reshape(hi - lo, width)
        offset += block
    eos = tuple(sorted(int(e) for e in getattr(index, "eos_ids", ())))
    return Vocab(
        size,
        tb,
        order,
        matrix,
        eos,
        (size + 7) // 8,
        sorted_lens,
        _trie.build_trie(matrix, sorted_lens, order, (size + 7) // 8, rows),
    )


Event = tuple[int, np.ndarray, bytes]  # (column, matrix rows, content key of the row set)
Events = tuple[Event, ...]


@dataclass(frozen=True, eq=False, slots=True)
class Walk:
    """Tokens walked through one lexer state: those that stay inside the lexeme to their last
    byte (`accepted`, matrix rows; or, for a whole-vocabulary walk keeping more tokens than
    its rows would take bytes, `packed`, a bitmask by token id), and the boundary events of
    the others: (c, rows, key) where the lexeme was complete after byte c and the rest must be
    checked against whatever the parser allows next."""

    accepted: np.ndarray
    events: Events  # whole-vocabulary walks: only the big ones (see SMALL_EVENT_ROWS)
    packed: np.ndarray | None
    #: whole-vocabulary walks: every event as trie position ranges, rows (c, lo, hi) sorted
    ranges: np.ndarray | None = None
    #: `suffix_plan`'s answer, set on first use (an attribute, not a weak-keyed table: one
    #: object fewer per walk for the garbage collector to track)
    plan: SuffixPlan | None = None


def _per_vocab(vocab: Vocab, name: str, size: int) -> Any:
    """The byte-bounded cache `name` of `vocab`, created on first use. It hangs on the
    vocabulary, so it dies with it and a lookup is one dict read (a weak-keyed table made a
    weak reference per lookup, tens of thousands per cold mask)."""
    cache = vocab.caches.get(name)
    if cache is None:
        with _lock:
            cache = vocab.caches.setdefault(name, BoundedCache(name, size))
    return cache


def rows_key(rows: np.ndarray) -> bytes:
    """A name for a set of token rows, by content: walks that cut the same tokens at the same
    byte (the counts of a bounded string, the same key in two objects) share their follow-up
    walks. A 16-byte digest: a collision would take 2^64 row sets."""
    return hashlib.blake2b(
        np.ascontiguousarray(rows, dtype=np.int64).tobytes(), digest_size=16
    ).digest()


WALK_CACHE_BYTES = 160 << 20


def classify(vocab: Vocab, dfa: AnyDfa, state: int) -> Walk:
    """The stack-independent split of the whole vocabulary at one lexer state (cached)."""
    return cached_walk(vocab, dfa, state, 0, None, 0)


def window_depth(vocab: Vocab) -> int:
    """Bytes of a lazy automaton a walk can see: a token is never longer than the matrix."""
    return int(vocab.matrix.shape[1]) + 2


def cached_walk(
    vocab: Vocab,
    dfa: AnyDfa,
    state: int,
    col: int,
    rows: np.ndarray | None,
    rows_key: bytes | int,
) -> Walk:
    """`walk`, memoised across grammars: row sets are named by their content (`rows_key`), so
    the same boundary crossing is never walked twice, whichever walk produced it. A lazy
    automaton is walked on the window of states a token can reach."""
    cache = _per_vocab(vocab, "vocabulary walks", WALK_CACHE_BYTES)
    if isinstance(dfa, LazyDfa):
        depth = window_depth(vocab)
        key = ((dfa.serial, dfa.key(state, depth)), col, rows_key)
    else:
        key = (state_key(dfa, state), col, rows_key)
    got = cache.get(key)
    if got is None:
        if isinstance(dfa, LazyDfa):
            if not dfa.branchy:
                dfa, state = dfa.window(state, window_depth(vocab)), 1
            elif rows is None:
                dfa, state = dfa.window_along(state, trie_levels(vocab)), 1
            else:
                dfa, state = dfa.window_along(state, _row_levels(vocab, rows, col)), 1
        if rows is not None and len(rows) > BUCKET_MIN_ROWS and rows_key:
            # a big boundary event (tokens after a whitespace run, say) meets many follow-up
            # terminals: look only at the rows whose next byte this state takes
            rows = _rows_starting_with(vocab, rows, col, rows_key, dfa.row(state) != 0)
        if rows is None:
            packed, kept, ranges = walk_vocabulary(vocab, dfa, state)
            if packed is not None:
                packed = _shared_bitmask(vocab, packed)
            got = Walk(kept, range_events(vocab, ranges, SMALL_EVENT_ROWS), packed, ranges)
        else:
            accepted, events = walk(vocab, dfa, state, rows, col)
            got = Walk(accepted, events, None)
        size = 200 + got.accepted.nbytes + sum(r.nbytes + 64 for _, r, _ in got.events)
        if got.ranges is not None:  # the bitmask is counted where it is shared
            size += got.ranges.nbytes
        cache.put(key, got, size)
    return got


def _shared_bitmask(vocab: Vocab, packed: np.ndarray) -> np.ndarray:
    """One array per distinct bitmask of kept tokens. The walks that keep most tokens are
    string bodies and the like, reached from thousands of states of different automata, and
    keep few distinct sets: on the dev schemas 7,422 bitmasks held 255 distinct values."""
    cache = _per_vocab(vocab, "walk bitmasks", 32 << 20)
    # keyed by the bytes themselves: an exact match, and Python's hash of them is a fifth
    # of a 16-byte digest's cost (the key's copy is counted)
    key = packed.tobytes()
    got = cache.get(key)
    if got is None:
        got = cache.put(key, packed, 2 * packed.nbytes + 100)
    return got


def trie_levels(vocab: Vocab) -> list[tuple[np.ndarray, np.ndarray]]:
    """The vocabulary's trie by depth, for `LazyDfa.window_along`: per level, each node's
    parent (its index in the level above) and byte. Cached on the vocabulary."""
    got: list[tuple[np.ndarray, np.ndarray]] | None = vocab.caches.get("trie levels")
    if got is None:
        trie = vocab.trie
        depth = np.asarray(trie.depth, dtype=np.int64)
        byte = np.asarray(trie.byte, dtype=np.int64)
        got = []
        above = np.zeros(1, dtype=np.int64)  # positions of the level above; the root first
        for d in range(1, int(depth.max(initial=0)) + 1):
            here = np.nonzero(depth == d)[0]
            # preorder: a node's parent is the last node of the level above before it
            parent = np.searchsorted(above, here) - 1 if d > 1 else np.zeros(len(here), np.int64)
            got.append((parent.astype(np.int64), byte[here]))
            above = here
        vocab.caches["trie levels"] = got
    return got


def _row_levels(vocab: Vocab, rows: np.ndarray, col: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Token rows from byte `col` on as levels of a tree (one path per row)."""
    rows = np.asarray(rows, dtype=np.int64)
    lengths = vocab.row_lengths[rows]
    out: list[tuple[np.ndarray, np.ndarray]] = []
    alive = np.arange(len(rows))
    parent = np.zeros(len(rows), dtype=np.int64)
    for c in range(col, int(lengths.max(initial=0))):
        keep = lengths[alive] > c
        alive, parent = alive[keep], parent[keep]
        out.append((parent, vocab.matrix[rows[alive], c].astype(np.int64)))
        parent = np.arange(len(alive))
    return out


#: Wide states (at least this many first bytes) are keyed by the language they accept, the
#: others by (DFA, state): a narrow walk costs less than the signature.
WIDE_STATE_BYTES = 64
#: Wide states reaching more states than this are keyed by (DFA, state) too.
SIGNATURE_MAX_STATES = 64
#: The first element of a literal state's key (`state_key`).
LITERAL = "literal"
#: Longest rest named by its bytes; longer ones are keyed by (DFA, state).
LITERAL_MAX_BYTES = 256


def literal_rest(dfa: Dfa, state: int) -> bytes | None:
    """The one string `state` still accepts, when its language is a single non-empty string
    (the rest of a key or of an enum value; trimmed DFAs: one move per state up to an
    accepting state with none), else None. Its walks need no chains (`walk_vocabulary`).
    Read along the path from `state` only: a pattern's table can be megabytes."""
    read = _dfa_kernels.literal_path(
        dfa.table, dfa.classes, dfa.accepting, state, LITERAL_MAX_BYTES
    )
    return read.tobytes() if len(read) else None


def state_key(dfa: Dfa, state: int) -> Any:
    """A cache key for the walks from `state`. Equal keys, equal languages: a wide state (a
    string body, the start of a key-exclusion string) shares its walks with every DFA that
    has one like it, which on a 262k vocabulary saves milliseconds per schema, and a state
    with one string left (the rest of a key, of an enum value) is named by that string, so
    `name"` is walked once for every key ending in it, in any grammar. DFAs of equal regexes
    are one object already (compile_regex memoises)."""
    keys: dict[int, Any] = dfa.__dict__.setdefault("_state_keys", {})
    got = keys.get(state)
    if got is None:
        got = (dfa.serial, state)
        n_live = dfa.live_bits(state).bit_count()
        rest = literal_rest(dfa, state) if n_live == 1 else None
        if rest is not None:
            got = (LITERAL, rest)
        elif n_live >= WIDE_STATE_BYTES:
            form = _dfa_kernels.canonical_form(
                dfa.table, dfa.classes, dfa.accepting, state, SIGNATURE_MAX_STATES
            )
            if len(form):
                got = hashlib.blake2b(form.tobytes(), digest_size=20).digest()
        keys[state] = got
    return got


_NO_ROWS = np.zeros(0, dtype=np.int32)


@dataclass(frozen=True, eq=False, slots=True)
class SuffixPlan:
    """The small events of a whole-vocabulary walk as trie ranges: `ranges[k] = (c, lo, hi)`
    holds the tokens at trie positions lo:hi, which all died below one node and had a complete
    lexeme after byte c; they share the byte after c. Whether a token is allowed depends only
    on its bytes after c (every event of a configuration continues from the same parser
    state), so a range whose first byte cannot follow is skipped whole: the ranges are sorted
    by that byte, those of byte b at `offsets[b]:offsets[b + 1]`, and `first_bits` has bit b
    set when there are any (one AND with the bytes that may follow picks them)."""

    # Arrays and ints, not lists: a plan is built for every new walk (a list of lists cost
    # more than the walk's check), and none of this is anything the garbage collector walks.
    ranges: np.ndarray  # (k, 3) int32
    offsets: tuple[int, ...]  # 257
    first_bits: int


#: A whole walk's boundary events of at most this many tokens (per column) are checked token
#: by token against the parser; bigger ones are walked per follow-up terminal.
SMALL_EVENT_ROWS = 256
_NO_PLAN = SuffixPlan(np.zeros((0, 3), dtype=np.int32), (0,) * 257, 0)


def suffix_plan(vocab: Vocab, walk: Walk, max_rows: int = SMALL_EVENT_ROWS) -> SuffixPlan:
    """The plan of the events of `walk` with at most `max_rows` rows, cached per walk."""
    got = walk.plan
    if got is None:
        ranges = walk.ranges
        got = _NO_PLAN
        if ranges is not None and len(ranges):
            small, offsets, words = _row_walks.plan_ranges(
                ranges, vocab.matrix, vocab.trie.order, max_rows
            )
            if len(small):
                w0, w1, w2, w3 = words.tolist()
                got = SuffixPlan(
                    small, tuple(offsets.tolist()), w0 | w1 << 64 | w2 << 128 | w3 << 192
                )
        object.__setattr__(walk, "plan", got)  # a race computes the same plan twice
    return got


#: Entries of one trie range in the order they are checked: (the token's bytes after the
#: lexeme's end, how many of them the previous entry shares, matrix row).
RangeEntries = tuple[tuple[bytes, int, int], ...]


def range_entries(vocab: Vocab, c: int, lo: int, hi: int) -> RangeEntries:
    """The tokens of trie positions lo:hi cut after byte c: in trie order their rests are
    sorted, so a shared prefix is stepped once and a dead one skips its run."""
    cache = _per_vocab(vocab, "trie range entries", 16 << 20)
    key = (c, lo, hi)
    got = cache.get(key)
    if got is None:
        trie = vocab.trie
        tb = vocab.token_bytes
        shared = np.maximum(trie.lcp[lo:hi] - c, 0)
        shared[0] = 0
        got = tuple(
            zip(
                [tb[t][c:] for t in trie.tid[lo:hi].tolist()],
                shared.tolist(),
                trie.order[lo:hi].tolist(),
                strict=True,
            )
        )
        cache.put(key, got, 100 + 80 * (hi - lo))
    return got


def pack_rows(vocab: Vocab, rows: np.ndarray) -> np.ndarray:
    return _trie.pack_rows(vocab.ids, rows, vocab.packed_len)


def walk_vocabulary(
    vocab: Vocab, dfa: Dfa, state: int
) -> tuple[np.ndarray | None, np.ndarray, np.ndarray]:
    """Every token from `state`: those still inside the lexeme at their last byte (a packed
    bitmask, or None and their matrix rows when they are few: `_trie.walk_trie`), and the
    boundary events of those that die as trie position ranges (c, lo, hi), sorted: the tokens
    at positions lo:hi died after the lexeme was complete after byte c."""
    key = state_key(dfa, state)
    if isinstance(key, tuple) and key[0] == LITERAL:
        # One string left (the rest of a key, of an enum value): read along its trie path.
        # The cold steps of a schema's first instance walk every key a token at a time;
        # a table and a whole-vocabulary walk for each cost a fifth of those steps.
        trie = vocab.trie
        ranges, kept = _trie.walk_literal(
            trie.byte,
            trie.skip,
            trie.sub_lo,
            trie.sub_hi,
            trie.end_lo,
            trie.end_hi,
            trie.roots,
            trie.order,
            np.frombuffer(key[1], dtype=np.uint8),
        )
        return None, kept, ranges.astype(np.int32)  # in trie order: sorted already
    trans, classes, acc, chains = dfa.table, dfa.classes, dfa.accepting, dfa.chains
    packed, kept, ranges = _trie.walk_trie(
        vocab.trie, trans, classes, acc, chains, state, vocab.packed_len
    )
    if len(ranges) > 1:
        ranges = ranges[np.lexsort((ranges[:, 1], ranges[:, 0]))]
    return packed, kept, ranges.astype(np.int32)  # half the bytes of a cached walk's ranges


def range_events(vocab: Vocab, ranges: np.ndarray, min_rows: int = 0) -> Events:
    """Sorted trie ranges as events (c, matrix rows, key), one per column c with more than
    `min_rows` rows (a row can appear under several c)."""
    if not len(ranges):
        return ()
    cols = ranges[:, 0]
    sizes = ranges[:, 2] - ranges[:, 1]
    if min_rows and int(sizes.sum()) <= min_rows:
        return ()  # no column can have more
    if min_rows:
        per_col = np.bincount(cols, weights=sizes)
        ranges = ranges[per_col[cols] > min_rows]
        if not len(ranges):
            return ()
        cols = ranges[:, 0]
        sizes = ranges[:, 2] - ranges[:, 1]
    lo = ranges[:, 1]
    starts = np.cumsum(sizes) - sizes
    positions = np.arange(int(sizes.sum()), dtype=np.int64) + np.repeat(lo - starts, sizes)
    rows = vocab.trie.order[positions]
    bounds = np.flatnonzero(np.diff(cols)) + 1
    return tuple(
        (int(c), part, rows_key(part))
        for c, part in zip(
            cols[np.r_[0, bounds]].tolist(), np.split(rows, starts[bounds]), strict=True
        )
    )


def walk(
    vocab: Vocab, dfa: Dfa, state: int, rows: np.ndarray, col: int
) -> tuple[np.ndarray, Events]:
    """Run the lexer from `state` over tokens `rows` starting at byte `col`: the rows still
    inside the lexeme at their last byte, and the boundary events of the rows that die."""
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    kept, cols, bounds, ev_rows = _row_walks.walk_rows(
        vocab.matrix, vocab.row_lengths, rows, col, dfa.table, dfa.classes, dfa.accepting, state
    )
    if not len(cols):
        return kept, ()
    at = bounds.tolist()
    parts = [ev_rows[at[i] : at[i + 1]] for i in range(len(at) - 1)]
    return kept, tuple(
        (c, part, rows_key(part)) for c, part in zip(cols.tolist(), parts, strict=True)
    )


BUCKET_MIN_ROWS = 512


def _rows_starting_with(
    vocab: Vocab, rows: np.ndarray, col: int, rows_key: Any, allowed: np.ndarray
) -> np.ndarray:
    """`rows` whose byte at `col` is `allowed` (ascending); the rows are bucketed by that byte
    once per row set, so each follow-up terminal costs only its own buckets."""
    cache = _per_vocab(vocab, "rows by byte", 32 << 20)
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
