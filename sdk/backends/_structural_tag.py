"""`constraint="structural_tag"`: a turn's calls as the structural tag vLLM and SGLang hand to
XGrammar (`response_format={"type": "structural_tag", "format": ...}`).

The text is free until the format's opener; a call is then one of the turn's tools, its
arguments under the tool's parameter schema. XGrammar reads one JSON Schema construct
differently from the standard: an object whose `required` keys are not declared in
`properties` accepts only `{}` there (the keys must be present: BFCL's `parallel_29` declares
`population` so, and every call of it was refused; found by `python -m sdk.bench servers`). The
schemas sent declare such keys, with the schema the standard gives them (`additionalProperties`,
or anything), which means the same thing and reads the same there.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sdk.decoding.generate import TurnRequest
    from sdk.decoding.turn_grammar import TurnGrammar

__all__ = [
    "declare_open_objects",
    "declare_required",
    "legacy_structural_tag",
    "structural_tag_for",
]

_SUBSCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
_SUBSCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SUBSCHEMAS = ("items", "additionalProperties", "not", "if", "then", "else", "contains",
               "propertyNames", "unevaluatedProperties", "unevaluatedItems")  # fmt: skip


def _subschemas(node: dict[str, Any]) -> Iterator[Any]:
    """The schemas directly inside `node` (its applicators' and containers' subschemas)."""
    for k in _SUBSCHEMAS:
        yield node.get(k)
    for k in _SUBSCHEMA_LISTS:
        yield from node.get(k) or ()
    for k in _SUBSCHEMA_MAPS:
        sub = node.get(k)
        if isinstance(sub, dict):
            yield from sub.values()


def declare_required(schema: Any) -> Any:
    """A copy of `schema` in which every object's `required` keys are declared in
    `properties`: with `additionalProperties`' schema where it is one (that is what applies to
    an undeclared key), else `{}`; left alone where a `patternProperties` pattern may match
    the key (both would apply: declaring it changes nothing) or `additionalProperties` is
    false (the schema admits no such object either way)."""
    out = copy.deepcopy(schema)
    _declare(out)
    return out


def _declare(node: Any) -> None:
    if not isinstance(node, dict):
        return
    required = node.get("required")
    extra = node.get("additionalProperties", True)
    if isinstance(required, list) and extra is not False:
        props = node.setdefault("properties", {})
        patterns = list(node.get("patternProperties") or {})
        if isinstance(props, dict):
            for key in required:
                if not isinstance(key, str) or key in props:
                    continue
                if any(re.search(p, key) for p in patterns):
                    continue
                props[key] = copy.deepcopy(extra) if isinstance(extra, dict) else {}
    for sub in _subschemas(node):
        _declare(sub)


def declare_open_objects(schema: Any) -> Any:
    """A copy of `schema` in which every object schema without `additionalProperties` says
    `"additionalProperties": true`: the standard's default, so no instance changes validity.
    XGrammar's JSON Schema converter, which vLLM and SGLang run, reads a missing
    `additionalProperties` as false (its strict mode): it refused 46 valid MaskBench
    instances, 13 with the objects sent open (`python -m sdk.bench servers --targets
    xgrammar-json`). Left as it is where `unevaluatedProperties` appears: an explicit `true`
    would count every key as evaluated there."""
    out = copy.deepcopy(schema)
    if "unevaluatedProperties" not in json.dumps(out):
        _open(out)
    return out


def _open(node: Any) -> None:
    if not isinstance(node, dict):
        return
    kind = node.get("type")
    is_object = (
        kind == "object"
        or (isinstance(kind, list) and "object" in kind)
        or any(k in node for k in ("properties", "required", "patternProperties"))
    )
    if is_object and "additionalProperties" not in node:
        node["additionalProperties"] = True
    for sub in _subschemas(node):
        _open(sub)


# Assertions that only ever take instances away: a schema without them admits a superset.
_RESTRICTING = (
    "not", "uniqueItems", "if", "then", "else", "dependentSchemas", "dependentRequired",
    "dependencies", "contains", "minContains", "maxContains", "propertyNames", "format",
)  # fmt: skip


def looser_schema(schema: Any) -> Any:
    """A copy of `schema` without the assertions servers' JSON Schema compilers most often
    refuse (llguidance: `not`, `oneOf`, `uniqueItems`, an unknown `format`, ...): each dropped (`oneOf` read as
    `anyOf`), so every instance valid before stays valid. The remote backend sends it after a
    server refused the schema, and validates the reply against the real one. Unchanged where
    `unevaluatedProperties`/`unevaluatedItems` appear (what subschemas evaluate matters there)."""
    out = copy.deepcopy(schema)
    text = json.dumps(out)
    if "unevaluatedProperties" not in text and "unevaluatedItems" not in text:
        _loosen(out)
    return out


def _loosen(node: Any) -> None:
    if not isinstance(node, dict):
        return
    for key in _RESTRICTING:
        node.pop(key, None)
    if "oneOf" in node:
        one_of = node.pop("oneOf")
        if "anyOf" in node:
            node.setdefault("allOf", []).append({"anyOf": one_of})
        else:
            node["anyOf"] = one_of
    for sub in _subschemas(node):
        _loosen(sub)


def structural_tag_for(
    request: TurnRequest, grammar: TurnGrammar, parallel_tool_calls: bool = True
) -> dict[str, Any] | None:
    """The turn's calls as an XGrammar structural tag: any text until the format's opener, then
    the calls as the format writes them. Each call is a tag: its begin the call's text up to
    the arguments, its content the tool's parameter schema (`declare_required`) where the
    format writes JSON arguments, else the arguments' grammar in the format's surface (EBNF,
    the GBNF export), its end the rest of the call. Formats that write a turn's calls in one
    envelope (a list after a marker) make the envelope the tag and its calls tags with a
    separator; a format whose reply is calls or text (pythonic) takes any text or the
    envelope. `"required"` and a named tool need at least one call; parallel calls off stops
    after the first. None where the turn offers no call. Raises `ConfigError` for a format
    whose calls have no such form."""
    from sdk.decoding.formats import CallFormat, format_traits

    if grammar.mode == "none" or not grammar.tool_names:
        return None
    fmt = request.fmt
    traits = format_traits(fmt)
    tags = [
        _call_tag(fmt, spec.to_openai()["function"], traits)
        for spec in request.tools
        if spec.to_openai()["function"]["name"] in grammar.tool_names
    ]
    required = grammar.mode == "required"
    single = not parallel_tool_calls
    envelope = getattr(type(fmt), "calls_rule", CallFormat.calls_rule) is not CallFormat.calls_rule
    first = _before_calls(traits, grammar)
    if not envelope:
        return _structural(_triggered([fmt.opener], tags, required, single), first)
    pre, sep, post = _envelope_parts(fmt)
    inner = {
        "type": "tags_with_separator",
        "tags": tags,
        "separator": sep,
        "at_least_one": True,
        "stop_after_first": single,
    }
    outer = {"type": "tag", "begin": pre, "content": inner, "end": post}
    if traits.whole_reply:  # calls or text, never both
        if required:
            return _structural(outer, first)
        return _structural({"type": "or", "elements": [outer, {"type": "any_text"}]}, first)
    return _structural(_triggered([fmt.opener], [outer], required, single), first)


def _structural(fmt: dict[str, Any], first: list[dict[str, Any]]) -> dict[str, Any]:
    if first:
        fmt = {"type": "sequence", "elements": [*first, fmt]}
    return {"type": "structural_tag", "format": fmt}


def _before_calls(traits: Any, grammar: TurnGrammar) -> list[dict[str, Any]]:
    """What the turn may write before its calls: the format's reasoning span (its start
    marker left out where the prompt opened it; the span's text is free, a call in it is
    no call), then blanks; or, in a `"required"` turn with a reasoning budget, free text
    until the opener (triggered tags with at least one call take none)."""
    if traits.reasoning:
        start, end = traits.reasoning
        span = [
            {"type": "optional", "content": {"type": "const_string", "value": start}},
            {"type": "any_text"},
            {"type": "const_string", "value": end},
        ]
        return [
            {"type": "optional", "content": {"type": "sequence", "elements": span}},
            {"type": "regex", "pattern": r"\s*"},
        ]
    if grammar.text_first:
        return [{"type": "any_text"}]
    return []


def _triggered(
    triggers: list[str], tags: list[dict[str, Any]], required: bool, single: bool
) -> dict[str, Any]:
    return {
        "type": "triggered_tags",
        "triggers": triggers,
        "tags": tags,
        "at_least_one": required,
        "stop_after_first": single,
    }


_HOLE = "structural_hole"


def _call_tag(fmt: Any, function: dict[str, Any], traits: Any) -> dict[str, Any]:
    """One tool's call as a tag (see `structural_tag_for`)."""
    name, schema = function["name"], function["parameters"]
    if traits.body == "named":
        begin, end = _around(fmt.named_call_rule(name, _HOLE), fmt)
    else:
        before, after = _around(fmt.call_rule(_HOLE), fmt)
        body = fmt.body_text(name, {})
        cut = body.rindex("{}")  # the empty arguments object: what the schema fills
        begin, end = before + body[:cut], body[cut + 2 :] + after
    json_args = traits.surface == "json" and not (traits.body != "named" and traits.extra_members)
    if json_args:
        content: dict[str, Any] = {
            "type": "json_schema",
            "json_schema": declare_open_objects(declare_required(schema)),
        }
    else:
        from sdk.decoding.turn_grammar import arguments_lark
        from sdk.engine.gbnf import lark_to_gbnf

        lark = arguments_lark(schema, fmt, extras=traits.body != "named")
        content = {"type": "grammar", "grammar": lark_to_gbnf(lark)}
    return {"type": "tag", "begin": begin, "content": content, "end": end}


