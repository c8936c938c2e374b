"""The files store's schedule records: ``schedules/{sha256(name)}`` one file per record, each
written under its lock (``.{sha256(name)}.lock``), so a fire's advance never brings back a
record deleted meanwhile."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from pathlib import Path

from ...model.requests import ScheduleRecord, SlotMark
from ..base import ScheduleStore
from .core import FilesCore, parse_file
from .names import key_file_name

__all__ = ["FilesSchedules"]


class FilesSchedules(FilesCore, ScheduleStore):
    """The files store's ``ScheduleStore``."""

    async def schedule_records(self) -> list[ScheduleRecord]:
        return await self._disk.io(self._schedule_records)

    async def save_schedules(self, records: Sequence[ScheduleRecord]) -> None:
        await self._disk.io(self._save_schedules, list(records))

    async def advance_schedules(self, marks: Sequence[SlotMark]) -> None:
        await self._disk.io(self._advance_schedules, list(marks))

    async def delete_schedule(self, name: str) -> bool:
        return await self._disk.io(self._delete_schedule, name)

    # -- synchronous work, run in a worker thread

    def _schedule_path(self, name: str) -> Path:
        return self._folder("schedules") / key_file_name(name)

    def _schedule_records(self) -> list[ScheduleRecord]:
        folder = self._folder("schedules")
        found = [parse_file(p, ScheduleRecord) for p in folder.iterdir()
                 if not p.name.startswith(".")]
        return sorted(found, key=lambda r: r.name)

    def _schedule_lock(self, name: str) -> contextlib.AbstractContextManager[None]:
        # A dot file: never listed as a record.
        return self._disk.lock(self._folder("schedules") / f".{key_file_name(name)}.lock")

    def _save_schedules(self, records: list[ScheduleRecord]) -> None:
        for record in records:
            path = self._schedule_path(record.name)
            with self._schedule_lock(record.name):
                stored = parse_file(path, ScheduleRecord) if path.exists() else None
                self._disk.write(path, record.over(stored).model_dump_json().encode())

    def _advance_schedules(self, marks: list[SlotMark]) -> None:
        for mark in marks:
            path = self._schedule_path(mark.name)
            with self._schedule_lock(mark.name):
                if not path.exists():
                    continue  # deleted: not brought back
                record = parse_file(path, ScheduleRecord)
                moved = mark.applied(record)
                if moved is not record:
                    self._disk.write(path, moved.model_dump_json().encode())

    def _delete_schedule(self, name: str) -> bool:
        with self._schedule_lock(name):
            try:
                self._schedule_path(name).unlink()
            except FileNotFoundError:
                return False
        return True
