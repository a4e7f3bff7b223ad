"""The engine's memo tables: what they hold, their one byte budget, and emptying them.

Compiled DFAs, parsed definitions, per-vocabulary walks and per-grammar masks are memoised in
tables that share one process-wide budget (default 256 MiB, or `SDK_CACHE_BYTES` in the
environment at import). Over it, the oldest entries of the largest tables are dropped first.
Each table also has a cap of its own. A server that holds many grammars sets the budget it
can spare; a test that wants cold timings calls `clear()`. `lookups()` counts the hits and
misses of the tables where a miss is work worth counting (a schema piece's miss is a schema
compile). The same functions are methods of the engine's owner,
`sdk.engine.compiler.default_compiler()`, which holds the limits too.
"""

from __future__ import annotations

from sdk.engine._cache import BoundedCache, budget, clear_all, lookups, set_budget, usage

__all__ = ["BoundedCache", "budget", "clear", "lookups", "set_budget", "usage"]

clear = clear_all
"""Empty every table (nothing is lost but time: all of it is recomputed on demand)."""
