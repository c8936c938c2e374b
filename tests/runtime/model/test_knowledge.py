"""Cutting a knowledge folder's files into passages (``runtime/model/knowledge.py``): each
passage keeps its section or page, none spans two, none is over the size, and nothing of
a file is lost but blank lines."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from runtime.model.knowledge import (
    KnowledgeConfig,
    Piece,
    cut,
    excluded,
    kind_of,
    open_sources,
)
from runtime.model.runs import Origin
from tests.samples import pdf

RUNBOOK = b"""\xef\xbb\xbfIntro line before any heading.

# Deploys

How we deploy.

## Rollback ##

Run `make rollback`.

```sh
# not a heading: a comment in a code block
make rollback
```

# On call

Page the person on call.
"""


def test_markdown_is_cut_by_its_headings_each_passage_with_its_path() -> None:
    assert cut("ops/runbook.md", RUNBOOK, 1_200) == [
        Piece("Intro line before any heading."),
        Piece("How we deploy.", section="Deploys"),
        Piece("Run `make rollback`.\n\n```sh\n# not a heading: a comment in a code block\n"
              "make rollback\n```", section="Deploys > Rollback"),
        Piece("Page the person on call.", section="On call"),
    ]


def test_html_headings_make_its_sections_and_its_scripts_are_dropped() -> None:
    page = (b"<html><head><title>Guide</title><script>var x = 1;</script></head><body>"
            b"<h1>Setup</h1><p>Install it.</p><h2>Keys</h2><p>Set <b>API_KEY</b>.</p>"
            b"</body></html>")
    assert cut("guide.HTML", page, 1_200) == [
        Piece("Install it.", section="Setup"), Piece("Set API_KEY.", section="Setup > Keys")]


def test_a_pdf_is_cut_by_page() -> None:
    passages = cut("q4.pdf", pdf("the quarter closed at 42"), 1_200)
    assert [(p.page, p.section) for p in passages] == [(1, None)]
    assert "the quarter closed at 42" in passages[0].text


def test_a_file_not_taken_or_unreadable_gives_no_passage() -> None:
    assert cut("setup.zip", b"PK\x03\x04", 1_200) == []
    assert cut("broken.pdf", b"%PDF-1.4 not really", 1_200) == []
    assert cut("empty.md", b"\n\n", 1_200) == []
    assert kind_of("a/b/NOTES.TXT") == "text" and kind_of("a/b/notes") is None


def test_paragraphs_are_gathered_up_to_the_size_and_a_long_one_is_cut_at_spaces() -> None:
    text = ("alpha " * 30).strip() + "\n\nshort one\n\n" + "word " * 400
    passages = cut("notes.txt", text.encode(), 300)
    assert all(len(p.text) <= 300 for p in passages)
    assert passages[0].text.startswith("alpha") and "short one" in passages[0].text
    assert all(not p.text.startswith(" ") and "wor d" not in p.text for p in passages)


@given(st.lists(st.text(alphabet="ab #\n", max_size=80), max_size=30),
       st.integers(min_value=10, max_value=120))
def test_no_passage_is_over_the_size_and_nothing_of_the_body_is_lost(
        lines: list[str], size: int) -> None:
    text = "\n".join(lines)
    passages = cut("n.md", text.encode(), size)
    assert all(0 < len(p.text) <= size for p in passages)
    # Every character of the lines that are no heading is in a passage, in order (a word
    # longer than a passage may be cut in two: whitespace is not compared).
    body = [line for line in text.splitlines() if not re.match(r" {0,3}#{1,6}( |$)", line)]
    assert "".join(" ".join(body).split()) == "".join(
        "".join(p.text.split()) for p in passages)


def test_a_source_names_its_folder_and_a_bad_name_is_refused() -> None:
    source = KnowledgeConfig(name="runbooks", path="docs/runbooks", places=["slack:C01"])
    assert source.chunk_chars == 1_200 and source.agents == []
    with pytest.raises(ValidationError, match="name"):
        KnowledgeConfig(name="Run Books", path="x")
    with pytest.raises(ValidationError, match="'C01' is not a place: write channel:id"):
        KnowledgeConfig(name="x", path="x", places=["slack:C01", "C01"])
    with pytest.raises(ValidationError, match="chunk_chars"):
        KnowledgeConfig(name="x", path="x", chunk_chars=10)


SOURCES = [KnowledgeConfig(name="open", path="a"),
           KnowledgeConfig(name="ops", path="b", agents=["maiden"],
                           places=["slack:C1", "discord:500"]),
           KnowledgeConfig(name="helper", path="c", agents=["helper"])]


@pytest.mark.parametrize(("agent", "origin", "expected"), [
    ("maiden", Origin(), ["open"]),  # the CLI: no place, so no source limited to places
    ("maiden", Origin(channel="slack", place=("C1",)), ["open", "ops"]),
    ("maiden", Origin(channel="slack", place=("C2",)), ["open"]),
    ("maiden", Origin(channel="discord", place=("C1",)), ["open"]),  # another channel's C1
    # A Discord thread (thread, parent channel, guild): its guild is its place too.
    ("maiden", Origin(channel="discord", place=("900", "700", "500")), ["open", "ops"]),
    ("helper", Origin(channel="slack", place=("C1",)), ["open", "helper"]),
    ("other", Origin(), ["open"]),
])
def test_a_run_searches_the_sources_of_its_agent_and_place(
        agent: str, origin: Origin, expected: list[str]) -> None:
    assert open_sources(SOURCES, agent, origin) == expected


@pytest.mark.parametrize(("path", "patterns", "expected"), [
    ("drafts/wip.md", ["drafts/**"], True),
    ("drafts/deep/wip.md", ["drafts/**"], True),
    ("drafts/wip.md", ["drafts"], True),  # a folder's name leaves out all of it
    ("ops/drafts/wip.md", ["drafts/**"], False),
    ("ops/drafts/wip.md", ["*/drafts"], True),
    ("notes.tmp.md", ["*.tmp.md"], True),
    ("deep/notes.tmp.md", ["*.tmp.md"], True),  # ``*`` matches ``/`` too
    ("deploy.md", ["*.tmp.md", "drafts/**"], False),
    ("deploy.md", [], False),
])
def test_exclude_patterns_match_a_path_or_one_of_its_folders(
        path: str, patterns: list[str], expected: bool) -> None:
    assert excluded(path, patterns) is expected
