"""ECMA-262 regex → dialect regex over the JSON-*encoded* content of a string.

JSON Schema's `pattern` is an ECMA-262 regex matched against the *decoded* string value with
search semantics. The grammar, however, sees the encoded JSON text. Because the encoding is a
per-character, uniquely decodable substitution, replacing every character set of the pattern by
the alternatives of its encodings (`_encode_set`) gives a regex whose language is exactly the
encodings of the pattern's language. Everything else here is about keeping that exact:

* Semantics are ECMA's with the `u` flag (code points, as `minLength` counts them); `\\d` `\\w`
  are ASCII, `\\s` is ECMA's Unicode whitespace set, `.` excludes `\\n \\r \\u2028 \\u2029`.
* Search semantics: a branch not starting with `^` gets a leading `ANY*`, one not ending with
  `$` a trailing `ANY*`. Anchors elsewhere (inside quantifiers, mid-sequence) are rejected.
* Lookahead is kept only at the top level of a branch, where it is emitted as `(?=A ANY* ")`:
  it then ends with the closing quote, so the dialect's intersection semantics coincide with
  ECMA's (the lookahead sees the whole rest of the value).
* Backreferences, lookbehind, `\\b`, `\\p{..}` and Annex-B oddities whose meaning differs between
  engines raise `UnsupportedSchemaError`; malformed patterns raise `SchemaError`.

The functions produce *tails*: regexes for `content"` (content plus the closing quote), so that
several constraints combine as `"(?=T1)(?=T2)T3`.
"""

from __future__ import annotations

import functools

from .._regex_ast import (
    ALL,
    MAX_CODEPOINT,
    Alt,
    Anchor,
    Chars,
    Look,
    Node,
    Ranges,
    Repeat,
    Seq,
    chars,
    contains,
    intersect,
    minus,
    negate,
    normalize,
)
from ..errors import SchemaError, UnsupportedSchemaError


def rs(*items: str | tuple[int, int] | int) -> Ranges:
    """Build ranges from single chars, 2-char strings 'az' and (lo, hi) pairs."""
    out: list[tuple[int, int]] = []
    for it in items:
        if isinstance(it, int):
            out.append((it, it))
        elif isinstance(it, tuple):
            out.append(it)
        elif len(it) == 2:
            out.append((ord(it[0]), ord(it[1])))
        else:
            out.append((ord(it), ord(it)))
    return normalize(out)


SURROGATES: Ranges = ((0xD800, 0xDFFF),)
DIGIT = rs("09")
WORD = rs("az", "AZ", "09", "_")
# ECMA WhiteSpace (incl. Zs) + LineTerminator.
SPACE = rs(
    (9, 13), 0x20, 0xA0, 0x1680, (0x2000, 0x200A), 0x2028, 0x2029, 0x202F, 0x205F, 0x3000, 0xFEFF
)
DOT = negate(rs(0x0A, 0x0D, 0x2028, 0x2029))
CONTROL: Ranges = ((0, 0x1F),)
_SHORT = {0x22: '"', 0x5C: "\\", 0x2F: "/", 0x08: "b", 0x0C: "f", 0x0A: "n", 0x0D: "r", 0x09: "t"}
_NO_SHORT_CONTROL = minus(CONTROL, rs(8, 9, 10, 12, 13))


# --------------------------------------------------------------------------- regex text output


def esc_cp(cp: int) -> str:
    """One code point as regex text, safe in and out of classes and inside Lark `/.../`."""
    if cp < 0x80:
        c = chr(cp)
        if c.isalnum():
            return c
        if 0x20 < cp < 0x7F:
            return "\\" + c
        return f"\\x{cp:02x}"
    if cp <= 0xFFFF:
        return f"\\u{cp:04x}"
    return f"\\U{cp:08x}"


def _class_body(r: Ranges) -> str:
    parts = []
    for lo, hi in r:
        if lo == hi:
            parts.append(esc_cp(lo))
        elif hi == lo + 1:
            parts.append(esc_cp(lo) + esc_cp(hi))
        else:
            parts.append(esc_cp(lo) + "-" + esc_cp(hi))
    return "".join(parts)


