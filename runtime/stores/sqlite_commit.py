"""Group commit: the writes that arrive together share one transaction and its fsync.

With ``synchronous=full`` a commit costs a disk flush, and one connection commits
one transaction at a time: with many threads checkpointing at once, each commit
would queue up behind the others' flushes. So writes handed in while a transaction
is on the connection's thread wait for the next one and all go in it, each in a
savepoint of its own, so that one that fails (a stale write) leaves the others in.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar, cast

from ..errors import StoreError
from .sqlite_thread import SQLiteThread

__all__ = ["GroupCommit"]

P = ParamSpec("P")
T = TypeVar("T")


class GroupCommit:
    """The writing connection: ``write`` joins the next group commit, ``transaction`` does not.

    Both run ``fn(connection, ...)`` in one ``BEGIN IMMEDIATE`` transaction; every
    write gets its result or its exception.
    """

    def __init__(self, conn: SQLiteThread) -> None:
        self.conn = conn
        self._pending: list[_Write] = []
        self._flusher: asyncio.Task[None] | None = None

    async def transaction(
        self,
        fn: Callable[Concatenate[sqlite3.Connection, P], T],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """``fn(connection, ...)`` in a transaction of its own: all of it or none of it."""
        return await self.conn.call(_transaction, self.conn.path, fn, *args, **kwargs)

    async def write(
        self,
        fn: Callable[Concatenate[sqlite3.Connection, P], T],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """``fn(connection, ...)`` in the next group commit, in a savepoint of its own."""
        write = _Write(fn, args, kwargs, asyncio.get_running_loop().create_future())
        self._pending.append(write)
        if self._flusher is None:
            self._flusher = asyncio.create_task(self._flush(), name="maiden-sqlite-commit")
        return cast(T, await write.future)

    async def close(self) -> None:
        """Let the writes already handed in land, then close the connection."""
        if self._flusher is not None:
            await asyncio.wait([self._flusher])
        await self.conn.close()

    async def _flush(self) -> None:
        group: list[_Write] = []
        try:
            while self._pending:
                group, self._pending = self._pending, []
                try:
                    outcomes = await self.conn.call(_write_group, self.conn.path, group)
                except Exception as exc:  # the transaction as a whole failed
                    outcomes = [exc] * len(group)
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


@dataclass(frozen=True, slots=True)
class _Write:
    """A write waiting for the next group commit."""

    fn: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    future: asyncio.Future[Any]


# -- on the connection's thread


def _transaction(
    db: sqlite3.Connection,
    path: Path,
    fn: Callable[Concatenate[sqlite3.Connection, P], T],
    /,
    *args: P.args,
    **kwargs: P.kwargs,
) -> T:
    try:
        db.execute("BEGIN IMMEDIATE")
    except sqlite3.Error as exc:
        raise StoreError(f"{path}: cannot start a write: {exc}") from exc
    try:
        result = fn(db, *args, **kwargs)
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    return result


def _write_group(db: sqlite3.Connection, path: Path, group: list[_Write]) -> list[object]:
    """The writes of a group in one transaction; each outcome is a value or an error."""
    if len(group) == 1:
        return [_transaction(db, path, group[0].fn, *group[0].args, **group[0].kwargs)]
    outcomes: list[object] = []

    def each(db: sqlite3.Connection) -> None:
        for write in group:
            db.execute("SAVEPOINT write")
            try:
                outcomes.append(write.fn(db, *write.args, **write.kwargs))
            except Exception as exc:
                if not db.in_transaction:
                    raise  # SQLite gave up the whole transaction
                db.execute("ROLLBACK TO write")
                outcomes.append(_error(path, exc))
            db.execute("RELEASE write")

    _transaction(db, path, each)
    return outcomes


def _error(path: Path, exc: Exception) -> Exception:
    if isinstance(exc, sqlite3.Error):
        error = StoreError(f"{path}: {exc}")
        error.__cause__ = exc
        return error
    return exc
