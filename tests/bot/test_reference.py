"""The docs' reference pages against the code (``bot/reference``): each page is what the
code renders today, every config key has a description, and nothing the code defines is
missing from its page: a config key, a command or flag of the parser, a route or schema of
the HTTP API."""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any, get_args

import pytest
from pydantic import BaseModel

from bot.cli import build_parser
from bot.config import MaidenConfig
from bot.reference import pages, stale
from bot.reference.config import missing_descriptions, tables
from bot.reference.http import schema

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"

def page(name: str) -> str:
    return (DOCS / "reference" / name).read_text(encoding="utf-8")


def test_the_pages_are_what_the_code_renders() -> None:
    assert not stale(DOCS), (
        f"{', '.join(stale(DOCS))} differ from the code: run `python -m bot.reference` "
        "and commit the pages")


def test_the_pages_say_they_are_generated() -> None:
    for path, text in pages().items():
        assert text.startswith("<!-- Generated from the code"), path


def test_every_config_key_has_a_description() -> None:
    """No allow-list: a key added without ``Field(description=...)`` fails here."""
    assert sum(len(t.keys) for t in tables()) > 150  # the walk found the keys
    missing = missing_descriptions()
    assert not missing, f"describe these keys in their model (Field(description=...)): " \
        f"{missing}"


def _keys(model: type[BaseModel], seen: set[type[BaseModel]]) -> tuple[set[str], set[str]]:
    """The keys (their TOML names) of ``model`` and of the tables under it; and the names
    of those tables."""
    keys: set[str] = set()
    tables: set[str] = set()
    seen.add(model)
    for name, info in model.model_fields.items():
        key = info.alias or name
        inner = _models(info.annotation)
        # A key holding only a table (or a list of them) is that table; a union of a
        # value and a table ([agents] provider) is a key.
        only = len(inner) == 1 and all(
            a is type(None) or a in inner or get_args(a) == (inner[0],)
            for a in get_args(info.annotation) or (info.annotation,))
        (tables if only else keys).add(key)
        for table in inner:
            if table not in seen:
                more_keys, more_tables = _keys(table, seen)
                keys |= more_keys
                tables |= more_tables
    return keys, tables


def _models(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in get_args(annotation) for m in _models(arg)]


def test_every_config_key_is_on_the_page() -> None:
    text = page("config.md")
    keys, tables = _keys(MaidenConfig, set())
    missing = sorted(k for k in keys if f"| `{k}` |" not in text)
    assert not missing, f"keys missing from docs/reference/config.md: {missing}"
    headings = re.findall(r"^## `\[\[?([\w.]+)\]\]?`", text, re.M)
    listed = {h.rsplit(".", 1)[-1] for h in headings} | {
        k for k in tables if f"| `{k}` | table" in text or f"| `{k}` | array of tables" in text}
    missing = sorted(tables - listed - {"channels"})  # [channels] holds only tables
    assert not missing, f"tables missing from docs/reference/config.md: {missing}"


def _commands(parser: argparse.ArgumentParser, words: tuple[str, ...] = ()
              ) -> list[tuple[tuple[str, ...], list[str]]]:
    """Each command's words and its option strings and positionals' names."""
    found = [(words, [o for a in parser._actions for o in a.option_strings if o != "-h"
                      and o != "--help"])]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                found += _commands(child, (*words, name))
    return found


def test_every_command_and_flag_is_on_the_page() -> None:
    text = page("cli.md")
    listed = _commands(build_parser())
    assert len(listed) > 10
    for words, flags in listed:
        if not words:
            section = text.split("## Commands", 1)[0]
        else:
            heading = f"`maiden {' '.join(words)}` {{#"
            assert heading in text, f"`maiden {' '.join(words)}` has no section on cli.md"
            section = text.split(heading, 1)[1].split("\n#", 1)[0]
        for flag in flags:
            assert f"`{flag}" in section or f", {flag}" in section, \
                f"{flag} of `maiden {' '.join(words)}` is not on cli.md"


def test_every_argument_has_help() -> None:
    """What the page says of an argument is its help: none may lack it."""
    def walk(parser: argparse.ArgumentParser, words: str) -> list[str]:
        bare = [f"{words} {a.dest}" for a in parser._actions
                if not a.help and not isinstance(a, argparse._SubParsersAction)]
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    bare += walk(child, f"{words} {name}")
        return bare

    assert not walk(build_parser(), "maiden")


@pytest.fixture(scope="module")
def openapi() -> dict[str, Any]:
    return schema()


def test_every_route_and_schema_is_on_the_page(openapi: dict[str, Any]) -> None:
    text = page("http.md")
    routes = [f"{method.upper()} {path}" for path, operations in openapi["paths"].items()
              for method in operations]
    assert "POST /v1/threads/{thread_id}/messages" in routes
    missing = [r for r in routes if f"### `{r}`" not in text]
    assert not missing, f"routes missing from docs/reference/http.md: {missing}"
    names = list(openapi["components"]["schemas"])
    missing = [n for n in names if f"### {n} {{#" not in text]
    assert not missing, f"schemas missing from docs/reference/http.md: {missing}"
