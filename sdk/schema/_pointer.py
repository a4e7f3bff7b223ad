"""JSON pointer (RFC 6901) helpers: building pointers while walking, resolving them in a document."""

from __future__ import annotations

from typing import Any

from sdk.errors import SchemaError


def join(pointer: str, *tokens: str | int) -> str:
    """Append reference tokens to a pointer, escaping `~` and `/`."""
    for t in tokens:
        pointer += "/" + str(t).replace("~", "~0").replace("/", "~1")
    return pointer


def split(pointer: str) -> list[str]:
    """The unescaped reference tokens of a pointer ("" is the whole document)."""
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise SchemaError(f"invalid JSON pointer {pointer!r}", pointer)
    return [t.replace("~1", "/").replace("~0", "~") for t in pointer[1:].split("/")]


def resolve(document: Any, pointer: str, where: str) -> Any:
    """The value at `pointer` in `document`; SchemaError if absent."""
    node = document
    for token in split(pointer):
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            raise SchemaError(f"dangling $ref: nothing at #{pointer}", where)
    return node
