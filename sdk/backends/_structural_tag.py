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
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sdk.decoding.generate import TurnRequest
    from sdk.decoding.turn_grammar import TurnGrammar

__all__ = ["declare_required", "structural_tag_for"]

_SUBSCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
_SUBSCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SUBSCHEMAS = ("items", "additionalProperties", "not", "if", "then", "else", "contains",
               "propertyNames", "unevaluatedProperties", "unevaluatedItems")  # fmt: skip


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
    for k in _SUBSCHEMAS:
        _declare(node.get(k))
    for k in _SUBSCHEMA_LISTS:
        for item in node.get(k) or ():
            _declare(item)
    for k in _SUBSCHEMA_MAPS:
        sub = node.get(k)
        if isinstance(sub, dict):
            for item in sub.values():
                _declare(item)


def structural_tag_for(
    request: TurnRequest, grammar: TurnGrammar, parallel_tool_calls: bool = True
) -> dict[str, Any] | None:
    """The turn's calls as an XGrammar structural tag: any text until the format's opener, then
    one tag per tool the turn may call, its begin the call's text up to the arguments (as the
    format writes it), its content the tool's parameter schema (`declare_required`), its end
    the rest of the call. `"required"` and a named tool need at least one call; parallel calls
    off stops after the first. None where the turn offers no call."""
    if grammar.mode == "none" or not grammar.tool_names:
        return None
    fmt = request.fmt
    tags = []
    for spec in request.tools:
        function = spec.to_openai()["function"]
        if function["name"] not in grammar.tool_names:
            continue
        text = fmt.render_call(function["name"], {})
        cut = text.rindex("{}")  # the empty arguments object: what the schema fills
        schema = declare_required(function["parameters"])
        tags.append(
            {
                "type": "tag",
                "begin": text[:cut],
                "content": {"type": "json_schema", "json_schema": schema},
                "end": text[cut + 2 :],
            }
        )
    return {
        "type": "structural_tag",
        "format": {
            "type": "triggered_tags",
            "triggers": [fmt.opener],
            "tags": tags,
            "at_least_one": grammar.mode == "required",
            "stop_after_first": not parallel_tool_calls,
        },
    }
