"""Chat templates rendered as transformers renders them, without importing transformers.

`LlamaCppModel` reads its template from the GGUF and never needs a transformers tokenizer;
importing transformers' renderer alone (`transformers.utils.chat_template_utils`) cost ~0.4 s
of load and ~20 MB of resident memory on that path. This module gives templates what
transformers gives them (checked output for output against it in
`tests/test_jinja_renderer.py`): a sandboxed Jinja environment with `trim_blocks` and
`lstrip_blocks`, loop controls, the `{% generation %}` tag (its body rendered as is), a `tojson`
filter that does not escape HTML, `raise_exception`, `strftime_now`, a `dict` and a
`namespace` that cannot reach Python internals; messages as plain JSON data, keys whose value
is None dropped, reasoning under every name templates read it by.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from datetime import datetime
from functools import lru_cache
from typing import Any

__all__ = ["normalize_messages", "render_chat"]

# Names a message's reasoning is passed under (templates read `reasoning_content`, gpt-oss's
# read `thinking`).
_REASONING = ("reasoning_content", "thinking", "reasoning")


def normalize_messages(conversation: Any) -> list[dict[str, Any]]:
    """Messages as plain JSON data (`_plain`: pydantic models and dataclasses dumped), keys
    whose value is None dropped: templates handle a missing key and may render a None as
    "None"."""
    out = []
    for message in _plain(conversation):
        if not isinstance(message, dict):
            raise TypeError(f"chat messages must be dicts, got {message!r}")
        out.append({k: v for k, v in message.items() if v is not None})
    return out


def render_chat(
    conversations: list[list[dict[str, Any]]],
    tools: list[dict[str, Any]] | None = None,
    chat_template: str = "",
    add_generation_prompt: bool = False,
    **kwargs: Any,
) -> tuple[list[str], list[Any]]:
    """Each conversation rendered by `chat_template` (the shape of transformers'
    `render_jinja_template`: the texts, and no generation indices)."""
    template = _compile(chat_template)
    tool_data = _plain(tools)
    extra = _plain(kwargs)
    texts = []
    for chat in conversations:
        messages = [_with_reasoning(m) for m in _plain(chat)]
        texts.append(
            template.render(
                messages=messages,
                tools=tool_data,
                documents=None,
                add_generation_prompt=add_generation_prompt,
                **extra,
            )
        )
    return texts, []


def _plain(value: Any) -> Any:
    """Only plain JSON types reach the sandbox: subclasses lose their methods, other objects
    become a `<TypeName>` placeholder."""
    if value is None or type(value) in (str, int, float, bool):
        return value
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return int.__int__(value)
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, Mapping):
        return {_plain(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_plain(v) for v in value)
    item = getattr(value, "item", None)  # NumPy scalars
    if callable(item) and type(value).__module__ == "numpy":
        return _plain(item())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if callable(getattr(value, "model_dump", None)):
        return _plain(value.model_dump())
    return f"<{type(value).__name__}>"


def _with_reasoning(message: Any) -> Any:
    if not isinstance(message, dict):
        raise TypeError(f"chat messages must be dicts, got {message!r}")
    reasoning = next((message[k] for k in _REASONING if message.get(k) is not None), None)
    if reasoning is None:
        return message
    return {"thinking": reasoning, **message, "reasoning_content": reasoning}


@lru_cache(maxsize=16)
def _compile(chat_template: str) -> Any:
    import jinja2
    import jinja2.ext
    import jinja2.nodes
    import jinja2.utils
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class Generation(jinja2.ext.Extension):
        """`{% generation %}...{% endgeneration %}` (training masks): its body, as is."""

        tags = {"generation"}  # noqa: RUF012 - jinja's own class attribute

        def parse(self, parser: Any) -> Any:
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            call = self.call_method("_body")
            return jinja2.nodes.CallBlock(call, [], [], body).set_lineno(lineno)

        def _body(self, caller: Any) -> str:
            return str(caller())

    class Namespace(jinja2.utils.Namespace):
        """`namespace(...)` that refuses underscore names (no way to CPython internals)."""

        def __init__(*args: Any, **kwargs: Any) -> None:
            self, rest = args[0], args[1:]
            attrs = dict(*rest, **kwargs)
            for name in attrs:
                _check(name)
            jinja2.utils.Namespace.__init__(self, attrs)

        def __setitem__(self, name: str, value: Any) -> None:
            _check(name)
            jinja2.utils.Namespace.__setitem__(self, name, value)

    def _check(name: Any) -> None:
        if isinstance(name, str) and name.startswith("_"):
            raise jinja2.exceptions.SecurityError(
                f"chat templates cannot set underscore attributes on a namespace: {name!r}"
            )

    class Dict:
        """`dict(...)` and `dict.fromkeys(...)`, nothing else of the type."""

        def __call__(self, *args: Any, **kwargs: Any) -> dict[Any, Any]:
            return dict(*args, **kwargs)

        def fromkeys(self, *args: Any, **kwargs: Any) -> dict[Any, Any]:
            return dict.fromkeys(*args, **kwargs)

    def raise_exception(message: str) -> None:
        raise jinja2.exceptions.TemplateError(message)

    def tojson(
        x: Any,
        ensure_ascii: bool = False,
        indent: Any = None,
        separators: Any = None,
        sort_keys: bool = False,
    ) -> str:
        return json.dumps(
            x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
        )

    def strftime_now(fmt: str) -> str:
        return datetime.now().strftime(fmt)

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[Generation, jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    env.globals["dict"] = Dict()
    env.globals["namespace"] = Namespace
    return env.from_string(chat_template)
