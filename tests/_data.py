"""Where the tests find MaskBench schemas: the dev split beside the checkout, or the sample
vendored here.

`$SDK_MASKBENCH_DIR`, else `shared/maskbench-dev` beside the checkout (the project's layout);
no machine's absolute path. `tests/fixtures/maskbench/` holds a small sample of it (a few
schemas of each source, with their labelled instances), so the suites that walk MaskBench
schemas run on every clone: `maskbench_files()` is the dev split where present, else that
sample, never empty.
"""

from __future__ import annotations

import os
from pathlib import Path

MASKBENCH_DEV = Path(
    os.environ.get("SDK_MASKBENCH_DIR")
    or Path(__file__).resolve().parents[1].parent / "shared" / "maskbench-dev"
)
FIXTURES = sorted((Path(__file__).parent / "fixtures" / "maskbench").glob("*.json"))
DEV_FILES = sorted(MASKBENCH_DEV.glob("*.json")) if MASKBENCH_DEV.is_dir() else []


def maskbench_files() -> list[Path]:
    """The dev split's schema files, or (without it) the vendored sample."""
    return DEV_FILES or FIXTURES


def maskbench_sample(every: int, start: int = 0) -> list[Path]:
    """Every `every`-th file of the dev split from `start`; without it, the same share of the
    vendored sample, at least 4 files spread over its sources (the suites that sample sparsely
    are the slow ones per schema, such as brute-force masks over the whole vocabulary)."""
    if DEV_FILES:
        return DEV_FILES[start::every]
    n = max(4, len(FIXTURES) // every)
    step = max(1, len(FIXTURES) // n)
    return FIXTURES[start % step :: step][:n]
