"""The docs' reference pages, generated from the code: ``agent.toml`` from the pydantic
config models, the command line from its argparse parser, the HTTP API from the FastAPI
app's OpenAPI schema. ``python -m bot.reference`` writes them under ``docs/reference/``;
``tests/bot/test_reference.py`` fails when the pages there are not what it writes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from . import cli, config, http

__all__ = ["PAGES", "pages", "stale", "write"]

HEADER = ("<!-- Generated from the code by `python -m bot.reference`: do not edit; "
          "change the code and run it again. -->\n\n")

PAGES: dict[str, Callable[[], str]] = {
    "reference/config.md": config.render,
    "reference/cli.md": cli.render,
    "reference/http.md": http.render,
}
"""Each page, by its path under ``docs/``, and what renders it."""


def pages() -> dict[str, str]:
    """Every reference page's text, by its path under ``docs/``."""
    return {path: HEADER + render().rstrip("\n") + "\n" for path, render in PAGES.items()}


def stale(docs: Path) -> list[str]:
    """The pages under ``docs`` that differ from what the code renders (or are missing)."""
    found = []
    for path, text in pages().items():
        page = docs / path
        if not page.is_file() or page.read_text(encoding="utf-8") != text:
            found.append(path)
    return found


def write(docs: Path) -> list[str]:
    """Write the pages under ``docs``; the paths that changed."""
    changed = []
    for path, text in pages().items():
        page = docs / path
        if page.is_file() and page.read_text(encoding="utf-8") == text:
            continue
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text(text, encoding="utf-8")
        changed.append(path)
    return changed
