"""The PostgreSQL store's knowledge passages, searched with its text search (``@@`` on each
passage's stored ``tsvector``, in a GIN index) and ranked by ``ts_rank``."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from ...model.knowledge import IndexedFile, Passage, Piece, search_words
from ..knowledge import KnowledgeStore
from .core import PostgresCore

__all__ = ["PostgresKnowledge"]


class PostgresKnowledge(PostgresCore, KnowledgeStore):
    """The PostgreSQL store's ``KnowledgeStore``."""

    async def indexed_files(self, source: str | None = None) -> list[IndexedFile]:
        if source is None:
            return await self._parsed(IndexedFile.model_validate_json,
                                      "SELECT data FROM knowledge_files ORDER BY source, path")
        return await self._parsed(
            IndexedFile.model_validate_json,
            "SELECT data FROM knowledge_files WHERE source = $1 ORDER BY path", source)

    async def index_file(self, file: IndexedFile, pieces: Sequence[Piece]) -> None:
        async with self._transaction() as conn:
            await _drop(conn, file.source, file.path)
            await conn.executemany(
                "INSERT INTO knowledge_passages (source, path, n, section, page, text) "
                "VALUES ($1, $2, $3, $4, $5, $6)",
                [(file.source, file.path, n, p.section, p.page, p.text)
                 for n, p in enumerate(pieces)])
            await conn.execute("INSERT INTO knowledge_files VALUES ($1, $2, $3)",
                               file.source, file.path, file.model_dump_json())

    async def drop_indexed_file(self, source: str, path: str) -> bool:
        async with self._transaction() as conn:
            return await _drop(conn, source, path)

    async def search_passages(self, query: str, sources: Collection[str], *,
                              limit: int = 5) -> list[Passage]:
        words, sources = search_words(query), list(sources)
        if not words or not sources or limit < 1:
            return []
        rows = await self._fetch(
            "SELECT source, path, n, section, page, text "
            "FROM knowledge_passages, to_tsquery('english', $1) AS q "
            "WHERE tsv @@ q AND source = ANY($2) "
            "ORDER BY ts_rank(tsv, q) DESC, source, path, n LIMIT $3",
            " | ".join(words), sources, limit)
        return [Passage(source=r[0], path=r[1], n=r[2], section=r[3], page=r[4], text=r[5])
                for r in rows]


async def _drop(conn: Any, source: str, path: str) -> bool:
    await conn.execute("DELETE FROM knowledge_passages WHERE source = $1 AND path = $2",
                       source, path)
    done = await conn.execute("DELETE FROM knowledge_files WHERE source = $1 AND path = $2",
                              source, path)
    return bool(done == "DELETE 1")
