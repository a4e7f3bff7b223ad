"""The JSON Schema a server is sent for a typed output (`constraint="json_schema"`): the same
language the agent enforces locally, written so the servers' engines read it so.

The agent compiles a typed output with `close_objects` (an object that declares `properties`
takes no other members unless the schema says so) and reads `pattern` as the standard does (a
search). Servers hand the schema to their own engines, which read three things otherwise
(`python -m sdk.bench servers --targets xgrammar-json,guidance-json` compares them with our
matcher):

- XGrammar (vLLM, SGLang) reads a missing `additionalProperties` as false, and both it and
  llguidance take undeclared members only after the declared ones. So the objects the agent
  closes are sent closed (`"additionalProperties": false`, a `required` member no part declares
  declared), and the others open (`true`, the standard's default): then neither engine has an
  undeclared member to place. An object made of parts (`allOf`, a `$ref` with siblings, a
  branch merged with its parent) cannot be closed part by part (each would forbid the others'
  members); it is sent open, which is looser than the agent, whose validation takes what a
  server lets through.
- XGrammar reads object keywords beside a `type` without `"object"` (`{"type": "array",
  "properties": ...}`), and any keyword it does not know (`"Title"`, a misspelt
  `"descprition"`) beside `"type": "array"`, as a constraint on the array, and refuses every
  non-empty one. Keywords of a type the node cannot have apply to nothing, and keywords the
  standard does not define are annotations; both are dropped (unknown ones only where they
  hold no schema a `$ref` could point into).
- XGrammar (and llama.cpp) match `pattern` against the whole string; the standard searches.
  A pattern is sent anchored, as what it means: `a` as `^[\\s\\S]*(?:a)[\\s\\S]*$`, `^a` as
  `^(?:a)[\\s\\S]*$`. Patterns with anchors elsewhere (inside a group, around a top-level `|`)
  are sent as they are.

Every rewrite keeps each instance's validity under the standard except closing, which is the
agent's own reading (tested with `jsonschema`).

One reading no rewrite can keep exact: XGrammar takes no escape sequence (`\\n`, `\\"`) in a
string with `minLength`, `maxLength` or `pattern`. Told the engine is XGrammar
(`engine="xgrammar"`), such strings go without those keywords wherever they could hold a
character JSON escapes: looser, and named (`dropped`), so the backend logs it and counts the turn
in `usage.loosened_turns`; the agent's validation checks the reply, as always.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

from sdk.backends._structural_tag import declare_open_objects
from sdk.schema import CONSTRAINING

__all__ = ["may_hold_escapes", "sent_schema"]

_ANNOTATIONS = frozenset(
    {"title", "description", "default", "examples", "$comment", "deprecated", "readOnly",
     "writeOnly", "$id", "$schema", "$anchor"}
)  # fmt: skip
_KNOWN = CONSTRAINING | {
    "then", "else", "$defs", "definitions", "$id", "id", "$schema", "$anchor", "$dynamicAnchor",
    "$recursiveAnchor", "$vocabulary", "$comment", "title", "description", "default",
    "examples", "deprecated", "readOnly", "writeOnly", "contentEncoding", "contentMediaType",
    "contentSchema",
}  # fmt: skip
# Keywords that make a node one part of a bigger object (its members merge with others').
_MERGING = ("allOf", "anyOf", "oneOf", "$ref", "$dynamicRef", "$recursiveRef", "if", "then",
            "else", "dependentSchemas", "dependencies", "unevaluatedProperties")  # fmt: skip
_OBJECT_KEYWORDS = ("properties", "required", "additionalProperties", "patternProperties",
                    "minProperties", "maxProperties", "propertyNames", "dependentRequired",
                    "dependentSchemas", "dependencies", "unevaluatedProperties")  # fmt: skip
# Children whose value is a whole value's schema of its own (never merged with the parent).
_OWN_VALUE = ("additionalProperties", "items", "contains", "propertyNames", "unevaluatedItems")
_OWN_VALUE_MAPS = ("properties", "patternProperties")
_OWN_VALUE_LISTS = ("prefixItems",)


def sent_schema(schema: Any, engine: str | None = None, dropped: list[str] | None = None) -> Any:
    """A copy of `schema` as a server's engine should be sent it (see the module's doc).
    `engine="xgrammar"`: strings whose escapes XGrammar would refuse lose their length bounds
    and pattern, each named in `dropped` (a list to append to)."""
    out = copy.deepcopy(schema)
    if not isinstance(out, dict):
        return out
    if "unevaluatedProperties" not in json.dumps(out):  # what subschemas evaluate matters there
        _rewrite(out, True, _plain_refs(out), set())
    out = declare_open_objects(out)  # the objects left open say so
    if engine == "xgrammar":
        _free_escapes(out, "", dropped if dropped is not None else [])
    elif engine is not None:
        raise ValueError(f"engine={engine!r}: expected 'xgrammar' or None")
    return out


_STRING_BOUNDS = ("minLength", "maxLength", "pattern")


def _free_escapes(node: Any, pointer: str, dropped: list[str]) -> None:
    """Drop the string keywords under which XGrammar refuses escapes, where the string could
    hold a character JSON writes escaped (a pattern that cannot is kept, with its bounds)."""
    if not isinstance(node, dict):
        return
    if any(k in node for k in _STRING_BOUNDS):
        pattern = node.get("pattern")
        if not isinstance(pattern, str) or may_hold_escapes(pattern):
            gone = [k for k in _STRING_BOUNDS if node.pop(k, None) is not None]
            dropped.append(f"{pointer or '/'}: {', '.join(gone)}")
    for where, sub in _children(node):
        _free_escapes(sub, f"{pointer}/{where}", dropped)


def _children(node: dict[str, Any]) -> list[tuple[str, Any]]:
    """The schemas directly inside `node`, each with its path from it (member names of
    `properties` are names, not keywords)."""
    out: list[tuple[str, Any]] = []
    for key, value in node.items():
        if key in _SINGLE and isinstance(value, dict):
            out.append((key, value))
        elif key in _LISTS and isinstance(value, list):
            out += [(f"{key}/{i}", v) for i, v in enumerate(value)]
        elif key in _MAPS and isinstance(value, dict):
            out += [(f"{key}/{k}", v) for k, v in value.items()]
    return out


_SINGLE = frozenset(
    {"items", "additionalItems", "additionalProperties", "not", "if", "then", "else",
     "contains", "propertyNames", "unevaluatedProperties", "unevaluatedItems"}
)  # fmt: skip
_LISTS = frozenset({"allOf", "anyOf", "oneOf", "prefixItems", "items"})
_MAPS = frozenset(
    {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas",
     "dependencies"}
)  # fmt: skip


_ESCAPED = frozenset('"\\') | frozenset(chr(c) for c in range(0x20))


def may_hold_escapes(pattern: str) -> bool:
    """Could a string `pattern` matches (searched) hold `"`, `\\` or a control character, which
    JSON writes escaped? Conservative: True for anything it cannot read as safe."""
    starts, ends, inner, top_alt = _anchors(pattern)
    if not (starts and ends) or inner or top_alt:
        return True  # a search: anything may surround the match
    i, n = 1, len(pattern) - 1
    while i < n:
        c = pattern[i]
        if c == "\\":
            if pattern[i + 1 : i + 2] not in set("dwbB.-/()[]{}*+?|^$,:!@#%&=<>'`~;_ ") | set(
                "0123456789"
            ) - {"0"}:
                return True  # \s, \S, \W, \D, \x.., \u...., \\, \" and the like
            i += 2
            continue
        if c == "[":
            end = _class_end(pattern, i)
            if end < 0 or _class_may_escape(pattern[i + 1 : end]):
                return True
            i = end + 1
            continue
        if c == "." or c in _ESCAPED:
            return True
        i += 1
    return False


def _class_end(pattern: str, at: int) -> int:
    i = at + 1
    if pattern[i : i + 1] == "^":
        i += 1
    if pattern[i : i + 1] == "]":
        i += 1
    while i < len(pattern):
        if pattern[i] == "\\":
            i += 2
            continue
        if pattern[i] == "]":
            return i
        i += 1
    return -1


def _class_may_escape(body: str) -> bool:
    if body.startswith("^"):
        return True  # a negated class holds nearly everything
    chars: list[str] = []
    i = 0
    while i < len(body):
        c = body[i]
        if c == "\\":
            nxt = body[i + 1 : i + 2]
            if nxt not in set("dw.-/()[]{}*+?|^$,:!@#%&=<>'`~;_ "):
                return True
            chars.append(nxt if nxt not in "dw" else "a")
            i += 2
            continue
        chars.append(c)
        i += 1
    for j, c in enumerate(chars):
        if c in _ESCAPED:
            return True
        if c == "-" and 0 < j < len(chars) - 1:
            lo, hi = ord(chars[j - 1]), ord(chars[j + 1])
            if lo <= hi and any(lo <= ord(x) <= hi for x in ('"', "\\")) or lo < 0x20:
                return True
    return False


def _search(pattern: str, text: str) -> bool:
    try:
        return re.search(pattern, text) is not None
    except re.error:
        return True  # cannot tell: leave the member to the pattern


def _types(node: dict[str, Any]) -> set[str] | None:
    kind = node.get("type")
    if isinstance(kind, str):
        return {kind}
    if isinstance(kind, list) and all(isinstance(k, str) for k in kind):
        return set(kind)
    return None


def _rewrite(node: Any, whole: bool, refs: dict[str, bool], seen: set[int]) -> None:
    """Rewrite `node` in place; `whole`: no other schema merges into it (it may be closed)."""
    if not isinstance(node, dict) or id(node) in seen:
        return
    seen.add(id(node))
    for key in [k for k, v in node.items() if k not in _KNOWN and not isinstance(v, dict | list)]:
        del node[key]
    types = _types(node)
    if types is not None and "object" not in types:
        for key in _OBJECT_KEYWORDS:
            node.pop(key, None)
    if isinstance(node.get("pattern"), str):
        node["pattern"] = full_match(node["pattern"])
    if (
        whole
        and isinstance(node.get("properties"), dict)
        and "additionalProperties" not in node
        and not any(k in node for k in _MERGING)
    ):
        patterns = list(node.get("patternProperties") or {})
        for key in node.get("required") or ():
            declared = not isinstance(key, str) or key in node["properties"]
            if not declared and not any(_search(p, key) for p in patterns):
                node["properties"][key] = {}  # a member of the object, as the agent reads it
        node["additionalProperties"] = False
    for key in _OWN_VALUE:
        _rewrite(node.get(key), True, refs, seen)
    for key in _OWN_VALUE_MAPS:
        sub = node.get(key)
        if isinstance(sub, dict):
            for value in sub.values():
                _rewrite(value, True, refs, seen)
    for key in _OWN_VALUE_LISTS:
        for value in node.get(key) or ():
            _rewrite(value, True, refs, seen)
    # Branches stand alone where the parent adds nothing to merge into them.
    alone = set(node) <= _ANNOTATIONS | {"anyOf", "oneOf", "type"}
    for key in ("anyOf", "oneOf"):
        for value in node.get(key) or ():
            _rewrite(value, alone, refs, seen)
    for key in ("allOf", "if", "then", "else", "not"):
        sub = node.get(key)
        for value in sub if isinstance(sub, list) else [sub]:
            _rewrite(value, False, refs, seen)
    for key in ("$defs", "definitions"):
        defs = node.get(key)
        if isinstance(defs, dict):
            for name, value in defs.items():
                _rewrite(value, refs.get(f"#/{key}/{name}", False), refs, seen)


def _plain_refs(root: dict[str, Any]) -> dict[str, bool]:
    """For each local `$ref` target: is every reference to it a node of its own (the `$ref`
    with annotations only) at a place where nothing merges into it?"""
    out: dict[str, bool] = {}

    def visit(node: Any, whole: bool) -> None:
        if isinstance(node, list):
            for item in node:
                visit(item, whole)
            return
        if not isinstance(node, dict):
            return
        ref = node.get("$ref")
        if isinstance(ref, str):
            plain = whole and set(node) <= _ANNOTATIONS | {"$ref"}
            out[ref] = out.get(ref, True) and plain
        alone = set(node) <= _ANNOTATIONS | {"anyOf", "oneOf", "type"}
        for key, value in node.items():
            if key in _OWN_VALUE or key in _OWN_VALUE_LISTS:
                visit(value, True)
            elif key in _OWN_VALUE_MAPS and isinstance(value, dict):
                for sub in value.values():
                    visit(sub, True)
            elif key in ("anyOf", "oneOf"):
                visit(value, alone)
            elif key in ("$defs", "definitions") and isinstance(value, dict):
                for sub in value.values():
                    visit(sub, True)  # a definition's insides; its root counts where used
            elif isinstance(value, (dict, list)) and key not in (
                "enum",
                "const",
                "examples",
                "default",
            ):
                visit(value, False)

    visit(root, True)
    return {ref: plain for ref, plain in out.items() if ref.startswith("#/")}


def full_match(pattern: str) -> str:
    """`pattern` (searched, as the standard reads it) written as a whole-string match, where
    that can be done exactly; else as it is."""
    starts, ends, inner, top_alt = _anchors(pattern)
    if inner:
        return pattern
    if starts and ends:
        return pattern
    if top_alt and (starts or ends):
        return pattern
    body = pattern[1 if starts else 0 : len(pattern) - 1 if ends else len(pattern)]
    head = "^" if starts else "^[\\s\\S]*"
    tail = "$" if ends else "[\\s\\S]*$"
    return f"{head}(?:{body}){tail}"


def _anchors(pattern: str) -> tuple[bool, bool, bool, bool]:
    """(anchored at the start, at the end, an anchor anywhere else, a `|` outside groups)."""
    positions: list[int] = []
    top_alt = False
    depth = 0
    i, n = 0, len(pattern)
    in_class = False
    while i < n:
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            if c == "]":
                in_class = False
        elif c == "[":
            in_class = True
            if pattern[i + 1 : i + 2] == "^":
                i += 1
            if pattern[i + 1 : i + 2] == "]":
                i += 1
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c in "^$":
            positions.append(i)
        elif c == "|" and depth == 0:
            top_alt = True
        i += 1
    starts = 0 in positions and pattern[0] == "^"
    ends = (n - 1) in positions and pattern[-1] == "$"
    inner = any(p not in (0, n - 1) for p in positions) or (
        (0 in positions and pattern[0] == "$") or ((n - 1) in positions and pattern[-1] == "^")
    )
    return starts, ends, inner, top_alt