def class_text(r: Ranges) -> str:
    """Shortest class for `r`; surrogates are don't-care (they never occur in UTF-8 text)."""
    r = minus(r, SURROGATES)
    if not r:
        return NEVER
    pos = r
    if contains(r, 0xD7FF) and contains(r, 0xE000):
        pos = normalize(list(r) + list(SURROGATES))
    neg = minus(negate(r), SURROGATES)
    if neg and contains(neg, 0xD7FF) and contains(neg, 0xE000):
        neg = normalize(list(neg) + list(SURROGATES))
    if len(pos) == 1 and pos[0][0] == pos[0][1]:
        return esc_cp(pos[0][0])
    ptxt = "[" + _class_body(pos) + "]"
    if not neg:
        return "[\\s\\S]"
    ntxt = "[^" + _class_body(neg) + "]"
    return ntxt if len(ntxt) < len(ptxt) else ptxt


NEVER = "[^\\x00-\\U0010ffff]"  # matches nothing; used for unsatisfiable constraints


def _hex_class(nibbles: list[int]) -> str:
    cps = []
    for n in nibbles:
        d = f"{n:x}"
        cps.append(ord(d))
        if d.isalpha():
            cps.append(ord(d.upper()))
    return class_text(normalize([(c, c) for c in cps]))


def encode_set(s: Ranges) -> tuple[str, bool]:
    """Regex for the JSON encodings of any one character of `s` → (text, is_atom)."""
    s = minus(s, SURROGATES)
    raw = minus(s, normalize([(0, 0x1F), (0x22, 0x22), (0x5C, 0x5C)]))
    alts = []
    if raw:
        alts.append(class_text(raw))
    short = [v for k, v in _SHORT.items() if contains(s, k)]
    uctl = intersect(s, _NO_SHORT_CONTROL)
    esc_alts = []
    if short:
        esc_alts.append(class_text(rs(*short)))
    if uctl:
        hi_alts = []
        for high in (0, 1):
            lows = [cp & 0xF for lo, hi in uctl for cp in range(lo, hi + 1) if cp >> 4 == high]
            if lows:
                hi_alts.append(f"{high}{_hex_class(lows)}")
        body = hi_alts[0] if len(hi_alts) == 1 else "(?:" + "|".join(hi_alts) + ")"
        esc_alts.append("u00" + body)
    if esc_alts:
        if len(esc_alts) == 1:
            alts.append("\\\\" + esc_alts[0])
        else:
            alts.append("\\\\(?:" + "|".join(esc_alts) + ")")
    if not alts:
        return NEVER, True
    if len(alts) == 1:
        text = alts[0]
        atom = not text.startswith("\\\\")
        return text, atom
    return "(?:" + "|".join(alts) + ")", True


def encode_literal(value: str) -> str:
    """Content regex for exactly the encodings of `value` (no quotes)."""
    out = []
    for ch in value:
        cp = ord(ch)
        if 0xD800 <= cp <= 0xDFFF:
            raise UnsupportedSchemaError("const", "", "a lone surrogate has no UTF-8 encoding")
        out.append(_encode_char(cp))
    return "".join(out)


@functools.lru_cache(maxsize=4096)
def _encode_char(cp: int) -> str:
    # Memoised: the set algebra costs ~0.3 ms a character, and a 5,000-value enum of
    # 20-character strings would otherwise spend half a minute here.
    return encode_set(((cp, cp),))[0]


ANY_UNIT = encode_set(ALL)[0]
ANY_STAR = ANY_UNIT + "*"


# --------------------------------------------------------------------------- ECMA parser

_CLASS_ESC = {
    "d": DIGIT,
    "D": negate(DIGIT),
    "w": WORD,
    "W": negate(WORD),
    "s": SPACE,
    "S": negate(SPACE),
}
_CHAR_ESC = {"n": 0x0A, "r": 0x0D, "t": 0x09, "f": 0x0C, "v": 0x0B}


