"""One process-wide lock around building Python ASTs from source (`ast.parse`, and Lark's
grammar loader and literal parser, which call `ast.literal_eval` on text).

CPython 3.11 keeps the AST constructor's recursion depth per interpreter, not per thread: two
threads building ASTs at once can fail with "SystemError: AST constructor recursion depth
mismatch" (python/cpython#106905). Concurrent runs compile grammars and parse calls in their
own threads, so every such call in the package takes this lock. The calls are short (a literal,
a grammar's lines, one reply).
"""

from __future__ import annotations

import threading

__all__ = ["AST_LOCK"]

AST_LOCK = threading.RLock()
