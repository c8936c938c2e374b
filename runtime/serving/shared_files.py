"""The files people shared in a knowledge source's places (``shared_in``), for the indexing
pass: which there are now, and each one indexed, as a document of the source.

A file is "shared in" a place when a message of a thread there carried it (as its thread
keeps the message: files the runtime refused are not there) and its blob is still
stored. The store holds no index of runs by place, so a pass reads the runs (one
listing) and then the threads of those whose origin is in one of the places: a pass is
hourly by default, and this is what it costs.

A file is keyed by its digest, so one shared twice (or in two of the places) is indexed
once, under the first thread's place and name; its path in the source is
``shared/<place>/<name> (<digest head>)``, which is what a citation shows. Its digest is
the blob's, so an unchanged file is never read again. A file whose thread was erased (its
runs gone, and with them its blob unless another thread names it) or whose blob was
pruned is no longer listed, and the pass drops it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from ..errors import NotFound
from ..model.attachments import BlobInfo, FileRef
from ..model.entries import Entry, UserMessage
from ..model.knowledge import IndexedFile, KnowledgeConfig, cut, kind_of
from ..model.runs import Run
from ..stores.knowledge import KnowledgeStore

__all__ = ["SharedFile", "SharedFilesStore", "drop_unshared", "index_shared", "is_shared",
           "shared_files"]

log = logging.getLogger("maiden.knowledge")

SHARED = "shared/"
"""Where a source's shared files are, among its paths: ``shared/slack:C0OPS/...``."""

_SUFFIXES = {"text/markdown": ".md", "text/x-markdown": ".md", "text/plain": ".txt",
             "text/html": ".html", "application/pdf": ".pdf"}
"""A file named without a suffix knowledge takes is read by its media type instead."""


class SharedFilesStore(Protocol):
    """What the pass reads of a store to find the shared files: runs, threads, blobs."""

    async def list_runs(self) -> list[Run]: ...

    async def load_entries(self, thread_id: str) -> list[Entry]: ...

    async def blob_info(self, digest: str) -> BlobInfo | None: ...

    async def get_blob(self, digest: str) -> bytes: ...


@dataclass(frozen=True, slots=True)
class SharedFile:
    """A file shared in one of a source's places, as the source indexes it."""

    path: str
    """``shared/<place>/<name> (<digest head>)``: its path in the source, unique by digest."""
    digest: str
    kind_name: str
    """Its name with a suffix that says its kind (``cut`` reads the kind from it)."""


def is_shared(path: str) -> bool:
    """Whether a source's path is a shared file's (``shared/<channel:place>/...``), not
    one of its folder's."""
    head, _, rest = path.removeprefix(SHARED).partition("/")
    return path.startswith(SHARED) and ":" in head and bool(rest)


def _place_of(run: Run, places: Sequence[str]) -> str | None:
    """The first of ``places`` the run came from (any id of its origin's place)."""
    here = {f"{run.origin.channel}:{id_}" for id_ in run.origin.place}
    return next((p for p in places if p in here), None)


def _kind_name(ref: FileRef) -> str | None:
    """The file's name, with a suffix for its media type if its own says no kind; None
    for a file knowledge does not read."""
    if kind_of(ref.name) is not None:
        return ref.name
    suffix = _SUFFIXES.get(ref.media_type.split(";")[0].strip().lower())
    return ref.name + suffix if suffix else None


async def shared_files(store: SharedFilesStore, source: KnowledgeConfig
                       ) -> tuple[list[SharedFile], list[str]]:
    """The files shared in the source's places that it takes, by path, and the names of
    those passed over as over ``max_file_bytes``."""
    threads: dict[str, str] = {}
    for run in await store.list_runs():
        place = _place_of(run, source.shared_in)
        if place is not None:
            threads.setdefault(run.thread_id, place)
    found: dict[str, SharedFile] = {}
    too_big: list[str] = []
    seen: set[str] = set()
    for thread_id, place in threads.items():
        entries = await store.load_entries(thread_id)
        for ref in (f for e in entries if isinstance(e, UserMessage) for f in e.files):
            kind_name = _kind_name(ref)
            if ref.digest in seen or kind_name is None:
                continue
            seen.add(ref.digest)
            if ref.size > source.max_file_bytes:
                too_big.append(f"{place}/{ref.name}")
            elif await store.blob_info(ref.digest) is not None:
                name = ref.name.replace("/", "_").strip() or "file"
                found[ref.digest] = SharedFile(
                    f"{SHARED}{place}/{name} ({ref.digest[:8]})", ref.digest, kind_name)
    return sorted(found.values(), key=lambda f: f.path), too_big


async def index_shared(store: KnowledgeStore, blobs: SharedFilesStore,
                       source: KnowledgeConfig, clock: Callable[[], float]
                       ) -> tuple[int, int]:
    """Index the source's shared files: new ones stored (each with its passages, in one
    write), those no longer shared dropped; how many of each."""
    files, too_big = await shared_files(blobs, source)
    for name in too_big:
        log.warning("%s: shared file %s passed over: over max_file_bytes (%s bytes)",
                    source.name, name, f"{source.max_file_bytes:,}")
    known = {f.path: f for f in await store.indexed_files(source.name) if is_shared(f.path)}
    stored = 0
    for file in files:
        if (had := known.get(file.path)) is not None and had.digest == file.digest:
            continue
        try:
            data = await blobs.get_blob(file.digest)
        except NotFound:
            continue  # pruned or erased since it was listed: the next pass drops it
        pieces = await asyncio.to_thread(cut, file.kind_name, data, source.chunk_chars)
        await store.index_file(IndexedFile(
            source=source.name, path=file.path, digest=file.digest, passages=len(pieces),
            indexed_at=clock()), pieces)
        stored += 1
    gone = sorted(known.keys() - {f.path for f in files})
    for path in gone:
        await store.drop_indexed_file(source.name, path)
    return stored, len(gone)



async def drop_unshared(store: KnowledgeStore, blobs: SharedFilesStore) -> int:
    """Drop the shared files whose bytes the store no longer holds (the last thread that
    carried them erased), at once rather than at the next pass: what a person erased stops
    being searchable with it. How many went. Each is one write; a crash between the
    erasure and this leaves them to the next pass, which drops them too."""
    gone = 0
    for file in await store.indexed_files():
        if is_shared(file.path) and await blobs.blob_info(file.digest) is None:
            await store.drop_indexed_file(file.source, file.path)
            gone += 1
    return gone