class _Parser:
    def __init__(self, text: str, pointer: str) -> None:
        self.s = text
        self.i = 0
        self.pointer = pointer

    def bad(self, msg: str) -> SchemaError:
        return SchemaError(f"invalid pattern {self.s!r}: {msg}", self.pointer)

    def unsupported(self, msg: str) -> UnsupportedSchemaError:
        return UnsupportedSchemaError("pattern", self.pointer, f"{msg} in {self.s!r}")

    def peek(self, k: int = 0) -> str | None:
        j = self.i + k
        return self.s[j] if j < len(self.s) else None

    def parse(self) -> Node:
        node = self.alternation()
        if self.i != len(self.s):
            raise self.bad("unbalanced ')'")
        return node

    def alternation(self) -> Node:
        branches = [self.sequence()]
        while self.peek() == "|":
            self.i += 1
            branches.append(self.sequence())
        return branches[0] if len(branches) == 1 else Alt(tuple(branches))

    def sequence(self) -> Node:
        items: list[Node] = []
        while (c := self.peek()) is not None and c not in "|)":
            atom = self.atom()
            q = self.quantifier()
            if q is not None:
                if isinstance(atom, Anchor):
                    raise self.bad("nothing to repeat")
                if isinstance(atom, Look):
                    raise self.unsupported("quantified lookahead")
                atom = Repeat(atom, q[0], q[1])
            items.append(atom)
        return items[0] if len(items) == 1 else Seq(tuple(items))

    def braces(self) -> tuple[int, int | None] | None:
        """`{n}`, `{n,}`, `{n,m}` at self.i, or None (Annex B: then `{` is a literal)."""
        j = self.i + 1
        s = self.s
        k = j
        while k < len(s) and s[k].isdigit():
            k += 1
        if k == j:
            return None
        lo = int(s[j:k])
        hi: int | None = lo
        if k < len(s) and s[k] == ",":
            k += 1
            m = k
            while k < len(s) and s[k].isdigit():
                k += 1
            hi = int(s[m:k]) if k > m else None
        if k >= len(s) or s[k] != "}":
            return None
        self.i = k + 1
        return lo, hi

    def quantifier(self) -> tuple[int, int | None] | None:
        c = self.peek()
        q: tuple[int, int | None] | None
        if c == "*":
            q = (0, None)
            self.i += 1
        elif c == "+":
            q = (1, None)
            self.i += 1
        elif c == "?":
            q = (0, 1)
            self.i += 1
        elif c == "{":
            q = self.braces()
            if q is None:
                return None
            if q[1] is not None and q[1] < q[0]:
                raise self.bad("numbers out of order in {} quantifier")
        else:
            return None
        if self.peek() == "?":  # lazy: same language
            self.i += 1
        nxt = self.peek()
        if nxt is not None and (nxt in "*+?" or (nxt == "{" and self._braces_ahead())):
            raise self.bad("nothing to repeat")
        return q

    def _braces_ahead(self) -> bool:
        save = self.i
        try:
            return self.braces() is not None
        finally:
            self.i = save

    def atom(self) -> Node:
        c = self.s[self.i]
        if c == "(":
            return self.group()
        if c == "[":
            return chars(self.char_class())
        if c == ".":
            self.i += 1
            return chars(DOT)
        if c == "^":
            self.i += 1
            return Anchor(False)
        if c == "$":
            self.i += 1
            return Anchor(True)
        if c in "*+?":
            raise self.bad("nothing to repeat")
        if c == "{" and self._braces_ahead():
            raise self.bad("nothing to repeat")
        if c == "\\":
            return self.escape(in_class=False)
        self.i += 1
        return chars(((ord(c), ord(c)),))

    def group(self) -> Node:
        s = self.s
        self.i += 1
        look: bool | None = None
        if s.startswith("?:", self.i):
            self.i += 2
        elif s.startswith("?=", self.i) or s.startswith("?!", self.i):
            look = s[self.i + 1] == "!"
            self.i += 2
        elif s.startswith("?<=", self.i) or s.startswith("?<!", self.i):
            raise self.unsupported("lookbehind")
        elif s.startswith("?<", self.i):
            end = s.find(">", self.i)
            name = s[self.i + 2 : end] if end > 0 else ""
            if (
                not name
                or not (name[0].isalpha() or name[0] in "_$")
                or not all(ch.isalnum() or ch in "_$" for ch in name)
            ):
                raise self.bad("invalid group name")
            self.i = end + 1
        elif self.peek() == "?":
            raise self.unsupported("unknown group syntax (?" + (self.peek(1) or "") + "...)")
        body = self.alternation()
        if self.peek() != ")":
            raise self.bad("missing ')'")
        self.i += 1
        if look is not None:
            return Look(body, look)
        return body

    def char_class(self) -> Ranges:
        self.i += 1
        negated = self.peek() == "^"
        if negated:
            self.i += 1
        out: list[tuple[int, int]] = []
        while True:
            c = self.peek()
            if c is None:
                raise self.bad("unterminated character class")
            if c == "]":
                self.i += 1
                break
            a = self.class_atom()
            if self.peek() == "-" and self.peek(1) not in (None, "]"):
                self.i += 1
                b = self.class_atom()
                if isinstance(a, int) and isinstance(b, int):
                    if b < a:
                        raise self.bad("range out of order in character class")
                    out.append((a, b))
                    continue
                # Annex B: a class escape at either end makes '-' literal.
                for x in (a, b):
                    out.extend([(x, x)] if isinstance(x, int) else x)
                out.append((0x2D, 0x2D))
                continue
            out.extend([(a, a)] if isinstance(a, int) else a)
        r = normalize(out)
        return negate(r) if negated else r

    def class_atom(self) -> int | Ranges:
        c = self.s[self.i]
        if c == "\\":
            node = self.escape(in_class=True)
            assert isinstance(node, Chars)
            r = node.ranges
            # only the class escapes (\d \w \s ...) denote more than one code point
            return r[0][0] if len(r) == 1 and r[0][0] == r[0][1] else r
        self.i += 1
        return ord(c)

    def _hex(self, width: int) -> int | None:
        d = self.s[self.i : self.i + width]
        if len(d) == width and all(ch in "0123456789abcdefABCDEF" for ch in d):
            self.i += width
            return int(d, 16)
        return None

    def escape(self, *, in_class: bool) -> Node:
        self.i += 1
        c = self.peek()
        if c is None:
            raise self.bad("trailing backslash")
        self.i += 1
        if c in _CLASS_ESC:
            return chars(_CLASS_ESC[c])
        if c in _CHAR_ESC:
            return _char(_CHAR_ESC[c])
        if c == "b":
            if in_class:
                return _char(8)
            raise self.unsupported("word boundary \\b")
        if c == "B":
            raise self.unsupported("word boundary \\B")
        if c == "0":
            if (d := self.peek()) is not None and d.isdigit():
                raise self.unsupported("legacy octal escape")
            return _char(0)
        if c.isdigit():
            raise self.unsupported("backreference")
        if c == "k":
            if self.peek() == "<":
                raise self.unsupported("named backreference")
            raise self.unsupported("identity escape \\k")
        if c == "c":
            d = self.peek()
            if d is not None and d.isascii() and d.isalpha():
                self.i += 1
                return _char(ord(d) % 32)
            raise self.unsupported("\\c without a control letter")
        if c == "x":
            v = self._hex(2)
            if v is None:
                raise self.unsupported("\\x without two hex digits")
            return _char(v)
        if c == "u":
            if self.peek() == "{":
                end = self.s.find("}", self.i)
                digits = self.s[self.i + 1 : end] if end > 0 else ""
                if not digits or any(ch not in "0123456789abcdefABCDEF" for ch in digits):
                    raise self.bad("invalid \\u{...} escape")
                v = int(digits, 16)
                if v > MAX_CODEPOINT:
                    raise self.bad("code point out of range")
                self.i = end + 1
                return _char(v)
            v = self._hex(4)
            if v is None:
                raise self.unsupported("\\u without four hex digits")
            if 0xD800 <= v <= 0xDBFF and self.s.startswith("\\u", self.i):
                save = self.i
                self.i += 2
                lo = self._hex(4)
                if lo is not None and 0xDC00 <= lo <= 0xDFFF:
                    return _char(0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00))
                self.i = save
            return _char(v)
        if c in "pP":
            raise self.unsupported("Unicode property escape")
        if c == "-" and in_class:
            return _char(0x2D)
        if c.isascii() and c.isalnum():
            raise self.unsupported(f"identity escape \\{c} (engine-dependent meaning)")
        return _char(ord(c))


