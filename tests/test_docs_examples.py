"""Every ```python block in README.md and docs/**/*.md runs, offline, and prints what the page shows.

Conventions (stated in docs/contributing-docs.md):

* The blocks of one page run in order in one namespace (a fresh module per page), like a
  notebook: a later block may use the tools an earlier one defined. Each page runs in its own
  temporary working directory.
* What a block prints is compared with the fenced ```text block that directly follows it
  (blank lines may sit between them). A block without such a block must print nothing.
  In the expected text, a line that is exactly `...` matches any number of lines, and `...`
  inside a line matches any run of characters (for timings and object addresses).
* Opt-outs are explicit and visible in the page source: an HTML comment
  `<!-- docs-test: skip REASON -->` on the line before a block skips that block, and
  `<!-- docs-test: skip-page REASON -->` anywhere in a page skips all of its blocks.

Examples that use the embedded SmolLM2 model share one loaded model (the backend caches it per
process); greedy decoding makes their output deterministic.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import sys
import textwrap
import traceback
import types
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PY_LANGS = {"python", "py"}
OUT_LANGS = {"text", "output"}
SKIP_RE = re.compile(r"<!--\s*docs-test:\s*skip\s+(?P<reason>.*?)\s*-->")
SKIP_PAGE_RE = re.compile(r"<!--\s*docs-test:\s*skip-page\s+(?P<reason>.*?)\s*-->")
FENCE_RE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`]*)$")


@dataclass
class Fence:
    lang: str
    code: str
    line: int  # 1-based line of the opening fence
    end: int  # 0-based index of the line after the closing fence
    skip: str | None = None


@dataclass
class Example:
    page: str  # path relative to the repo root
    index: int  # position among the page's python blocks
    line: int
    code: str
    expected: str | None
    skip: str | None

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


def parse_fences(text: str) -> list[Fence]:
    lines = text.splitlines()
    fences: list[Fence] = []
    i = 0
    while i < len(lines):
        m = FENCE_RE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, info = m.group("indent"), m.group("fence"), m.group("info").strip()
        lang = info.split()[0].lstrip(".{").rstrip("}").lower() if info else ""
        body: list[str] = []
        j = i + 1
        while j < len(lines):
            stripped = lines[j].strip()
            if stripped.startswith(fence[0] * len(fence)) and set(stripped) == {fence[0]}:
                break
            body.append(lines[j][len(indent) :] if lines[j].startswith(indent) else lines[j])
            j += 1
        prev = next((lines[k] for k in range(i - 1, -1, -1) if lines[k].strip()), "")
        skip = SKIP_RE.search(prev)
        fences.append(
            Fence(
                lang, "\n".join(body) + "\n", i + 1, j + 1, skip.group("reason") if skip else None
            )
        )
        i = j + 1
    return fences


def collect(path: Path) -> list[Example]:
    text = path.read_text(encoding="utf-8")
    rel = path.relative_to(ROOT).as_posix()
    page_skip = SKIP_PAGE_RE.search(text)
    lines = text.splitlines()
    fences = parse_fences(text)
    out: list[Example] = []
    for k, f in enumerate(fences):
        if f.lang not in PY_LANGS:
            continue
        expected = None
        nxt = fences[k + 1] if k + 1 < len(fences) else None
        if nxt is not None and nxt.lang in OUT_LANGS:
            between = lines[f.end : nxt.line - 1]
            if all(not s.strip() for s in between):
                expected = nxt.code
        skip = page_skip.group("reason") if page_skip else f.skip
        out.append(Example(rel, len(out), f.line, f.code, expected, skip))
    return out


def doc_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


EXAMPLES = [ex for p in doc_files() for ex in collect(p)]


def _pattern(expected: str) -> re.Pattern[str]:
    parts = []
    for line in expected.rstrip("\n").split("\n"):
        if line.strip() == "...":
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            parts.append(".*?".join(re.escape(s) for s in line.rstrip().split("...")) + r"\n")
    return re.compile("".join(parts))  # no DOTALL: `...` inside a line stays on that line


def output_matches(expected: str, actual: str) -> bool:
    norm = "\n".join(line.rstrip() for line in actual.rstrip().split("\n")) + "\n"
    return _pattern(expected).fullmatch(norm) is not None


@dataclass
class _Page:
    module: types.ModuleType
    workdir: Path
    ran: int = 0
    failed: str | None = None
    outputs: dict[int, str] = field(default_factory=dict)


_PAGES: dict[str, _Page] = {}


def _fresh_models() -> None:
    """Each page starts from models without cached cells, so what it prints does not depend
    on which tests ran before it: on llama.cpp, where a prompt's cells lie in the KV cache
    moves its logits by rounding, enough to flip a near tie (`sdk.backends._llama_batch`)."""
    from sdk.backends import local

    for model in list(local._NAMED.values()):
        context = getattr(model, "_context", None)
        if context is not None:
            context.clear()


def _page(page: str, tmp_factory: pytest.TempPathFactory) -> _Page:
    state = _PAGES.get(page)
    if state is None:
        _fresh_models()
        slug = re.sub(r"\W", "_", page)
        module = types.ModuleType(f"docs_example_{slug}")
        module.__file__ = str(ROOT / page)
        sys.modules[module.__name__] = module
        state = _PAGES[page] = _Page(module, tmp_factory.mktemp(slug))
    return state


def _run_block(state: _Page, ex: Example) -> str:
    buf = io.StringIO()
    cwd = os.getcwd()
    os.chdir(state.workdir)
    try:
        code = compile(textwrap.dedent(ex.code), ex.id, "exec")
        with contextlib.redirect_stdout(buf):
            exec(code, state.module.__dict__)
    finally:
        os.chdir(cwd)
    return buf.getvalue()


# The pages show the embedded model's output: a server named in the environment (which
# `Agent()` would otherwise use) is not what they document.
_OUTSIDE_MODEL_URL = os.environ.get("SDK_MODEL_URL")


@pytest.mark.parametrize("ex", EXAMPLES, ids=[e.id for e in EXAMPLES])
def test_docs_example(
    ex: Example, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    if ex.skip is not None:
        pytest.skip(f"opted out in the page: {ex.skip}")
    if _OUTSIDE_MODEL_URL is not None and os.environ.get("SDK_MODEL_URL") == _OUTSIDE_MODEL_URL:
        monkeypatch.delenv("SDK_MODEL_URL")
    state = _page(ex.page, tmp_path_factory)
    siblings = [e for e in EXAMPLES if e.page == ex.page]
    # Run earlier blocks of the page first when this one was selected alone (-k).
    while state.ran < ex.index and state.failed is None:
        prev = siblings[state.ran]
        if prev.skip is None:
            try:
                state.outputs[prev.index] = _run_block(state, prev)
            except BaseException:
                state.failed = f"{prev.id} raised:\n{traceback.format_exc()}"
        state.ran += 1
    if state.failed is not None:
        pytest.fail(f"an earlier block of the page failed: {state.failed}", pytrace=False)
    try:
        actual = _run_block(state, ex)
    except BaseException:
        state.failed = ex.id
        raise
    finally:
        state.ran = ex.index + 1
    if ex.expected is None:
        assert actual == "", (
            f"{ex.id} printed output but the page shows none (add a ```text block after it):\n"
            f"{actual}"
        )
    else:
        assert output_matches(ex.expected, actual), (
            f"{ex.id}: printed output differs from the page.\n--- page shows:\n{ex.expected}"
            f"--- printed:\n{actual}"
        )


def test_docs_examples_inventory() -> None:
    """Every page's python blocks are collected; opt-outs stay rare and carry a reason."""
    pages = {e.page for e in EXAMPLES}
    skipped = [e for e in EXAMPLES if e.skip is not None]
    print(f"\n{len(EXAMPLES)} python examples on {len(pages)} pages; {len(skipped)} opted out")
    assert "README.md" in pages
    assert len(EXAMPLES) >= 40
    assert all(e.skip for e in skipped)
    assert len(skipped) <= max(3, len(EXAMPLES) // 10), [e.id for e in skipped]


def test_output_matching_rules() -> None:
    assert output_matches("a\nb\n", "a  \nb\n\n")
    assert output_matches("took ...s\n", "took 1.5s\n")
    assert not output_matches("took ...s\n", "took 1\n2s\n")
    assert output_matches("first\n...\nlast\n", "first\nx\ny\nlast\n")
    assert output_matches("first\n...\nlast\n", "first\nlast\n")
    assert not output_matches("a\n", "a\nb\n")
