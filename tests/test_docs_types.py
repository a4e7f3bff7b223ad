"""The docs' examples type-check: what a page shows must pass mypy in users' editors too
(`Agent(output_type=Literal[...])` once did not). Each page's blocks become one module."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_docs_examples import ROOT, collect, doc_files

# Per file, inline: a flag would change the options the cache is keyed by, and this run would
# re-check the package and its dependencies (75 s) that `mypy sdk` (.ci/run) has just checked.
_NO_REDEF = '# mypy: disable-error-code="no-redef"'


def test_docs_examples_type_check(tmp_path: Path) -> None:
    pytest.importorskip("mypy")
    for page in doc_files():
        code = "\n\n".join(ex.code for ex in collect(page) if not ex.skip)
        if code.strip():
            name = "_".join(page.relative_to(ROOT).with_suffix("").parts).replace("-", "_")
            # Pages run like notebooks: a later block may redefine an earlier one's function.
            (tmp_path / f"{name}.py").write_text(f"{_NO_REDEF}\n{code}")
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", str(tmp_path)],  # pyproject's options, from ROOT
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
