"""Pythonic calls (Llama 3.2's small models, Llama 4): the reply is a Python list of calls,
`[get_weather(city="Paris", days=2), add(a=1, b=2)]`, keyword arguments as Python literals.

The arguments grammar is the schema compiler's Python surface (`compile_schema(surface=
"python")`): keyword arguments in declaration order, `None`/`True`/`False`, strings in double
quotes with the escapes Python and JSON read alike. Parsing uses `ast` (never `eval`)."""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Sequence
from typing import Any

from sdk._ast_lock import AST_LOCK
from sdk.decoding.formats._base import CallFormat, ParsedCall, lark_literal

__all__ = ["PYTHONIC", "PythonicFormat", "python_literal"]


def python_literal(value: Any, separators: tuple[str, str] = (", ", ": ")) -> str:
    """`value` (JSON data) as the Python literal the grammar accepts."""
    item, key = separators
    if value is None or isinstance(value, bool):
        return repr(value)
    if isinstance(value, dict):
        inner = item.join(
            json.dumps(k, ensure_ascii=False) + key + python_literal(v, separators)
            for k, v in value.items()
        )
        return "{" + inner + "}"
    if isinstance(value, list | tuple):
        return "[" + item.join(python_literal(v, separators) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


class PythonicFormat(CallFormat):
    """`[name(key=value, ...), ...]` as the whole reply (text replies never start with `[`)."""

    name = "pythonic"
    body = "named"
    opener = "["
    surface = "python"
    whole_reply = True
    family = "Llama 3.2 (1B, 3B), Llama 4"
    spec = "Meta Llama 3.2 / Llama 4 prompt formats: pythonic tool calls"

    def _seps(self) -> tuple[str, str]:
        return self.style.separators or (", ", ": ")

    def named_call_rule(self, name: str, args_rule: str) -> str:
        return f"{lark_literal(name)} {args_rule}"

    def calls_rule(self, call: str, parallel: bool) -> str:
        item = self._seps()[0]
        rest = f" ({lark_literal(item)} {call})*" if parallel and self.parallel else ""
        return f'"[" {call}{rest} "]"'

    def render_call(self, name: str, arguments: Any) -> str:
        return self.render_calls([(name, arguments)])

    def _one(self, name: str, arguments: Any) -> str:
        item, key = self._seps()
        if isinstance(arguments, dict):
            kwargs = item.join(
                f"{k}={python_literal(v, (item, key))}" for k, v in arguments.items()
            )
        else:  # a placeholder (the tools prompt's example)
            kwargs = str(arguments)
        return f"{name}({kwargs})"

    def render_calls(self, calls: Sequence[tuple[str, Any]]) -> str:
        item = self._seps()[0]
        return "[" + item.join(self._one(n, a) for n, a in calls) + "]"

    def tools_prompt(self, tools: Any) -> str:
        text = super().tools_prompt(tools)
        return text.replace(
            "To call a function, write it like this:",
            "To call functions, reply with nothing but a Python list of calls, like this:",
        ).replace("<function-name>(<args-dict>)", "func_name(param_name=param_value)")

    _LIST = re.compile(r"\[[A-Za-z_][\w.]*\(.*?\)\]")

    def find_calls(self, text: str) -> list[ParsedCall]:
        """Calls anywhere in `text` (a rendered chat template), for detection."""
        found: list[ParsedCall] = []
        for m in self._LIST.finditer(text):
            found += self.parse_calls(m.group(0))
        return found

    def parse_calls(self, text: str) -> list[ParsedCall]:
        body = text.strip()
        if not body.startswith(self.opener):
            return []
        try:
            with AST_LOCK:
                tree = ast.parse(body, mode="eval").body
        except SyntaxError as exc:
            return [ParsedCall("", None, body, f"invalid pythonic call list: {exc.msg}")]
        if not isinstance(tree, ast.List) or not all(isinstance(e, ast.Call) for e in tree.elts):
            return []  # a list that holds no calls is not a call (a typed list reply)
        calls: list[ParsedCall] = []
        for node in tree.elts:
            assert isinstance(node, ast.Call)
            name = ast.unparse(node.func)
            raw = ast.unparse(node)
            if node.args or any(k.arg is None for k in node.keywords):
                calls.append(ParsedCall(name, None, raw, "only keyword arguments are allowed"))
                continue
            try:
                args = {str(k.arg): ast.literal_eval(k.value) for k in node.keywords}
            except ValueError as exc:
                calls.append(ParsedCall(name, None, raw, f"not a literal argument: {exc}"))
                continue
            calls.append(ParsedCall(name, args, json.dumps(args, ensure_ascii=False)))
        return calls


PYTHONIC = PythonicFormat()
