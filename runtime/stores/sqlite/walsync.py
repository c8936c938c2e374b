"""Durable commits that the event loop never waits on the disk for.

In WAL mode, ``synchronous=FULL`` is ``NORMAL`` plus a flush of the log after each commit
(https://sqlite.org/pragma.html#pragma_synchronous): the commit's frames are appended to
the log, then the log is flushed. So a durable write is committed on the loop's thread
with ``NORMAL`` (its frames reach the OS in microseconds), and its caller then waits,
without the loop waiting, for ``fdatasync`` of the log on a thread of its own
(``WalSync.durable``). Commits made while a flush is under way share the next one: the
answers of many threads, one flush.

Until its flush returns, a commit is visible to readers but not yet on disk: a power cut in
that fraction of a millisecond loses it, and everything after it in the log with it (the
log's frames are checksummed in a chain: a later one never survives an earlier one). Its
writer is not told it landed before it is on disk, so nothing that follows from it (a
reply sent, a message acknowledged) happens before. A kill -9 loses nothing either way:
the frames are in the OS's cache. An accepted message's writer, its flush apart (the disk
slow), is told at once, with the flush to wait for (``after``): its worker starts while the
disk works, and the message is acknowledged once that flush is done; anything of the run's
that leaves the process (a call with an effect, a reply) waits for a durable write of its
own, whose flush comes after (the log is flushed in order).

A flush that fails is not tried again: the OS may have dropped the pages it could not
write, and a later flush that succeeds would say nothing of them, so the commits after
would be told they are on disk behind a hole in the log's chain. The store is lost instead
(``failed``, as for a deleted file): every durable write after it fails, and a restart
recovers the log from what the disk holds.

The trip to the flushing thread and back costs about as much as the flush itself on a fast
disk. So a commit made while the loop has nothing else ready to run (``flush="auto"``, the
store's default) flushes the log itself when the log's recent flushes were quick
(``quick``: ``QUICK_S``): SQLite's own flush, within the commit (``synchronous=FULL``),
which on the development VM costs ~0.1 ms a message less than the same commit with
``NORMAL`` and a flush of the log right after it (``bench/README.md``). The loop is then
held for a fraction of a millisecond that nobody was waiting for. A slow one (its time is
given to ``flushed_within``) sends the next ones to the flushing thread until the disk is
quick again. Such a commit does not wait for a flush under way on the flushing thread
(that thread, done with the disk, may still wait for the interpreter's lock), but its
writer is told only once that flush is over too (``behind``). (With other work ready on
the loop, ``GroupCommit`` sends the whole write to the writer's thread.)
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ...errors import StoreError, StoreGone
from ..identity import flush_failed

__all__ = ["QUICK_S", "WalSync"]

QUICK_S = 0.0005
"""A flush of the log this quick (its recent average) may be made on the loop's thread."""

_datasync = getattr(os, "fdatasync", os.fsync)  # (macOS has no fdatasync)


