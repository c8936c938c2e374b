"""The runtime's files: what people share, taken in once and stored once by content.

A file comes in two ways. With its bytes (the HTTP API, the CLI): ``put`` checks the
limits and stores it before the run is queued, and the run names it. Announced by a
platform (Slack, Discord): the run carries where to get it (``FileSource``), and ``take``
fetches and stores it as the run's first step, before its message enters the thread, so a
run never starts with half a file and a crash mid-download fetches again (a blob is named
by its sha256: storing it twice writes it once). A run whose files come from a channel
that is configured here but whose fetcher this runtime was not built with (a command
that opens no channels) is left for a runtime that has it, and a platform out of reach is
tried again (``fetching``). ``parts`` loads what a request shows the model; ``prune``
removes blobs no message names any more.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ..errors import FileRefused, FileUnreachable, NotFound
from ..model.attachments import (
    BlobInfo,
    FilePart,
    FileRef,
    FileSource,
    Seeing,
    TextPart,
    describe_blob,
    gone_part,
    human_size,
    media_type_of,
    to_part,
)
from ..model.config import FilesConfig
from ..model.entries import Entry, ToolResult, UserMessage
from ..model.runs import Run
from ..providers.models import UNKNOWN_CONTEXT
from ..retry import Failed, retrying
from ..stores.base import Store
from ..tools.base import ToolFile, ToolImage
from .fetching import Patience, fetcher_awaited

__all__ = ["FileFetcher", "Files", "Taken", "file_names", "named_blobs", "prune_files"]

log = logging.getLogger("maiden.files")

_CACHED_BYTES = 64_000_000
"""What the parts kept for the next request may hold (a run's turns send the same files
again): the newest first, the oldest dropped beyond this."""


class FileFetcher(Protocol):
    """How a channel downloads a file its platform announced (Slack with the bot token,
    Discord from its CDN): the bytes, at most ``max_bytes`` of them, or ``FileRefused``
    saying why not (too big once counted, a sign-in page instead of the file, gone), or
    ``FileUnreachable`` if the platform cannot be reached now (tried again)."""

    async def fetch(self, source: FileSource, max_bytes: int) -> bytes: ...


@dataclass(frozen=True, slots=True)
class Taken:
    """A run's files once taken in: those stored, and a line for each one refused."""

    refs: tuple[FileRef, ...] = ()
    refused: tuple[FileRefused, ...] = field(default=())

    @property
    def notice(self) -> str:
        """What the person (and the model) is told of the refused ones."""
        lines = [f"I could not read {r.name}: {r.why}." for r in self.refused]
        return "\n".join(lines)


