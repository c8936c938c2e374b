"""The SQLite store's control plane, leases, schedule records and notes: the small tables
beside the threads, written through the store's own connections (``SQLiteStore`` is made
of this and the threads' part)."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

from ...errors import CorruptStore, NotFound
from ...requests import (
    ControlRequest,
    Instance,
    Lease,
    Note,
    NoteCall,
    ScheduleRecord,
    SlotMark,
)
from ..base import unlistened
from .sql import delete_note_row, put_note_row, record_note_calls

if TYPE_CHECKING:
    from .commit import GroupCommit

__all__ = ["SQLiteControl", "parse_schedule_record"]

P = ParamSpec("P")
T = TypeVar("T")


class SQLiteControl:
    """What ``SQLiteStore`` keeps beside threads and runs."""

    if TYPE_CHECKING:
        def _write_side(self) -> GroupCommit: ...

        async def _write(self, fn: Callable[Concatenate[sqlite3.Connection, P], T], /,
                         *args: P.args, **kwargs: P.kwargs) -> T: ...

        async def _fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[Any]: ...

    # -- the control plane

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

    # -- leases (this machine's clock: every process on one SQLite file shares it)

    async def take_lease(self, name: str, holder: str, ttl_s: float, *,
                         steal_from: str | None = None) -> str | None:
        def take(db: sqlite3.Connection) -> str | None:
            now = time.time()
            db.execute("INSERT INTO leases VALUES (?, ?, ?) ON CONFLICT (name) DO UPDATE "
                       "SET holder = excluded.holder, expires_at = excluded.expires_at "
                       "WHERE leases.holder = excluded.holder OR leases.expires_at <= ? "
                       "OR leases.holder = ?", (name, holder, now + ttl_s, now, steal_from))
            found = db.execute("SELECT holder FROM leases WHERE name = ?", (name,)).fetchone()
            return None if found[0] == holder else str(found[0])

        # Not a durable point: a lease lost to a power cut was held by a process that
        # died with it.
        return await self._write_side().write_lazily(take)

    async def renew_leases(self, holder: str, ttl_s: float) -> list[str]:
        def renew(db: sqlite3.Connection) -> list[str]:
            now = time.time()
            db.execute("UPDATE leases SET expires_at = ? WHERE holder = ? AND expires_at > ?",
                       (now + ttl_s, holder, now))
            rows = db.execute("SELECT name FROM leases WHERE holder = ? AND expires_at > ? "
                              "ORDER BY name", (holder, now)).fetchall()
            return [str(row[0]) for row in rows]

        return await self._write_side().write_lazily(renew)

    async def release_leases(self, holder: str, names: Sequence[str] | None = None) -> None:
        def release(db: sqlite3.Connection) -> None:
            if names is None:
                db.execute("DELETE FROM leases WHERE holder = ?", (holder,))
            else:
                db.executemany("DELETE FROM leases WHERE name = ? AND holder = ?",
                               [(name, holder) for name in names])

        await self._write_side().write_lazily(release)

    async def leases(self) -> list[Lease]:
        now = time.time()
        rows = await self._fetchall("SELECT name, holder, expires_at FROM leases "
                                    "WHERE expires_at > ? ORDER BY name", (now,))
        return [Lease(name=r[0], holder=r[1], expires_in=r[2] - now) for r in rows]

    # -- schedule records

    async def schedule_records(self) -> list[ScheduleRecord]:
        rows = await self._fetchall("SELECT data FROM schedules ORDER BY name")
        return [ScheduleRecord.model_validate_json(row[0]) for row in rows]

    async def save_schedules(self, records: Sequence[ScheduleRecord]) -> None:
        if not records:
            return

        def save(db: sqlite3.Connection) -> None:
            for record in records:  # read and written in one BEGIN IMMEDIATE
                row = db.execute("SELECT data FROM schedules WHERE name = ?",
                                 (record.name,)).fetchone()
                stored = None if row is None else parse_schedule_record(record.name, row[0])
                db.execute("INSERT OR REPLACE INTO schedules VALUES (?, ?)",
                           (record.name, record.over(stored).model_dump_json()))

        await self._write(save)

    async def advance_schedules(self, marks: Sequence[SlotMark]) -> None:
        if not marks:
            return

        def advance(db: sqlite3.Connection) -> None:
            # Read and written in one BEGIN IMMEDIATE: no other writer, in any process,
            # comes in between.
            for mark in marks:
                row = db.execute("SELECT data FROM schedules WHERE name = ?",
                                 (mark.name,)).fetchone()
                if row is None:
                    continue  # deleted: not brought back
                record = parse_schedule_record(mark.name, row[0])
                moved = mark.applied(record)
                if moved is not record:
                    db.execute("UPDATE schedules SET data = ? WHERE name = ?",
                               (moved.model_dump_json(), mark.name))

        await self._write(advance)

    async def delete_schedule(self, name: str) -> bool:
        def delete(db: sqlite3.Connection) -> bool:
            return db.execute("DELETE FROM schedules WHERE name = ?", (name,)).rowcount == 1

        return await self._write(delete)

    # -- notes

    async def notes(self, scope: str) -> list[Note]:
        rows = await self._fetchall("SELECT data FROM notes WHERE scope = ? ORDER BY key",
                                    (scope,))
        return [Note.model_validate_json(row[0]) for row in rows]

    async def put_note(self, note: Note, call: str | None = None) -> bool:
        return await self._write(put_note_row, note, call)

    async def delete_note(self, scope: str, key: str, call: str | None = None) -> bool:
        return await self._write(delete_note_row, scope, key, call)

    async def note_calls(self, scope: str) -> list[NoteCall]:
        rows = await self._fetchall("SELECT data FROM note_calls WHERE scope = ? "
                                    "ORDER BY rowid", (scope,))
        return [NoteCall.model_validate_json(row[0]) for row in rows]

    async def save_note_calls(self, calls: Sequence[NoteCall]) -> None:
        if calls:
            await self._write(record_note_calls, list(calls))



def parse_schedule_record(name: str, data: str) -> ScheduleRecord:
    try:
        return ScheduleRecord.model_validate_json(data)
    except ValueError as exc:
        raise CorruptStore(f"the record of schedule {name!r} cannot be read: {exc}") from exc
