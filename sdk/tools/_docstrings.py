"""Docstring → tool description and per-parameter descriptions (Google, NumPy, Sphinx/reST).

The model only sees what lands in the JSON Schema, so parameter docs written in the usual
places must flow into `description` fields without the user repeating them in `Field(...)`.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field

import docstring_parser


@dataclass(frozen=True)
class ParsedDocstring:
    """What a tool needs from a docstring: one description, and `params` by parameter name."""

    description: str | None = None
    params: dict[str, str] = field(default_factory=dict)


def _clean(text: str | None) -> str | None:
    """Dedent, strip, and map empty text to None, so callers can test with `is None`."""
    if text is None:
        return None
    cleaned = inspect.cleandoc(text).strip()
    return cleaned or None


def parse_docstring(doc: str | None) -> ParsedDocstring:
    """Parse `doc` with style auto-detection; an unparsable docstring becomes a plain description.

    The description is the short description and the long one joined by a blank line: sections
    (Args, Returns, Raises, ...) are left out, since they are either in the schema already
    (parameters) or irrelevant to choosing the tool (returns).
    """
    text = _clean(doc)
    if text is None:
        return ParsedDocstring()
    try:
        parsed = docstring_parser.parse(text, style=docstring_parser.DocstringStyle.AUTO)
    except docstring_parser.ParseError:
        # Malformed sections must not make a function unusable as a tool.
        return ParsedDocstring(description=text)
    parts = [p for p in (_clean(parsed.short_description), _clean(parsed.long_description)) if p]
    params: dict[str, str] = {}
    for param in parsed.params:
        desc = _clean(param.description)
        # Sphinx allows `:param int x:`; NumPy allows `x, y : int` — both reach us as arg_name.
        for name in param.arg_name.replace(" ", "").split(","):
            name = name.lstrip("*")
            if desc and name and name not in params:
                params[name] = desc
    return ParsedDocstring(description="\n\n".join(parts) or None, params=params)