class Files:
    """Takes files in under ``[files]``'s limits, stores them, loads them for the model.

    ``fetchers``: each channel's, by name. ``expected``: the channels configured here; a
    queued run whose files come from one of them with no fetcher here waits for a runtime
    that has it (``awaits``). ``patience``: how a download is tried again while its
    platform cannot be reached.
    """

    def __init__(self, store: Store, config: FilesConfig | None = None, *,
                 clock: Callable[[], float], fetchers: Mapping[str, FileFetcher] | None = None,
                 expected: Collection[str] = (),
                 patience: Patience | None = None) -> None:
        self.store = store
        self.config = config or FilesConfig()
        self.clock = clock
        self._fetchers: dict[str, FileFetcher] = dict(fetchers or {})
        self._expected = frozenset(expected)
        self._patience = patience or Patience()
        self._parts: OrderedDict[tuple[str, Seeing, int], FilePart] = OrderedDict()
        self._ahead: dict[str, list[FileRef | FileRefused]] = {}
        """What ``prefetch`` fetched, by run, until ``take`` (or ``forget``) has it."""

    def awaits(self, run: Run) -> str | None:
        """The channel whose fetcher a queued run waits for before it may start (it is
        configured here and this runtime has none), or None."""
        return fetcher_awaited(run, self._fetchers, self._expected)

    # -- taking files in

    def check(self, name: str, media_type: str, size: int | None) -> None:
        """``FileRefused`` if a file of this type and size is not taken in."""
        limit = self.config.max_bytes
        if size is not None and size > limit:
            raise FileRefused(name, f"it is {human_size(size)}; at most {human_size(limit)} "
                                    "are read ([files] max_bytes)", "size")
        if not self.config.allows(media_type):
            raise FileRefused(name, f"files of type {media_type} are not read here ([files] "
                                    "allowed_types)", "type")

    async def put(self, name: str, media_type: str | None, data: bytes) -> FileRef:
        """Check and store a file someone handed over with its bytes (the HTTP API, the
        CLI); ``FileRefused`` if it breaks a limit."""
        self.check(name, media_type_of(media_type, name), len(data))
        return await self._store(name, media_type, data)

    def too_many(self, count: int) -> None:
        """``FileRefused`` if one message carries more files than are read."""
        most = self.config.max_per_message
        if count > most:
            raise FileRefused(f"{count} files", f"at most {most} are read from one message "
                                                "([files] max_per_message)", "count")

    async def take(self, run: Run, window: int | None) -> Taken:
        """The run's files, stored: those it was given, and those its platform announced,
        fetched now. Beyond ``max_per_message`` and over a limit, refused with a reason; a
        text file's share of the window (``window``) is what it may fill of a request."""
        refs: list[FileRef] = list(run.files)
        refused: list[FileRefused] = []
        fetched = self._ahead.pop(run.id, None)
        for outcome in await self._fetch_all(run) if fetched is None else fetched:
            if isinstance(outcome, FileRefused):
                log.info("run %s: file refused: %s", run.id, outcome)
                refused.append(outcome)
            else:
                refs.append(outcome)
        return Taken(tuple(_shared(refs, window or UNKNOWN_CONTEXT, self.config.text_share)),
                     tuple(refused))

    async def prefetch(self, run: Run) -> None:
        """Fetch and store now the files a queued run's platform announced, for ``take``:
        called before the run waits for the runtime's lock (global concurrency), so a slow
        download holds up no other thread. A run that never gets to ``take`` (refused,
        cancelled, driven elsewhere) leaves its blobs stored, as a crash there would; a
        failure other than a refusal is left for ``take`` to meet again."""
        if not run.fetch or run.started_at is not None or run.id in self._ahead:
            return
        try:
            self._ahead[run.id] = await self._fetch_all(run)
        except Exception as exc:
            log.warning("run %s: fetching its files ahead failed (%s); they are fetched "
                        "when it starts", run.id, exc)

    def forget(self, run_id: str) -> None:
        """Drop what was fetched ahead for a run that did not take it."""
        self._ahead.pop(run_id, None)

    async def _fetch_all(self, run: Run) -> list[FileRef | FileRefused]:
        """Each announced file, stored, or why it is not (at most ``max_per_message`` with
        the files the run was given)."""
        room = self.config.max_per_message - len(run.files)
        outcomes: list[FileRef | FileRefused] = []
        for n, source in enumerate(run.fetch):
            if n >= room:
                outcomes.append(FileRefused(source.name, f"at most "
                                            f"{self.config.max_per_message} files are read "
                                            "from one message ([files] max_per_message)",
                                            "count"))
                continue
            try:
                outcomes.append(await self._fetch(source))
            except FileRefused as exc:
                outcomes.append(exc)
        return outcomes

    async def _fetch(self, source: FileSource) -> FileRef:
        self.check(source.name, media_type_of(source.media_type, source.name), source.size)
        fetcher = self._fetchers.get(source.via)
        if fetcher is None:
            raise FileRefused(source.name, f"the {source.via} channel is not running here to "
                                           "download it")
        data = await self._download(fetcher, source)
        self.check(source.name, media_type_of(source.media_type, source.name), len(data))
        return await self._store(source.name, source.media_type, data)

    async def _download(self, fetcher: FileFetcher, source: FileSource) -> bytes:
        """The file's bytes, tried again while its platform cannot be reached, for as long
        as ``patience`` allows; then refused, saying so."""
        def pause(failed: Failed[FileUnreachable]) -> float:
            error, waited = failed.error, failed.waited_s
            delay = self._patience.delay(failed.tries - 1, waited, error.retry_after)
            if delay is None:
                raise FileRefused(source.name, f"{error.why}, tried again for "
                                  f"{_duration(waited)}") from error
            return delay

        def told(failed: Failed[FileUnreachable], delay: float) -> None:
            log.warning("%s: %s; trying again in %.1fs", source.name, failed.error.why, delay)

        return await retrying(lambda: fetcher.fetch(source, self.config.max_bytes),
                              on=FileUnreachable, pause=pause, told=told,
                              sleep=self._patience.sleep)

    async def keep(self, files: Sequence[ToolFile]) -> tuple[FileRef, ...]:
        """Store the files a tool handed back (no ``[files]`` limit: a tool is trusted
        code, not a stranger's upload)."""
        return tuple([await self._store(f.name, f.media_type, f.data, checked=False)
                      for f in files])

    async def keep_images(self, tool: str, images: Sequence[ToolImage]
                          ) -> tuple[FileRef, ...]:
        """Store the images a tool showed the model, named after the tool."""
        return tuple([await self._store(f"{tool}-{n}{_suffix(i.media_type)}", i.media_type,
                                        i.data, checked=False)
                      for n, i in enumerate(images, 1)])

    async def _store(self, name: str, media_type: str | None, data: bytes, *,
                     checked: bool = True) -> FileRef:
        digest = hashlib.sha256(data).hexdigest()
        # Opening an image or a PDF to check it is CPU work: not on the event loop.
        ref = await asyncio.to_thread(describe_blob, data, name, media_type, digest,
                                      text_tokens=UNKNOWN_CONTEXT)
        if checked:
            self.check(name, ref.media_type, None)  # what the bytes are, not the claim
        await self.store.put_blob(data, ref.media_type, self.clock())
        return ref

    # -- showing files to the model

    async def parts(self, entries: Iterable[Entry], seeing: Seeing) -> dict[str, FilePart]:
        """What a request shows the model of each file its messages name, by digest."""
        found: dict[str, FilePart] = {}
        for entry in entries:
            shown = entry.files if isinstance(entry, UserMessage) else \
                entry.images if isinstance(entry, ToolResult) else ()
            for ref in shown:
                if ref.digest not in found:
                    found[ref.digest] = await self._part(ref, seeing)
        return found

    async def _part(self, ref: FileRef, seeing: Seeing) -> FilePart:
        key = (ref.digest, seeing, ref.tokens)
        part = self._parts.get(key)
        if part is not None:
            self._parts.move_to_end(key)
            return part
        try:
            data = await self.store.get_blob(ref.digest)
        except NotFound:
            return gone_part(ref)
        part = await asyncio.to_thread(to_part, ref, data, seeing)
        self._parts[key] = part
        while sum(_weight(p) for p in self._parts.values()) > _CACHED_BYTES \
                and len(self._parts) > 1:
            self._parts.popitem(last=False)
        return part

    # -- reading and pruning

    async def read(self, digest: str) -> tuple[BlobInfo, bytes]:
        """A stored file's record and bytes; ``NotFound`` if there is none."""
        info = await self.store.blob_info(digest)
        if info is None:
            raise NotFound(f"no file {digest} in the store")
        return info, await self.store.get_blob(digest)

    async def blobs(self) -> list[BlobInfo]:
        """Every stored file's record, oldest first."""
        return await self.store.blobs()

    async def names(self) -> dict[str, list[tuple[str, str]]]:
        """Each stored file a message names: the names it goes by, and the threads that
        name it so (``file_names``)."""
        return await file_names(self.store)

    async def prune(self, *, dry_run: bool = False) -> list[BlobInfo]:
        """Remove the blobs no message or result names, stored more than ``[files]
        retention_days`` ago (``dry_run``: only say which)."""
        return await prune_files(self.store, dry_run=dry_run,
                                 older_than=self.clock() - self.config.retention_days * 86_400)


