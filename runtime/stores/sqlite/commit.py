"""Group commit: the writes that arrive together share one transaction and its fsync.

With ``synchronous=full`` a commit costs a disk flush, and one connection commits
one transaction at a time: with many threads checkpointing at once, each commit
would queue up behind the others' flushes. So writes handed in while a transaction
is on the connection's thread wait for the next one and all go in it, each in a
savepoint of its own, so that one that fails (a stale write) leaves the others in.

A write that finds the connection idle (nothing queued, nothing on its thread) is done
at once on the event loop's thread: the trip to the connection's thread and back costs
more than a small transaction. It does not wait for another process's lock there (if
the database is busy, it goes to the thread, which waits). WAL checkpoints, which copy
the log into the database and can take milliseconds, always run on the thread.

A durable write's commit must reach the disk, which the loop must not wait for: with
``flush="apart"`` it is committed on the loop's thread without a flush and its caller
waits for a flush of the log on a thread of its own, shared by the commits made meanwhile
(``WalSync``). ``flush="writer"`` sends the whole write to the connection's thread, where
the writes that come meanwhile share its commit and flush; ``flush="loop"`` commits with the
flush on the loop's thread. By default (``flush="auto"``) a durable write made while the
loop has other work ready goes to the writer's thread; one made while the loop has nothing
else ready is committed on it with its flush (SQLite's own) if the disk is quick (the
trip to a thread costs as much as such a flush), even while a flush is under way on the
flushing thread, else apart. ``bench/`` measures all four. ``write_committed`` (an
accepted message's write) committed on the loop's thread with its flush apart returns once
committed, with that flush to await, so that its caller goes on while the (slow) disk works.

What runs in each transaction, on whichever thread, is ``transact.py``'s.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, Concatenate, Literal, ParamSpec, TypeVar, cast

from ...errors import StoreError
from .mark import Mark
from .thread import SQLiteThread
from .transact import (
    BUSY,
    FLUSHING,
    Level,
    QueuedWrite,
    Target,
    WriteCounts,
    durable_transaction,
    mark_and_checkpoint,
    write_group,
    write_here,
)
from .walsync import WalSync

__all__ = ["SLOW_S", "FlushWay", "GroupCommit", "WriteCounts"]

log = logging.getLogger("maiden.store")

P = ParamSpec("P")
T = TypeVar("T")


SLOW_S = 0.001
"""A commit on the event loop's thread that holds it up longer than this is counted slow."""

FlushWay = Literal["auto", "apart", "loop", "writer"]
"""Where a durable write waits for the disk: ``apart`` (committed on the loop's thread
without a flush, then the log flushed on a thread of its own, shared; falls back to
``writer`` where the journal is not a WAL), ``writer`` (the whole write on the connection's
thread), ``loop`` (the flush on the loop's thread), or ``auto``: ``writer`` while the loop
has other work ready, else committed on the loop with its flush when the disk is quick,
apart when it is not."""


