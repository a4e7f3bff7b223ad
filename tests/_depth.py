"""How many examples the costliest property tests draw.

The default run (CI's) draws a share of each one's full count, so that the suite stays within
minutes; `SDK_TEST_DEPTH=full` draws them all (with `-m slow`, the deep run: CONTRIBUTING.md).
Hypothesis draws anew on every run, so the default runs together still cover the full counts'
ground; a failure found either way is saved in `.hypothesis/` and replayed first.
"""

from __future__ import annotations

import os

FULL = os.environ.get("SDK_TEST_DEPTH", "") == "full"


def examples(full: int) -> int:
    """`full` under `SDK_TEST_DEPTH=full`, else a quarter of it (at least 10, at most `full`)."""
    return full if FULL else min(full, max(10, full // 4))
