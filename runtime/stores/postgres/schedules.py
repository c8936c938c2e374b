"""The PostgreSQL store's schedule records, their rows locked in name order for a write."""

from __future__ import annotations

from collections.abc import Sequence

from ...model.requests import ScheduleRecord, SlotMark
from ..base import ScheduleStore, parse_schedule_record
from .core import PostgresCore

__all__ = ["PostgresSchedules"]


class PostgresSchedules(PostgresCore, ScheduleStore):
    """The PostgreSQL store's ``ScheduleStore``."""

    async def schedule_records(self) -> list[ScheduleRecord]:
        return await self._parsed(ScheduleRecord.model_validate_json,
                                  "SELECT data FROM schedules ORDER BY name")

    async def save_schedules(self, records: Sequence[ScheduleRecord]) -> None:
        if not records:
            return
        async with self._transaction() as conn:
            # Locked in name order until the commit, as advance_schedules does.
            found = await conn.fetch("SELECT name, data FROM schedules WHERE name = ANY($1) "
                                     "ORDER BY name FOR UPDATE",
                                     sorted({r.name for r in records}))
            stored = {r[0]: parse_schedule_record(r[0], r[1]) for r in found}
            rows = []
            for record in records:
                stored[record.name] = saved = record.over(stored.get(record.name))
                rows.append((record.name, saved.model_dump_json()))
            await conn.executemany("INSERT INTO schedules VALUES ($1, $2) ON CONFLICT (name) "
                                   "DO UPDATE SET data = excluded.data", rows)

    async def advance_schedules(self, marks: Sequence[SlotMark]) -> None:
        if not marks:
            return
        async with self._transaction() as conn:
            # The rows stay locked until the commit, so no other writer comes in between;
            # locked in name order, so two of these cannot deadlock.
            rows = await conn.fetch("SELECT name, data FROM schedules WHERE name = ANY($1) "
                                    "ORDER BY name FOR UPDATE", sorted({m.name for m in marks}))
            stored = {r[0]: parse_schedule_record(r[0], r[1]) for r in rows}
            moved = dict(stored)
            for mark in marks:
                if mark.name in moved:  # else deleted: not brought back
                    moved[mark.name] = mark.applied(moved[mark.name])
            changed = [(name, record.model_dump_json()) for name, record in moved.items()
                       if record is not stored[name]]
            if changed:
                await conn.executemany("UPDATE schedules SET data = $2 WHERE name = $1",
                                       changed)

    async def delete_schedule(self, name: str) -> bool:
        deleted = await self._value("DELETE FROM schedules WHERE name = $1 RETURNING true", name)
        return deleted is not None