def _char(cp: int) -> Chars:
    return chars(((cp, cp),))


def parse(pattern: str, pointer: str = "") -> Node:
    """Parse an ECMA-262 pattern; `SchemaError` if malformed, `UnsupportedSchemaError` if the
    construct has no exact regular translation."""
    return _Parser(pattern, pointer).parse()


# --------------------------------------------------------------------------- emission


def _has(node: Node, kinds: tuple[type, ...]) -> bool:
    if isinstance(node, kinds):
        return True
    if isinstance(node, (Seq, Alt)):
        return any(_has(n, kinds) for n in node.items)
    if isinstance(node, Repeat):
        return _has(node.item, kinds)
    return False  # Look bodies are checked when emitted


def _quant(lo: int, hi: int | None) -> str:
    if (lo, hi) == (0, None):
        return "*"
    if (lo, hi) == (1, None):
        return "+"
    if (lo, hi) == (0, 1):
        return "?"
    if hi is None:
        return f"{{{lo},}}"
    if lo == hi:
        return f"{{{lo}}}"
    return f"{{{lo},{hi}}}"


def emit(node: Node, unsupported: UnsupportedSchemaError) -> tuple[str, str]:
    """Plain (anchor- and lookahead-free) node → (text, kind) with kind atom|seq|alt."""
    if isinstance(node, Chars):
        text, atom = encode_set(node.ranges)
        return text, "atom" if atom else "seq"
    if isinstance(node, Seq):
        if not node.items:
            return "", "seq"
        parts = []
        for it in node.items:
            t, k = emit(it, unsupported)
            parts.append(f"(?:{t})" if k == "alt" else t)
        if len(parts) == 1:
            return emit(node.items[0], unsupported)
        return "".join(parts), "seq"
    if isinstance(node, Alt):
        texts = [emit(it, unsupported)[0] for it in node.items]
        return "|".join(texts), "alt"
    if isinstance(node, Repeat):
        if node.max == 0:
            return "", "seq"
        t, k = emit(node.item, unsupported)
        if t == "":
            return "", "seq"
        if k != "atom":
            t = f"(?:{t})"
        if (node.min, node.max) == (1, 1):
            return t, "atom"
        return t + _quant(node.min, node.max), "seq"
    raise unsupported