async def named_blobs(store: Store) -> set[str]:
    """Every digest a message in the store names (its thread's entry, or its queued run)."""
    return set(await file_names(store))


async def file_names(store: Store) -> dict[str, list[tuple[str, str]]]:
    """Every digest a message in the store names (its thread's entry, or its queued run),
    with each name it goes by and the thread that names it so: ``(name, thread id)``, each
    once, in the order they are found (threads most recently active first)."""
    named: dict[str, dict[tuple[str, str], None]] = {}

    def note(refs: Iterable[FileRef], thread_id: str) -> None:
        for ref in refs:
            named.setdefault(ref.digest, {})[(ref.name, thread_id)] = None

    for info in await store.list_threads():
        for entry in await store.load_entries(info.id):
            if isinstance(entry, UserMessage):
                note(entry.files, info.id)
            elif isinstance(entry, ToolResult):
                note((*entry.files, *entry.images), info.id)
    for run in await store.list_runs():
        note((*run.files, *run.reply_files), run.thread_id)
    return {digest: list(places) for digest, places in named.items()}


async def prune_files(store: Store, *, older_than: float, dry_run: bool = False
                      ) -> list[BlobInfo]:
    """Remove the blobs no message names that were stored before ``older_than`` (a
    timestamp): younger ones may belong to a message being taken in right now. Those
    removed (with ``dry_run``: those that would be)."""
    named = await named_blobs(store)
    unnamed = [b for b in await store.blobs() if b.digest not in named
               and b.created_at < older_than]
    if not dry_run:
        await store.delete_blobs([b.digest for b in unnamed])
    return unnamed


def _shared(refs: Sequence[FileRef], window: int, share: float) -> list[FileRef]:
    """Text files cut to an even part of the message's share of the window."""
    texts = [r for r in refs if r.kind == "text"]
    if not texts:
        return list(refs)
    each = max(200, int(window * share) // len(texts))
    return [r.model_copy(update={"tokens": min(r.size // 4 + 1, each)}) if r.kind == "text"
            else r for r in refs]


def _duration(seconds: float) -> str:
    """``45 seconds``, ``12 minutes``, ``2.0 hours``."""
    if seconds < 120:
        return f"{seconds:.0f} seconds"
    if seconds < 7200:
        return f"{seconds / 60:.0f} minutes"
    return f"{seconds / 3600:.1f} hours"


def _suffix(media_type: str) -> str:
    return {"image/png": ".png", "image/jpeg": ".jpg", "image/gif": ".gif",
            "image/webp": ".webp"}.get(media_type, "")


def _weight(part: FilePart) -> int:
    return len(part.text) if isinstance(part, TextPart) else len(part.data)
