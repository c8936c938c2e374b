"""The SQLite store's schedule records, each read and written in one ``BEGIN IMMEDIATE``."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from ...model.requests import ScheduleRecord, SlotMark
from ..base import ScheduleStore, parse_schedule_record
from .core import SQLiteCore

__all__ = ["SQLiteSchedules"]


class SQLiteSchedules(SQLiteCore, ScheduleStore):
    """The SQLite store's ``ScheduleStore``."""

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
