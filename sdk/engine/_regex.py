"""Regex text (the dialect in docs/internals/grammar-dialect.md) → the regex AST of
`sdk._regex_ast`, which `_automata` turns into byte-level DFAs. Python's syntax and meanings
(Unicode `\\d \\w \\s`, `.` without `\\n`); Lark terminals are matched whole, so no anchors.
"""

from __future__ import annotations

from .._regex_ast import (
    EMPTY,
    MAX_CODEPOINT,
    Alt,
    Chars,
    Look,
    Node,
    Ranges,
    Repeat,
    Seq,
    chars,
    negate,
    normalize,
)
from ..errors import RegexError
from ._cache import BoundedCache

__all__ = [
    "EMPTY",
    "MAX_CODEPOINT",
    "Alt",
    "Chars",
    "Look",
    "Node",
    "Ranges",
    "Repeat",
    "Seq",
    "literal",
    "negate",
    "normalize",
    "parse",
]

#: Counts above this are out of reach of any output (4 Gi repetitions): a larger upper bound
#: means no bound, a larger lower bound is refused. Counted automata number their states by
#: count, so a count of 10**30 (seen in real schemas' `maxLength`) must not reach them.
MAX_COUNT = (1 << 32) - 1


def literal(text: str, *, ignore_case: bool = False) -> Node:
    items: list[Node] = []
    for ch in text:
        if ignore_case:
            items.append(chars(_case_fold(((ord(ch), ord(ch)),))))
        else:
            items.append(chars(((ord(ch), ord(ch)),)))
    return items[0] if len(items) == 1 else Seq(tuple(items))


def _case_fold(ranges: Ranges) -> Ranges:
    extra: list[tuple[int, int]] = list(ranges)
    total = sum(hi - lo + 1 for lo, hi in ranges)
    if total > 20000:
        raise RegexError("case-insensitive matching of a large character class is not supported")
    for lo, hi in ranges:
        for cp in range(lo, hi + 1):
            ch = chr(cp)
            for other in {ch.lower(), ch.upper(), ch.swapcase()}:
                if len(other) == 1:
                    extra.append((ord(other), ord(other)))
    return normalize(extra)


_unicode_classes: dict[str, Ranges] = {}


def _class_escape(letter: str) -> Ranges:
    """Python's own (Unicode) meaning of \\d, \\w, \\s and their negations, computed once."""
    got = _unicode_classes.get(letter)
    if got is None:
        import re

        probe = re.compile("\\" + letter.lower())
        ranges: list[tuple[int, int]] = []
        start = None
        for cp in range(MAX_CODEPOINT + 2):
            hit = cp <= MAX_CODEPOINT and probe.match(chr(cp)) is not None
            if hit and start is None:
                start = cp
            elif not hit and start is not None:
                ranges.append((start, cp - 1))
                start = None
        positive = tuple(ranges)
        _unicode_classes[letter.lower()] = positive
        _unicode_classes[letter.upper()] = negate(positive)
        got = _unicode_classes[letter]
    return got


_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", "v": "\v", "a": "\a", "0": "\0"}
ANY_BUT_NEWLINE: Ranges = normalize([(0, 9), (11, MAX_CODEPOINT)])


