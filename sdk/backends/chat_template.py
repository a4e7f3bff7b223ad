"""Prompts through a model's chat template, and what the template says about tool calls.

Templates that take `tools=` (Qwen, Llama 3.1, Hermes, ...) render the tools themselves and
get tool results as `role: "tool"` messages; for the others (SmolLM2's, for one) the tools are
described in the system prompt in the Hermes style (`ToolCallFormat.tools_prompt`) and results
come back as a user turn in plain words (`tool_result_text`: tags led a model never trained
on tools to answer in markup). Tokenizers without any template (GGUF conversions such as
Gemma-3's) get a built-in Gemma or ChatML one. A probe call rendered through the template
tells which call format and body layout the model was trained on. Any local backend renders
with these; none of it needs torch.
"""

from __future__ import annotations

import json
import logging
import re
from typing import TYPE_CHECKING, Any, cast

from sdk._memo import per_object
from sdk.decoding.call_style import CallStyle
from sdk.decoding.formats import CallFormat, format_traits, prompt_content, tagged_result_text
from sdk.decoding.generate import TurnRequest

if TYPE_CHECKING:
    from sdk.engine.tokenizer import TokenizerIndex

__all__ = [
    "chat_template",
    "detect_call_format",
    "encode_prompt",
    "index_for",
    "probe_call_style",
    "render_probe_call",
    "render_prompt",
    "template_supports_tools",
]

_PROBE_TOOL = {
    "type": "function",
    "function": {
        "name": "sdk_probe_tool_x7",
        "description": "probe",
        "parameters": {"type": "object", "properties": {}},
    },
}


# Templates for tokenizers that ship without one (GGUF conversions often lose it).
_GEMMA_TEMPLATE = (
    "{{ bos_token }}"
    "{% set ns = namespace(sys='') %}"
    "{% if messages and messages[0]['role'] == 'system' %}"
    "{% set ns.sys = messages[0]['content'] + '\n\n' %}{% set messages = messages[1:] %}"
    "{% endif %}"
    "{% for m in messages %}"
    "{{ '<start_of_turn>' + ('model' if m['role'] == 'assistant' else 'user') + '\n' }}"
    "{{ (ns.sys if loop.first else '') + m['content'] + '<end_of_turn>\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<start_of_turn>model\n' }}{% endif %}"
)
_CHATML_TEMPLATE = (
    "{% for m in messages %}"
    "{{ '<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def chat_template(tokenizer: Any) -> str | None:
    """The tokenizer's own template, else a built-in one: Gemma's turn format when the
    vocabulary has `<start_of_turn>`, ChatML otherwise. None: use the tokenizer's."""
    if getattr(tokenizer, "chat_template", None):
        return None
    return _builtin_template(tokenizer)


@per_object
def _builtin_template(tokenizer: Any) -> str:
    # Once per tokenizer: the vocabulary as a dict is 262k entries for Gemma-3, and building
    # it took 0.26-0.38 s of every prompt's rendering.
    vocab = tokenizer.get_vocab()
    return _GEMMA_TEMPLATE if "<start_of_turn>" in vocab else _CHATML_TEMPLATE


def _apply(tokenizer: Any, messages: list[dict[str, Any]], **kwargs: Any) -> str:
    template = chat_template(tokenizer)
    if template is not None:
        kwargs["chat_template"] = template
    return str(
        tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=True, **kwargs
        )
    )


@per_object
def template_supports_tools(tokenizer: Any) -> bool:
    """Whether the chat template renders `tools=` (rendering with and without them differs)."""
    msgs = [{"role": "user", "content": "hi"}]
    try:
        plain = _apply(tokenizer, msgs)
        with_tools = _apply(tokenizer, msgs, tools=[_PROBE_TOOL])
        supported = plain != with_tools and "sdk_probe_tool_x7" in with_tools
    except Exception:  # noqa: BLE001 - any template failure means "no native tools"
        supported = False
    return supported


_PROBE_CALL = re.compile(r'"sdk_probe_a"(\s*:\s*)1(\s*,\s*)"sdk_probe_b"')


@per_object
def render_probe_call(tokenizer: Any) -> tuple[str, ...]:
    """A conversation holding one probe call (`registry.PROBE_NAME`), rendered through the
    model's chat template: once with the arguments as an object, once as a JSON string (what
    DeepSeek's template wants); only renderings that show them. Empty where the template
    renders no calls. The call id has Mistral's 9 characters."""
    from sdk.decoding.formats.registry import PROBE_ARGUMENTS, PROBE_NAME

    out: list[str] = []
    for arguments in (dict(PROBE_ARGUMENTS), json.dumps(dict(PROBE_ARGUMENTS))):
        call = {
            "id": "call00000",
            "type": "function",
            "function": {"name": PROBE_NAME, "arguments": arguments},
        }
        msgs: list[dict[str, Any]] = [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call00000", "name": PROBE_NAME, "content": "ok"},
        ]
        try:
            text = _apply(tokenizer, msgs, tools=[_PROBE_TOOL])
        except Exception:  # noqa: BLE001 - a template that cannot render calls (this way)
            continue
        if "sdk_probe_a" in text:
            out.append(text)
    return tuple(out)


