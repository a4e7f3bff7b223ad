"""The engine's memo tables: what they hold, their one byte budget, and emptying them.

Compiled DFAs, parsed definitions, per-vocabulary walks and per-grammar masks are memoised in
tables that share one process-wide budget (default 256 MiB, or `SDK_CACHE_BYTES` in the
environment at import). Over it, the oldest entries of the largest tables are dropped first.
Each table also has a cap of its own. A server that holds many grammars sets the budget it can spare; a test that
wants cold timings calls `clear()`.
"""

from __future__ import annotations

from sdk.engine._cache import budget, clear_all, lookups, set_budget, usage

__all__ = ["budget", "clear", "lookups", "set_budget", "usage"]

clear = clear_all
"""Empty every table (nothing is lost but time: all of it is recomputed on demand)."""
