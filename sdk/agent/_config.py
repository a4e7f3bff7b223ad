"""`Agent(...)` arguments checked at construction: a mistake fails there, with a
`ConfigError` naming the argument, not in the middle of a conversation."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from pydantic import TypeAdapter

from sdk._settings import check_tool_choice
from sdk.decoding.call_style import CallStyle, as_call_style
from sdk.decoding.formats import ToolCallFormat, get_format
from sdk.decoding.turn_grammar import format_style
from sdk.errors import ConfigError

ToolChoiceSpec = str | Mapping[str, Any] | Sequence[str | Mapping[str, Any]]
"""A mode, a tool name, an OpenAI `tool_choice` dict, or one of those per turn."""
CallStyleSpec = Literal["auto", "compact", "spaced", "flexible"] | CallStyle | tuple[str, str]


def tool_choices(tool_choice: Any, tools: Mapping[str, Any]) -> tuple[str, ...]:
    """One choice per turn, the last repeating: a single "required" or tool name applies to
    the first turn only (then "auto"), so forcing calls can end."""
    if isinstance(tool_choice, str | Mapping):
        first = check_tool_choice(tool_choice)
        choices: tuple[str, ...] = (first,) if first in ("auto", "none") else (first, "auto")
    elif isinstance(tool_choice, Iterable):
        choices = tuple(check_tool_choice(c) for c in tool_choice)
    else:
        choices = (check_tool_choice(tool_choice),)
    if not choices:
        raise ConfigError("tool_choice must not be empty")
    for c in choices:
        if c not in ("auto", "required", "none") and c not in tools:
            raise ConfigError(
                f"tool_choice={c!r} is neither a mode ('auto', 'required', 'none') nor an "
                f"offered tool {sorted(tools)}"
            )
        if c == "required" and not tools:
            raise ConfigError('tool_choice="required" needs at least one tool')
    return choices


def check_call_format(call_format: Any) -> ToolCallFormat | str:
    if isinstance(call_format, str):
        if call_format != "auto":
            get_format(call_format)  # a ConfigError naming the known formats
    elif not isinstance(call_format, ToolCallFormat):
        raise ConfigError(
            f"call_format={call_format!r}: expected 'auto', a format name or a ToolCallFormat"
        )
    return call_format


def call_style_of(call_style: CallStyleSpec, call_format: ToolCallFormat | str) -> CallStyle | None:
    """The body layout asked for (None: the model's own), checked against the format."""
    style = None if call_style == "auto" else as_call_style(call_style)
    if (
        style is not None
        and not isinstance(call_format, str)
        and not hasattr(call_format, "with_style")
        and style != format_style(call_format)
    ):
        raise ConfigError(
            f"call_style={call_style!r}: the format {call_format.name!r} has no "
            "with_style(); lay its calls out in the format itself"
        )
    return style


def output_adapter(output_type: Any) -> tuple[TypeAdapter[Any] | None, dict[str, Any] | None]:
    """The validator and JSON Schema of a typed final reply (None, None for `str`)."""
    if output_type is None or output_type is str:
        return None, None
    try:
        adapter: TypeAdapter[Any] = TypeAdapter(output_type)
        return adapter, adapter.json_schema()
    except Exception as exc:  # PydanticSchemaGenerationError, TypeError, ...
        raise ConfigError(
            f"output_type={output_type!r}: not a type Pydantic can validate and describe "
            f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"
        ) from exc


def check_text(name: str, value: Any) -> str | None:
    """A text argument (`system_prompt`, a run's prompt): a str or None."""
    if value is not None and not isinstance(value, str):
        raise ConfigError(f"{name}={value!r}: expected a str or None")
    return value


def check_call_bias(bias: Any) -> float | Literal["auto"] | None:
    if bias != "auto" and bias is not None:
        if isinstance(bias, bool) or not isinstance(bias, int | float):
            raise ConfigError(f"auto_call_bias={bias!r}: expected a float, 'auto' or None")
        if not math.isfinite(bias):
            raise ConfigError(f"auto_call_bias={bias!r}: expected a finite float")
    return bias


def check_processors(processors: Any) -> tuple[Any, ...]:
    """`history_processors`: a sequence of callables."""
    if isinstance(processors, str | bytes) or not isinstance(processors, Iterable):
        raise ConfigError(f"history_processors={processors!r}: expected a list of callables")
    out = tuple(processors)
    for p in out:
        if not callable(p):
            raise ConfigError(f"history_processors: {p!r} is not callable")
    return out
