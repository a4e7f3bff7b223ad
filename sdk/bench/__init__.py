"""Benchmarks for the SDK's constrained-decoding engine against peer libraries.

Run ``python -m sdk.bench`` for the list of subcommands; ``maskbench`` replays MaskBench
instances through token masks (see `sdk.bench.maskbench`). Nothing here is imported by the
SDK itself, so peers stay optional dependencies.
"""

from __future__ import annotations

__all__: list[str] = []
