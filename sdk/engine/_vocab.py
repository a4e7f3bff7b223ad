"""Vocabulary arrays for vectorised automaton walks, and per-DFA-state token classification.

`classify(dfa, state)` is the precomputation that does not depend on the parser stack: for one
lexer state it splits the whole vocabulary into tokens that stay inside the lexeme (allowed
whatever the stack), tokens that die (never allowed) and the few that finish the lexeme in
their middle (checked against the stack at run time). One numpy pass over a length-sorted byte
matrix does it; the result is cached per (terminal DFA, state), across grammars.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import _automata as au


@dataclass(frozen=True, eq=False)
class Vocab:
    size: int  # mask length (ids >= len(token_bytes) are never allowed)
    token_bytes: tuple[bytes, ...]
    ids: np.ndarray  # int64 [N]: non-empty token ids sorted by byte length, descending
    matrix: np.ndarray  # uint8 [N, L]: their bytes, zero padded
    longer_than: np.ndarray  # int64 [L + 1]: count of tokens with length > j
    eos_ids: tuple[int, ...]
    packed_len: int


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
    matrix = np.zeros((len(order), max_len), dtype=np.uint8)
    for row, tid in enumerate(order.tolist()):
        b = tb[tid]
        matrix[row, : len(b)] = np.frombuffer(b, dtype=np.uint8)
    sorted_lens = lens[order]
    longer = np.asarray([(sorted_lens > j).sum() for j in range(max_len + 1)], dtype=np.int64)
    eos = tuple(sorted(int(e) for e in getattr(index, "eos_ids", ())))
    return Vocab(size, tb, order, matrix, longer, eos, (size + 7) // 8)


Events = tuple[tuple[int, np.ndarray], ...]


@dataclass(frozen=True, eq=False)
class Classes:
    accepted: np.ndarray  # packed uint8 bitmask (little bit order)
    events: Events  # (column, matrix rows): tokens whose lexeme may end after `column` bytes
    # and that die if it does not; their rest is checked against the parser stack.


_class_cache: weakref.WeakKeyDictionary[Vocab, dict[tuple[int, int], Classes]] = (
    weakref.WeakKeyDictionary()
)
MAX_CLASS_CACHE = 20_000


def classify(vocab: Vocab, dfa: au.Dfa, state: int) -> Classes:
    cache = _class_cache.get(vocab)
    if cache is None:
        cache = _class_cache.setdefault(vocab, {})
    key = (dfa.serial, state)
    got = cache.get(key)
    if got is not None:
        return got
    rows, events = walk(vocab, dfa, state, None, 0)
    got = Classes(pack_rows(vocab, rows), events)
    if len(cache) >= MAX_CLASS_CACHE:
        cache.clear()
    cache[key] = got
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
    events of the rows that die: (c, rows) where the lexeme was complete after byte c and more
    bytes followed (a row can appear under several c).
    """
    trans = dfa.trans
    acc = dfa.accepting
    matrix = vocab.matrix
    longer = vocab.longer_than
    if rows is None:
        rows = np.arange(len(vocab.ids), dtype=np.int64)
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
    events: list[tuple[int, np.ndarray]] = []
    if died is not None:
        for c, cand in candidates:
            keep = cand[died[cand]]
            if len(keep):
                events.append((c, keep))
    return accepted, tuple(events)
