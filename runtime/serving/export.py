"""A thread as JSON lines, for a person who asks for what is kept about them (``maiden
threads export``, ``GET /v1/threads/{id}/export``, the console's Export link).

One JSON object a line, each naming its ``type``, in this order::

    {"type": "thread", "format": 1, "thread_id": "...", "exported_at": 1767225600.0}
    {"type": "entry", "seq": 0, "entry": {...}}           its history, in order
    {"type": "run", "run": {...}, "transitions": [...]}   each run, oldest first
    {"type": "vote", "vote": {...}}                       the votes on its replies
    {"type": "note", "note": {...}}                       its memory (the thread's notes)
    {"type": "memory", "memory": {...}}                   memories learned in it or kept
                                                          for it (``memories_of_thread``)
    {"type": "file", "digest": "...", "names": [...], "media_type": "...", "size": 3,
     "created_at": 1767225600.0, "stored": true}          each file it names, by digest

Records are written as the store holds them, read page by page (a thread of any length
costs the same memory). A file's bytes are not in the export: it names each by its sha256,
which ``GET /v1/files/{digest}`` (or the console) serves. Known secret values (the
configured tokens and keys: ``secrets``) never appear: each is written ``[redacted]``
wherever it would.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable
from typing import Any

from ..errors import NotFound
from ..model.attachments import FileRef
from ..model.entries import Entry, ToolResult, UserMessage
from ..model.runs import Run
from ..stores.base import Store
from ..stores.erasure import thread_scope

__all__ = ["FORMAT", "ThreadExport"]

FORMAT = 1
PAGE = 500
"""Entries read at a time."""
REDACTED = "[redacted]"


class ThreadExport:
    """One thread's export (``lines``), made by ``of``: whether the thread exists is known
    before a line is written."""

    def __init__(self, store: Store, thread_id: str, runs: list[Run], *, at: float,
                 secrets: Iterable[str] = ()) -> None:
        self._store = store
        self.thread_id = thread_id
        self._runs = runs
        self._at = at
        # As they appear in JSON text (escaped), longest first; short values would redact
        # ordinary words (a real token is long).
        self._secrets = sorted({json.dumps(s, ensure_ascii=False)[1:-1] for s in secrets
                                if len(s) >= 6}, key=len, reverse=True)

    @classmethod
    async def of(cls, store: Store, thread_id: str, *, at: float,
                 secrets: Iterable[str] = ()) -> ThreadExport:
        """The export of ``thread_id``; ``NotFound`` if there is no such thread."""
        runs = await store.list_runs(thread_id=thread_id)
        if not runs and not await store.thread_length(thread_id):
            raise NotFound(f"no thread {thread_id!r}")
        return cls(store, thread_id, runs, at=at, secrets=secrets)

    async def lines(self) -> AsyncIterator[str]:
        """The export, a line at a time (each ending with a newline)."""
        store, thread_id = self._store, self.thread_id
        yield self._line({"type": "thread", "format": FORMAT, "thread_id": thread_id,
                          "exported_at": self._at})
        files: dict[str, dict[str, None]] = {}
        offset = 0
        while True:
            page = await store.load_entries(thread_id, offset=offset, limit=PAGE)
            for seq, entry in enumerate(page, offset):
                _named(files, _files_of(entry))
                yield self._line({"type": "entry", "seq": seq,
                                  "entry": entry.model_dump(mode="json")})
            offset += len(page)
            if len(page) < PAGE:
                break
        for run in self._runs:
            _named(files, (*run.files, *run.reply_files))
            steps = await store.transitions(run.id)
            yield self._line({"type": "run", "run": run.model_dump(mode="json"),
                              "transitions": [t.model_dump(mode="json") for t in steps]})
        for run in self._runs:
            for vote in await store.votes(run_id=run.id):
                yield self._line({"type": "vote", "vote": vote.model_dump(mode="json")})
        for note in await store.notes(thread_scope(thread_id)):
            yield self._line({"type": "note", "note": note.model_dump(mode="json")})
        for memory in await store.memories_of_thread(thread_id):
            yield self._line({"type": "memory", "memory": memory.model_dump(mode="json")})
        for digest, names in files.items():
            info = await store.blob_info(digest)
            yield self._line({
                "type": "file", "digest": digest, "names": list(names),
                "media_type": info.media_type if info else None,
                "size": info.size if info else None,
                "created_at": info.created_at if info else None, "stored": info is not None})

    def _line(self, record: dict[str, Any]) -> str:
        text = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
        for secret in self._secrets:
            text = text.replace(secret, REDACTED)
        return text + "\n"


def _files_of(entry: Entry) -> tuple[FileRef, ...]:
    if isinstance(entry, UserMessage):
        return entry.files
    if isinstance(entry, ToolResult):
        return (*entry.files, *entry.images)
    return ()


def _named(files: dict[str, dict[str, None]], refs: Iterable[FileRef]) -> None:
    for ref in refs:
        files.setdefault(ref.digest, {})[ref.name] = None