def _flatten(node: Node) -> list[Node]:
    if isinstance(node, Seq):
        out: list[Node] = []
        for it in node.items:
            out.extend(_flatten(it))
        return out
    return [node]


_MAX_BRANCHES = 64


def _branches(node: Node, unsupported: UnsupportedSchemaError) -> list[list[Node]]:
    """Distribute top-level alternations that hold anchors/lookaheads into flat branches."""
    if isinstance(node, Alt):
        out: list[list[Node]] = []
        for it in node.items:
            out.extend(_branches(it, unsupported))
        return out
    result: list[list[Node]] = [[]]
    for it in _flatten(node):
        if isinstance(it, Alt) and _has(it, (Anchor, Look)):
            subs = _branches(it, unsupported)
            result = [r + s for r in result for s in subs]
            if len(result) > _MAX_BRANCHES:
                raise unsupported
        else:
            for r in result:
                r.append(it)
    return result


def tail(node: Node, *, search: bool, pointer: str, source: str) -> str:
    """Regex for `content"` where content encodes a value matched by `node`.

    `search`: JSON Schema search semantics (unanchored branches may be surrounded by anything);
    otherwise the match starts at the current position (a lookahead body) but may still end
    anywhere before the end unless the branch ends in `$`.
    """
    unsupported = UnsupportedSchemaError(
        "pattern", pointer, f"anchors or lookahead in an unsupported position in {source!r}"
    )
    alts = []
    plain = not _has(node, (Anchor, Look))
    for items in [[node]] if plain else _branches(node, unsupported):
        # leading zero-width items: `^` and lookaheads in any order
        start_anchored = not search
        i = 0
        while i < len(items) and isinstance(items[i], (Anchor, Look)):
            a = items[i]
            if isinstance(a, Anchor):
                if a.end:
                    break
                if not search:
                    raise unsupported  # `^` inside a lookahead body
                start_anchored = True
                del items[i]
                continue
            i += 1
        end_anchored = False
        while items and isinstance(items[-1], Anchor) and items[-1].end:
            end_anchored = True
            items.pop()
        parts = [] if start_anchored else [ANY_STAR]
        for it in items:
            if isinstance(it, Anchor):
                raise unsupported
            if isinstance(it, Look):
                body = tail(it.body, search=False, pointer=pointer, source=source)
                parts.append(("(?!" if it.negative else "(?=") + body + ")")
                continue
            if _has(it, (Anchor, Look)):
                raise unsupported
            t, k = emit(it, unsupported)
            parts.append(f"(?:{t})" if k == "alt" else t)
        if not end_anchored:
            parts.append(ANY_STAR)
        parts.append('"')
        alts.append("".join(parts))
    if len(alts) == 1:
        return alts[0]
    return "(?:" + "|".join(alts) + ")"


