"""`format` keyword → exact regexes, written as anchored ECMA patterns over the decoded value.

Writing them over the *decoded* value and sending them through the same translator as `pattern`
(`_ecma_regex`) means the JSON encoding (`\\/` for `/`, escapes, ...) is handled in one place.

Definitions (each is exact for the definition stated; documented where a choice was made):

* `date`: RFC 3339 full-date, years 0000-9999, days per month, Feb 29 only in Gregorian leap
  years (proleptic, so 0000 is a leap year).
* `time`: RFC 3339 full-time: hh:mm:ss[.frac] with offset `Z`/`z`/`±hh:mm`; second 60 (leap
  second) is accepted at any time of day, since whether it is legal depends on the offset and on
  the leap-second table.
* `date-time`: full-date (`T`|`t`) full-time.
* `duration`: RFC 3339 appendix A (`P1Y2M`, `PT1H`, `P2W`, ...), upper-case designators.
* `email`: RFC 5321 `Mailbox`: dot-atom or quoted-string local part, `@`, then a domain of
  RFC 1123 labels (1-63 chars, no leading/trailing `-`) or an address literal `[IPv4]` /
  `[IPv6:...]`. No overall length limits (RFC 5321 section 4.5.3 sizes are not applied).
* `hostname`: RFC 1123: dot-separated labels of 1-63 `[A-Za-z0-9-]` not starting or ending
  with `-`, total length 1-253, no trailing dot.
* `ipv4`: dotted quad, 0-255, no leading zeros. `ipv6`: RFC 4291 text forms (all `::`
  compressions, trailing dotted-quad), no zone id.
* `uuid`: 8-4-4-4-12 hex digits, either case.
* `uri`, `uri-reference`: RFC 3986 `URI` / `URI-reference` ABNF; `iri`, `iri-reference`: the
  RFC 3987 counterparts (ucschar / iprivate ranges).
* `json-pointer`: RFC 6901. `relative-json-pointer`: non-negative integer followed by `#` or a
  JSON pointer (no index manipulation, as in draft-handrews-relative-json-pointer-01).

Not supported (raise `UnsupportedSchemaError`): `regex` (not a regular language), `idn-email`,
`idn-hostname` (IDNA tables), `uri-template`, and any unknown name.
"""

from __future__ import annotations

from functools import cache

from ..errors import UnsupportedSchemaError
from ._ecma_regex import parse, tail

# ---- date and time -------------------------------------------------------------------------
_LEAP = r"(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)"
_MONTH_DAY = (
    r"(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])"
    r"|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)"
    r"|02-(?:0[1-9]|1[0-9]|2[0-8]))"
)
_DATE = rf"(?:[0-9]{{4}}-{_MONTH_DAY}|{_LEAP}-02-29)"
_TIME = (
    r"(?:[01][0-9]|2[0-3]):[0-5][0-9]:(?:[0-5][0-9]|60)(?:\.[0-9]+)?"
    r"(?:[Zz]|[+\-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
)
_D = "[0-9]+"
_DUR_TIME = rf"T(?:{_D}H(?:{_D}M(?:{_D}S)?)?|{_D}M(?:{_D}S)?|{_D}S)"
_DUR_DATE = rf"(?:{_D}D|{_D}M(?:{_D}D)?|{_D}Y(?:{_D}M(?:{_D}D)?)?)(?:{_DUR_TIME})?"
_DURATION = rf"P(?:{_DUR_DATE}|{_DUR_TIME}|{_D}W)"

# ---- internet addresses --------------------------------------------------------------------
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
_IPV4 = rf"{_OCTET}(?:\.{_OCTET}){{3}}"


def _ipv6() -> str:
    h = "[0-9A-Fa-f]{1,4}"
    ls32 = f"(?:{h}:{h}|{_IPV4})"
    forms = [f"(?:{h}:){{6}}{ls32}", f"::(?:{h}:){{5}}{ls32}", f"(?:{h})?::(?:{h}:){{4}}{ls32}"]
    for k, tail_ in (
        (1, f"(?:{h}:){{3}}{ls32}"),
        (2, f"(?:{h}:){{2}}{ls32}"),
        (3, f"{h}:{ls32}"),
        (4, ls32),
        (5, h),
        (6, ""),
    ):
        forms.append(f"(?:(?:{h}:){{0,{k}}}{h})?::{tail_}")
    return "(?:" + "|".join(forms) + ")"