class WalSync:
    """Flushes of one database's write-ahead log, on a thread of their own, shared."""

    def __init__(self, wal: Path, flushed: Callable[[float], None] = lambda s: None,
                 failed: Callable[[str], None] = lambda why: None) -> None:
        self.wal = wal
        self._flushed = flushed
        """Called on the loop after each flush it made, with how long it took (to count
        them)."""
        self._failed = failed
        """Called once, with why, when a flush fails: the store is lost."""
        self._failure: str | None = None
        """Why the log can no longer be said to be on disk (a flush failed), if it can't."""
        self._recent_s: float | None = None
        """How long the log's recent flushes took (a moving average; none made yet)."""
        self._fd: int | None = None
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="maiden-sqlite-sync")
        self._written = 0
        """Commits made that must be flushed..."""
        self._synced = 0
        """...and how many of them are on disk."""
        self._closed = False
        self._flush: tuple[asyncio.Future[float], int] | None = None
        """The flush under way, and how many commits it covers."""

    async def durable(self) -> None:
        """Wait until the commit just made (and every one before it) is on disk: a flush
        begun before it was made does not count; one begun after covers it and every
        other commit made meanwhile."""
        await self.after()

    def after(self) -> Coroutine[Any, Any, None]:
        """``durable`` for the commit just made, to await later: the commit is counted
        now (a flush begun from now on covers it), the flush begun when it is awaited
        unless one is by then."""
        if self._failure is not None:
            raise StoreGone(self._failure)
        self._written += 1
        return self._until(self._written)

    def quick(self) -> bool:
        """Whether the log's recent flushes were quick (``QUICK_S``): a commit may then
        flush the log itself, on the loop's thread (also while a flush is under way on the
        flushing thread: then ``behind`` before its writer is told)."""
        recent = self._recent_s
        return recent is not None and recent < QUICK_S and self._failure is None

    async def behind(self) -> None:
        """After a commit flushed the log itself: wait for the flush that was under way
        meanwhile, if one was, so that its failure fails this writer too (the pages it could
        not write may be dropped, and a later flush that succeeds says nothing of them)."""
        if self._flush is not None:
            await self._over(*self._flush)

    def flushed_within(self, took: float) -> None:
        """A commit just flushed the log itself (SQLite's own flush, ``synchronous=FULL``),
        its ``COMMIT`` taking ``took``: every commit made so far is on disk, and ``took``
        counts toward the disk's recent speed (a little over the flush's own)."""
        self._synced = self._written
        self._recent(took)

    async def settled(self) -> None:
        """Wait until every commit made so far is on disk (before the store closes); a
        failed flush is left to the writers waiting for it."""
        with contextlib.suppress(StoreError):
            await self._until(self._written)

    async def _until(self, target: int) -> None:
        while self._synced < target:
            # Begun at once, not in a task of its own: the disk works while the loop goes
            # on with whatever else it has.
            await self._over(*(self._flush or self._begin()))

    async def _over(self, flush: asyncio.Future[float], upto: int) -> None:
        """Until ``flush`` is over; raises if it failed, or another did meanwhile."""
        try:
            # Shielded: a caller cancelled meanwhile leaves the flush to the others.
            await asyncio.shield(flush)
        except OSError as exc:
            raise self._lost(exc) from exc
        finally:
            self._settle(flush, upto)
        if self._failure is not None:  # another waiter's flush failed meanwhile
            raise StoreGone(self._failure)

    def _begin(self) -> tuple[asyncio.Future[float], int]:
        if self._closed:
            raise StoreError(f"{self.wal}: the store is closed")
        if self._failure is not None:
            raise StoreGone(self._failure)
        flush = asyncio.get_running_loop().run_in_executor(self._executor, self._flush_log)
        self._flush = flush, self._written
        return self._flush

    def _settle(self, flush: asyncio.Future[float], upto: int) -> None:
        """The flush is over (whichever of its waiters sees it first says so)."""
        if flush.done() and self._flush is not None and self._flush[0] is flush:
            self._flush = None
            if not flush.cancelled() and flush.exception() is None:
                self._synced = max(self._synced, upto)
                self._recent(flush.result())
                self._flushed(flush.result())

    def _lost(self, exc: OSError) -> StoreGone:
        """A flush failed: the error to raise, now and for every durable write after."""
        if self._failure is None:
            self._failure = flush_failed(f"{self.wal}: a flush of the write-ahead log", exc)
            self._failed(self._failure)
        return StoreGone(self._failure)

    def _recent(self, took: float) -> None:
        recent = self._recent_s
        self._recent_s = took if recent is None else recent + (took - recent) / 4

    def _flush_log(self) -> float:
        """On the sync thread; how long the flush took. The log is opened once and kept:
        SQLite keeps it (same file) while its connection is open; one that was removed is
        opened anew."""
        if self._fd is not None and os.fstat(self._fd).st_nlink == 0:
            os.close(self._fd)
            self._fd = None
        if self._fd is None:
            self._fd = os.open(self.wal, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        began = time.perf_counter()
        _datasync(self._fd)
        return time.perf_counter() - began

    def close(self) -> None:
        """After the last flush. (Closing a file drops the POSIX locks this process holds
        on it: SQLite locks the database file and the shared-memory index, not the log.)"""
        self._closed = True
        self._executor.shutdown(wait=True)
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

