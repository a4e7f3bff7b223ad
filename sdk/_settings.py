"""Checks of the agent's settings, made at construction: a mistake is a `ConfigError` that
names the setting, raised where it was made, never an obscure failure mid-run."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sdk.errors import ConfigError

__all__ = [
    "UsageLimits",
    "check_int",
    "check_run_settings",
    "check_sampling",
    "check_tool_choice",
    "check_tools_arg",
]

RUN_SETTINGS = ("max_tokens", "temperature", "top_p", "seed", "decoding")


@dataclass(frozen=True)
class UsageLimits:
    """Caps on one run; reaching one stops it with `UsageLimitExceeded` (checked before each
    model turn and each tool call, and after each turn). None: no cap."""

    total_tokens: int | None = None  # prompt + generated tokens, summed over the turns
    output_tokens: int | None = None  # generated tokens, summed over the turns
    tool_calls: int | None = None  # tool calls executed (validated calls that ran)

    def __post_init__(self) -> None:
        for name in ("total_tokens", "output_tokens", "tool_calls"):
            value = getattr(self, name)
            if value is not None:
                check_int(f"UsageLimits.{name}", value, 0)


def check_run_settings(settings: Any) -> dict[str, Any]:
    """Per-run overrides of the agent's generation settings, checked like the agent's own."""
    if settings is None:
        return {}
    if not isinstance(settings, Mapping):
        raise ConfigError(f"settings must be a mapping, not {type(settings).__name__}")
    unknown = sorted(set(settings) - set(RUN_SETTINGS))
    if unknown:
        raise ConfigError(f"settings {unknown}: unknown; per-run settings are {list(RUN_SETTINGS)}")
    out = dict(settings)
    if "max_tokens" in out:
        check_int("max_tokens", out["max_tokens"], 1)
    return out


def check_int(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{name}={value!r}: expected an int")
    if value < minimum:
        raise ConfigError(f"{name}={value!r}: must be >= {minimum}")
    return value


def check_sampling(temperature: Any, top_p: Any, seed: Any, decoding: Any = "masked") -> None:
    for name, value in (("temperature", temperature), ("top_p", top_p)):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{name}={value!r}: expected a number")
        if not math.isfinite(value) or value < 0:
            raise ConfigError(f"{name}={value!r}: must be a finite number >= 0")
    if not 0 < top_p <= 1:
        raise ConfigError(f"top_p={top_p!r}: must be in (0, 1]")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise ConfigError(f"seed={seed!r}: expected an int or None")
    if decoding not in ("masked", "exact", "best"):
        raise ConfigError(f"decoding={decoding!r}: expected 'masked', 'exact' or 'best'")
    if decoding == "exact" and (temperature <= 0 or top_p < 1):
        raise ConfigError(
            "decoding='exact' draws from the model's own distribution over valid outputs: it "
            f"needs temperature > 0 and top_p=1 (got temperature={temperature}, top_p={top_p})"
        )


def check_tools_arg(tools: Any) -> list[Any]:
    """`tools=` must be a collection of tools; a lone tool is the most common slip."""
    if tools is None:
        return []
    if (
        isinstance(tools, str | bytes | Mapping)
        or callable(tools)
        or not isinstance(tools, Iterable)
    ):
        raise ConfigError(
            f"tools must be a list of tools, not a {type(tools).__name__}: "
            f"write tools=[{getattr(tools, '__name__', 'tool')}]"
        )
    return list(tools)


def check_tool_choice(choice: Any) -> str:
    """A mode, a tool name, or the OpenAI forms: `{"type": "function", "function": {"name":
    ...}}` (or `{"type": "function", "name": ...}`) name a tool, `"required"` etc. as they are."""
    if isinstance(choice, str):
        return choice
    if isinstance(choice, Mapping):
        fn = choice.get("function")
        name = fn.get("name") if isinstance(fn, Mapping) else choice.get("name")
        if choice.get("type") == "function" and isinstance(name, str):
            return name
        raise ConfigError(
            f"tool_choice={dict(choice)!r}: the OpenAI form is "
            '{"type": "function", "function": {"name": "<tool name>"}}'
        )
    raise ConfigError(
        f"tool_choice={choice!r}: expected 'auto', 'required', 'none', a tool name, an OpenAI "
        "tool_choice dict, or a list of those (one per turn)"
    )
