"""Reference runs for the tests of lazy constructions: what a state reaches, (alive, accepting)
after each prefix of a string through rows (lazy) or a table, and a mask by brute force."""

from __future__ import annotations

from typing import Any

import numpy as np

from sdk.engine import Matcher
from sdk.engine import _automata as au
from sdk.engine._lazy import LazyDfa


def reachable(d: au.Dfa, q: int) -> set[int]:
    seen, todo = {q}, [q]
    while todo:
        x = todo.pop()
        for t in set(d.row(x).tolist()) - {0} - seen:
            seen.add(t)
            todo.append(t)
    return seen


def live_states(d: au.Dfa) -> set[int]:
    """The states from which an accepting state can be reached: one backward search over the
    table's moves (asking each reachable state for its own reachable set was quadratic, and
    a random regex's materialised automaton can have 10^5 states)."""
    src, col = np.nonzero(d.table)
    dst = d.table[src, col]
    order = np.argsort(dst, kind="stable")
    src, dst = src[order].tolist(), dst[order]
    starts = np.searchsorted(dst, np.arange(d.n_states + 1)).tolist()
    live = set(np.flatnonzero(d.accepting).tolist())
    todo = list(live)
    while todo:
        x = todo.pop()
        for s in src[starts[x] : starts[x + 1]]:
            if s not in live:
                live.add(s)
                todo.append(s)
    return live


def run_lazy(d: LazyDfa, q: int, data: bytes) -> list[tuple[bool, bool]]:
    """(alive, accepting) after each prefix of `data` from state q, until the state dies."""
    out = []
    for k in range(len(data) + 1):
        if k:
            q = int(d.step(np.asarray([q]), np.asarray([data[k - 1]]))[0])
        out.append((q != 0, bool(q) and bool(d.acc(np.asarray([q]))[0])))
        if not q:
            break
    return out


def run_table(d: au.Dfa, q: int, data: bytes) -> list[tuple[bool, bool]]:
    """`run_lazy` on a table."""
    out = []
    for k in range(len(data) + 1):
        if k:
            q = d.move(q, data[k - 1])
        out.append((q != 0, bool(q) and bool(d.accepting[q])))
        if not q:
            break
    return out


def brute_force_mask(m: Matcher, index: Any) -> np.ndarray:
    """The mask `m` should give: every non-empty, non-EOS token tried on its own."""
    want = np.zeros_like(m.mask())
    for tid, data in enumerate(index.token_bytes):
        if data and tid not in index.eos_ids:
            want[tid] = m.fork().try_advance(tid)
    return want
