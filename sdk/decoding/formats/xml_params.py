"""Qwen3-Coder's XML calls: a function block with one `<parameter=NAME>` block per argument.

    <tool_call>
    <function=get_weather>
    <parameter=city>
    Paris
    </parameter>
    <parameter=days>
    2
    </parameter>
    </function>
    </tool_call>

String parameters are raw text (no quotes, no escapes), the others JSON. Which is which
depends on the tool's schema, so the raw texts are kept in the parsed call and typed by
`resolve_arguments` once the tool is known (the agent does this); without a schema a value
that reads as JSON is taken as JSON. The grammar comes from the schema compiler's XML surface
(`compile_schema(surface="xml")`)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from sdk.decoding.formats._base import CallFormat, ParsedCall, lark_literal

__all__ = ["QWEN_XML", "QwenXmlFormat", "is_raw_text_parameter"]


def _resolve(schema: Any, defs: Mapping[str, Any]) -> Any:
    while isinstance(schema, dict) and isinstance(schema.get("$ref"), str):
        ref = schema["$ref"]
        name = ref.rsplit("/", 1)[-1]
        if not ref.startswith(("#/$defs/", "#/definitions/")) or name not in defs:
            return schema
        schema = defs[name]
    return schema


def _string_only(schema: Any, defs: Mapping[str, Any]) -> tuple[bool, bool]:
    """(only strings [and null], null allowed) for a property schema."""
    schema = _resolve(schema, defs)
    if not isinstance(schema, dict):
        return False, False
    if "enum" in schema or "const" in schema:
        values = schema.get("enum", [schema.get("const")])
        ok = bool(values) and all(isinstance(v, str) or v is None for v in values)
        return ok, None in values
    for key in ("anyOf", "oneOf"):
        if key in schema and len(schema) <= 3:  # the union plus title/description
            parts = [_resolve(s, defs) for s in schema[key]]
            nulls = [p for p in parts if isinstance(p, dict) and p.get("type") == "null"]
            rest = [p for p in parts if p not in nulls]
            checks = [_string_only(p, defs) for p in rest]
            return bool(rest) and all(c[0] for c in checks), bool(nulls)
    kind = schema.get("type")
    kinds = set(kind) if isinstance(kind, list) else {kind}
    return kinds <= {"string", "null"} and "string" in kinds, "null" in kinds


def is_raw_text_parameter(schema: Any, defs: Mapping[str, Any]) -> bool:
    """Whether a parameter with this schema is written as raw text (strings only)."""
    return _string_only(schema, defs)[0]


class QwenXmlFormat(CallFormat):
    """`<tool_call>\\n<function=NAME>\\n<parameter=KEY>\\nVALUE\\n</parameter>\\n...`."""

    name = "qwen_xml"
    body = "named"
    opener = "<tool_call>"
    closer: str | None = "</tool_call>"
    surface = "xml"
    reserved = ("\n</parameter>",)  # raw values never hold it (the compiler's XML surface)
    family = "Qwen3-Coder, Qwen3 2507 instruct models with XML tool calls"
    spec = "Qwen3-Coder chat template and tool parser"
    _CALL = re.compile(
        r"<tool_call>\s*<function=([^>\n]+)>\n?(.*?)</function>\s*</tool_call>", re.DOTALL
    )
    _PARAM = re.compile(r"<parameter=([^>\n]+)>\n(.*?)\n</parameter>", re.DOTALL)

    def named_call_rule(self, name: str, args_rule: str) -> str:
        head = f"{self.opener}\n<function={name}>\n"
        return f"{lark_literal(head)} {args_rule} {lark_literal('</function>' + chr(10) + (self.closer or ''))}"

    def _value(self, value: Any) -> str:
        if isinstance(value, str):
            return value
        return self.style.dumps(value)

    def render_call(self, name: str, arguments: Any) -> str:
        if isinstance(arguments, dict):
            params = "".join(
                f"<parameter={k}>\n{self._value(v)}\n</parameter>\n" for k, v in arguments.items()
            )
        else:  # a placeholder (the tools prompt's example)
            params = f"<parameter=example_parameter>\n{arguments}\n</parameter>\n"
        return f"{self.opener}\n<function={name}>\n{params}</function>\n{self.closer}"

    def parse_calls(self, text: str) -> list[ParsedCall]:
        calls: list[ParsedCall] = []
        for m in self._CALL.finditer(text):
            texts = {k: v for k, v in self._PARAM.findall(m.group(2))}
            args = {k: _guess(v) for k, v in texts.items()}
            calls.append(
                ParsedCall(m.group(1), args, json.dumps(args, ensure_ascii=False), texts=texts)
            )
        return calls

    def resolve_arguments(self, call: ParsedCall, schema: Mapping[str, Any]) -> ParsedCall:
        """`call` with its parameters typed by the tool's schema: raw text for string
        parameters (`null` is None where the schema allows it), JSON for the rest."""
        if call.texts is None:
            return call
        defs = {**schema.get("definitions", {}), **schema.get("$defs", {})}
        props = schema.get("properties", {})
        args: dict[str, Any] = {}
        for k, text in call.texts.items():
            only, nullable = _string_only(props.get(k, {}), defs)
            if only:
                args[k] = None if nullable and text == "null" else text
            else:
                args[k] = _guess(text)
        return ParsedCall(call.name, args, json.dumps(args, ensure_ascii=False), texts=call.texts)


def _guess(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


QWEN_XML = QwenXmlFormat()
