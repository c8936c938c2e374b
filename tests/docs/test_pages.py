"""The hand-written pages of the docs site (docs/) against what they restate: the README's
two commands, word for word; the durability table and the runtime's public surface as
the code has them. (The generated reference pages: tests/bot/test_reference.py.)"""

from __future__ import annotations

import re
from pathlib import Path

from runtime import EchoProvider, Runtime, SQLiteStore
from runtime.model.durability import table

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def read(path: str) -> str:
    return (ROOT / path).read_text(encoding="utf-8")


def test_install_gives_the_readmes_two_commands() -> None:
    def commands(text: str) -> list[str]:
        section = text.split("## Two commands for a fresh machine", 1)[1].split("\n## ", 1)[0]
        return re.findall(r"```sh\n(.*?)\n```", section, re.S)

    readme = commands(read("README.md"))
    assert len(readme) == 2
    assert commands(read("docs/get-started/install.md")) == readme


def test_durability_prints_the_table() -> None:
    page = read("docs/how-it-works/durability.md")
    for name, made in table():
        row = re.compile(rf"^\| `{re.escape(name)}`[^|]*\| {'yes' if made.fsync else 'no'} \|",
                         re.M)
        assert row.search(page), f"the durability page's table lacks the row for {name!r}"


def test_the_runtime_api_page_names_every_public_name_and_there_are_few(tmp_path: Path) -> None:
    """Methods and attributes alike (an attribute set in ``__init__`` counts: the runtime
    is built, not opened, so no store is touched); at most the 15 verbs, ``records``,
    ``operator`` and ``kept`` (issue 54: ~15 and the reads and the operator's levers)."""
    page = read("docs/how-it-works/runtime-api.md")
    section = page.split("`Runtime`'s public surface, and nothing more", 1)[1]
    named = set(re.findall(r"`(\w+)`", section.split("\n\n", 2)[1]))
    runtime = Runtime(SQLiteStore(tmp_path / "m.db"), EchoProvider())
    public = {n for n in dir(runtime) if not n.startswith("_")}
    assert public <= named, sorted(public - named)
    assert len(public) <= 18, sorted(public)
