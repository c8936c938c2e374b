"""The indexing pass over the ``[[knowledge]]`` folders, and the search the
``search_knowledge`` tool asks (``KnowledgeSearch``, the ``knowledge`` service).

A pass walks each source's folder (its sub-folders too, never out of it through a
symbolic link), reads each document it takes and hashes it, and compares the digest with
the store's record: an unchanged file is left alone, a new or changed one is cut
(``model.knowledge.cut``) and stored, a file gone from the folder (or now excluded, or too
big) is dropped, and so is every file of a source no longer configured. Reading, hashing
and cutting happen in a worker thread, one file at a time, so a large folder never holds up
the event loop. The store replaces a file's passages with its record in one write, so a
pass cut off anywhere (a kill, a shutdown) leaves each file as it was or as it is now, and
the next pass, which compares digests again, goes on from there: passes are idempotent.

A source whose folder is missing keeps what was indexed of it (a share not mounted yet is
not a reason to forget it); the pass says so in its log and in the source's status.

A source with ``shared_in`` also takes the files people shared in those places
(``shared_files``): its paths under ``shared/<place>/`` are theirs, the rest its folder's.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

from ..errors import StoreError
from ..model.knowledge import (
    IndexedFile,
    KnowledgeConfig,
    Piece,
    cut,
    excluded,
    kind_of,
    open_sources,
)
from ..model.runs import Origin
from ..stores.knowledge import KnowledgeStore
from .shared_files import SharedFilesStore, index_shared, is_shared

if TYPE_CHECKING:
    from .operator import Operator

__all__ = [
    "KNOWLEDGE_LEASE",
    "Indexer",
    "IndexerStore",
    "KnowledgeSearch",
    "SourceStatus",
    "folder_of",
    "keep_indexed",
]

log = logging.getLogger("maiden.knowledge")

KNOWLEDGE_LEASE = "role:knowledge-index"
"""The lease a serving process holds while it indexes: one pass at a time among replicas."""



class IndexerStore(KnowledgeStore, SharedFilesStore, Protocol):
    """What a pass needs of the store: the passages, and the runs, threads and blobs in
    which the shared files are found."""


_PROGRESS_EVERY = 100
"""Files between two progress lines of a source (and one at its end)."""


@dataclass(slots=True)
class SourceStatus:
    """What is known of a source: its folder, what the store holds of it, the last pass."""

    name: str
    folder: Path | None
    """None: the source has no folder, only files shared in its places."""
    files: int = 0
    passages: int = 0
    last_indexed_at: float | None = None
    """When a file of it was last stored (None: never)."""
    last_pass_at: float | None = None
    """When this process last finished a pass over it (None: not yet)."""
    running: bool = False
    last_error: str | None = None
    """What went wrong in the last pass (a missing folder, files that could not be read)."""
    changed: int = 0
    """Files stored in the last pass (new or changed)."""
    removed: int = 0
    """Files dropped in the last pass."""


def folder_of(source: KnowledgeConfig, base_dir: Path) -> Path | None:
    """A source's folder: its ``path``, relative to agent.toml's folder (``base_dir``);
    None for a source of shared files only."""
    if source.path is None:
        return None
    return (base_dir / Path(source.path).expanduser()).absolute()


async def _stored_status(store: KnowledgeStore, sources: Sequence[KnowledgeConfig],
                         base_dir: Path) -> list[SourceStatus]:
    """Each source's status as the store has it."""
    by_source: dict[str, list[IndexedFile]] = {}
    for file in await store.indexed_files():
        by_source.setdefault(file.source, []).append(file)
    found = []
    for source in sources:
        files = by_source.get(source.name, [])
        found.append(SourceStatus(
            source.name, folder_of(source, base_dir), files=len(files),
            passages=sum(f.passages for f in files),
            last_indexed_at=max((f.indexed_at for f in files), default=None)))
    return found


Progress = Callable[[str], None]
"""Told each progress line of a pass (the CLI prints them; the log has them anyway)."""


