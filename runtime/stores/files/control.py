"""The files store's control plane: requests between processes, heartbeats, leases, schedules.

``requests/{id:012d}.json`` one file per request (ids from a counter file under a
lock), ``instances/{id}.json`` one file per serving runtime, ``schedules/{sha256(name)}``
one file per schedule record (each written under its lock, ``.{sha256(name)}.lock``, so a
fire's advance never brings back a record deleted meanwhile), ``leases.json`` every lease
(rewritten whole under a lock, with this machine's clock), ``notes/{sha256(scope)}`` one file per
scope of notes and the calls that changed them (rewritten whole under a lock: a scope has
at most a few hundred notes, and keeps its newest ``NOTE_CALLS_KEPT`` calls). Written
through the store's ``Disk``, so the same atomic writes and locks apply.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel

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
from ..base import NOTE_CALLS_KEPT, unlistened
from .fs import Disk
from .names import key_file_name

__all__ = ["FilesControl"]

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")


class FilesControl:
    """What ``FilesStore`` keeps beside threads and runs, on the store's ``Disk`` (as
    ``SQLiteStore`` is made of ``SQLiteControl`` and its own part)."""

    _disk: Disk

    async def listen_requests(self, wake: Callable[[], None]) -> Callable[[], Awaitable[None]]:
        return unlistened  # readers poll: a folder cannot tell another process

    async def add_request(self, request: ControlRequest) -> ControlRequest:
        return await self._disk.io(self._add_request, request)

    async def requests(self) -> list[ControlRequest]:
        found = await self._disk.io(self._list_requests)
        return [r for r in found if r.handled_at is None]

    async def get_request(self, request_id: int) -> ControlRequest:
        return await self._disk.io(self._get_request, request_id)

    async def finish_request(self, request: ControlRequest) -> bool:
        return await self._disk.io(self._finish_request, request)

    async def beat(self, instance: Instance, *, gone: bool = False) -> None:
        await self._disk.io(self._beat, instance, gone)

    async def instances(self) -> list[Instance]:
        return await self._disk.io(self._instances)

    async def take_lease(self, name: str, holder: str, ttl_s: float, *,
                         steal_from: str | None = None) -> str | None:
        def take(leases: dict[str, _Held], now: float) -> str | None:
            held = leases.get(name)
            if held is None or held.holder in (holder, steal_from) or held.expires_at <= now:
                leases[name] = _Held(holder=holder, expires_at=now + ttl_s)
                return None
            return held.holder

        return await self._disk.io(self._change_leases, take)

    async def renew_leases(self, holder: str, ttl_s: float) -> list[str]:
        def renew(leases: dict[str, _Held], now: float) -> list[str]:
            mine = sorted(n for n, h in leases.items() if h.holder == holder
                          and h.expires_at > now)
            for n in mine:
                leases[n] = _Held(holder=holder, expires_at=now + ttl_s)
            return mine

        return await self._disk.io(self._change_leases, renew)

    async def release_leases(self, holder: str, names: Sequence[str] | None = None) -> None:
        def release(leases: dict[str, _Held], now: float) -> None:
            for n in [n for n, h in leases.items() if h.holder == holder
                      and (names is None or n in names)]:
                del leases[n]

        await self._disk.io(self._change_leases, release)

    async def leases(self) -> list[Lease]:
        found, now = await self._disk.io(self._read_leases)
        return [Lease(name=n, holder=h.holder, expires_in=h.expires_at - now)
                for n, h in sorted(found.items()) if h.expires_at > now]

    async def schedule_records(self) -> list[ScheduleRecord]:
        return await self._disk.io(self._schedule_records)

    async def save_schedules(self, records: Sequence[ScheduleRecord]) -> None:
        await self._disk.io(self._save_schedules, list(records))

    async def advance_schedules(self, marks: Sequence[SlotMark]) -> None:
        await self._disk.io(self._advance_schedules, list(marks))

    async def delete_schedule(self, name: str) -> bool:
        return await self._disk.io(self._delete_schedule, name)

    async def notes(self, scope: str) -> list[Note]:
        return await self._disk.io(self._notes, scope)

    async def put_note(self, note: Note, call: str | None = None) -> bool:
        return await self._disk.io(self._change_notes, note.scope, note.key, note, call)

    async def delete_note(self, scope: str, key: str, call: str | None = None) -> bool:
        return await self._disk.io(self._change_notes, scope, key, None, call)

    async def note_calls(self, scope: str) -> list[NoteCall]:
        return await self._disk.io(self._note_calls, scope)

    async def save_note_calls(self, calls: Sequence[NoteCall]) -> None:
        await self._disk.io(self._save_note_calls, list(calls))

    # -- synchronous work, run in a worker thread

    def _folder(self, name: str) -> Path:
        folder = self._disk.root / name
        folder.mkdir(exist_ok=True)
        return folder

    def _request_path(self, request_id: int) -> Path:
        return self._folder("requests") / f"{int(request_id):012d}.json"

    def _add_request(self, request: ControlRequest) -> ControlRequest:
        folder = self._folder("requests")
        with self._disk.lock(folder / "counter.lock"):
            counter = folder / "counter"
            last = int(counter.read_text() or 0) if counter.exists() else 0
            stored = request.model_copy(update={"id": last + 1})
            # The counter first: dying in between then only skips an id, instead of
            # leaving a request its asker never heard of for a server to carry out,
            # under an id the next request would take over.
            self._disk.write(counter, str(stored.id).encode())
            self._disk.write(self._request_path(stored.id), stored.model_dump_json().encode())
        return stored

    def _list_requests(self) -> list[ControlRequest]:
        paths = sorted(p for p in self._folder("requests").glob("*.json")
                       if not p.name.startswith("."))
        return [_parse(p, ControlRequest) for p in paths]

    def _get_request(self, request_id: int) -> ControlRequest:
        path = self._request_path(request_id)
        if not path.exists():
            raise NotFound(f"no request {request_id}")
        return _parse(path, ControlRequest)

    def _finish_request(self, request: ControlRequest) -> bool:
        path = self._request_path(request.id)
        with self._disk.lock(path.with_suffix(".lock")):
            if _parse(path, ControlRequest).handled_at is not None:
                return False
            self._disk.write(path, request.model_dump_json().encode())
        return True

    def _beat(self, instance: Instance, gone: bool) -> None:
        path = self._folder("instances") / f"{instance.id}.json"
        if gone:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        else:
            self._disk.write(path, instance.model_dump_json().encode())

    def _instances(self) -> list[Instance]:
        folder = self._folder("instances")
        return [_parse(p, Instance) for p in sorted(folder.glob("*.json"))
                if not p.name.startswith(".")]

    def _read_leases(self) -> tuple[dict[str, _Held], float]:
        path = self._disk.root / "leases.json"
        found = _parse(path, _Leases).leases if path.exists() else {}
        return found, time.time()

    def _change_leases(self, change: Callable[[dict[str, _Held], float], T]) -> T:
        path = self._disk.root / "leases.json"
        with self._disk.lock(path.with_suffix(".lock")):
            leases, now = self._read_leases()
            result = change(leases, now)
            self._disk.write(path, _Leases(leases={
                n: h for n, h in leases.items() if h.expires_at > now}).model_dump_json()
                .encode())
        return result

    def _schedule_path(self, name: str) -> Path:
        return self._folder("schedules") / key_file_name(name)

    def _schedule_records(self) -> list[ScheduleRecord]:
        folder = self._folder("schedules")
        found = [_parse(p, ScheduleRecord) for p in folder.iterdir()
                 if not p.name.startswith(".")]
        return sorted(found, key=lambda r: r.name)

    def _schedule_lock(self, name: str) -> contextlib.AbstractContextManager[None]:
        # A dot file: never listed as a record.
        return self._disk.lock(self._folder("schedules") / f".{key_file_name(name)}.lock")

    def _save_schedules(self, records: list[ScheduleRecord]) -> None:
        for record in records:
            path = self._schedule_path(record.name)
            with self._schedule_lock(record.name):
                stored = _parse(path, ScheduleRecord) if path.exists() else None
                self._disk.write(path, record.over(stored).model_dump_json().encode())

    def _advance_schedules(self, marks: list[SlotMark]) -> None:
        for mark in marks:
            path = self._schedule_path(mark.name)
            with self._schedule_lock(mark.name):
                if not path.exists():
                    continue  # deleted: not brought back
                record = _parse(path, ScheduleRecord)
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

    def _notes_path(self, scope: str) -> Path:
        return self._folder("notes") / key_file_name(scope)

    def _notes(self, scope: str) -> list[Note]:
        path = self._notes_path(scope)
        if not path.exists():
            return []
        found = _parse(path, _Notes).notes
        return [found[key] for key in sorted(found)]

    def _change_notes(self, scope: str, key: str, note: Note | None, call: str | None) -> bool:
        """Put (``note``) or delete under the scope's lock: a call found among the scope's
        is not applied again (a put answers False, a delete what it answered then)."""
        path = self._notes_path(scope)
        with self._disk.lock(path.with_suffix(".lock")):
            stored = _parse(path, _Notes) if path.exists() else _Notes(scope=scope)
            done = stored.calls.get(call) if call is not None else None
            if done is not None:
                return done.existed if note is None else False
            existed = key in stored.notes
            notes = {k: v for k, v in stored.notes.items() if k != key}
            if note is not None:
                notes[key] = note
            calls = stored.calls
            if call is not None:
                record = NoteCall(scope=scope, call=call, key=key) if note is not None else \
                    NoteCall(scope=scope, call=call, key=key, forget=True, existed=existed)
                calls = _kept(calls | {call: record})
            self._disk.write(path, _Notes(scope=scope, notes=notes, calls=calls)
                            .model_dump_json().encode())
        return existed if note is None else True

    def _note_calls(self, scope: str) -> list[NoteCall]:
        path = self._notes_path(scope)
        return list(_parse(path, _Notes).calls.values()) if path.exists() else []

    def _save_note_calls(self, calls: list[NoteCall]) -> None:
        for scope in dict.fromkeys(c.scope for c in calls):
            path = self._notes_path(scope)
            with self._disk.lock(path.with_suffix(".lock")):
                stored = _parse(path, _Notes) if path.exists() else _Notes(scope=scope)
                added = {c.call: c for c in calls
                         if c.scope == scope and c.call not in stored.calls}
                self._disk.write(path, stored.model_copy(
                    update={"calls": _kept(stored.calls | added)}).model_dump_json().encode())


class _Held(BaseModel):
    holder: str
    expires_at: float


class _Leases(BaseModel):
    leases: dict[str, _Held] = {}


class _Notes(BaseModel):
    scope: str
    notes: dict[str, Note] = {}
    calls: dict[str, NoteCall] = {}
    """By idempotency key, oldest first (a JSON object keeps its order)."""


def _kept(calls: dict[str, NoteCall]) -> dict[str, NoteCall]:
    """The newest ``NOTE_CALLS_KEPT`` calls."""
    return dict(list(calls.items())[-NOTE_CALLS_KEPT:])


def _parse(path: Path, model: type[M]) -> M:
    try:
        return model.model_validate_json(path.read_bytes())
    except ValueError as exc:
        raise CorruptStore(f"{path}: {exc}") from exc