_LITERAL = re.compile(r'\s*("(?:\\.|[^"\\])*")')


def _no_form(fmt: Any, text: str) -> Exception:
    from sdk.errors import ConfigError

    return ConfigError(
        f"constraint='structural_tag': the calls of {type(fmt).__name__} are not literal text "
        f"around their arguments ({text.strip()!r}); use a grammar constraint ('gbnf', 'lark')"
    )


def _literals(text: str, fmt: Any) -> str:
    """The text a run of Lark string literals spells (ConfigError for anything else)."""
    out, at = [], 0
    while at < len(text.rstrip()):
        m = _LITERAL.match(text, at)
        if m is None:
            raise _no_form(fmt, text)
        out.append(json.loads(m.group(1)))
        at = m.end()
    return "".join(out)


def _around(rule: str, fmt: Any) -> tuple[str, str]:
    """The literal text before and after the one hole of a format's call rule."""
    before, hole, after = rule.partition(_HOLE)
    if not hole or _HOLE in after:
        raise _no_form(fmt, rule)
    return _literals(before, fmt), _literals(after, fmt)


def _envelope_parts(fmt: Any) -> tuple[str, str, str]:
    """The text before a turn's calls, between two of them and after them, from the
    format's `calls_rule` (`PRE call (SEP call)* POST`)."""
    rule = fmt.calls_rule(_HOLE, True)
    m = re.fullmatch(
        rf"(?P<pre>.*?){_HOLE}\s*\((?P<sep>.*?){_HOLE}\s*\)\*(?P<post>.*)", rule.strip(), re.S
    )
    if m is None:
        raise _no_form(fmt, rule)
    return _literals(m["pre"], fmt), _literals(m["sep"], fmt), _literals(m["post"], fmt)


