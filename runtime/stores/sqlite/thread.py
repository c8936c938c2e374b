"""One ``sqlite3`` connection on one dedicated thread, a whole operation per round trip.

A ``sqlite3.Connection`` blocks, so it lives on a thread of its own, and the event
loop hands it work. The unit of work is a plain function of the connection, not a
statement: a checkpoint is half a dozen statements, and every trip to the thread
and back costs two wake-ups (tens of microseconds), so one trip per operation keeps
that cost off the number of statements. The thread takes jobs from a queue and
hands each result back with ``loop.call_soon_threadsafe``; the connection is
created and closed on that thread.

While no job is queued, the thread only waits, and a short operation may run on the
calling thread instead (``idle``, ``here``): a trip costs more than a small indexed read
or a write that does not wait for the disk. Jobs are counted when handed in and when their
outcome arrives back on the loop, so the connection is never used from two threads at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar

from ...errors import CorruptStore, StoreError, StoreFull, StoreGone
from ..identity import flush_failed

__all__ = ["SQLiteThread", "store_error"]

P = ParamSpec("P")
T = TypeVar("T")

# fn, its arguments, and where its outcome goes. fn is None for the last job: close.
_Job = tuple[Callable[..., Any] | None, tuple[Any, ...], dict[str, Any],
             asyncio.AbstractEventLoop, asyncio.Future[Any]]


class _Queued:
    """Jobs handed to the thread whose outcome has not come back to the loop yet."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0


