"""The SQLite store's knowledge passages, searched with FTS5 and ranked by BM25 (the tables
are ``schema.KNOWLEDGE``'s)."""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Sequence

from ...model.knowledge import IndexedFile, Passage, Piece, search_words
from ..knowledge import KnowledgeStore
from .core import SQLiteCore

__all__ = ["SQLiteKnowledge"]


class SQLiteKnowledge(SQLiteCore, KnowledgeStore):
    """The SQLite store's ``KnowledgeStore``."""

    async def indexed_files(self, source: str | None = None) -> list[IndexedFile]:
        where, params = ("WHERE source = ?", (source,)) if source is not None else ("", ())
        rows = await self._fetchall(
            f"SELECT data FROM knowledge_files {where} ORDER BY source, path", params)
        return [IndexedFile.model_validate_json(row[0]) for row in rows]

    async def index_file(self, file: IndexedFile, pieces: Sequence[Piece]) -> None:
        def replace(db: sqlite3.Connection) -> None:
            _drop(db, file.source, file.path)
            db.executemany(
                "INSERT INTO knowledge_passages (source, path, n, section, page, text) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                [(file.source, file.path, n, p.section, p.page, p.text)
                 for n, p in enumerate(pieces)])
            db.execute("INSERT INTO knowledge_files VALUES (?, ?, ?)",
                       (file.source, file.path, file.model_dump_json()))

        await self._write(replace)

    async def drop_indexed_file(self, source: str, path: str) -> bool:
        return await self._write(_drop, source, path)

    async def search_passages(self, query: str, sources: Collection[str], *,
                              limit: int = 5) -> list[Passage]:
        words, sources = search_words(query), list(sources)
        if not words or not sources or limit < 1:
            return []
        match = " OR ".join(f'"{word}"' for word in words)  # (words: letters and digits)
        rows = await self._fetchall(
            "SELECT p.source, p.path, p.n, p.section, p.page, p.text "
            "FROM knowledge_fts JOIN knowledge_passages AS p ON p.id = knowledge_fts.rowid "
            f"WHERE knowledge_fts MATCH ? AND p.source IN ({','.join('?' * len(sources))}) "
            "ORDER BY bm25(knowledge_fts) LIMIT ?", (match, *sources, limit))
        return [Passage(source=r[0], path=r[1], n=r[2], section=r[3], page=r[4], text=r[5])
                for r in rows]


def _drop(db: sqlite3.Connection, source: str, path: str) -> bool:
    db.execute("DELETE FROM knowledge_passages WHERE source = ? AND path = ?", (source, path))
    return db.execute("DELETE FROM knowledge_files WHERE source = ? AND path = ?",
                      (source, path)).rowcount == 1
