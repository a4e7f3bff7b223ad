"""Schema pieces by what they were compiled from (`sdk.grammar.pieces`).

A tool's arguments compile once, when the tool is defined, and every turn grammar that offers
the tool reuses that piece: a turn over tools seen before compiles no schema. The table is
counted (`sdk.engine.caches.lookups()["schema pieces"]`: hits, and misses that compiled).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sdk.grammar.pieces import SchemaPiece, Surface, compile_piece, piece_key

from ._cache import BoundedCache

__all__ = ["schema_piece"]

_pieces: BoundedCache[str, SchemaPiece] = BoundedCache("schema pieces", 32 << 20)


def schema_piece(
    schema: Any, *, surface: Surface = "json", reserved: Sequence[str] = (), own: bool = False
) -> SchemaPiece:
    """The piece of `schema` that fits `reserved` (compiled on a miss; raises what
    `compile_schema` raises). `own`: one compiled for `reserved` itself, under a namespace
    of its own (for a grammar that holds the schema under other reserved texts too)."""
    key = piece_key(schema, surface, reserved)
    if not own:
        piece = _pieces.lookup(key)
        if piece is None:
            piece = _store(key, compile_piece(schema, surface=surface, reserved=reserved))
        if piece.fits(reserved):
            return piece
    # A key holds a reserved text (that key is a terminal there, so the rules differ), or
    # the caller needs names of its own.
    key += "#fit" + json.dumps(list(reserved))
    fitted = _pieces.lookup(key)
    if fitted is None:
        fitted = _store(key, compile_piece(schema, surface=surface, reserved=reserved, fit=True))
    return fitted


def _store(key: str, piece: SchemaPiece) -> SchemaPiece:
    # Lines, their statement trees (about 40 bytes of tree per character) and the grammar.
    size = 64 * (len(piece.grammar.lark) + len(key))
    return _pieces.put(key, piece, size)
