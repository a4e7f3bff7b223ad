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


@dataclass(frozen=True, eq=False)
class Classes:
    accepted: np.ndarray  # packed uint8 bitmask (little bit order)
    uncertain: tuple[int, ...]  # token ids that complete the lexeme strictly inside


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
    got = _classify(vocab, dfa, state)
    if len(cache) >= MAX_CLASS_CACHE:
        cache.clear()
    cache[key] = got
    return got


def _classify(vocab: Vocab, dfa: au.Dfa, state: int) -> Classes:
    trans = dfa.trans
    acc = dfa.accepting
    matrix = vocab.matrix
    longer = vocab.longer_than
    n_all = len(vocab.ids)
    rows = np.arange(n_all, dtype=np.int64)  # row numbers into matrix, ascending
    s = np.full(n_all, state, dtype=np.int32)
    mid = np.zeros(n_all, dtype=bool)
    accepted_rows: list[np.ndarray] = []
    uncertain_rows: list[np.ndarray] = []
    for j in range(matrix.shape[1]):
        n = int(np.searchsorted(rows, longer[j]))  # rows[:n] still have a byte at column j
        if n < len(rows):
            accepted_rows.append(rows[n:])
            rows, s, mid = rows[:n], s[:n], mid[:n]
        if n == 0:
            break
        s = trans[s, matrix[rows, j]]
        alive = s != 0
        if not alive.all():
            dead = ~alive
            uncertain_rows.append(rows[dead & mid])
            rows, s, mid = rows[alive], s[alive], mid[alive]
            if len(rows) == 0:
                break
        # finished the lexeme after this byte and more bytes follow: may continue past it
        more = rows < longer[j + 1]
        mid = mid | (acc[s] & more)
    if len(rows):
        accepted_rows.append(rows)
    bits = np.zeros(vocab.packed_len * 8, dtype=bool)
    if accepted_rows:
        bits[vocab.ids[np.concatenate(accepted_rows)]] = True
    unc = np.concatenate(uncertain_rows) if uncertain_rows else np.zeros(0, dtype=np.int64)
    return Classes(
        np.packbits(bits, bitorder="little"),
        tuple(sorted(vocab.ids[unc].tolist())),
    )