@per_object
def probe_call_style(tokenizer: Any) -> CallStyle:
    """The call-body layout the model's chat template writes in its history.

    An assistant turn with one probe call is rendered through the template; the separators
    between the probe's arguments are the style the model was trained on. Templates that do
    not render calls (SmolLM2's) give `SPACED`, `json.dumps`' and `tojson`'s default.
    """
    from sdk.decoding.call_style import SPACED, as_call_style

    for text in render_probe_call(tokenizer):
        m = _PROBE_CALL.search(text)
        if m is not None:
            return as_call_style((m.group(2), m.group(1)))
    return SPACED


@per_object
def detect_call_format(tokenizer: Any) -> CallFormat:
    """The built-in call format the model's chat template writes calls in (`HERMES` where it
    renders none or none is recognised), with the template's reasoning markers if it has any
    (`<think>`): see `sdk.decoding.formats.registry`."""
    from sdk.decoding.formats import HERMES
    from sdk.decoding.formats.registry import format_from_rendering, reasoning_from_template

    renderings = render_probe_call(tokenizer)
    found = (format_from_rendering(text) for text in renderings)
    fmt = next((f for f in found if f is not None), None)
    if fmt is None:
        fmt = HERMES
        if renderings:  # the template writes calls, in a way no built-in format reads
            logging.getLogger("sdk.agent").warning(
                "the chat template writes tool calls in a format the SDK does not recognise; "
                "using Hermes <tool_call> tags. Pass Agent(call_format=...) (a name from "
                "sdk.decoding.formats.FORMATS, or a ToolCallFormat) to choose"
            )
    source = getattr(tokenizer, "chat_template", None)
    markers = reasoning_from_template(source) if isinstance(source, str) else None
    return fmt.with_reasoning(markers) if markers else fmt


def _fallback_dicts(request: TurnRequest, *, tool_template: bool) -> list[dict[str, Any]]:
    """Messages for templates without tool support, and for tool-trained ones in turns that
    offer no tools: tools in the system prompt, calls as the format writes them
    (`prompt_content`), results as user turns (consecutive results share one turn).

    A tool-trained template's results are `<tool_response>` tags, as it renders them itself;
    other templates get the format's `tool_result_text` (plain words)."""
    fmt = request.fmt
    out: list[dict[str, Any]] = []
    for m in request.messages:
        if m.role == "tool":
            name = m.name or ""
            text = (
                tagged_result_text(name, m.content)
                if tool_template
                else fmt.tool_result_text(name, m.content)
            )
            if out and out[-1]["role"] == "user" and out[-1].get("_tool_results"):
                out[-1]["content"] += "\n" + text
            else:
                out.append({"role": "user", "content": text, "_tool_results": True})
        else:
            out.append({"role": m.role, "content": prompt_content(m, fmt)})
    if request.tools:
        tools_text = fmt.tools_prompt([t.to_openai() for t in request.tools])
        if out and out[0]["role"] == "system":
            out[0]["content"] = f"{out[0]['content']}\n\n{tools_text}"
        else:
            out.insert(0, {"role": "system", "content": tools_text})
    for d in out:
        d.pop("_tool_results", None)
    return out


def render_prompt(tokenizer: Any, request: TurnRequest) -> str:
    """The prompt text of one assistant turn (generation prompt included)."""
    tool_template = template_supports_tools(tokenizer)
    if request.tools and tool_template:
        history = format_traits(request.fmt).history_dict
        if history is not None:  # the format rebuilds what its template expects
            msgs = [history(m) for m in request.messages]
        else:
            # The content shows the calls (the model's raw text, or the calls of an
            # OpenAI-format turn rendered in its format); don't render them twice.
            msgs = []
            for m in request.messages:
                d = m.to_dict()
                d.pop("tool_calls", None)
                d["content"] = prompt_content(m, request.fmt)
                msgs.append(d)
        return _apply(tokenizer, msgs, tools=[t.to_openai() for t in request.tools])
    return _apply(tokenizer, _fallback_dicts(request, tool_template=tool_template))


def encode_prompt(tokenizer: Any, text: str) -> list[int]:
    # The template already wrote BOS/special tokens where the model wants them.
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def index_for(tokenizer: Any) -> TokenizerIndex:
    """One `TokenizerIndex` per tokenizer: its own where it builds one (`token_index`,
    llama.cpp's), else `from_hf` (cached in memory and on disk)."""
    from sdk.engine.tokenizer import TokenizerIndex

    own = getattr(tokenizer, "token_index", None)
    if callable(own):
        return cast("TokenizerIndex", own())
    return TokenizerIndex.from_hf(tokenizer)
