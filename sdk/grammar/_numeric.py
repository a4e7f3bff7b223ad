"""Numeric lexemes: JSON integer/number texts restricted to a range, built digit by digit.

Integers use the classic range-to-regex construction: split by digit count, then by the first
differing digit. Numbers (with bounds) reuse it for the integer part and compare the fraction
digit-wise against the bound's fraction, so exclusive bounds are exact (`> 0` accepts `0.0001`,
rejects `0.000`).

Numbers with bounds are generated as plain decimals and in scientific notation with one
nonzero digit before the point (`1e-06`, `2.5E+20`: what JSON serialisers write for big and
small floats): for those the exponent decides the magnitude and the mantissa is compared
digit-wise at a bound's own exponent, so both are exact. Other exponent forms are not
generated: the set of values `{m × 10^e}` in a range is not a regular language over all texts
(`0.000…01e<k>` ties k to the zero count), so no regex could accept every exponent form
exactly. Every JSON number value has a plain spelling, so the accepted set of *values* is still
exactly the range. The exception is bounds at zero only (`minimum: 0`, `exclusiveMaximum: 0`,
...): there the sign and whether the mantissa is all zeros decide, so every spelling, exponent
and `-0` included, is accepted exactly. Without bounds the full RFC 8259 syntax is accepted.

`multipleOf` on numbers accepts plain decimal spellings (trailing fraction zeros free); its
exponent forms would tie the exponent to the digit count, so they are not generated. A step c × 10^e with c = 2^a 5^b (0.01, 0.25, 1.5, 20) is decided by the last few digits
of value × 10^-e, so the multiples form a small regex whatever the range; with both bounds any
step works while the range holds few multiples (they are listed). A step like 0.3 over an
unbounded range would need the digits' remainder mod 3 (regular, but no small regex): it is
refused.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from decimal import Decimal, InvalidOperation

from ..errors import SchemaError, UnsupportedSchemaError
from ._ecma_regex import NEVER

JSON_NUMBER = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+\-]?[0-9]+)?"
JSON_INTEGER = r"(?:0|-?[1-9][0-9]*)"
_ANY_FRAC = r"(?:\.[0-9]+)?"
_EXP = r"(?:[eE][+\-]?[0-9]+)?"
_ZERO = r"0(?:\.0+)?" + _EXP  # every spelling of zero but its sign
_POSITIVE = r"(?:[1-9][0-9]*(?:\.[0-9]+)?|0\.[0-9]*[1-9][0-9]*)" + _EXP


def _alt(parts: list[str]) -> str | None:
    parts = [p for p in parts if p is not None]
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else "(?:" + "|".join(parts) + ")"


def _dclass(lo: int, hi: int) -> str:
    if lo == hi:
        return str(lo)
    if (lo, hi) == (0, 9):
        return "[0-9]"
    return f"[{lo}-{hi}]" if hi > lo + 1 else f"[{lo}{hi}]"


def _rep(n: int) -> str:
    return "" if n == 0 else "[0-9]" if n == 1 else f"[0-9]{{{n}}}"


def _same_len(lo: str, hi: str) -> list[str]:
    """Alternatives for digit strings of len(lo) with lo <= s <= hi (lexicographic = numeric)."""
    if not lo:
        return [""]
    if lo == hi:
        return [lo]
    n = len(lo)
    a, b = int(lo[0]), int(hi[0])
    if a == b:
        return [lo[0] + _wrap(_same_len(lo[1:], hi[1:]))]
    if lo[1:] == "0" * (n - 1) and hi[1:] == "9" * (n - 1):
        return [_dclass(a, b) + _rep(n - 1)]
    out = []
    lo_full = lo[1:] == "0" * (n - 1)
    hi_full = hi[1:] == "9" * (n - 1)
    first = a if lo_full else a + 1
    last = b if hi_full else b - 1
    if not lo_full:
        out.append(lo[0] + _wrap(_same_len(lo[1:], "9" * (n - 1))))
    if first <= last:
        out.append(_dclass(first, last) + _rep(n - 1))
    if not hi_full:
        out.append(hi[0] + _wrap(_same_len("0" * (n - 1), hi[1:])))
    return out


def _wrap(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else "(?:" + "|".join(parts) + ")"


def nat_range(lo: int, hi: int | None) -> str | None:
    """Regex for canonical decimal texts of the naturals in [lo, hi] (hi None: unbounded)."""
    lo = max(lo, 0)
    if hi is not None and hi < lo:
        return None
    parts: list[str] = []
    if lo == 0:
        parts.append("0")
        lo = 1
        if hi == 0:
            return "0"
    los = str(lo)
    top_len = len(str(hi)) if hi is not None else len(los)
    for n in range(len(los), top_len + 1):
        a = los if n == len(los) else "1" + "0" * (n - 1)
        b = str(hi) if hi is not None and n == top_len else "9" * n
        parts.extend(_same_len(a, b))
    if hi is None:
        parts.append(f"[1-9][0-9]{{{len(los)},}}")
    return _alt(parts)


def _int_bound(x: float | int | None, name: str, up: bool) -> int | float | None:
    """Integer bound from a (possibly float) bound: ceil for minimum, floor for maximum.

    Returns None for "no bound" and ±inf for an unsatisfiable infinite bound."""
    if x is None:
        return None
    if isinstance(x, float):
        if math.isnan(x):
            raise SchemaError(f"{name} is NaN")
        if math.isinf(x):
            return None if (x < 0) == up else x
        return math.ceil(x) if up else math.floor(x)
    return int(x)


def integer_regex(
    *,
    minimum: int | float | None = None,
    maximum: int | float | None = None,
    multiple_of: int | float | None = None,
) -> str:
    """JSON integer texts (`0|-?[1-9][0-9]*`, no `-0`) in the inclusive range.

    Float bounds are allowed (rounded inwards: ceil of minimum, floor of maximum).

    `multiple_of` (a fractional step means the integer one of `integer_multiple_of`) is exact
    when it is 1, when it only has prime factors 2 and 5 (divisibility is then decided by the
    last k digits), or when the range holds at most 4096 multiples (enumerated); otherwise
    `UnsupportedSchemaError("multipleOf")`.
    """
    lo_b = _int_bound(minimum, "minimum", True)
    hi_b = _int_bound(maximum, "maximum", False)
    _check_size(lo_b, "minimum")
    _check_size(hi_b, "maximum")
    if isinstance(lo_b, float) or isinstance(hi_b, float):
        return NEVER  # minimum +inf or maximum -inf
    lo, hi = lo_b, hi_b
    if lo is not None and hi is not None and lo > hi:
        return NEVER
    m: int | None = None
    if multiple_of is not None:
        m = integer_multiple_of(multiple_of)
        m = None if m == 1 else m
    if m is None:
        if lo is None and hi is None:
            return JSON_INTEGER
        return _signed(lo, hi, nat_range) or NEVER
    k = _pow25(m)
    if k is not None:
        return _signed(lo, hi, lambda a, b: _nat_multiple(a, b, m, k)) or NEVER
    if lo is not None and hi is not None and (hi // m - (lo + m - 1) // m) < 4096:
        first = -((-lo) // m) * m
        values = list(range(first, hi + 1, m))
        if not values:
            return NEVER
        neg = sorted(str(-v) for v in values if v < 0)
        pos = sorted(str(v) for v in values if v >= 0)
        parts = []
        if neg:
            parts.append("-" + _wrap_s(_trie(neg)))
        if pos:
            parts.append(_trie(pos))
        return _alt(parts) or NEVER
    raise UnsupportedSchemaError(
        "multipleOf", "", f"multipleOf {m} over an unbounded or large range is not expressible"
    )


def _wrap_s(text: str) -> str:
    """Group `text` if it has a top-level `|` (so it can be concatenated)."""
    return text if _is_atomic(text) else f"(?:{text})"


def _is_atomic(text: str) -> bool:
    depth = 0
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "|" and depth == 0:
            return False
        i += 1
    return True


def _trie(words: list[str]) -> str:
    """Alternation of digit strings `words`, factored by prefix; siblings with equal suffix
    languages are merged into one digit class."""
    groups: dict[str, list[str]] = {}
    end = False
    for w in words:
        if not w:
            end = True
        else:
            groups.setdefault(w[0], []).append(w[1:])
    by_rest: dict[str, list[int]] = {}
    for c, rest in groups.items():
        by_rest.setdefault("" if rest == [""] else _wrap_s(_trie(rest)), []).append(int(c))
    alts = []
    for rest_re, digits in by_rest.items():
        digits.sort()
        if digits == list(range(digits[0], digits[-1] + 1)):
            cls = _dclass(digits[0], digits[-1])
        else:
            cls = "[" + "".join(map(str, digits)) + "]"
        alts.append(cls + rest_re)
    body = "|".join(alts)
    if end:
        return f"(?:{body})?"
    return body


def _pow25(m: int) -> int | None:
    """k with m | 10**k when m = 2^a 5^b (k = max(a, b)), else None."""
    a = b = 0
    while m % 2 == 0:
        m //= 2
        a += 1
    while m % 5 == 0:
        m //= 5
        b += 1
    if m != 1:
        return None
    k = max(a, b)
    return k if k <= 4 else None


def _nat_multiple(lo: int, hi: int | None, m: int, k: int) -> str | None:
    """Naturals in [lo, hi] divisible by m, where m | 10**k: n = q·10^k + r with m | r."""
    lo = max(lo, 0)
    if hi is not None and hi < lo:
        return None
    p = 10**k
    residues = [r for r in range(0, p, m)]
    parts: list[str] = []
    # q == 0: n = r itself, written without padding
    small = [str(r) for r in residues if lo <= r and (hi is None or r <= hi)]
    if small:
        parts.append(_trie(sorted(small)))
    qlo, qhi = max(lo // p, 1), None if hi is None else hi // p
    if qhi is not None and qhi < qlo:
        return _alt(parts)

    def padded(rlo: int, rhi: int) -> str | None:
        words = sorted(f"{r:0{k}d}" for r in residues if rlo <= r <= rhi)
        return _wrap_s(_trie(words)) if words else None

    def add(q_re: str | None, r_re: str | None) -> None:
        if q_re is not None and r_re is not None:
            parts.append(_wrap_s(q_re) + r_re)

    if qhi is not None and qlo == qhi:
        add(str(qlo), padded(max(lo - qlo * p, 0), hi - qlo * p if hi is not None else p - 1))
        return _alt(parts)
    lo_partial = lo > qlo * p
    add(str(qlo) if lo_partial else None, padded(lo - qlo * p, p - 1))
    mid_lo = qlo + 1 if lo_partial else qlo
    hi_partial = hi is not None and qhi is not None and hi < qhi * p + p - 1
    mid_hi = None if qhi is None else (qhi - 1 if hi_partial else qhi)
    if mid_hi is None or mid_lo <= mid_hi:
        add(nat_range(mid_lo, mid_hi), padded(0, p - 1))
    if hi_partial and qhi is not None and hi is not None:
        add(str(qhi), padded(0, hi - qhi * p))
    return _alt(parts)


def _signed(
    lo: int | None, hi: int | None, nat: Callable[[int, int | None], str | None]
) -> str | None:
    """Combine a natural-number range builder into a signed range (no `-0`)."""
    parts = []
    if hi is None or hi >= 0:
        pos = nat(max(lo, 0) if lo is not None else 0, hi)
        if pos is not None:
            parts.append(pos)
    if lo is None or lo < 0:
        # |n| in [max(1, -hi), -lo]
        neg = nat(max(1, -hi if hi is not None else 1), -lo if lo is not None else None)
        if neg is not None:
            parts.insert(0, "-" + _wrap_s(neg))
    return _alt(parts)


# --------------------------------------------------------------------------- numbers


_MAX_DIGITS = 400


def _check_size(bound: Decimal | int | float | None, keyword: str) -> None:
    """Digit-wise construction recurses per digit: refuse absurdly long bounds."""
    if isinstance(bound, (int, Decimal)) and not isinstance(bound, bool):
        d = Decimal(bound)
        if d.is_finite() and d != 0 and abs(d.adjusted()) + len(d.as_tuple().digits) > _MAX_DIGITS:
            raise UnsupportedSchemaError(keyword, "", f"bound with more than {_MAX_DIGITS} digits")


def _to_decimal(x: float | int, name: str) -> Decimal | None:
    if isinstance(x, bool):
        raise SchemaError(f"{name} must be a number")
    if isinstance(x, float):
        if math.isnan(x):
            raise SchemaError(f"{name} is NaN")
        if math.isinf(x):
            return None
        try:
            return Decimal(repr(x))  # the shortest spelling: what the schema author wrote
        except InvalidOperation as exc:  # pragma: no cover
            raise SchemaError(f"bad {name}") from exc
    return Decimal(x)


def _split(d: Decimal) -> tuple[int, str]:
    """Nonnegative decimal → (integer part, fraction digits without trailing zeros)."""
    ip = int(d)
    frac = d - ip
    if frac == 0:
        return ip, ""
    text = format(frac, "f")  # '0.xyz'
    return ip, text.split(".")[1].rstrip("0")


def _frac(lo: str, lo_strict: bool, hi: str | None, hi_strict: bool, nonempty: bool) -> str | None:
    """Digit strings F (nonempty if asked) with 0.lo <(=) 0.F <(=) 0.hi (hi None: no bound)."""
    if hi == "":
        # value must be 0 (or < 0: impossible)
        if hi_strict or lo_strict or lo.strip("0"):
            return None
        return "0+" if nonempty else "0*"
    if lo == "" and hi is None:
        if lo_strict:
            return "0*[1-9][0-9]*"
        return "[0-9]+" if nonempty else "[0-9]*"
    l1 = int(lo[0]) if lo else 0
    h1 = int(hi[0]) if hi is not None else 9
    hi_rest = hi[1:] if hi is not None else None
    parts: list[str] = []
    if not nonempty:
        zero_ok = not lo.strip("0") and not lo_strict
        if zero_ok:
            parts.append("")
    if l1 == h1 and hi is not None:
        sub = _frac(lo[1:], lo_strict, hi_rest, hi_strict, False)
        if sub is not None:
            parts.append(str(l1) + _wrap_opt(sub))
    else:
        sub = _frac(lo[1:], lo_strict, None, False, False)
        if sub is not None:
            parts.append(str(l1) + _wrap_opt(sub))
        if l1 + 1 <= h1 - (0 if hi is None else 1):
            parts.append(_dclass(l1 + 1, h1 - (0 if hi is None else 1)) + "[0-9]*")
        if hi is not None:
            sub = _frac("", False, hi_rest, hi_strict, False)
            if sub is not None:
                parts.append(str(h1) + _wrap_opt(sub))
    if not parts:
        return None
    if parts == [""]:
        return ""
    if parts[0] == "":
        rest = parts[1:]
        return f"(?:{'|'.join(rest)})?"
    return parts[0] if len(parts) == 1 else "(?:" + "|".join(parts) + ")"


def _wrap_opt(text: str) -> str:
    return text if _is_atomic(text) else f"(?:{text})"


def _frac_part(lo: str, lo_strict: bool, hi: str | None, hi_strict: bool) -> str | None:
    """`(\\.F)?` part: ε when the fraction 0 satisfies, `\\.F` for nonempty F that do."""
    zero_ok = (not lo and not lo_strict) and (hi is None or hi != "" or not hi_strict)
    f = _frac(lo, lo_strict, hi, hi_strict, True)
    if f is None:
        return "" if zero_ok else None
    return f"(?:\\.{f})?" if zero_ok else f"\\.{f}"


def _nonneg(a: Decimal, sa: bool, b: Decimal | None, sb: bool) -> str | None:
    """Unsigned texts with value in (a|[a) .. (b|b]) ; 0 <= a."""
    ai, fa = _split(a)
    parts: list[str] = []

    def add(int_re: str | None, frac_re: str | None) -> None:
        if int_re is not None and frac_re is not None:
            parts.append(_wrap_s(int_re) + frac_re)

    if b is None:
        add(str(ai), _frac_part(fa, sa, None, False))
        add(nat_range(ai + 1, None), _ANY_FRAC)
        return _alt(parts)
    bi, fb = _split(b)
    if ai == bi:
        add(str(ai), _frac_part(fa, sa, fb, sb))
        return _alt(parts)
    add(str(ai), _frac_part(fa, sa, None, False))
    if ai + 1 <= bi - 1:
        add(nat_range(ai + 1, bi - 1), _ANY_FRAC)
    add(str(bi), _frac_part("", False, fb, sb))
    return _alt(parts)


def _exponents(lo: int | None, hi: int | None) -> str | None:
    """`[eE]` and the exponent texts (sign and leading zeros free) of the integers in
    [lo, hi] (None: unbounded)."""
    if lo is not None and hi is not None and lo > hi:
        return None
    parts = []
    if lo is None or lo < 0:
        # |x| in [max(1, -hi), -lo]
        mags = nat_range(1 if hi is None or hi >= 0 else -hi, None if lo is None else -lo)
        if mags is not None:
            parts.append("-0*" + _wrap_s(mags))
    if (lo is None or lo <= 0) and (hi is None or hi >= 0):
        parts.append("[+\\-]?0+")
    if hi is None or hi > 0:
        mags = nat_range(1 if lo is None or lo <= 0 else lo, hi)
        if mags is not None:
            parts.append("\\+?0*" + _wrap_s(mags))
    return "[eE]" + _wrap_s("|".join(parts)) if parts else None


_MANTISSA = "[1-9](?:\\.[0-9]+)?"


def _scientific(a: Decimal, sa: bool, b: Decimal | None, sb: bool) -> str | None:
    """Texts m·10^x with one nonzero digit before the point (`1e-06`, `2.5E+20`: scientific
    notation as serialisers write it) whose value is in (a|[a) .. (b|b]); 0 <= a. Each x
    between the bounds' own exponents takes any mantissa; at a bound's exponent the mantissa
    is compared digit-wise, as plain decimals are."""
    xa = a.adjusted() if a > 0 else None
    xb = b.adjusted() if b is not None and b > 0 else None
    if b is not None and b <= 0:
        return None
    parts = []

    def add(mantissa: str | None, exps: str | None) -> None:
        if mantissa is not None and exps is not None:
            parts.append(_wrap_s(mantissa) + exps)

    ten = Decimal(10)
    if xa is not None and xa == xb:
        assert b is not None
        add(_nonneg(a.scaleb(-xa), sa, b.scaleb(-xa), sb), _exponents(xa, xa))
        return _alt(parts)
    if xa is not None:
        add(_nonneg(a.scaleb(-xa), sa, ten, True), _exponents(xa, xa))
    inner_lo = None if xa is None else xa + 1
    inner_hi = None if xb is None else xb - 1
    add(_MANTISSA, _exponents(inner_lo, inner_hi))
    if xb is not None:
        assert b is not None
        add(_nonneg(Decimal(1), False, b.scaleb(-xb), sb), _exponents(xb, xb))
    return _alt(parts)


def _sign_only(no_lo: bool, no_hi: bool, ex_lo: bool, ex_hi: bool) -> str:
    """Bounds at zero only: any spelling (exponents, `-0`) of an allowed sign."""
    parts = []
    if no_lo:
        parts.append("-" + _POSITIVE)
    if (no_lo or not ex_lo) and (no_hi or not ex_hi):
        parts.append("-?" + _ZERO)
    if no_hi:
        parts.append(_POSITIVE)
    return _alt(parts) or NEVER


def number_regex(
    *,
    minimum: float | int | None = None,
    maximum: float | int | None = None,
    exclusive_minimum: bool = False,
    exclusive_maximum: bool = False,
) -> str:
    """JSON number texts whose value lies within the bounds (see module doc for exponents)."""
    lo = _to_decimal(minimum, "minimum") if minimum is not None else None
    hi = _to_decimal(maximum, "maximum") if maximum is not None else None
    _check_size(lo, "minimum")
    _check_size(hi, "maximum")
    if minimum is not None and lo is None and minimum > 0:  # +inf minimum
        return NEVER
    if maximum is not None and hi is None and maximum < 0:  # -inf maximum
        return NEVER
    if lo is None and hi is None:
        return JSON_NUMBER
    if (lo is None or lo == 0) and (hi is None or hi == 0):
        return _sign_only(lo is None, hi is None, exclusive_minimum, exclusive_maximum)
    if (
        lo is not None
        and hi is not None
        and (lo > hi or (lo == hi and (exclusive_minimum or exclusive_maximum)))
    ):
        return NEVER
    parts: list[str] = []
    # nonnegative values
    if hi is None or hi > 0 or (hi == 0 and not exclusive_maximum):
        if lo is None or lo < 0:
            pos_range = (Decimal(0), False, hi, exclusive_maximum)
        else:
            pos_range = (lo, exclusive_minimum, hi, exclusive_maximum)
        pos = _alt([p for p in (_nonneg(*pos_range), _scientific(*pos_range)) if p])
        if pos is not None:
            parts.append(pos)
    # negative values: |x| in (max(0, -hi) .. -lo), |x| > 0 strictly
    if lo is None or lo < 0:
        if hi is None or hi >= 0:
            a, sa = Decimal(0), True
        else:
            a, sa = -hi, exclusive_maximum
        b, sb = (None, False) if lo is None else (-lo, exclusive_minimum)
        neg = _alt([p for p in (_nonneg(a, sa, b, sb), _scientific(a, sa, b, sb)) if p])
        if neg is not None:
            parts.insert(0, "-" + _wrap_s(neg))
    return _alt(parts) or NEVER


# --------------------------------------------------------------------------- multipleOf on numbers

#: Bounded ranges with at most this many multiples are enumerated.
MAX_ENUMERATED_MULTIPLES = 4096


def _step(step: float | int) -> tuple[int, int]:
    """`step` = c × 10^e with c a positive integer not divisible by 10 (what the schema
    author wrote: a float is read by its shortest spelling)."""
    d = _to_decimal(step, "multipleOf")
    if d is None or d <= 0:
        raise SchemaError("multipleOf must be a finite number > 0")
    _check_size(d, "multipleOf")
    _, digits, exp = d.normalize().as_tuple()
    c = int("".join(map(str, digits)))
    e = int(exp)
    while c % 10 == 0:
        c //= 10
        e += 1
    return c, e


def integer_multiple_of(step: float | int) -> int:
    """The integer m such that an integer n is a multiple of `step` iff m divides n: for
    c × 10^-k, n·10^k / c is whole iff c / gcd(c, 10^k) divides n."""
    c, e = _step(step)
    if e >= 0:
        return c * 10**e
    return c // math.gcd(c, 10**-e)


def _fraction_of(values: list[str]) -> str:
    """`.F` (optional where the all-zero value is allowed) for fraction digit strings
    `values`: F is one of them with trailing zeros free to drop or add, at least one digit."""
    kept = sorted({v.rstrip("0") for v in values})
    alts = []
    if any(kept):
        alts.append(_wrap_s(_trie([v for v in kept if v])) + "0*")
    if "" in kept:
        alts.append("0+")
    body = r"\." + _wrap_s("|".join(alts))
    return f"(?:{body})?" if "" in kept else body


def _ending_in(tail: str) -> str:
    """Canonical integer parts whose last len(tail) digits, zero-padded, are `tail`."""
    short = tail.lstrip("0")
    return "(?:" + (short or "0") + "|[1-9][0-9]*" + tail + ")"


def _unbounded_multiples(c: int, k: int, d: int) -> str:
    """Nonnegative plain decimal texts of the multiples of c × 10^-k (k ≥ 1), where c | 10^d:
    N = value × 10^k must be whole (no nonzero digit past the k-th fraction digit) and its
    last d digits a multiple of c."""
    window = [f"{r:0{d}d}" for r in range(0, 10**d, c)]
    if d <= k:
        # the last d digits are fraction digits k-d+1..k: the first k-d are free, and a
        # shorter fraction is padded with zeros
        free = k - d
        tails = [w[:j] for w in window for j in range(1, d) if w[j:] == "0" * (d - j)]
        ends = [_wrap_s(_trie(sorted(set(tails))))] if tails else []
        ends.append(_wrap_s(_trie(window)) + "0*")
        alts = [f"[0-9]{{1,{free}}}"] if free else []
        alts.append(_rep(free) + _wrap_s("|".join(ends)))
        return "(?:0|[1-9][0-9]*)" + r"(?:\." + _wrap_s("|".join(alts)) + ")?"
    # the window reaches into the integer part: its last d-k digits and the k fraction digits
    r = d - k
    by_int: dict[str, list[str]] = {}
    for w in window:
        by_int.setdefault(w[:r], []).append(w[r:])
    return _wrap_s("|".join(_ending_in(wi) + _fraction_of(fr) for wi, fr in sorted(by_int.items())))


def _no_multiples(step: float | int, why: str) -> UnsupportedSchemaError:
    return UnsupportedSchemaError("multipleOf", "", f"multipleOf {step} {why} is not expressible")


def number_multiple_regex(
    step: float | int,
    *,
    minimum: float | int | None = None,
    maximum: float | int | None = None,
    exclusive_minimum: bool = False,
    exclusive_maximum: bool = False,
) -> str:
    """JSON number texts (plain decimals, no exponent; see the module doc) whose value is a
    multiple of `step` and lies within the bounds.

    Exact without bounds when the step is c × 10^e with c = 2^a 5^b (0.01, 0.25, 1.5, 20:
    the last few digits decide), and with both bounds when the range holds at most
    MAX_ENUMERATED_MULTIPLES multiples (enumerated); otherwise
    `UnsupportedSchemaError("multipleOf")`."""
    c, e = _step(step)
    lo = _to_decimal(minimum, "minimum") if minimum is not None else None
    hi = _to_decimal(maximum, "maximum") if maximum is not None else None
    if (minimum is not None and lo is None and minimum > 0) or (
        maximum is not None and hi is None and maximum < 0
    ):
        return NEVER  # +inf minimum or -inf maximum
    at_zero = (lo is None or (lo == 0 and not exclusive_minimum)) and (
        hi is None or (hi == 0 and not exclusive_maximum)
    )
    if (lo is not None or hi is not None) and not at_zero:
        if lo is None or hi is None:
            raise _no_multiples(step, "with a one-sided bound away from zero")
        _check_size(lo, "minimum")
        _check_size(hi, "maximum")
        unit = Decimal(c).scaleb(e)
        first = math.ceil(lo / unit)
        last = math.floor(hi / unit)
        if exclusive_minimum and first * unit == lo:
            first += 1
        if exclusive_maximum and last * unit == hi:
            last -= 1
        if last - first >= MAX_ENUMERATED_MULTIPLES:
            raise _no_multiples(step, f"over more than {MAX_ENUMERATED_MULTIPLES} values")
        return _enumerated(unit, first, last)
    if lo is not None and hi is not None:
        return r"-?0(?:\.0+)?"  # both bounds at zero
    if e >= 0:
        m = c * 10**e
        k = _pow25(m)
        if k is None:
            raise _no_multiples(step, "over an unbounded range")
        whole = "(?:0|[1-9][0-9]*)" if m == 1 else _wrap_s(_nat_multiple(0, None, m, k) or "0")
        magnitude = whole + r"(?:\.0+)?"
    else:
        d = _pow25(c)
        if d is None:
            raise _no_multiples(step, "over an unbounded range")
        magnitude = _unbounded_multiples(c, -e, d)
    # inclusive bounds at zero: the sign decides (zero may be written `-0` or `0`)
    zero = r"0(?:\.0+)?"
    if lo is None and hi is None:
        return "-?" + magnitude
    if lo is None:
        return "(?:-" + magnitude + "|" + zero + ")"
    return "(?:-" + zero + "|" + magnitude + ")"


def _enumerated(unit: Decimal, first: int, last: int) -> str:
    """The multiples first·unit .. last·unit, each in every plain spelling (trailing
    fraction zeros free; zero also as `-0`)."""
    if first > last:
        return NEVER
    # per sign: integer part -> its fractions (digits without trailing zeros)
    sides: dict[str, dict[str, list[str]]] = {"-": {}, "": {}}
    for q in range(first, last + 1):
        v = unit * q
        whole, frac = _split(abs(v))
        sides["-" if v < 0 else ""].setdefault(str(whole), []).append(frac)
        if v == 0:
            sides["-"].setdefault("0", []).append("")
    parts = []
    for sign, by_int in sides.items():
        # integer parts with the same fractions are one alternative
        groups: dict[tuple[str, ...], list[str]] = {}
        for whole_text, fracs in by_int.items():
            groups.setdefault(tuple(sorted(fracs)), []).append(whole_text)
        alts = [_wrap_s(_trie(sorted(ws))) + _fraction_of(list(fr)) for fr, ws in groups.items()]
        if alts:
            parts.append(sign + _wrap_s("|".join(alts)))
    return _alt(parts) or NEVER
