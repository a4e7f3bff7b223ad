"""The surfaces other than JSON: the pythonic call's keyword arguments, Qwen3-Coder's XML
parameters (`<parameter=NAME>` blocks, strings as raw text) and FunctionGemma's syntax (bare
keys, raw strings between `<escape>` markers). Helpers of `Emitter`, which they take first."""

from __future__ import annotations

import json
import keyword
import re
from typing import TYPE_CHECKING

from sdk.errors import SchemaError
from sdk.schema import Consts, Node, Obj, Ref, Str, Typed, Union

from . import _trees
from ._exprs import opt, seq, sym
from ._trees import SEQ, E

if TYPE_CHECKING:
    from ._emit import Emitter

GEMMA_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
XML_END = "\n</parameter>"
GEMMA_ESC = "<escape>"


def call_arguments(em: Emitter, root: Node) -> Obj:
    """The root object of a pythonic or XML call, whose members are its arguments."""
    if not (
        isinstance(root, Typed)
        and root.obj is not None
        and root.arr is None
        and root.string is None
        and root.number is None
        and not root.null
        and not root.boolean
    ):
        raise SchemaError(f"{'pythonic' if em.python else 'XML'} calls need object arguments", "")
    return root.obj


def check_keyword_argument(pname: str, pointer: str) -> None:
    """A property of a pythonic call's arguments must be a Python identifier."""
    if not (pname.isidentifier() and not keyword.iskeyword(pname)):
        raise SchemaError(
            f"property {pname!r} is not a Python identifier: it cannot be a keyword "
            "argument of a pythonic call",
            pointer,
        )


# -- XML parameters -----------------------------------------------------------------------
def xml_params(em: Emitter, o: Obj, name: str) -> E | None:
    """The root object as `<parameter=NAME>` blocks in declaration order. Each block is
    self-delimiting, so optional ones need no separators; one rule per optional block
    keeps Lark from expanding 2^k alternatives."""
    if em.extras(o, name) is not None:
        raise SchemaError(
            "arguments beyond the declared properties (additionalProperties, "
            "patternProperties) cannot be XML parameters",
            o.pointer,
        )
    if o.min_props > len([p for p, _ in o.props if p in o.required]) or (
        o.max_props is not None and o.max_props < len(o.props)
    ):
        for k in ("minProperties", "maxProperties"):
            em.usage.validate(k, o.pointer, "counted by validation for XML parameters")
    for kw in dict.fromkeys(kw for kw, _, _ in o.depends):
        em.usage.validate(kw, o.pointer, "checked by validation for XML parameters")
    blocks: list[tuple[E, bool]] = []
    for pname, v in o.props:
        if "<" in pname or ">" in pname or "\n" in pname or not pname:
            raise SchemaError(f"property {pname!r} cannot be an XML parameter name", o.pointer)
        ve = xml_value(em, v, f"{name}_{pname}")
        if ve is None:
            if pname in o.required:
                return None
            continue
        head = json.dumps(f"<parameter={pname}>\n")
        block = seq([sym(head), ve, sym(json.dumps(XML_END + "\n"))])
        blocks.append((block, pname in o.required))
    out: E | None = None
    for i in range(len(blocks) - 1, -1, -1):
        block, required = blocks[i]
        piece = seq([block if required else opt(block), out])
        if i:  # one rule per suffix
            rule = em.names.rule(f"{name}_params{i}")
            em.rules[rule] = piece
            piece = sym(rule)
        out = piece
    return out if out is not None else ("", SEQ, _trees.EMPTY)


def xml_value(em: Emitter, node: Node, hint: str) -> E | None:
    """Raw text for string parameters (their `null` is the text `null`), JSON otherwise."""
    target = node
    if isinstance(target, Ref):
        target = em.defs.nodes.get(target.key, target)
    raw = raw_text(em, target)
    if raw is None:
        return em.expr(node, hint)
    return em.term(raw, hint)


def raw_text(em: Emitter, node: Node) -> str | None:
    """The raw-text regex of a string-only parameter (None: not string-only)."""
    ban = "|".join(re.escape(t) for t in (XML_END, *em.reserved))
    if isinstance(node, Union):  # Optional[str] and the like: raw text, or `null`
        alts: list[str] = []
        for a in node.alts:
            if isinstance(a, Typed) and a == Typed(null=True):
                alts.append("null")
                continue
            r = raw_text(em, a)
            if r is None:
                return None
            alts.append(r)
        return "(?:" + "|".join(alts) + ")"
    if isinstance(node, Consts):
        values = [json.loads(t) for t in node.texts]
        if not values or not all(isinstance(v, str) or v is None for v in values):
            return None
        texts = sorted({"null" if v is None else v for v in values})
        if any(re.search(ban, t) for t in texts):
            raise SchemaError("an enum value holds the XML parameter end", "")
        return "(?:" + "|".join(re.escape(t) for t in texts) + ")"
    if not isinstance(node, Typed) or node.string is None:
        return None
    if node.number is not None or node.boolean or node.obj is not None or node.arr is not None:
        return None
    text = raw_string(em, node.string, (XML_END, *em.reserved))
    return f"(?:{text}|null)" if node.null else text


def raw_string(em: Emitter, st: Str, ban: tuple[str, ...]) -> str:
    """Regex of the raw (unescaped) texts of strings `st` allows, none holding a `ban`
    text. Length is counted in the grammar; `pattern`, `format` and `not` are left to
    validation (their machinery works over JSON-escaped text)."""
    for kw, items in (("pattern", st.patterns), ("format", st.formats)):
        for _, ptr in items:
            em.usage.validate(kw, ptr, "raw string values are checked by validation")
    if st.excluded:
        em.usage.validate("not", st.pointer, "raw string values")
    alts = "|".join(re.escape(t).replace("\\\n", "\\n") for t in ban)
    avoid = rf"(?![\s\S]*(?:{alts}))" if alts else ""
    lo, hi = st.min_length, st.max_length
    if (lo, hi) == (0, None):
        return avoid + r"[\s\S]*"
    q = f"{{{lo},}}" if hi is None else f"{{{lo},{hi}}}"
    return avoid + r"[\s\S]" + q


# -- the FunctionGemma surface ---------------------------------------------------------
def gemma_key(name: str) -> E:
    """A bare key: it ends at the `:` that follows."""
    if not name or not GEMMA_KEY.fullmatch(name):
        raise SchemaError(f"property {name!r} cannot be a bare FunctionGemma key", "")
    return sym(json.dumps(name))


def gemma_text(text: str) -> E:
    """One constant string, between `<escape>` markers."""
    if GEMMA_ESC in text:
        raise SchemaError(f"a constant string holds {GEMMA_ESC!r}", "")
    return sym(json.dumps(GEMMA_ESC + text + GEMMA_ESC))


def gemma_string(em: Emitter, st: Str, hint: str) -> E:
    body = em.term(raw_string(em, st, (GEMMA_ESC, *em.reserved)), hint)
    esc = sym(json.dumps(GEMMA_ESC))
    return seq([esc, body, esc])