class SQLiteThread:
    """A ``sqlite3.Connection`` living on its own thread; ``open`` it, ``call`` it, ``close`` it."""

    def __init__(self, path: Path, jobs: queue.SimpleQueue[_Job], thread: threading.Thread,
                 db: sqlite3.Connection, queued: _Queued) -> None:
        """Use ``await SQLiteThread.open(path)``."""
        self.path = path
        self._jobs = jobs
        self._thread = thread
        self._db = db
        self._queued = queued
        self._open = True
        self.lost: Callable[[str], None] = lambda why: None
        """Called with why when an error means the store is lost (a flush to disk failed:
        ``store_error`` makes it ``StoreGone``)."""

    @classmethod
    async def open(cls, path: str | Path, *, busy_timeout_s: float = 5.0,
                   name: str = "maiden-sqlite") -> SQLiteThread:
        """Start the thread and connect on it (autocommit: transactions are explicit).

        ``busy_timeout_s`` is how long a statement waits for another connection's lock.
        If the connection cannot be made, the thread is stopped before this raises.
        """
        path = Path(path)
        loop = asyncio.get_running_loop()
        connected: asyncio.Future[sqlite3.Connection] = loop.create_future()
        jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        queued = _Queued()
        # A daemon: a connection nobody closed must not keep the process from exiting.
        thread = threading.Thread(target=_serve,
                                  args=(path, busy_timeout_s, jobs, loop, connected, queued),
                                  name=name, daemon=True)
        thread.start()
        try:
            db = await connected
        except BaseException as exc:
            if connected.cancelled():  # we were: the thread closes and ends once connected
                jobs.put((None, (), {}, loop, loop.create_future()))
            else:  # it could not connect, and has returned
                _join(thread)
            if isinstance(exc, sqlite3.Error):
                raise store_error(path, exc, "cannot open it") from exc
            raise
        return cls(path, jobs, thread, db, queued)

    @property
    def idle(self) -> bool:
        """Open, and no job handed in is still out: ``here`` may use the connection."""
        return self._open and self._queued.count == 0

    def here(
        self,
        fn: Callable[Concatenate[sqlite3.Connection, P], T],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """``fn(connection, ...)`` on the calling thread, now; only while ``idle``, and only
        for what takes well under a millisecond (it holds up the event loop)."""
        if not self.idle:
            raise StoreError(f"{self.path}: the connection is in use on its thread")
        try:
            return fn(self._db, *args, **kwargs)
        except sqlite3.Error as exc:
            raise self._error(exc) from exc

    async def call(
        self,
        fn: Callable[Concatenate[sqlite3.Connection, P], T],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """``fn(connection, *args, **kwargs)`` on the connection's thread, in one trip.

        Calls run one at a time in the order they were made. ``sqlite3.Error`` comes
        back as ``StoreError`` naming the database.
        """
        if not self._open:
            raise StoreError(f"{self.path}: the connection is closed")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._queued.count += 1
        self._jobs.put((fn, args, kwargs, loop, future))
        try:
            return await future
        except sqlite3.Error as exc:
            raise self._error(exc) from exc

    def _error(self, exc: sqlite3.Error) -> StoreError:
        error = store_error(self.path, exc)
        if isinstance(error, StoreGone):
            self.lost(str(error))
        return error

    async def close(self) -> None:
        """Close the connection on its thread, after every call made before; stop the thread.

        Idempotent. Once it returns, the thread is gone.
        """
        if not self._open:
            return
        self._open = False
        loop = asyncio.get_running_loop()
        closed: asyncio.Future[None] = loop.create_future()
        self._queued.count += 1
        self._jobs.put((None, (), {}, loop, closed))
        try:
            await closed
        except sqlite3.Error as exc:
            raise StoreError(f"cannot close {self.path}: {exc}") from exc
        finally:
            if not closed.cancelled():  # else it ends by itself, after the calls before
                _join(self._thread)


_CORRUPT = (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)
_FLUSH_FAILED = (sqlite3.SQLITE_IOERR_FSYNC, sqlite3.SQLITE_IOERR_DIR_FSYNC)
# No room: for a page (FULL), or to make the ``-shm`` file a first connection needs (its
# own "disk I/O error"; SHMSIZE is nothing but a failure to grow that file).
_FULL = {sqlite3.SQLITE_FULL: "the disk is full",
         sqlite3.SQLITE_IOERR_SHMSIZE: "no room on the disk for its -shm file"}


def store_error(path: Path, exc: sqlite3.Error, doing: str = "") -> StoreError:
    """``exc`` as maiden's error, in one short line naming the database: ``CorruptStore``
    when the file's pages or a row's bytes are damaged (a run on that thread then fails
    ``corrupt_store`` instead of waiting forever), ``StoreGone`` when a flush to disk
    failed, ``StoreFull`` when the disk has no room, else ``StoreError``."""
    where = f"{path}: {doing}: " if doing else f"{path}: "
    text = str(exc)
    if text.startswith("Could not decode to UTF-8"):
        # Python's own message quotes the damaged row (long, and full of binary): name
        # the column only.
        column = text.split("'")[1] if text.count("'") >= 2 else "?"
        return CorruptStore(f"{where}a stored row is damaged (its {column!r} is not valid "
                            "UTF-8 text)")
    code = getattr(exc, "sqlite_errorcode", None)
    if code in _CORRUPT:
        return CorruptStore(f"{where}the database file is damaged ({text})")
    if code in _FLUSH_FAILED:
        return StoreGone(flush_failed(f"{where}a flush", text))
    if code in _FULL:
        return StoreFull(f"{where}{_FULL[code]} ({text})")
    return StoreError(where + text.splitlines()[0] if text else where + type(exc).__name__)


def _serve(path: Path, timeout: float, jobs: queue.SimpleQueue[_Job],
           loop: asyncio.AbstractEventLoop, connected: asyncio.Future[sqlite3.Connection],
           queued: _Queued) -> None:
    """The thread: connect, then run jobs until the one that closes the connection."""
    try:
        # Not bound to this thread: ``here`` uses it from the loop's while no job is out.
        db = sqlite3.connect(path, timeout=timeout, isolation_level=None,
                             check_same_thread=False)
    except BaseException as exc:
        _reply(loop, _set_exception, connected, exc)
        return
    _reply(loop, _set_result, connected, db)
    while True:
        fn, args, kwargs, loop, future = jobs.get()
        try:
            if fn is None:
                db.close()
                result = None
            else:
                result = fn(db, *args, **kwargs)
        except BaseException as exc:
            if isinstance(exc, StopIteration):  # a future cannot hold one
                exc = RuntimeError(f"StopIteration escaped {fn!r}")
            _reply(loop, _set_exception, future, exc, queued)
        else:
            _reply(loop, _set_result, future, result, queued)
        if fn is None:
            return


def _reply(loop: asyncio.AbstractEventLoop, settle: Callable[[asyncio.Future[Any], Any], None],
           future: asyncio.Future[Any], outcome: object, queued: _Queued | None = None) -> None:
    with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is waiting any more
        loop.call_soon_threadsafe(_settle, settle, future, outcome, queued)


def _settle(settle: Callable[[asyncio.Future[Any], Any], None], future: asyncio.Future[Any],
            outcome: object, queued: _Queued | None) -> None:
    # On the loop: the job is done with the connection (even if its caller gave up waiting).
    if queued is not None:
        queued.count -= 1
    settle(future, outcome)


def _set_result(future: asyncio.Future[Any], result: object) -> None:
    if not future.done():  # the caller may have been cancelled meanwhile
        future.set_result(result)


def _set_exception(future: asyncio.Future[Any], exc: BaseException) -> None:
    if not future.done():
        future.set_exception(exc)


def _join(thread: threading.Thread) -> None:
    # The thread has handed back its last outcome and has only to return: no real wait.
    thread.join()