_IPV6 = _ipv6()
_LABEL = "[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOSTNAME = rf"(?=.{{1,253}}$){_LABEL}(?:\.{_LABEL})*"
_ATEXT = r"[A-Za-z0-9!#$%&'*+\-/=?\^_`{|}~]"
_EMAIL = (
    rf"(?:{_ATEXT}+(?:\.{_ATEXT}+)*|\x22(?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\[\x20-\x7e])*\x22)"
    rf"@(?:{_LABEL}(?:\.{_LABEL})*|\[(?:{_IPV4}|IPv6:{_IPV6})\])"
)
_UUID = "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"


# ---- URI / IRI (RFC 3986 / RFC 3987) -------------------------------------------------------
def _uri(iri: bool, reference: bool) -> str:
    uc = (
        r"\u{A0}-\u{D7FF}\u{F900}-\u{FDCF}\u{FDF0}-\u{FFEF}"
        + "".join(f"\\u{{{p:X}0000}}-\\u{{{p:X}FFFD}}" for p in range(1, 14))
        + r"\u{E1000}-\u{EFFFD}"
        if iri
        else ""
    )
    private = r"\u{E000}-\u{F8FF}\u{F0000}-\u{FFFFD}\u{100000}-\u{10FFFD}" if iri else ""
    unres = r"A-Za-z0-9\-._~" + uc
    sub = r"!$&'()*+,;="
    pct = "%[0-9A-Fa-f]{2}"
    pchar = rf"(?:[{unres}{sub}:@]|{pct})"
    seg = f"{pchar}*"
    seg_nz = f"{pchar}+"
    seg_nz_nc = rf"(?:[{unres}{sub}@]|{pct})+"
    userinfo = rf"(?:[{unres}{sub}:]|{pct})*"
    ipfuture = rf"v[0-9A-Fa-f]+\.[{unres.replace(uc, '')}{sub}:]+"
    host = rf"(?:\[(?:{_IPV6}|{ipfuture})\]|(?:[{unres}{sub}]|{pct})*)"
    authority = rf"(?:{userinfo}@)?{host}(?::[0-9]*)?"
    abempty = f"(?:/{seg})*"
    absolute = f"/(?:{seg_nz}(?:/{seg})*)?"
    rootless = f"{seg_nz}(?:/{seg})*"
    noscheme = f"{seg_nz_nc}(?:/{seg})*"
    query = rf"(?:\?(?:{pchar}|[/?{private}])*)?" if iri else rf"(?:\?(?:{pchar}|[/?])*)?"
    fragment = rf"(?:#(?:{pchar}|[/?])*)?"
    scheme = r"[A-Za-z][A-Za-z0-9+\-.]*"
    absolute_uri = f"{scheme}:(?://{authority}{abempty}|{absolute}|{rootless}|){query}{fragment}"
    if not reference:
        return absolute_uri
    relative = f"(?://{authority}{abempty}|{absolute}|{noscheme}|){query}{fragment}"
    return f"(?:{absolute_uri}|{relative})"


_JSON_POINTER = "(?:/(?:[^~/]|~[01])*)*"

FORMATS: dict[str, str] = {
    "date-time": f"{_DATE}[Tt]{_TIME}",
    "date": _DATE,
    "time": _TIME,
    "duration": _DURATION,
    "email": _EMAIL,
    "hostname": _HOSTNAME,
    "ipv4": _IPV4,
    "ipv6": _IPV6,
    "uuid": _UUID,
    "uri": _uri(iri=False, reference=False),
    "uri-reference": _uri(iri=False, reference=True),
    "iri": _uri(iri=True, reference=False),
    "iri-reference": _uri(iri=True, reference=True),
    "json-pointer": _JSON_POINTER,
    "relative-json-pointer": f"(?:0|[1-9][0-9]*)(?:#|{_JSON_POINTER})",
}


def format_known(fmt: str) -> bool:
    """Whether `fmt` is a format this module enforces exactly."""
    return fmt in FORMATS


def format_pattern(fmt: str, pointer: str = "") -> str:
    """The anchored ECMA pattern (over decoded values) for `fmt`."""
    if fmt not in FORMATS:
        raise UnsupportedSchemaError("format", pointer, f"format {fmt!r} is not supported")
    return f"^(?:{FORMATS[fmt]})$"


@cache
def _format_tail(fmt: str) -> str:
    return tail(parse(format_pattern(fmt)), search=True, pointer="", source=fmt)


def format_tail(fmt: str, pointer: str = "") -> str:
    """Tail regex (`content"`) for strings whose value is a valid `fmt`."""
    if fmt not in FORMATS:
        raise UnsupportedSchemaError("format", pointer, f"format {fmt!r} is not supported")
    return _format_tail(fmt)
