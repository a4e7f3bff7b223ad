"""DFAs of literal texts and small finite sets of them, built directly: a chain of states
for one text, a minimised trie for a set (enums, declared keys). Most of a schema's terminals
are literals, and the general construction costs ~10-20x more for them.
"""

from __future__ import annotations

import numpy as np

from . import _regex as rx
from ._dfa import Dfa
from ._dfa_ops import minimize


def _literal_bytes(node: rx.Node) -> bytes | None:
    """The one text `node` matches, when it is a plain literal (single code points in a row,
    no surrogates): object keys, `true`, punctuation. None otherwise."""
    items = node.items if isinstance(node, rx.Seq) else (node,)
    cps: list[int] = []
    for item in items:
        if not isinstance(item, rx.Chars) or len(item.ranges) != 1:
            return None
        lo, hi = item.ranges[0]
        if lo != hi or 0xD800 <= lo <= 0xDFFF:
            return None
        cps.append(lo)
    return "".join(map(chr, cps)).encode("utf-8")


def _chain(text: bytes) -> Dfa:
    """The minimal DFA of one text, built directly: states in reading order after the dead
    state, as `minimize` numbers them. Keys and keywords are most of a schema's terminals, and
    the general construction costs ~20x more for them."""
    n = len(text)
    trans = np.zeros((n + 2, 256), dtype=np.int32)
    trans[np.arange(1, n + 1), np.frombuffer(text, dtype=np.uint8)] = np.arange(2, n + 2)
    accepting = np.zeros(n + 2, dtype=bool)
    accepting[n + 1] = True
    return Dfa(trans, accepting)


#: Finite languages up to this many texts (and bytes in all) are built as a trie directly.
MAX_TRIE_WORDS = 4096
MAX_TRIE_BYTES = 1 << 16


def _finite_words(node: rx.Node) -> list[bytes] | None:
    """Every text `node` matches, when it is a small finite set of plain literals (an enum,
    the declared keys an open object's key must not be): None otherwise."""
    if isinstance(node, rx.Chars | rx.Seq):
        text = _literal_bytes(node)  # one pass for a whole literal, not one level per byte
        if text is not None:
            return [text]
    if isinstance(node, rx.Seq | rx.Alt):
        out: list[bytes] = [b""] if isinstance(node, rx.Seq) else []
        for item in node.items:
            sub = _finite_words(item)
            if sub is None:
                return None
            out = [w + t for w in out for t in sub] if isinstance(node, rx.Seq) else out + sub
            if len(out) > MAX_TRIE_WORDS or sum(map(len, out)) > MAX_TRIE_BYTES:
                return None
        return out
    return None


def _word_trie(words: list[bytes]) -> tuple[list[dict[int, int]], list[bool]]:
    """The trie of `words`: per node (0 the root, parents numbered before their children) its
    children by byte, and whether a word ends there."""
    children: list[dict[int, int]] = [{}]
    final = [False]
    for w in dict.fromkeys(words):
        node = 0
        for b in w:
            nxt = children[node].get(b)
            if nxt is None:
                nxt = len(children)
                children.append({})
                final.append(False)
                children[node][b] = nxt
            node = nxt
        final[node] = True
    return children, final


def _trie(words: list[bytes]) -> Dfa:
    """The minimal DFA of a finite set of texts: their trie (one state per distinct prefix),
    then minimised (shared suffixes). Subset construction over the alternation costs ~10x
    more for the same automaton."""
    children, final = _word_trie(words)
    trans = np.zeros((len(children) + 1, 256), dtype=np.int32)
    for k, edges in enumerate(children):
        for b, t in edges.items():
            trans[k + 1, b] = t + 1
    accepting = np.zeros(len(children) + 1, dtype=bool)
    accepting[1:] = final
    return minimize(Dfa(trans, accepting))
