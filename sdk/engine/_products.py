"""Products of automata (intersection, difference, union) and the constructions of
lookaheads on them: `prefix_closed` bodies, and `excluding_prefixes` for a finite set of words.
"""

from __future__ import annotations

import numpy as np

from ..errors import TooComplexError
from ._dfa import Dfa, empty_dfa
from ._dfa_ops import AnyDfa, _joint_classes, _trim, columns_at, table
from ._owner import OWNER
from ._word_dfas import _word_trie

#: Products of more pairs than this number their states through a hash of the pairs reached
#: (`_pairs`, compiled) instead of a dense table of every pair (4 bytes a pair).
DENSE_PAIRS = 1 << 20


def product(any_a: AnyDfa, any_b: AnyDfa, *, negate_b: bool = False, union: bool = False) -> Dfa:
    """L(a) ∩ L(b), or L(a) \\ L(b) with `negate_b` (b's dead state then acts as a sink), or
    L(a) ∪ L(b) with `union` (either dead state does).

    Breadth-first over pairs, one numpy step per BFS level rather than one Python step per
    state: length-bounded patterns (a pattern × a character counter) reach ~10^5 pairs. Pairs
    are numbered through a dense table of every pair up to `DENSE_PAIRS`, beyond it by the
    compiled BFS of `_pairs` (same numbering), whose memory follows the pairs reached.
    """
    a, b = table(any_a), table(any_b)
    na, nb = a.n_states, b.n_states
    # Only bytes that a or b tell apart matter: run the BFS on one column per class.
    reps, class_ab = _joint_classes(a, b)
    a_trans = columns_at(a, reps).astype(np.int64)
    b_trans = columns_at(b, reps).astype(np.int64)
    if na * nb > DENSE_PAIRS:
        from ._pairs import DIFFERENCE, INTERSECTION, UNION, pair_bfs

        mode = UNION if union else DIFFERENCE if negate_b else INTERSECTION
        compact, xs, ys, n = pair_bfs(a_trans, b_trans, mode, OWNER.limits.dfa_states)
        if n < 0:
            raise _too_many()
        return _product_table(a, b, compact, xs[1:], ys[1:], class_ab, union, negate_b)
    ids = np.zeros(na * nb, dtype=np.int32)
    start = 1 * nb + 1
    ids[start] = 1
    n = 1
    frontier = np.asarray([start], dtype=np.int64)
    pieces: list[tuple[np.ndarray, np.ndarray]] = []  # (state ids, their rows)
    pair_x: list[np.ndarray] = [np.asarray([1])]
    pair_y: list[np.ndarray] = [np.asarray([1])]
    while frontier.size:
        xs, ys = np.divmod(frontier, nb)
        tx, ty = a_trans[xs], b_trans[ys]
        if union:
            live = (tx != 0) | (ty != 0)
        elif negate_b:
            live = tx != 0
        else:
            live = (tx != 0) & (ty != 0)
        codes = tx * nb + ty
        cand = np.unique(codes[live])
        new = cand[ids[cand] == 0]
        if n + len(new) > OWNER.limits.dfa_states:
            raise _too_many()
        ids[new] = np.arange(n + 1, n + 1 + len(new), dtype=np.int32)
        row = np.where(live, ids[np.where(live, codes, 0)], 0)
        n += len(new)
        pieces.append((ids[frontier], row.astype(np.int32, copy=False)))
        nx, ny = np.divmod(new, nb)
        pair_x.append(nx)
        pair_y.append(ny)
        frontier = new
    del ids  # the pair numbering is done: only the rows are still needed
    compact = np.zeros((n + 1, len(reps)), dtype=np.int32)
    while pieces:  # each level's rows go as they are copied: never the table twice over
        sid, rows = pieces.pop()
        compact[sid] = rows
    xs_all = np.concatenate(pair_x)
    ys_all = np.concatenate(pair_y)
    return _product_table(a, b, compact, xs_all, ys_all, class_ab, union, negate_b)


