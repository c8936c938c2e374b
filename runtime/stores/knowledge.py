"""The store's knowledge role: the passages of the ``[[knowledge]]`` folders' files, with a
full-text search over them (SQLite's FTS5 ranked by BM25; PostgreSQL's text search ranked by
``ts_rank``; the files store a plain scan, counting the words each passage holds).

A file's passages are replaced in one write with its record (its digest), so an indexing
pass cut off by a crash leaves every file either as it was or as it is now: never a file
with half its passages, nor its passages twice; the next pass goes on from the digests."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Protocol

from ..model.knowledge import IndexedFile, Passage, Piece

__all__ = ["KnowledgeStore"]


class KnowledgeStore(Protocol):
    async def indexed_files(self, source: str | None = None) -> list[IndexedFile]:
        """The files indexed (of one source), by source and path."""

    async def index_file(self, file: IndexedFile, pieces: Sequence[Piece]) -> None:
        """The file's passages replaced by ``pieces`` (numbered from 0 in their order) and
        its record by ``file``, in one write."""

    async def drop_indexed_file(self, source: str, path: str) -> bool:
        """The file's passages and record removed (a file gone from its folder, or a
        source gone from the config); False if it was not indexed."""

    async def search_passages(self, query: str, sources: Collection[str], *,
                              limit: int = 5) -> list[Passage]:
        """The passages of ``sources`` that match any word of ``query``
        (``knowledge.search_words``), best first, at most ``limit``; none for a query
        without words."""
