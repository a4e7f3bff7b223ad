"""The built-in call formats, by name, and how one is recognised from a chat template.

Detection renders an assistant turn holding one probe call through the model's chat template
(`sdk.backends.transformers.detect_call_format`) and asks each format, most specific first,
whether its parser finds exactly that call in the text: the template itself says how the model
was trained to write calls. Templates that render no call (SmolLM2's) get Hermes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sdk.decoding.formats._base import CallFormat, format_traits
from sdk.decoding.formats.functiongemma import FUNCTIONGEMMA
from sdk.decoding.formats.harmony import HARMONY
from sdk.decoding.formats.hermes import HERMES
from sdk.decoding.formats.json_formats import GRANITE, LLAMA3_JSON, MISTRAL_LIST
from sdk.decoding.formats.named import DEEPSEEK_V3, MISTRAL_ARGS
from sdk.decoding.formats.pythonic import PYTHONIC
from sdk.decoding.formats.xml_params import QWEN_XML
from sdk.errors import ConfigError

__all__ = [
    "FORMATS",
    "PROBE_ARGUMENTS",
    "PROBE_NAME",
    "REASONING_MARKERS",
    "format_from_rendering",
    "get_format",
    "reasoning_from_template",
]

# Most specific first: a format whose markers are unique before the bare JSON object.
FORMATS: Mapping[str, CallFormat] = {
    f.name: f
    for f in (
        HERMES,
        QWEN_XML,
        MISTRAL_ARGS,
        MISTRAL_LIST,
        GRANITE,
        DEEPSEEK_V3,
        LLAMA3_JSON,
        PYTHONIC,
        FUNCTIONGEMMA,
        HARMONY,
    )
}

PROBE_NAME = "sdk_probe_tool_x7"
PROBE_ARGUMENTS: Mapping[str, Any] = {"sdk_probe_a": 1, "sdk_probe_b": "x"}

REASONING_MARKERS: tuple[tuple[str, str], ...] = (("<think>", "</think>"),)
"""Reasoning spans recognised in chat templates (Qwen3, DeepSeek-R1 and its distills, ...)."""


def get_format(name: str) -> CallFormat:
    """A built-in format by name (`FORMATS`)."""
    try:
        return FORMATS[name]
    except KeyError:
        raise ConfigError(
            f"call_format={name!r}: expected 'auto', a ToolCallFormat or one of {sorted(FORMATS)}"
        ) from None


def format_from_rendering(text: str) -> CallFormat | None:
    """The format whose parser finds the probe call (`PROBE_NAME` with `PROBE_ARGUMENTS`) in
    `text`, a chat template's rendering of a conversation holding it; None if none does."""
    for fmt in FORMATS.values():
        try:
            calls = (format_traits(fmt).find_calls or fmt.parse_calls)(text)
        except Exception:  # noqa: BLE001 - a parser meeting foreign text finds nothing
            continue
        if any(c.name == PROBE_NAME and c.arguments == PROBE_ARGUMENTS for c in calls):
            return fmt
    return None


def reasoning_from_template(source: str) -> tuple[str, str] | None:
    """The reasoning markers a chat template's source handles, if any."""
    for start, end in REASONING_MARKERS:
        if start in source and end in source:
            return start, end
    return None
