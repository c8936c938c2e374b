"""Knowledge folders (``[[knowledge]]``) and the passages their documents are cut into.

A knowledge source is a folder of the team's own documents (Markdown, plain text, HTML,
PDF), or the files of those kinds people shared in the places it names (``shared_in``), or
both, that the agents it names may search (``search_knowledge``), in the places it names.
Each file is cut into passages of at most ``chunk_chars`` characters, and each passage
keeps where it came from, so that an answer built on it can cite it: Markdown and HTML by
their headings (a passage's ``section`` is its headings' path, ``Deploys > Rollback``),
plain text by paragraphs, a PDF by page (its ``page``, from 1). A passage never spans two
sections or two pages; a paragraph longer than a passage is cut at a line, else a space.

What is pure here: the config, which files a source takes (``kind_of``), and ``cut``. The
indexing pass (files found, digests compared, passages stored) is the serving layer's.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import PurePosixPath
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .attachments.parts import pdf_pages
from .config import Section
from .html_text import html_to_text
from .runs import Origin

__all__ = ["KINDS", "IndexedFile", "KnowledgeConfig", "KnowledgeIndexConfig", "Passage",
           "Piece", "cut", "excluded", "kind_of", "open_sources", "search_words"]

Kind = Literal["markdown", "text", "html", "pdf"]

KINDS: dict[str, Kind] = {".md": "markdown", ".markdown": "markdown", ".txt": "text",
                          ".text": "text", ".html": "html", ".htm": "html", ".pdf": "pdf"}
"""The files a knowledge source takes, by suffix (any case); others are passed over."""

_HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*))?$")
"""An ATX heading as CommonMark has it: up to three spaces, one to six ``#``, then a space
or the end (``#`` alone is an empty heading; ``#5`` is text)."""
_CLOSING = re.compile(r"(?:^|[ \t]+)#+[ \t]*$")
_FENCE = re.compile(r"^\s*(```|~~~)")


class KnowledgeConfig(Section):
    """``[[knowledge]]``: one folder of documents and/or the files shared in some places,
    and who may search it where."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,39}$", description=(
        "the source's name: in citations, logs and `maiden knowledge status`"))
    path: str | None = Field(default=None, min_length=1, description=(
        "the folder, relative to agent.toml; its Markdown, text, HTML and PDF files are "
        "indexed, in its sub-folders too (a source has a folder, `shared_in`, or both)"))
    shared_in: list[str] = Field(default=[], description=(
        "places (channel:place) whose shared files are indexed too: the Markdown, text, "
        "HTML and PDF files people sent in their threads, each once, dropped once its "
        "thread is erased; such a source is searched only in these places unless "
        "`places` says otherwise"))
    exclude: list[str] = Field(default=[], description=(
        "glob patterns of paths (relative to the folder) left out, e.g. \"drafts/**\""))
    agents: list[str] = Field(default=[], description=(
        "the agents that may search it; empty: every agent"))
    places: list[str] = Field(default=[], description=(
        "where it may be searched, as channel:place (\"slack:C0123ABCD\", "
        "\"discord:1234\"); empty: everywhere its agents answer"))
    chunk_chars: int = Field(default=1_200, ge=200, le=20_000, description=(
        "a passage's size at most, in characters"))
    max_file_bytes: int = Field(default=20_000_000, ge=1, description=(
        "a bigger file is passed over, with a line in the log"))

    @field_validator("places", "shared_in")
    @classmethod
    def _places(cls, places: list[str]) -> list[str]:
        for place in places:
            channel, _, where = place.partition(":")
            if not channel or not where:
                raise ValueError(f"{place!r} is not a place: write channel:id, e.g. "
                                 "\"slack:C0123ABCD\" or \"discord:1234\"")
        return places

    @model_validator(mode="after")
    def _something(self) -> KnowledgeConfig:
        if self.path is None and not self.shared_in:
            raise ValueError(f"knowledge {self.name!r}: give it a folder (path) or places "
                             "whose shared files it takes (shared_in), or both")
        return self

    @property
    def searched_in(self) -> list[str]:
        """Where it may be searched (empty: everywhere its agents answer): ``places``, else
        the places it takes shared files from, so that a file sent in a private channel is
        never found elsewhere unless the config says so."""
        return self.places or self.shared_in


class KnowledgeIndexConfig(Section):
    """``[knowledge_index]``: when `maiden run` indexes the ``[[knowledge]]`` folders."""

    every_minutes: float = Field(default=60, ge=0, description=(
        "minutes between two indexing passes of `maiden run` (the first once it is up); "
        "0: only the one at start (`maiden knowledge index` runs one at any time)"))


def open_sources(sources: Sequence[KnowledgeConfig], agent: str, origin: Origin) -> list[str]:
    """The sources a run of ``agent`` that came from ``origin`` may search: those naming
    the agent (or no agent), and naming its place (or no place; ``searched_in``). A place is
    ``channel:id`` and matches any id of the origin's place (a Discord thread's parent
    channel and guild count as its place too)."""
    here = {f"{origin.channel}:{id_}" for id_ in origin.place}
    return [s.name for s in sources
            if (not s.agents or agent in s.agents)
            and (not s.searched_in or not here.isdisjoint(s.searched_in))]


def excluded(path: str, patterns: Sequence[str]) -> bool:
    """Whether a file (its path in the folder, ``/`` between folders) is left out: a
    pattern matches the path or one of its folders (``drafts/**``, ``drafts``,
    ``*.tmp.md``; ``*`` also matches ``/``)."""
    parts = PurePosixPath(path).parts
    prefixes = ["/".join(parts[:n]) for n in range(1, len(parts) + 1)]
    return any(fnmatchcase(p, pattern) for pattern in patterns for p in prefixes)


@dataclass(frozen=True, slots=True)
class Piece:
    """One passage of a file: its text, and its section (headings' path) or page."""

    text: str
    section: str | None = None
    page: int | None = None


class Passage(BaseModel):
    """A passage as the store keeps it: the ``n``-th of its file's, with where it is."""

    model_config = ConfigDict(frozen=True)

    source: str
    path: str
    """The file's path in its source's folder, with ``/`` between folders."""
    n: int
    text: str
    section: str | None = None
    page: int | None = None

    def cite(self) -> str:
        """Where it is, as an answer cites it: ``runbooks/deploy.md, Deploys > Rollback``
        or ``reports/q4.pdf, page 3``."""
        where = self.section if self.section else f"page {self.page}" if self.page else None
        return f"{self.source}/{self.path}" + (f", {where}" if where else "")


class IndexedFile(BaseModel):
    """A file of a source as last indexed: its digest (sha256 of its bytes), so that an
    unchanged file is not read again, and how many passages it gave."""

    model_config = ConfigDict(frozen=True)

    source: str
    path: str
    digest: str
    passages: int
    indexed_at: float


def search_words(query: str, most: int = 32) -> list[str]:
    """The words of a search (letters and digits, case folded, each once), which the
    stores' full-text searches match any of: nothing of a query's own syntax reaches them."""
    words = dict.fromkeys(re.findall(r"[^\W_]+", query.casefold()))
    return list(words)[:most]


def kind_of(path: str) -> Kind | None:
    """What a file is read as, by its suffix; None for a file a source does not take."""
    return KINDS.get(PurePosixPath(path).suffix.lower())


def cut(path: str, data: bytes, max_chars: int) -> list[Piece]:
    """The passages of a file (``path`` says its kind), in the file's order; none for an
    empty file, a kind not taken, or a PDF that cannot be read."""
    kind = kind_of(path)
    if kind == "pdf":
        return [Piece(text, page=n) for n, page in enumerate(pdf_pages(data), 1)
                for text in _sized(page, max_chars)]
    text = data.decode("utf-8", errors="replace").removeprefix("\ufeff")
    if kind == "html":
        text = html_to_text(text, headings=True)[1]
    elif kind != "markdown":
        return [Piece(t) for t in _sized(text, max_chars)] if kind == "text" else []
    return [Piece(t, section=section) for section, body in _sections(text)
            for t in _sized(body, max_chars)]


def _sections(markdown: str) -> Iterator[tuple[str | None, str]]:
    """``(section, body)`` of each stretch between headings (a heading in a fenced code
    block is code, not a heading); the section is the path of headings above it."""
    path: list[tuple[int, str]] = []
    body: list[str] = []
    fenced = False
    for line in markdown.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
        heading = None if fenced else _HEADING.match(line)
        if heading is None:
            body.append(line)
            continue
        yield _path(path), "\n".join(body)
        body = []
        level = len(heading.group(1))
        title = _CLOSING.sub("", heading.group(2) or "").strip()
        path = [(lv, t) for lv, t in path if lv < level] + [(level, title)]
    yield _path(path), "\n".join(body)


def _path(path: list[tuple[int, str]]) -> str | None:
    return " > ".join(title for _, title in path if title) or None


def _sized(text: str, max_chars: int) -> Iterator[str]:
    """``text``'s paragraphs gathered into pieces of at most ``max_chars``; a paragraph
    too long for one is cut at lines, and a line too long at a space (or anywhere)."""
    paragraphs = (p.strip() for p in re.split(r"\n\s*\n", text))
    return _gathered((part for p in paragraphs if p for part in _split(p, max_chars)),
                     max_chars, "\n\n")


def _split(paragraph: str, max_chars: int) -> Iterator[str]:
    if len(paragraph) <= max_chars:
        return iter((paragraph,))
    lines = (cut for line in paragraph.splitlines() for cut in _cut(line, max_chars))
    return _gathered(lines, max_chars, "\n")


def _cut(line: str, max_chars: int) -> Iterator[str]:
    while len(line) > max_chars:
        at = line.rfind(" ", 0, max_chars + 1)
        at = at if at > max_chars // 2 else max_chars
        if cut := line[:at].rstrip():
            yield cut
        line = line[at:].lstrip()
    if line:
        yield line


def _gathered(parts: Iterable[str], max_chars: int, sep: str) -> Iterator[str]:
    """``parts`` (each at most ``max_chars``) joined by ``sep`` into pieces of at most
    ``max_chars``, in order."""
    piece = ""
    for part in parts:
        if piece and len(piece) + len(sep) + len(part) > max_chars:
            yield piece
            piece = ""
        piece = f"{piece}{sep}{part}" if piece else part
    if piece:
        yield piece
