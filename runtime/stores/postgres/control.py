"""The PostgreSQL store's control plane, leases, schedule records and notes: the small
tables beside the threads, written through the store's own pool (``PostgresStore`` is made
of this and the threads' part, as ``SQLiteStore`` is of ``SQLiteControl`` and its own).

Requests are announced with ``pg_notify`` on a channel per schema, so the other replicas'
readers wake at once; leases are judged by the server's clock, so replicas whose clocks
disagree still agree on who holds one."""

from __future__ import annotations

import contextlib
import hashlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import asyncpg  # type: ignore[import-untyped]

from ...errors import NotFound
from ...requests import (
    ControlRequest,
    Instance,
    Lease,
    Note,
    NoteCall,
    ScheduleRecord,
    SlotMark,
)
from ..base import NOTE_CALLS_KEPT, parse_schedule_record, unlistened
from .sql import ERRORS

__all__ = ["PostgresControl"]

log = logging.getLogger("maiden.store")

T = TypeVar("T")


class PostgresControl:
    """What ``PostgresStore`` keeps beside threads and runs."""

    dsn: str
    schema: str
    connect_timeout_s: float

    if TYPE_CHECKING:
        def _connection(self) -> contextlib.AbstractAsyncContextManager[Any]: ...

        def _transaction(self, *, durable: bool = True
                         ) -> contextlib.AbstractAsyncContextManager[Any]: ...

        async def _fetch(self, sql: str, *args: Any) -> list[Any]: ...

        async def _parsed(self, parse: Callable[[str], T], sql: str, *args: Any
                          ) -> list[T]: ...

        async def _value(self, sql: str, *args: Any) -> Any: ...

    # -- the control plane

    async def add_request(self, request: ControlRequest) -> ControlRequest:
        async with self._transaction() as conn:
            stored = request.model_copy(update={"id": await conn.fetchval(
                "SELECT nextval('requests_id')")})
            await conn.execute("INSERT INTO requests (id, data) VALUES ($1, $2)",
                               stored.id, stored.model_dump_json())
            # Delivered to the listeners when the transaction commits, not before.
            await conn.execute("SELECT pg_notify($1, $2)", self._channel, str(stored.id))
        return stored

    async def listen_requests(self, wake: Callable[[], None]) -> Callable[[], Awaitable[None]]:
        """``LISTEN`` on a connection of its own (outside the pool); if it is lost, the
        readers' polling carries on alone, and the next call listens again."""

        def notified(*_: object) -> None:
            wake()

        try:
            conn = await asyncpg.connect(self.dsn, timeout=self.connect_timeout_s)
            await conn.add_listener(self._channel, notified)
        except (*ERRORS, ValueError) as exc:
            log.warning("cannot listen for requests on postgres (%s); polling instead",
                        type(exc).__name__)
            return unlistened

        async def unlisten() -> None:
            if not conn.is_closed():
                with contextlib.suppress(*ERRORS):
                    await conn.close(timeout=5)

        return unlisten

    @property
    def _channel(self) -> str:
        """The notification channel of this schema's requests (an identifier of 63 bytes
        at most, whatever the schema's name)."""
        return "maiden_requests_" + hashlib.sha256(self.schema.encode()).hexdigest()[:20]

    async def requests(self) -> list[ControlRequest]:
        return await self._parsed(ControlRequest.model_validate_json,
                                  "SELECT data FROM requests WHERE NOT handled ORDER BY id")

    async def get_request(self, request_id: int) -> ControlRequest:
        data = await self._value("SELECT data FROM requests WHERE id = $1", request_id)
        if data is None:
            raise NotFound(f"no request {request_id}")
        return ControlRequest.model_validate_json(data)

    async def finish_request(self, request: ControlRequest) -> bool:
        done = await self._value("UPDATE requests SET handled = true, data = $1 "
                                 "WHERE id = $2 AND NOT handled RETURNING true",
                                 request.model_dump_json(), request.id)
        return done is not None

    async def beat(self, instance: Instance, *, gone: bool = False) -> None:
        async with self._connection() as conn:
            if gone:
                await conn.execute("DELETE FROM instances WHERE id = $1", instance.id)
            else:
                await conn.execute("INSERT INTO instances VALUES ($1, $2) ON CONFLICT (id) "
                                   "DO UPDATE SET data = excluded.data",
                                   instance.id, instance.model_dump_json())

    async def instances(self) -> list[Instance]:
        return await self._parsed(Instance.model_validate_json,
                                  "SELECT data FROM instances ORDER BY id")

    # -- leases (the server's clock)

    async def take_lease(self, name: str, holder: str, ttl_s: float, *,
                         steal_from: str | None = None) -> str | None:
        async with self._connection() as conn:
            for _ in range(3):
                # ON CONFLICT locks the row and judges it as it stands now, so two takers
                # take turns and one of them wins.
                taken = await conn.fetchval(
                    "INSERT INTO leases VALUES ($1, $2, clock_timestamp() + "
                    "make_interval(secs => $3)) ON CONFLICT (name) DO UPDATE "
                    "SET holder = excluded.holder, expires_at = excluded.expires_at "
                    "WHERE leases.holder = excluded.holder OR leases.holder = $4 "
                    "OR leases.expires_at <= clock_timestamp() RETURNING true",
                    name, holder, ttl_s, steal_from)
                if taken:
                    return None
                other = await conn.fetchval("SELECT holder FROM leases WHERE name = $1 "
                                            "AND expires_at > clock_timestamp()", name)
                if other is not None:
                    return str(other)
            return "another process"  # released and taken again, twice, meanwhile

    async def renew_leases(self, holder: str, ttl_s: float) -> list[str]:
        rows = await self._fetch(
            "UPDATE leases SET expires_at = clock_timestamp() + make_interval(secs => $2) "
            "WHERE holder = $1 AND expires_at > clock_timestamp() RETURNING name",
            holder, ttl_s)
        return sorted(str(r[0]) for r in rows)

    async def release_leases(self, holder: str, names: Sequence[str] | None = None) -> None:
        async with self._connection() as conn:
            if names is None:
                await conn.execute("DELETE FROM leases WHERE holder = $1", holder)
            else:
                await conn.execute("DELETE FROM leases WHERE holder = $1 AND name = ANY($2)",
                                   holder, list(names))

    async def leases(self) -> list[Lease]:
        rows = await self._fetch(
            "SELECT name, holder, extract(epoch FROM expires_at - clock_timestamp()) "
            "FROM leases WHERE expires_at > clock_timestamp() ORDER BY name")
        return [Lease(name=r[0], holder=r[1], expires_in=float(r[2])) for r in rows]

    # -- schedule records

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

    # -- notes

    async def notes(self, scope: str) -> list[Note]:
        return await self._parsed(Note.model_validate_json,
                                  "SELECT data FROM notes WHERE scope = $1 ORDER BY key", scope)

    async def put_note(self, note: Note, call: str | None = None) -> bool:
        async with self._transaction() as conn:
            if call is not None and not await _claim_note_call(
                    conn, NoteCall(scope=note.scope, call=call, key=note.key)):
                return False
            await conn.execute("INSERT INTO notes VALUES ($1, $2, $3) ON CONFLICT (scope, key) "
                               "DO UPDATE SET data = excluded.data",
                               note.scope, note.key, note.model_dump_json())
        return True

    async def delete_note(self, scope: str, key: str, call: str | None = None) -> bool:
        async with self._transaction() as conn:
            if call is not None and not await _claim_note_call(
                    conn, NoteCall(scope=scope, call=call, key=key, forget=True)):
                done = await conn.fetchval("SELECT data FROM note_calls WHERE scope = $1 "
                                           "AND call = $2", scope, call)
                return NoteCall.model_validate_json(done).existed
            existed = await conn.fetchval("DELETE FROM notes WHERE scope = $1 AND key = $2 "
                                          "RETURNING true", scope, key) is not None
            if call is not None and existed:  # the answer a re-run gets
                await conn.execute(
                    "UPDATE note_calls SET data = $3 WHERE scope = $1 AND call = $2", scope,
                    call, NoteCall(scope=scope, call=call, key=key, forget=True,
                                   existed=True).model_dump_json())
        return existed

    async def note_calls(self, scope: str) -> list[NoteCall]:
        return await self._parsed(NoteCall.model_validate_json,
                                  "SELECT data FROM note_calls WHERE scope = $1 ORDER BY n",
                                  scope)

    async def save_note_calls(self, calls: Sequence[NoteCall]) -> None:
        if not calls:
            return
        async with self._transaction() as conn:
            await conn.executemany("INSERT INTO note_calls (scope, call, data) VALUES "
                                   "($1, $2, $3) ON CONFLICT DO NOTHING",
                                   [(c.scope, c.call, c.model_dump_json()) for c in calls])
            for scope in dict.fromkeys(c.scope for c in calls):
                await _keep_newest_note_calls(conn, scope)


async def _claim_note_call(conn: Any, record: NoteCall) -> bool:
    """Record the call, in the caller's transaction; False if it is recorded already. A
    transaction recording the same call at once is waited for (ON CONFLICT), so of two
    re-runs together one applies the call and the other finds it applied."""
    claimed = await conn.fetchval("INSERT INTO note_calls (scope, call, data) VALUES "
                                  "($1, $2, $3) ON CONFLICT DO NOTHING RETURNING true",
                                  record.scope, record.call, record.model_dump_json())
    if claimed:
        await _keep_newest_note_calls(conn, record.scope)
    return bool(claimed)


async def _keep_newest_note_calls(conn: Any, scope: str) -> None:
    await conn.execute("DELETE FROM note_calls WHERE scope = $1 AND n <= (SELECT n FROM "
                       "note_calls WHERE scope = $1 ORDER BY n DESC OFFSET $2 LIMIT 1)",
                       scope, NOTE_CALLS_KEPT)
