"""Build the docs site, serve it on localhost, and look at it in headless Chromium.

Opens the home page and one guide, asserts that the expected headings and code blocks were
rendered (from the DOM after scripts ran), and saves screenshots under
`build/docs-screenshots/` (or `$DOCS_SCREENSHOT_DIR`). Needs Debian's `chromium`
(`.ci/run` installs it); skipped with a reason where it is absent.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import pytest
from test_docs_site import ROOT, _require_mkdocs, build_site

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
]


def _chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    if os.environ.get("SDK_REQUIRE_BROWSER"):  # CI: a missing browser fails, never skips
        pytest.fail("chromium is not installed but SDK_REQUIRE_BROWSER is set")
    pytest.skip("chromium is not installed (apt-get install chromium; .ci/run does this)")


class _Page(HTMLParser):
    """Headings (h1-h3 text) and code blocks (<pre> text) of a rendered page."""

    def __init__(self) -> None:
        super().__init__()
        self.headings: list[tuple[str, str]] = []
        self.code_blocks: list[str] = []
        self._heading: str | None = None
        self._pre = 0
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("h1", "h2", "h3"):
            self._heading, self._text = tag, []
        elif tag == "pre":
            if self._pre == 0:
                self._text = []
            self._pre += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == self._heading:
            text = "".join(self._text).replace("¶", "").strip()
            self.headings.append((tag, " ".join(text.split())))
            self._heading = None
        elif tag == "pre" and self._pre:
            self._pre -= 1
            if self._pre == 0:
                self.code_blocks.append("".join(self._text))

    def handle_data(self, data: str) -> None:
        if self._heading is not None or self._pre:
            self._text.append(data)


def parse(dom: str) -> _Page:
    page = _Page()
    page.feed(dom)
    return page


@contextlib.contextmanager
def serve(directory: Path) -> Iterator[str]:
    """The site on a free loopback port, for the duration of the block."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

    handler = functools.partial(Quiet, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def chromium(browser: str, url: str, *extra: str) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory(prefix="sdk-chromium-") as profile:
        return subprocess.run(
            [browser, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *extra, url],
            capture_output=True,
            text=True,
            timeout=120,
        )


def dump_dom(browser: str, url: str) -> str:
    proc = chromium(browser, url, "--virtual-time-budget=5000", "--dump-dom")
    assert proc.returncode == 0 and "<html" in proc.stdout, proc.stderr[-2000:]
    return proc.stdout


def screenshot(browser: str, url: str, path: Path) -> None:
    path.unlink(missing_ok=True)
    proc = chromium(
        browser,
        url,
        "--window-size=1280,1400",
        "--virtual-time-budget=5000",
        f"--screenshot={path}",
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = path.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n"), "not a PNG"
    assert len(data) > 20_000, f"{path} is suspiciously small ({len(data)} bytes): blank page?"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    _require_mkdocs()
    dest = tmp_path_factory.mktemp("site") / "site"
    proc = build_site(dest)
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stdout}\n{proc.stderr}"
    with serve(dest) as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> str:
    return _chromium()


@pytest.fixture(scope="module")
def shots() -> Path:
    out = Path(os.environ.get("DOCS_SCREENSHOT_DIR", ROOT / "build" / "docs-screenshots"))
    out.mkdir(parents=True, exist_ok=True)
    return out


def test_home_page_renders(site: str, browser: str, shots: Path) -> None:
    page = parse(dump_dom(browser, f"{site}/"))
    titles = [text for _, text in page.headings]
    assert ("h1", "sdk") in page.headings, titles
    for expected in ("What you get", "Where next"):
        assert expected in titles, titles
    assert any("from sdk import Agent, tool" in code for code in page.code_blocks)
    assert any("ToolCall(get_weather" in code for code in page.code_blocks)  # the shown output
    screenshot(browser, f"{site}/", shots / "home.png")


def test_guide_renders(site: str, browser: str, shots: Path) -> None:
    url = f"{site}/guides/tools/"
    page = parse(dump_dom(browser, url))
    titles = [text for _, text in page.headings]
    assert ("h1", "Tools and docstrings") in page.headings, titles
    for expected in (
        "From a function",
        "Constraints with Annotated and Field",
        "Dependencies with RunContext",
    ):
        assert expected in titles, titles
    assert len(page.code_blocks) >= 10, len(page.code_blocks)
    assert any("@tool" in code for code in page.code_blocks)
    screenshot(browser, url, shots / "guide-tools.png")