class GroupCommit:
    """The writing connection: ``write`` joins the next group commit, ``transaction`` does not.

    Both run ``fn(connection, ...)`` in one ``BEGIN IMMEDIATE`` transaction; every
    write gets its result or its exception.
    """

    checkpoint_every = 250
    """Commits between two WAL checkpoints (the connection's own automatic ones are off:
    they would run inside a commit, on whichever thread made it)."""

    def __init__(self, conn: SQLiteThread, *, synchronous: str = "full",
                 busy_timeout_s: float = 10.0, inline: bool = True,
                 flush: FlushWay = "writer", wal: Path | None = None,
                 lost: Callable[[str], None] = lambda why: None,
                 mark: Mark | None = None) -> None:
        self.conn = conn
        self.mark = mark
        """This process's mark, moved on before each checkpoint (``mark``), or None."""
        conn.lost = lost  # a flush SQLite made failed
        self.inline = inline
        """Whether a write that finds the connection idle is done on the loop's thread."""
        # The connection's own busy timeout is 0: it waits for another process's write lock
        # here, on its thread only (the loop's thread never waits for one).
        self.counts = WriteCounts()
        """Transactions, flushes and level changes so far."""
        level = Level(synchronous.upper(), self.counts)
        self._waits = Target(conn.path, busy_timeout_s, level)
        self._no_wait = Target(conn.path, 0.0, level)
        # What a group of only non-durable writes commits with: no fsync of its own (in
        # WAL mode, NORMAL syncs at checkpoints only); the next durable commit's fsync
        # covers its frames, which precede it in the log.
        self._lazy = "NORMAL" if synchronous.upper() in FLUSHING else None
        self._synchronous = synchronous.upper()
        apart = flush in ("auto", "apart")
        self._apart = WalSync(wal, self._flushed_apart, lost) \
            if apart and wal is not None and self._lazy is not None else None
        self.flush: FlushWay = flush if self._apart is not None else \
            "writer" if apart else flush
        """Where durable writes wait for the disk (``auto`` and ``apart`` only on a WAL:
        ``wal``)."""
        self._pending: list[QueuedWrite] = []
        self._flusher: asyncio.Task[None] | None = None
        self._commits = 0
        self._checkpointer: asyncio.Task[None] | None = None
        self._restarts = False
        """The next write starts the log again (and flushes its header): not on the loop."""

    async def transaction(
        self,
        fn: Callable[Concatenate[sqlite3.Connection, P], T],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """``fn(connection, ...)`` in a transaction of its own: all of it or none of it."""
        try:
            done = await self.conn.call(durable_transaction, self._waits, self._synchronous,
                                        fn, *args, **kwargs)
            self._restarts = False
            return done
        finally:
            self._committed(1)

    async def write(
        self,
        fn: Callable[Concatenate[sqlite3.Connection, P], T],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """``fn(connection, ...)`` in the next group commit, in a savepoint of its own."""
        return cast(T, await self._join(QueuedWrite(fn, args, kwargs, True,
                                               asyncio.get_running_loop().create_future())))

    async def write_lazily(
        self,
        fn: Callable[Concatenate[sqlite3.Connection, P], T],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """As ``write``, but it may return before the write is on disk: it is on disk
        with the next durable write (see ``Checkpoint.durable``)."""
        return cast(T, await self._join(QueuedWrite(fn, args, kwargs, False,
                                               asyncio.get_running_loop().create_future())))

    async def write_committed(
        self,
        fn: Callable[Concatenate[sqlite3.Connection, P], T],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> tuple[T, Coroutine[Any, Any, None] | None]:
        """As ``write``, but a write committed on the loop's thread with its flush apart
        returns as soon as it is committed, with that flush to await (once); else with None,
        on disk already. The flush is counted now: every durable write after it waits for
        a flush that covers it too (the log is flushed in order)."""
        later: list[Coroutine[Any, Any, None]] = []
        done = await self._join(QueuedWrite(fn, args, kwargs, True,
                                       asyncio.get_running_loop().create_future()), later)
        return cast(T, done), (later[0] if later else None)

    async def _join(self, write: QueuedWrite,
                    later: list[Coroutine[Any, Any, None]] | None = None) -> Any:
        """``write`` done: here, on the loop's thread, when the connection is idle (its
        flush, if durable, within the commit or apart), else in the next group commit on the
        connection's thread. ``later``: where a flush apart is put for the caller to await,
        instead of being waited for here."""
        if self.inline and self._flusher is None and not self._pending and self.conn.idle \
                and not self._restarts:
            level = self._level_for([write])
            flushes = level in FLUSHING
            if flushes and self._to_writer():
                self.counts.sent_there += 1
            else:
                apart = flushes and self._apart is not None
                # Nothing else ready and the disk quick: the commit flushes the log itself
                # (SQLite's own flush, within it), cheaper than a commit and a flush after,
                # and than going on while the disk works (``later``: that pays a trip to
                # the flushing thread, which only a slow flush repays).
                within = apart and self.flush == "auto" and self._quick()
                apart = apart and not within
                if apart and self._lazy:
                    level = self._lazy
                outcome: object = BUSY
                began = time.perf_counter()
                try:
                    outcome = self.conn.here(write_here, self._no_wait, write, level)
                finally:
                    self._committed(1)
                    self._held(time.perf_counter() - began,
                               flushed=within and outcome is not BUSY)
                if outcome is not BUSY:
                    if within:
                        assert self._apart is not None
                        await self._apart.behind()
                    elif apart:
                        assert self._apart is not None
                        if later is not None:
                            later.append(self._apart.after())
                            return outcome
                        await self._apart.durable()
                    return outcome
        self._pending.append(write)
        if self._flusher is None:
            self._flusher = asyncio.create_task(self._flush(), name="maiden-sqlite-commit")
        return await write.future

    def _to_writer(self) -> bool:
        """Whether a durable write goes to the writer's thread whole: always with
        ``flush="writer"``; with ``"auto"`` while the loop has other work ready (there the
        writes that come meanwhile share its commit and flush, and SQLite works while the
        loop's Python goes on)."""
        return self.flush == "writer" or (self.flush == "auto" and not _loop_idle())

    def _quick(self) -> bool:
        """Whether the log's recent flushes were quick and none is under way."""
        return self._apart is not None and self._apart.quick()

    def _flushed_apart(self, took: float) -> None:
        self.counts.synced += 1

    def _held(self, took: float, *, flushed: bool = False) -> None:
        """A write on the loop's thread held it up for ``took`` seconds (``flushed``: its
        ``COMMIT`` flushed the log, which is counted as a flush made on the loop, timed
        alone: the disk's time, not the write's Python, nor a collection of the garbage
        that the write's objects set off)."""
        counts = self.counts
        counts.here += 1
        if flushed:
            assert self._apart is not None
            flush_s = self._no_wait.level.commit_s
            self._apart.flushed_within(flush_s)
            counts.flushed_here += 1
            counts.flushed_here_max_s = max(counts.flushed_here_max_s, flush_s)
            took -= flush_s
        counts.here_s += took
        counts.here_max_s = max(counts.here_max_s, took)
        counts.here_slow += took > SLOW_S

    async def close(self) -> None:
        """Let the writes already handed in land, then close the connection."""
        if self._flusher is not None:
            await asyncio.wait([self._flusher])
        if self._checkpointer is not None:
            await asyncio.wait([self._checkpointer])
        if self._apart is not None:
            await self._apart.settled()  # what was committed on the loop is on disk
        try:
            await self.conn.close()
        finally:
            if self._apart is not None:
                self._apart.close()

    def _level_for(self, group: list[QueuedWrite]) -> str:
        """The ``synchronous`` level the group commits with."""
        if self._lazy is None or any(w.durable for w in group):
            return self._synchronous
        return self._lazy

    def _committed(self, count: int) -> None:
        self._commits += count
        if self._commits >= self.checkpoint_every and self._checkpointer is None:
            self._commits = 0
            self._checkpointer = asyncio.create_task(self._checkpoint(),
                                                     name="maiden-sqlite-checkpoint")

    async def _checkpoint(self) -> None:
        try:
            await self.checkpoint()
        finally:
            self._checkpointer = None

    async def checkpoint(self) -> None:
        """Copy the WAL into the database, as far as no reader holds it back, the mark
        moved on first (a failure is logged: the next one tries again, the log only grows
        meanwhile)."""
        mark, value = self.mark, 0
        if mark is not None:
            value = mark.next()
        try:
            # The mark's commit is not flushed by itself: the checkpoint flushes the log.
            full = await self.conn.call(mark_and_checkpoint, self._waits,
                                        self._lazy or self._synchronous, mark, value)
        except StoreError as exc:
            log.warning("WAL checkpoint failed: %s", exc)
            return
        # Whole, the log is in the database now: the next write starts it again from its
        # beginning, and SQLite flushes the log's new header with that write, whatever
        # ``synchronous`` says. That flush is made on the writer's thread.
        self._restarts = full or (self._restarts and mark is None)
        if full and mark is not None:
            mark.checkpointed(value)

    async def _flush(self) -> None:
        group: list[QueuedWrite] = []
        try:
            while self._pending:
                group, self._pending = self._pending, []
                level = self._level_for(group)
                try:
                    outcomes = await self.conn.call(write_group, self._waits, group, level)
                except Exception as exc:  # the transaction as a whole failed
                    outcomes = [exc] * len(group)
                else:
                    self._restarts = False
                self._committed(1)
                for write, outcome in zip(group, outcomes, strict=True):
                    if write.future.done():
                        continue
                    if isinstance(outcome, BaseException):
                        write.future.set_exception(outcome)
                    else:
                        write.future.set_result(outcome)
        finally:
            self._flusher = None
            # Failed here, so no later flush writes what its caller was told did not land.
            interrupted, self._pending = [*group, *self._pending], []
            for write in interrupted:
                if not write.future.done():
                    write.future.set_exception(StoreError(f"{self.conn.path}: the write was "
                                                          "interrupted"))


def _loop_idle() -> bool:
    """Whether the running loop has nothing else ready to run (asyncio's own loop keeps its
    ready callbacks in ``_ready``; another loop, without it, is never taken for idle)."""
    ready = getattr(asyncio.get_running_loop(), "_ready", None)
    return ready is not None and not ready


