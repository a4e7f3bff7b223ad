"""OpenTelemetry spans for runs, model turns and tool executions (optional: `sdk[otel]`).

    from sdk.tracing import enable_tracing
    enable_tracing()                 # the global tracer provider, or pass your own

Spans follow the OpenTelemetry GenAI semantic conventions: `invoke_agent` for a run,
`chat <model>` for each model turn (requested settings, token usage, finish reason), and
`execute_tool <name>` for each tool call (tool name and call id), nested in that order; the
SDK's own numbers (forced tokens, forward passes, mask time) carry an `sdk.` prefix. Off by
default, and off costs one flag test per span site.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["disable_tracing", "enable_tracing", "tracing_enabled"]

_tracer: Any = None
_OFF = contextlib.nullcontext(None)


def enable_tracing(tracer_provider: Any = None) -> None:
    """Trace every agent of this process with `tracer_provider` (default: the global one).
    Needs `opentelemetry-api`."""
    global _tracer
    try:
        from opentelemetry import trace
    except ImportError as exc:
        raise ImportError("tracing needs OpenTelemetry: pip install 'sdk[otel]'") from exc
    from importlib.metadata import PackageNotFoundError, version

    try:
        ours = version("sdk")
    except PackageNotFoundError:  # a source checkout
        ours = None
    _tracer = trace.get_tracer("sdk", ours, tracer_provider=tracer_provider)


def disable_tracing() -> None:
    global _tracer
    _tracer = None


def tracing_enabled() -> bool:
    return _tracer is not None


def span(name: str, attributes: Mapping[str, Any]) -> contextlib.AbstractContextManager[Any]:
    """A current span (yielded) when tracing is on; a shared no-op (yielding None) when off."""
    if _tracer is None:
        return _OFF
    return _span(name, attributes)


@contextlib.contextmanager
def _span(name: str, attributes: Mapping[str, Any]) -> Iterator[Any]:
    with _tracer.start_as_current_span(name, attributes=_clean(attributes)) as s:
        yield s


def annotate(s: Any, attributes: Mapping[str, Any]) -> None:
    if s is not None:
        s.set_attributes(_clean(attributes))


def _clean(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """OpenTelemetry takes str, bool, int, float and sequences of them; None is left out."""
    return {k: v for k, v in attributes.items() if v is not None}
