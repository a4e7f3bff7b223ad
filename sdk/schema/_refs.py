"""`$ref` resolution inside one document: JSON pointers, `$id`-relative refs and anchors.

Why a separate index: refs may name a subschema by an `$id` declared anywhere in the document
(draft-04 `id` too) or by an anchor, so all identifiers are collected once up front. Remote
documents are never fetched: a ref that names none of the document's own ids is dangling.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote, urldefrag, urljoin

from sdk.errors import SchemaError

from . import _pointer

# Keywords whose value is a schema, a list of schemas, or a map of schemas.
SCHEMA_KEYWORDS = frozenset(
    {
        "additionalProperties",
        "additionalItems",
        "items",
        "not",
        "if",
        "then",
        "else",
        "contains",
        "propertyNames",
        "unevaluatedProperties",
        "unevaluatedItems",
    }
)
LIST_KEYWORDS = frozenset({"allOf", "anyOf", "oneOf", "prefixItems", "items"})
MAP_KEYWORDS = frozenset(
    {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"}
)


def schema_id(schema: dict[str, Any]) -> str | None:
    """The schema's own identifier: `$id`, or draft-04 `id` when it is a string."""
    for key in ("$id", "id"):
        value = schema.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def children(schema: dict[str, Any], pointer: str) -> list[tuple[Any, str]]:
    """Direct subschemas of a schema with their pointers (used to index the document)."""
    out: list[tuple[Any, str]] = []
    for key, value in schema.items():
        if key in MAP_KEYWORDS and isinstance(value, dict):
            out.extend((v, _pointer.join(pointer, key, k)) for k, v in value.items())
        elif key in LIST_KEYWORDS and isinstance(value, list):
            out.extend((v, _pointer.join(pointer, key, i)) for i, v in enumerate(value))
        elif key in SCHEMA_KEYWORDS:
            out.append((value, _pointer.join(pointer, key)))
    return out


class RefIndex:
    """Maps every base URI and anchor declared in a document to the pointer of its schema."""

    def __init__(self, root: Any) -> None:
        self.root = root
        self.uris: dict[str, str] = {}
        self.anchors: dict[tuple[str, str], str] = {}
        self.bases: dict[str, str] = {}
        self.root_base = ""
        if isinstance(root, dict):
            rid = schema_id(root)
            self.root_base = urldefrag(rid)[0] if rid else ""
        self._index()

    def _index(self) -> None:
        stack: list[tuple[Any, str, str]] = [(self.root, "", self.root_base)]
        seen = 0
        while stack:
            schema, pointer, base = stack.pop()
            seen += 1
            if seen > 200_000:
                break
            if not isinstance(schema, dict):
                continue
            sid = schema_id(schema)
            if sid is not None:
                if sid.startswith("#"):
                    self.anchors[(base, sid[1:])] = pointer
                else:
                    full = urljoin(base, sid) if base else sid
                    base, frag = urldefrag(full)
                    self.uris.setdefault(base, pointer)
                    if frag:
                        self.anchors[(base, frag)] = pointer
            anchor = schema.get("$anchor")
            if isinstance(anchor, str):
                self.anchors[(base, anchor)] = pointer
            self.bases[pointer] = base
            stack.extend((child, ptr, base) for child, ptr in children(schema, pointer))

    def base_of(self, pointer: str) -> str:
        """The base URI in force at a schema pointer (nearest enclosing `$id`)."""
        while pointer not in self.bases and pointer:
            pointer = pointer.rsplit("/", 1)[0]
        return self.bases.get(pointer, self.root_base)

    def resolve(self, ref: str, where: str) -> str:
        """The document pointer `ref` (found at schema pointer `where`) names."""
        base = self.base_of(where.rsplit("/", 1)[0] if where.endswith("/$ref") else where)
        tries = [base, self.root_base] if base != self.root_base else [base]
        error: SchemaError | None = None
        for b in tries:
            try:
                return self._resolve_in(ref, b, where)
            except SchemaError as exc:
                error = error or exc
        assert error is not None
        raise error

    def _resolve_in(self, ref: str, base: str, where: str) -> str:
        full = urljoin(base, ref) if base else ref
        doc, frag = urldefrag(full)
        if ref.startswith("#"):
            doc, frag = base, ref[1:]
        if doc in ("", self.root_base):
            start = ""
        elif doc in self.uris:
            start = self.uris[doc]
        else:
            raise SchemaError(f"dangling $ref {ref!r}: remote documents are not fetched", where)
        frag = unquote(frag)
        if frag == "" or frag.startswith("/"):
            pointer = start + frag
            _pointer.resolve(self.root, pointer, where)
            return pointer
        key = (doc if doc not in ("",) else self.root_base, frag)
        if key in self.anchors:
            return self.anchors[key]
        for (_, name), ptr in self.anchors.items():
            if name == frag:
                return ptr
        raise SchemaError(f"dangling $ref {ref!r}: no anchor {frag!r}", where)