def _product_table(
    a: Dfa,
    b: Dfa,
    compact: np.ndarray,
    xs: np.ndarray,
    ys: np.ndarray,
    class_ab: np.ndarray,
    union: bool,
    negate_b: bool,
) -> Dfa:
    """The product's DFA from its pair rows (one column per byte class) and the pair of every
    state 1..n."""
    acc = np.zeros(len(xs) + 1, dtype=bool)
    b_acc = b.accepting[ys]
    if union:
        acc[1:] = a.accepting[xs] | b_acc
    else:
        acc[1:] = a.accepting[xs] & (~b_acc if negate_b else b_acc)
    return _trim(compact, acc, class_ab)


def prefix_closed(d: Dfa) -> Dfa:
    """L(d)·Σ*: once an accepting state is reached, every continuation is accepted."""
    trans = np.concatenate([d.table, np.zeros((1, d.n_classes), dtype=np.int32)])
    sink = trans.shape[0] - 1
    trans[sink] = sink
    acc = np.concatenate([d.accepting, [True]])
    trans[acc] = sink
    trans[0] = 0
    return _trim(trans, acc, d.classes.astype(np.int64))


def excluding_prefixes(after: Dfa, words: list[bytes]) -> Dfa:
    """L(after) minus the strings that start with one of `words` (`(?!w1|w2)rest`, the keys
    an object's other members may not use), built directly: each state of the product is a
    node of the words' trie paired with the one state of `after` its prefix leads to, or a
    state of `after` alone once the text left the trie. The general product spends a numpy
    round per byte of the longest word on what is a trie."""
    if b"" in words:
        return empty_dfa()
    after = after.compacted()  # the same automaton, one column per byte class
    child, end = _word_trie(words)
    n_nodes = len(child)
    table, classes = after.table.tolist(), after.classes.tolist()  # small: Python reads
    at = [0] * n_nodes  # the state of `after` each node's prefix reaches
    at[0] = 1
    used: set[int] = set()  # the bytes of the words
    for u in range(n_nodes):  # parents are created before their children
        row = table[at[u]]
        for b, c in child[u].items():
            at[c] = row[classes[b]]
            used.add(b)
    # nodes with the same state of `after` and the same (merged) children accept the same
    # rests: one state for each, as minimisation would (word endings share their tails)
    same: dict[tuple[object, ...], int] = {}
    canon = list(range(n_nodes))
    for u in range(n_nodes - 1, -1, -1):  # children before parents
        sig = (at[u], end[u], tuple((b, canon[c]) for b, c in sorted(child[u].items())))
        canon[u] = same.setdefault(sig, u)
    # states: 0 dead, 1..n_nodes the trie nodes, then after's states 1.. shifted by n_nodes.
    # Columns: after's byte classes, with each byte of a word in a class of its own (every
    # column is some byte's: a column no byte takes would keep unreachable states alive).
    key = after.classes.astype(np.int64) * 257
    own = np.fromiter(used, dtype=np.int64, count=len(used))
    key[own] += own + 1
    uniq, byte_class = np.unique(key, return_inverse=True)
    byte_class = byte_class.reshape(-1)
    column = byte_class.tolist()
    cols = after.table[:, uniq // 257]
    moved = np.where(cols != 0, cols + n_nodes, 0).astype(np.int32)
    at_arr = np.asarray(at, dtype=np.int64)
    rows = moved[at_arr]
    rows[at_arr == 0] = 0
    for u in range(n_nodes):
        for b, c in child[u].items():
            rows[u, column[b]] = 0 if end[c] or at[c] == 0 else canon[c] + 1
    trans = np.concatenate([np.zeros((1, len(uniq)), dtype=np.int32), rows, moved[1:]])
    acc = np.concatenate([[False], after.accepting[at_arr] & (at_arr != 0), after.accepting[1:]])
    return _trim(trans, acc, byte_class)


def _too_many() -> TooComplexError:
    cap = OWNER.limits.dfa_states
    return TooComplexError(f"automaton exceeds {cap} DFA states (Limits.dfa_states)")