def _lengths(node: Node) -> tuple[int, int | None]:
    """Code points of the texts `node` matches: (fewest, most or None). Anchors and
    lookaheads are zero-width (a lookahead only removes texts, so the bounds still hold)."""
    if isinstance(node, Chars):
        return 1, 1
    if isinstance(node, Seq):
        lo = 0
        hi_or_none: int | None = 0
        for it in node.items:
            a, b = _lengths(it)
            lo += a
            hi_or_none = None if hi_or_none is None or b is None else hi_or_none + b
        return lo, hi_or_none
    if isinstance(node, Alt):
        bounds = [_lengths(it) for it in node.items]
        if not bounds:
            return 0, 0
        his = [b for _, b in bounds]
        return min(a for a, _ in bounds), None if None in his else max(h or 0 for h in his)
    if isinstance(node, Repeat):
        a, b = _lengths(node.item)
        if b == 0 or node.max == 0:
            return 0, 0
        return a * node.min, None if b is None or node.max is None else b * node.max
    return 0, 0  # Anchor, Look


def _anchored(node: Node) -> bool:
    """Every top-level branch starts with `^` and ends with `$`: no search padding."""
    if isinstance(node, Alt):
        return bool(node.items) and all(_anchored(it) for it in node.items)
    items = _flatten(node)
    return (
        len(items) >= 2
        and isinstance(items[0], Anchor)
        and not items[0].end
        and isinstance(items[-1], Anchor)
        and items[-1].end
    )


def pattern_lengths(pattern: str, pointer: str = "") -> tuple[int, int | None]:
    """Bounds, in code points, on the length of every value in which `pattern` finds a match
    (search semantics: an unanchored pattern has no upper bound). `minLength`/`maxLength`
    that these already imply need no intersection of their own."""
    node = parse(pattern, pointer)
    lo, hi = _lengths(node)
    return lo, hi if _anchored(node) else None


def pattern_tail(pattern: str, pointer: str = "") -> str:
    """Tail regex (`content"`) for the values in which ECMA `pattern` finds a match."""
    return tail(parse(pattern, pointer), search=True, pointer=pointer, source=pattern)
