"""The SQLite store's control plane: requests between processes on one store, and heartbeats."""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable

from ...errors import NotFound
from ...model.requests import ControlRequest, Instance
from ..base import ControlStore, unlistened
from .core import SQLiteCore

__all__ = ["SQLiteControl"]


class SQLiteControl(SQLiteCore, ControlStore):
    """The SQLite store's ``ControlStore``."""

    async def add_request(self, request: ControlRequest) -> ControlRequest:
        def add(db: sqlite3.Connection) -> ControlRequest:
            cursor = db.execute("INSERT INTO requests (data) VALUES ('{}')")
            stored = request.model_copy(update={"id": cursor.lastrowid})
            db.execute("UPDATE requests SET data = ? WHERE id = ?",
                       (stored.model_dump_json(), stored.id))
            return stored

        return await self._write(add)

    async def requests(self) -> list[ControlRequest]:
        rows = await self._fetchall("SELECT data FROM requests WHERE handled = 0 ORDER BY id")
        return [ControlRequest.model_validate_json(row[0]) for row in rows]

    async def get_request(self, request_id: int) -> ControlRequest:
        rows = await self._fetchall("SELECT data FROM requests WHERE id = ?", (request_id,))
        if not rows:
            raise NotFound(f"no request {request_id}")
        return ControlRequest.model_validate_json(rows[0][0])

    async def finish_request(self, request: ControlRequest) -> bool:
        def finish(db: sqlite3.Connection) -> bool:
            cursor = db.execute(
                "UPDATE requests SET handled = 1, data = ? WHERE id = ? AND handled = 0",
                (request.model_dump_json(), request.id))
            return cursor.rowcount == 1

        return await self._write(finish)

    async def beat(self, instance: Instance, *, gone: bool = False) -> None:
        def beat(db: sqlite3.Connection) -> None:
            if gone:
                db.execute("DELETE FROM instances WHERE id = ?", (instance.id,))
            else:
                db.execute("INSERT OR REPLACE INTO instances VALUES (?, ?)",
                           (instance.id, instance.model_dump_json()))

        await self._write(beat)

    async def instances(self) -> list[Instance]:
        rows = await self._fetchall("SELECT data FROM instances ORDER BY id")
        return [Instance.model_validate_json(row[0]) for row in rows]

    async def listen_requests(self, wake: Callable[[], None]) -> Callable[[], Awaitable[None]]:
        return unlistened  # readers poll: SQLite cannot tell another process's connection
