"""The files store's knowledge passages: ``knowledge/{sha256(source, path)}``, one file per
indexed file holding its record and its passages, replaced whole (so a file's passages
change with its record, at once). A search reads them all and ranks each passage by the
words of the query it holds (how many, then how often), with no stemming: the files store
is for a small deployment, whose folders are small."""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from pathlib import Path

from pydantic import BaseModel

from ...model.knowledge import IndexedFile, Passage, Piece, search_words
from ..knowledge import KnowledgeStore
from .core import FilesCore, parse_file
from .names import key_file_name

__all__ = ["FilesKnowledge"]


class _Indexed(BaseModel):
    file: IndexedFile
    passages: list[Passage]


class FilesKnowledge(FilesCore, KnowledgeStore):
    """The files store's ``KnowledgeStore``."""

    async def indexed_files(self, source: str | None = None) -> list[IndexedFile]:
        found = await self._disk.io(self._indexed)
        return sorted((i.file for i in found if source in (None, i.file.source)),
                      key=lambda f: (f.source, f.path))

    async def index_file(self, file: IndexedFile, pieces: Sequence[Piece]) -> None:
        indexed = _Indexed(file=file, passages=[
            Passage(source=file.source, path=file.path, n=n, text=p.text, section=p.section,
                    page=p.page) for n, p in enumerate(pieces)])
        await self._disk.io(self._disk.write, self._knowledge_path(file.source, file.path),
                            indexed.model_dump_json().encode())

    async def drop_indexed_file(self, source: str, path: str) -> bool:
        def drop() -> bool:
            where = self._knowledge_path(source, path)
            there = where.exists()
            self._disk.remove([where])
            return there

        return await self._disk.io(drop)

    async def search_passages(self, query: str, sources: Collection[str], *,
                              limit: int = 5) -> list[Passage]:
        words, wanted = search_words(query), set(sources)
        if not words or not wanted or limit < 1:
            return []
        scored = []
        for indexed in await self._disk.io(self._indexed):
            if indexed.file.source not in wanted:
                continue
            for passage in indexed.passages:
                held = re.findall(r"[^\W_]+", f"{passage.section or ''} {passage.text}"
                                  .casefold())
                score = (sum(w in held for w in words), sum(held.count(w) for w in words))
                if score[0]:
                    scored.append((score, passage))
        scored.sort(key=lambda s: (-s[0][0], -s[0][1], s[1].source, s[1].path, s[1].n))
        return [passage for _, passage in scored[:limit]]

    # -- synchronous work, run in a worker thread

    def _knowledge_path(self, source: str, path: str) -> Path:
        name = key_file_name(source + "\0" + path)
        return self._folder("knowledge") / f"{name}.json"

    def _indexed(self) -> list[_Indexed]:
        return [parse_file(path, _Indexed)
                for path in sorted(self._folder("knowledge").glob("*.json"))]