class _Parser:
    def __init__(self, text: str, ignore_case: bool) -> None:
        self.s = text
        self.i = 0
        self.ignore_case = ignore_case

    def error(self, msg: str) -> RegexError:
        return RegexError(f"{msg} at offset {self.i} in regex {self.s!r}")

    def peek(self) -> str | None:
        return self.s[self.i] if self.i < len(self.s) else None

    def parse(self) -> Node:
        node = self.alternation()
        if self.i != len(self.s):
            raise self.error("unbalanced ')'")
        return node

    def alternation(self) -> Node:
        branches = [self.sequence()]
        while self.peek() == "|":
            self.i += 1
            branches.append(self.sequence())
        return branches[0] if len(branches) == 1 else Alt(tuple(branches))

    def sequence(self) -> Node:
        items: list[Node] = []
        while True:
            c = self.peek()
            if c is None or c in "|)":
                break
            if c == "^" or (c == "$"):
                # Anchors are only meaningful at the edges; a lexeme is always matched whole.
                at_start = c == "^" and self.i == 0
                at_end = c == "$" and self.i == len(self.s) - 1
                if not (at_start or at_end):
                    raise self.error(f"anchor {c!r} is only supported at the start/end of a regex")
                self.i += 1
                continue
            atom = self.atom()
            if isinstance(atom, Look):
                items.append(atom)
                continue
            items.append(self.quantified(atom))
        if len(items) == 1 and not isinstance(items[0], Look):
            return items[0]
        return Seq(tuple(items))

    def quantified(self, atom: Node) -> Node:
        while True:
            c = self.peek()
            if c == "*":
                lo, hi = 0, None
            elif c == "+":
                lo, hi = 1, None
            elif c == "?":
                lo, hi = 0, 1
            elif c == "{":
                bounds = self.braces()
                if bounds is None:
                    return atom
                lo, hi = bounds
                atom = Repeat(atom, lo, hi)
                self.lazy_or_possessive()
                continue
            else:
                return atom
            self.i += 1
            atom = Repeat(atom, lo, hi)
            self.lazy_or_possessive()

    def lazy_or_possessive(self) -> None:
        if self.peek() == "?":
            self.i += 1  # lazy: same language
        elif self.peek() == "+":
            raise self.error("possessive quantifiers are not supported")

    def braces(self) -> tuple[int, int | None] | None:
        j = self.s.find("}", self.i)
        if j < 0:
            return None
        body = self.s[self.i + 1 : j]
        parts = body.split(",")
        try:
            if len(parts) == 1:
                n = int(parts[0])
                bounds: tuple[int, int | None] = (n, n)
            elif len(parts) == 2:
                lo = int(parts[0]) if parts[0] else 0
                hi = int(parts[1]) if parts[1] else None
                bounds = (lo, hi)
            else:
                return None
        except ValueError:
            return None  # Python treats a malformed brace as a literal '{'
        if bounds[1] is not None and bounds[1] < bounds[0]:
            raise self.error("min repeat greater than max repeat")
        if bounds[0] > MAX_COUNT:
            raise self.error(f"repeat count {bounds[0]} is beyond any output (max {MAX_COUNT})")
        if bounds[1] is not None and bounds[1] > MAX_COUNT:
            bounds = (bounds[0], None)  # no output reaches it: the same as no bound
        self.i = j + 1
        return bounds

    def atom(self) -> Node:
        c = self.s[self.i]
        if c == "(":
            return self.group()
        if c == "[":
            return chars(self.char_class())
        if c == ".":
            self.i += 1
            return chars(ANY_BUT_NEWLINE)
        if c == "\\":
            return self.escape(in_class=False)
        if c in "*+?":
            raise self.error("nothing to repeat")
        if c == "{" and self.braces_ahead():
            raise self.error("nothing to repeat")
        self.i += 1
        return self.char(ord(c))

    def braces_ahead(self) -> bool:
        save = self.i
        try:
            return self.braces() is not None
        finally:
            self.i = save

    def char(self, cp: int) -> Node:
        if self.ignore_case:
            return chars(_case_fold(((cp, cp),)))
        return chars(((cp, cp),))

    def group(self) -> Node:
        self.i += 1
        look: bool | None = None
        if self.s.startswith("?:", self.i):
            self.i += 2
        elif self.s.startswith("?P<", self.i):
            j = self.s.find(">", self.i)
            if j < 0:
                raise self.error("unterminated group name")
            self.i = j + 1
        elif self.s.startswith("?=", self.i):
            self.i += 2
            look = False
        elif self.s.startswith("?!", self.i):
            self.i += 2
            look = True
        elif self.peek() == "?":
            raise self.error("unsupported group construct")
        body = self.alternation()
        if self.peek() != ")":
            raise self.error("missing ')'")
        self.i += 1
        if look is not None:
            return Look(body, look)
        return body

    def char_class(self) -> Ranges:
        self.i += 1
        negated = False
        if self.peek() == "^":
            negated = True
            self.i += 1
        ranges: list[tuple[int, int]] = []
        first = True
        while True:
            c = self.peek()
            if c is None:
                raise self.error("unterminated character class")
            if c == "]" and not first:
                self.i += 1
                break
            first = False
            lo_set = self.class_atom()
            if isinstance(lo_set, tuple):
                ranges.extend(lo_set)
                continue
            lo = lo_set
            if self.peek() == "-" and self.i + 1 < len(self.s) and self.s[self.i + 1] != "]":
                self.i += 1
                hi_set = self.class_atom()
                if isinstance(hi_set, tuple):
                    raise self.error("bad character range")
                if hi_set < lo:
                    raise self.error("bad character range")
                ranges.append((lo, hi_set))
            else:
                ranges.append((lo, lo))
        out = normalize(ranges)
        if self.ignore_case:
            out = _case_fold(out)
        return negate(out) if negated else out

    def class_atom(self) -> int | Ranges:
        c = self.s[self.i]
        if c == "\\":
            node = self.escape(in_class=True)
            assert isinstance(node, Chars)
            if len(node.ranges) == 1 and node.ranges[0][0] == node.ranges[0][1]:
                return node.ranges[0][0]
            return node.ranges
        if c == "[" and self.s.startswith("[:", self.i):
            raise self.error("POSIX classes are not supported")
        self.i += 1
        return ord(c)

    def escape(self, *, in_class: bool) -> Node:
        self.i += 1
        if self.i >= len(self.s):
            raise self.error("trailing backslash")
        c = self.s[self.i]
        self.i += 1
        if c in "dwsDWS":
            return chars(_class_escape(c))
        nxt = self.peek()
        if c in _SIMPLE_ESCAPES and not (c == "0" and nxt is not None and nxt in "01234567"):
            return self.char(ord(_SIMPLE_ESCAPES[c]))
        if c == "b" and in_class:
            return self.char(8)
        if c in "xuU":
            width = {"x": 2, "u": 4, "U": 8}[c]
            digits = self.s[self.i : self.i + width]
            if len(digits) != width or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise self.error(f"bad \\{c} escape")
            self.i += width
            cp = int(digits, 16)
            if cp > MAX_CODEPOINT:
                raise self.error("code point out of range")
            return self.char(cp)
        if c.isdigit():
            raise self.error("backreferences are not supported")
        if c in "bBAZzG":
            if c in "AZz" and not in_class:
                edge = (c == "A" and self.i == 2) or (c in "Zz" and self.i == len(self.s))
                if edge:
                    return EMPTY
            raise self.error(f"\\{c} is not supported")
        if c.isalnum():
            raise self.error(f"unknown escape \\{c}")
        return self.char(ord(c))


_parsed: BoundedCache[tuple[str, bool], Node] = BoundedCache("regex ASTs", 4 << 20)


def parse(text: str, *, ignore_case: bool = False) -> Node:
    """Parse regex `text`; raises `RegexError` for syntax outside the dialect.

    Memoised in a small table (ASTs are immutable): across schemas the texts rarely repeat
    (2 hits in 4,708 lookups on the dev MaskBench run, where a 16 MiB table churned 112 MiB
    out of the shared budget); repeated terminals are caught by the DFA memo keyed by AST."""
    key = (text, ignore_case)
    node = _parsed.get(key)
    if node is None:
        node = _parsed.put(key, _Parser(text, ignore_case).parse(), 200 * len(text) + 256)
    return node
