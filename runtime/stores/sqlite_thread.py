"""One ``sqlite3`` connection on one dedicated thread, a whole operation per round trip.

A ``sqlite3.Connection`` blocks, so it lives on a thread of its own, and the event
loop hands it work. The unit of work is a plain function of the connection, not a
statement: a checkpoint is half a dozen statements, and every trip to the thread
and back costs two wake-ups (tens of microseconds), so one trip per operation keeps
that cost off the number of statements. The thread takes jobs from a queue and
hands each result back with ``loop.call_soon_threadsafe``; the connection is
created, used and closed on that thread only.
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

from ..errors import StoreError

__all__ = ["SQLiteThread"]

P = ParamSpec("P")
T = TypeVar("T")

# fn, its arguments, and where its outcome goes. fn is None for the last job: close.
_Job = tuple[Callable[..., Any] | None, tuple[Any, ...], dict[str, Any],
             asyncio.AbstractEventLoop, asyncio.Future[Any]]


class SQLiteThread:
    """A ``sqlite3.Connection`` living on its own thread; ``open`` it, ``call`` it, ``close`` it."""

    def __init__(self, path: Path, jobs: queue.SimpleQueue[_Job], thread: threading.Thread
                 ) -> None:
        """Use ``await SQLiteThread.open(path)``."""
        self.path = path
        self._jobs = jobs
        self._thread = thread
        self._open = True

    @classmethod
    async def open(cls, path: str | Path, *, busy_timeout_s: float = 5.0,
                   name: str = "maiden-sqlite") -> SQLiteThread:
        """Start the thread and connect on it (autocommit: transactions are explicit).

        ``busy_timeout_s`` is how long a statement waits for another connection's lock.
        If the connection cannot be made, the thread is stopped before this raises.
        """
        path = Path(path)
        loop = asyncio.get_running_loop()
        connected: asyncio.Future[None] = loop.create_future()
        jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        # A daemon: a connection nobody closed must not keep the process from exiting.
        thread = threading.Thread(target=_serve, args=(path, busy_timeout_s, jobs, loop, connected),
                                  name=name, daemon=True)
        thread.start()
        try:
            await connected
        except BaseException as exc:
            if connected.cancelled():  # we were: the thread closes and ends once connected
                jobs.put((None, (), {}, loop, loop.create_future()))
            else:  # it could not connect, and has returned
                _join(thread)
            if isinstance(exc, sqlite3.Error):
                raise StoreError(f"cannot open {path}: {exc}") from exc
            raise
        return cls(path, jobs, thread)

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
        self._jobs.put((fn, args, kwargs, loop, future))
        try:
            return await future
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path}: {exc}") from exc

    async def close(self) -> None:
        """Close the connection on its thread, after every call made before; stop the thread.

        Idempotent. Once it returns, the thread is gone.
        """
        if not self._open:
            return
        self._open = False
        loop = asyncio.get_running_loop()
        closed: asyncio.Future[None] = loop.create_future()
        self._jobs.put((None, (), {}, loop, closed))
        try:
            await closed
        except sqlite3.Error as exc:
            raise StoreError(f"cannot close {self.path}: {exc}") from exc
        finally:
            if not closed.cancelled():  # else it ends by itself, after the calls before
                _join(self._thread)


def _serve(path: Path, timeout: float, jobs: queue.SimpleQueue[_Job],
           loop: asyncio.AbstractEventLoop, connected: asyncio.Future[None]) -> None:
    """The thread: connect, then run jobs until the one that closes the connection."""
    try:
        db = sqlite3.connect(path, timeout=timeout, isolation_level=None)
    except BaseException as exc:
        _reply(loop, _set_exception, connected, exc)
        return
    _reply(loop, _set_result, connected, None)
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
            _reply(loop, _set_exception, future, exc)
        else:
            _reply(loop, _set_result, future, result)
        if fn is None:
            return


def _reply(loop: asyncio.AbstractEventLoop, settle: Callable[[asyncio.Future[Any], Any], None],
           future: asyncio.Future[Any], outcome: object) -> None:
    with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is waiting any more
        loop.call_soon_threadsafe(settle, future, outcome)


def _set_result(future: asyncio.Future[Any], result: object) -> None:
    if not future.done():  # the caller may have been cancelled meanwhile
        future.set_result(result)


def _set_exception(future: asyncio.Future[Any], exc: BaseException) -> None:
    if not future.done():
        future.set_exception(exc)


def _join(thread: threading.Thread) -> None:
    # The thread has handed back its last outcome and has only to return: no real wait.
    thread.join()