def legacy_structural_tag(tag: dict[str, Any], fmt: Any) -> dict[str, Any]:
    """`tag` in the shape older SGLang takes (`structures` of begin, JSON Schema, end, and
    `triggers`): any text, and after a trigger one of the structures. Looser than `tag`: at
    least one call, one call at most and a reasoning span first are not said (the agent
    checks them after the turn). `ConfigError` where a call is not one JSON object after a
    trigger (an envelope of several calls, arguments in another syntax)."""
    node = tag["format"]
    if node["type"] == "sequence":  # what may come first is any text there
        node = node["elements"][-1]
    tags = node.get("tags") if node["type"] == "triggered_tags" else None
    if not tags or any(t["type"] != "tag" or t["content"]["type"] != "json_schema" for t in tags):
        from sdk.errors import ConfigError

        raise ConfigError(
            f"tag_shape='legacy' holds one JSON call per trigger; the calls of "
            f"{type(fmt).__name__} are not (an envelope of several calls, or arguments that "
            "are not JSON): use tag_shape='format' or a grammar constraint"
        )
    structures = [
        {"begin": t["begin"], "schema": t["content"]["json_schema"], "end": t["end"]} for t in tags
    ]
    return {"type": "structural_tag", "structures": structures, "triggers": node["triggers"]}