class Indexer:
    """Runs passes over the configured sources into ``store``; ``status`` says how each
    stands. One pass at a time in a process (a second waits for the first)."""

    def __init__(self, store: IndexerStore, sources: Sequence[KnowledgeConfig],
                 base_dir: Path, *, clock: Callable[[], float] = time.time) -> None:
        self._store = store
        self._sources = list(sources)
        self._base_dir = base_dir
        self._clock = clock
        self._status = {s.name: SourceStatus(s.name, folder_of(s, base_dir))
                        for s in sources}
        self._one = asyncio.Lock()

    def status(self) -> list[SourceStatus]:
        """Each source's status, as this process's passes left it."""
        return list(self._status.values())

    @property
    def indexing(self) -> bool:
        """Whether a pass runs in this process now: between two sources, and while the
        files of sources no longer configured are dropped, no source says ``running``."""
        return self._one.locked()

    async def stored(self) -> list[SourceStatus]:
        """Each source's status as the store has it, whoever indexed it (`maiden knowledge
        status`): no pass of this process in it."""
        return await _stored_status(self._store, self._sources, self._base_dir)

    async def index(self, progress: Progress | None = None) -> list[SourceStatus]:
        """One pass over every source, then the sources no longer configured dropped;
        each source's status after it. ``StoreError`` if the store fails (what was stored
        until then stays, each file whole)."""
        async with self._one:
            for source in self._sources:
                await self._source(source, progress)
            names = {s.name for s in self._sources}
            gone = [f for f in await self._store.indexed_files() if f.source not in names]
            for file in gone:
                await self._store.drop_indexed_file(file.source, file.path)
            for name in sorted({f.source for f in gone}):
                _say(progress, f"{name}: no longer configured; its files dropped")
            return self.status()

    async def _source(self, source: KnowledgeConfig, progress: Progress | None) -> None:
        status = self._status[source.name]
        status.running, status.changed, status.removed = True, 0, 0
        try:
            status.last_error = await self._walk_source(source, status, progress)
            if source.shared_in:
                changed, removed = await index_shared(self._store, self._store, source,
                                                      self._clock)
                status.changed, status.removed = (status.changed + changed,
                                                  status.removed + removed)
                _say(progress, f"{source.name}: shared files, {changed} stored, "
                     f"{removed} removed")
        except StoreError as exc:
            status.last_error = f"the store failed: {exc}"
            raise
        finally:
            status.running = False
        status.last_pass_at = self._clock()
        stored = await self._store.indexed_files(source.name)
        status.files, status.passages = len(stored), sum(f.passages for f in stored)
        status.last_indexed_at = max((f.indexed_at for f in stored), default=None)

    async def _walk_source(self, source: KnowledgeConfig, status: SourceStatus,
                           progress: Progress | None) -> str | None:
        """Index the source's folder; what went wrong, if anything. A source with no
        folder (any more) drops what it had of one."""
        folder = status.folder
        if folder is None:
            for file in await self._store.indexed_files(source.name):
                if not is_shared(file.path):
                    await self._store.drop_indexed_file(source.name, file.path)
                    status.removed += 1
            return None
        if not folder.is_dir():
            problem = f"folder not found: {folder} (what was indexed of it is kept)"
            log.warning("%s: %s", source.name, problem)
            return problem
        paths, too_big = await asyncio.to_thread(_documents, folder, source)
        for path in too_big:
            log.warning("%s: %s passed over: over max_file_bytes (%s bytes)", source.name,
                        path, f"{source.max_file_bytes:,}")
        if source.shared_in:
            paths = _not_shared(source, paths)
        known = {f.path: f for f in await self._store.indexed_files(source.name)
                 if not is_shared(f.path)}
        unreadable: list[str] = []
        for n, path in enumerate(paths, 1):
            done = await self._file(source, folder, path, known.get(path))
            if done == "unreadable":
                unreadable.append(path)
            status.changed += done == "stored"
            if n % _PROGRESS_EVERY == 0 and n < len(paths):
                _say(progress, f"{source.name}: {n} of {len(paths)} files, "
                     f"{status.changed} changed")
        for path in sorted(known.keys() - set(paths)):
            await self._store.drop_indexed_file(source.name, path)
            status.removed += 1
        _say(progress, f"{source.name}: {len(paths)} of {len(paths)} files, "
             f"{status.changed} changed, {status.removed} removed")
        if unreadable:
            return f"{len(unreadable)} file(s) could not be read: {', '.join(unreadable[:3])}"
        return None

    async def _file(self, source: KnowledgeConfig, folder: Path, path: str,
                    known: IndexedFile | None) -> Literal["stored", "same", "unreadable"]:
        """Store one file's passages if it is new or changed. One that cannot be read
        keeps its old record, if any."""
        try:
            read = await asyncio.to_thread(
                _read, folder / path, path, source.chunk_chars,
                known.digest if known else None)
        except OSError as exc:
            log.warning("%s: %s cannot be read: %s", source.name, path, exc)
            return "unreadable"
        if read is None:
            return "same"
        digest, pieces = read
        await self._store.index_file(
            IndexedFile(source=source.name, path=path, digest=digest,
                        passages=len(pieces), indexed_at=self._clock()), pieces)
        return "stored"


