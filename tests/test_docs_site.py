"""The documentation site builds with `mkdocs build --strict`, offline, and its generated parts
are current (the JSON Schema support table is what the compiler reports today)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _require_mkdocs() -> None:
    for module in ("mkdocs", "material", "mkdocstrings_handlers.python"):
        if importlib.util.find_spec(module.split(".")[0]) is None:
            pytest.skip(f"{module} is not installed (pip install -e '.[dev]')")


def build_site(dest: Path) -> subprocess.CompletedProcess[str]:
    """`mkdocs build --strict` into `dest`; warnings (broken links, bad refs) fail the build."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "HF_HUB_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "-d", str(dest)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_mkdocs_build_strict(tmp_path: Path) -> None:
    _require_mkdocs()
    proc = build_site(tmp_path / "site")
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stdout}\n{proc.stderr}"
    site = tmp_path / "site"
    for page in (
        "index.html",
        "getting-started/index.html",
        "concepts/masking/index.html",
        "schema-support/index.html",
        "guides/tools/index.html",
        "performance/index.html",
        "reference/agent/index.html",
    ):
        assert (site / page).is_file(), page
    # The API reference really was generated from the docstrings.
    reference = (site / "reference/agent/index.html").read_text(encoding="utf-8")
    assert "run_sync" in reference and "tool-calling agent" in reference
    # Nothing is fetched from the network when the site is viewed (no web fonts).
    home = (site / "index.html").read_text(encoding="utf-8")
    assert "fonts.googleapis.com" not in home


@pytest.mark.parametrize(
    ("script", "page", "source"),
    [
        ("_gen_support_table.py", "schema-support.md", "what the compiler reports"),
        ("_gen_formats_table.py", "guides/model-families.md", "the format registry"),
    ],
)
def test_generated_tables_are_current(script: str, page: str, source: str) -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "docs" / script), "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, (
        f"docs/{page} differs from {source}; regenerate it with `python docs/{script}`\n"
        f"{proc.stderr}"
    )


def test_schema_support_table_is_complete() -> None:
    page = (ROOT / "docs" / "schema-support.md").read_text(encoding="utf-8")
    assert page.count("\n| `") >= 40
