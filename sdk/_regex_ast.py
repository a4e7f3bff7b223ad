"""Code-point sets and the regex AST: the common ground of the SDK's two regex dialects.

JSON Schema `pattern`s are ECMA-262 (`sdk.grammar._ecma_regex` parses them and rewrites them
over the JSON-encoded text); Lark terminals use Python's syntax (`sdk.engine._regex` parses them
for the automata). The dialects differ in their escapes, classes and anchors, not in what they
parse into: one tree of `Chars`/`Seq`/`Alt`/`Repeat`/`Look` nodes (ECMA adds `Anchor`), with
character sets kept as sorted, disjoint code-point ranges so that `.` or `[^"]` cost two
ranges, not a million characters. One copy of the range algebra serves both.

Nodes have slots: the regex and terminal caches keep tens of thousands of them, and a
`__dict__` each costs memory (and on Python 3.10, one more object for the collector to walk).
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_CODEPOINT = 0x10FFFF
Ranges = tuple[tuple[int, int], ...]
ALL: Ranges = ((0, MAX_CODEPOINT),)


def normalize(ranges: list[tuple[int, int]] | Ranges) -> Ranges:
    """Sorted, disjoint, merged ranges (empty ones dropped)."""
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if lo > hi:
            continue
        if out and lo <= out[-1][1] + 1:
            if hi > out[-1][1]:
                out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return tuple(out)


def negate(ranges: Ranges) -> Ranges:
    """The complement within all code points (of normalized ranges)."""
    out: list[tuple[int, int]] = []
    nxt = 0
    for lo, hi in ranges:
        if lo > nxt:
            out.append((nxt, lo - 1))
        nxt = hi + 1
    if nxt <= MAX_CODEPOINT:
        out.append((nxt, MAX_CODEPOINT))
    return tuple(out)


def intersect(a: Ranges, b: Ranges) -> Ranges:
    out = []
    for lo, hi in a:
        for lo2, hi2 in b:
            lo3, hi3 = max(lo, lo2), min(hi, hi2)
            if lo3 <= hi3:
                out.append((lo3, hi3))
    return normalize(out)


def minus(a: Ranges, b: Ranges) -> Ranges:
    return intersect(a, negate(b))


def contains(ranges: Ranges, cp: int) -> bool:
    return any(lo <= cp <= hi for lo, hi in ranges)


@dataclass(frozen=True, slots=True)
class Chars:
    ranges: Ranges


_SHARED: dict[Ranges, Chars] = {}
_SHARED_MAX = 1 << 14


def chars(ranges: Ranges) -> Chars:
    """The `Chars` node of `ranges`, one object per set. Parsed patterns and literals spell
    most characters one node each, and the regex and terminal caches keep those trees: on the
    dev MaskBench run they were half of the objects the caches kept. Every kept object is one
    more for the cyclic collector to walk and promote, and full collections (~200 ms with torch
    loaded) landed in the tail of the time between masks."""
    node = _SHARED.get(ranges)
    if node is None:
        if len(_SHARED) >= _SHARED_MAX:
            _SHARED.clear()
        node = _SHARED[ranges] = Chars(ranges)
    return node


@dataclass(frozen=True, slots=True)
class Seq:
    items: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Alt:
    items: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Repeat:
    item: Node
    min: int
    max: int | None


@dataclass(frozen=True, slots=True)
class Anchor:
    """`^` (end=False) or `$` (end=True); only ECMA patterns have them (Lark terminals are
    always matched whole)."""

    end: bool


@dataclass(frozen=True, slots=True)
class Look:
    """`(?=body)` / `(?!body)`: intersects (or subtracts) `body.*` with the rest of its group."""

    body: Node
    negative: bool


Node = Chars | Seq | Alt | Repeat | Anchor | Look

EMPTY = Seq(())