async def keep_indexed(indexer: Indexer, operator: Operator, every_s: float, *,
                       sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
    """`maiden run`'s passes: one now, then one every ``every_s`` seconds (0: only the
    first), each holding ``KNOWLEDGE_LEASE``, so that among replicas on one store one indexes
    at a time (a pass due while another process holds it is left to that process, and one
    due while a pass runs in this process, the console's, is left to that pass). A pass
    the store fails is logged and tried again at the next one. Runs until cancelled."""
    while True:
        try:
            await _leased_pass(indexer, operator)
        except StoreError as exc:
            log.warning("knowledge: the indexing pass failed: %s (tried again at the next)",
                        exc)
        if every_s <= 0:
            return
        await sleep(every_s)


async def _leased_pass(indexer: Indexer, operator: Operator) -> None:
    """One pass under ``KNOWLEDGE_LEASE``, unless a pass runs in this process already: the
    lease is the runtime's, not the pass's, so a second pass here would take it again and
    give it up under the first, and another process could index beside it."""
    if indexer.indexing:
        log.info("knowledge: a pass is under way in this process; this one is left to it")
        return
    holder = await operator.take_lease(KNOWLEDGE_LEASE)
    if holder is not None:
        log.info("knowledge: %s is indexing; this process leaves it the pass", holder)
        return
    try:
        await indexer.index()
    finally:
        await operator.release_lease(KNOWLEDGE_LEASE)


def _say(progress: Progress | None, line: str) -> None:
    log.info("%s", line)
    if progress is not None:
        progress(line)


def _not_shared(source: KnowledgeConfig, paths: list[str]) -> list[str]:
    """The folder's paths, less those that look like its shared files' (``shared/x:y/..``):
    passed over, with a line in the log, so neither part drops the other's."""
    clash = [p for p in paths if is_shared(p)]
    for path in clash:
        log.warning("%s: %s passed over: shared/<channel:place>/ holds the files shared "
                    "in its places", source.name, path)
    return [p for p in paths if not is_shared(p)] if clash else paths


def _documents(folder: Path, source: KnowledgeConfig) -> tuple[list[str], list[str]]:
    """The files of ``folder`` the source takes (paths relative to it, sorted), and those
    passed over as too big. Hidden files and folders (``.git``) are left out; symbolic
    links to folders are not followed, and a linked file is taken only if it lies in the
    folder."""
    root = folder.resolve()
    taken: list[str] = []
    too_big: list[str] = []
    for top, dirs, names in os.walk(root, followlinks=False):
        dirs[:] = [d for d in dirs if not d.startswith(".")]  # .git, .obsidian, ...
        for name in names:
            if name.startswith("."):
                continue
            full = Path(top, name)
            path = full.relative_to(root).as_posix()
            if kind_of(path) is None or excluded(path, source.exclude):
                continue
            try:
                real = full.resolve(strict=True)
                size = real.stat().st_size
            except (OSError, RuntimeError):
                continue  # a broken or looping link
            if not real.is_relative_to(root) or not real.is_file():
                continue
            (too_big if size > source.max_file_bytes else taken).append(path)
    return sorted(taken), sorted(too_big)


def _read(file: Path, path: str, chunk_chars: int, known: str | None
          ) -> tuple[str, list[Piece]] | None:
    """The file's digest and passages; None if its digest is ``known`` (unchanged)."""
    data = file.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest == known:
        return None
    return digest, cut(path, data, chunk_chars)


class KnowledgeSearch:
    """The ``knowledge`` service: a search over the sources a run may use."""

    def __init__(self, store: IndexerStore, sources: Sequence[KnowledgeConfig]) -> None:
        self._store = store
        self.sources = list(sources)

    def open_to(self, agent: str, origin: Origin) -> list[str]:
        """The sources a run of ``agent`` from ``origin`` may search."""
        return open_sources(self.sources, agent, origin)

    async def search(self, query: str, agent: str, origin: Origin, *, limit: int = 5
                     ) -> tuple[list[str], list[dict[str, object]]]:
        """The sources searched, and the passages found in them, best first: each with its
        ``source``, ``path``, ``section`` or ``page``, ``cite`` and ``text``."""
        sources = self.open_to(agent, origin)
        if not sources:
            return [], []
        found = await self._store.search_passages(query, sources, limit=limit)
        return sources, [{"source": p.source, "path": p.path,
                          **({"section": p.section} if p.section else {}),
                          **({"page": p.page} if p.page else {}),
                          "cite": p.cite(), "text": p.text} for p in found]
