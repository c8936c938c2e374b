"""The browser tests' fixtures: headless Chromium (Debian's, not one Playwright downloads)
driven by Playwright, and a page that records the console's errors.

Without the ``playwright`` package or without Chromium every browser test skips, saying
how to get it. ``MAIDEN_CHROMIUM`` names another Chromium binary (default
``/usr/bin/chromium``).

Screenshots go to each test's ``tmp_path``; ``MAIDEN_SCREENSHOTS=docs`` writes them over the
docs' images in docs/ instead (to refresh them). A test that changes docs/ otherwise
fails: running the tests must not dirty the tracked images.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import pytest_asyncio

if TYPE_CHECKING:
    from playwright.async_api import Browser, ConsoleMessage, Error, Page

CHROMIUM = Path(os.environ.get("MAIDEN_CHROMIUM", "/usr/bin/chromium"))
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    # Chromium would call Google's services otherwise, which a closed network refuses.
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
DOCS = Path(__file__).resolve().parents[2] / "docs"
VIEWPORT = {"width": 1280, "height": 800}
TIMEOUT_MS = 10_000
"""How long a Playwright action or ``expect`` waits before failing the test."""


@pytest.hookimpl(tryfirst=True)  # before xdist reads the marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The browser tests are of the "heavy" xdist group (pyproject addopts): one Chromium
    at a time, never beside the replicas or the benchmark, within its action timeouts."""
    here = Path(__file__).resolve().parent
    for item in items:
        if item.path.is_relative_to(here):
            item.add_marker(pytest.mark.xdist_group("heavy"))


def refresh_docs() -> bool:
    """Whether this run is asked to write the docs' screenshots."""
    return os.environ.get("MAIDEN_SCREENSHOTS", "") == "docs"


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    """Where a test's screenshots go: docs/ when asked to refresh them, else its tmp_path."""
    where = DOCS if refresh_docs() else tmp_path
    where.mkdir(exist_ok=True)
    return where


def _docs_images() -> dict[str, tuple[int, str]]:
    return {p.name: (p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
            for p in sorted(DOCS.glob("*.png"))}


@pytest.fixture(autouse=True)
def docs_untouched() -> Iterator[None]:
    """Unless asked to refresh them, a test leaves docs/'s images as they were."""
    before = _docs_images()
    yield
    if not refresh_docs():
        assert _docs_images() == before, "a browser test wrote into docs/"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def browser() -> AsyncIterator[Browser]:
    """Headless Chromium, or the test skips with one line saying what is missing. One for
    the module's tests (a launch costs ~1.5 s of CPU, more than most of them), driven from
    the module's event loop (its tests say ``pytest.mark.asyncio(loop_scope="module")``);
    each test has its own ``page``, in a context of its own (its own cookies and storage)."""
    try:
        from playwright.async_api import async_playwright, expect
    except ImportError:
        pytest.skip("no playwright package: pip install -e '.[dev]' (or pip install playwright)")
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip(f"no Chromium at {CHROMIUM}: apt-get install chromium (.ci/run does)")
    expect.set_options(timeout=TIMEOUT_MS)
    async with async_playwright() as p:
        launched = await p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS,
                                           headless=True)
        try:
            yield launched
        finally:
            await launched.close()


@pytest.fixture
def console_errors() -> list[str]:
    """What the page logged as an error (a CSP violation, a failed script, an uncaught
    exception), filled by ``page``."""
    return []


@pytest_asyncio.fixture(loop_scope="module")
async def page(browser: Browser, console_errors: list[str]) -> AsyncIterator[Page]:
    """A fresh page (its own cookies) at 1280x800 whose errors go to ``console_errors``."""
    context = await browser.new_context(viewport={"width": VIEWPORT["width"],
                                                  "height": VIEWPORT["height"]})
    context.set_default_timeout(TIMEOUT_MS)
    tab = await context.new_page()

    def on_console(message: ConsoleMessage) -> None:
        url = message.location.get("url", "")
        if message.type == "error":
            console_errors.append(f"console: {message.text} (at {url})")

    def on_page_error(error: Error) -> None:
        console_errors.append(f"page error: {error}")

    tab.on("console", on_console)
    tab.on("pageerror", on_page_error)
    try:
        yield tab
    finally:
        await context.close()
