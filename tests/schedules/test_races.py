"""Replicas racing on one store's schedule records: a replica that fires from its own, older
copy of the records undoes nothing another did (a pause, a resume, a delete), never moves
a record back, and does not call a slot another replica claimed a missed one.

Two replicas (a store object each on one storage, a runtime, a schedule runner without
timers) share one injected clock; the test is the alarm clock. Every test runs on each
backend a fleet can share.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from runtime import (
    EchoProvider,
    FilesStore,
    Origin,
    Runtime,
    ScheduleRecord,
    SlotMark,
    SQLiteStore,
)
from runtime.stores.postgres import PostgresStore
from schedules import Schedule, ScheduleBook, ScheduleConfig, Scheduler, load_schedules
from schedules.cron import slot_key
from tests.clock import Clock
from tests.postgres import PG_DSN, fresh_schema

pytestmark = [pytest.mark.timeout(60), pytest.mark.parametrize(
    "backend", ["postgres", "sqlite", "files"])]

T0 = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)
DAY = timedelta(days=1)


class _Held:
    """Mixed into a real store: once ``hold`` is set, a schedule write (a fire's, whichever
    method it uses) waits for it to be released: a GC pause, a slow network. Every read of
    the records is told to ``reads``."""

    hold: asyncio.Event | None = None
    entered: asyncio.Event
    reads: asyncio.Queue[None] | None = None

    async def refreshed(self) -> None:
        """Until a round of the refresher that began after now is over: it reads once per
        round, so the third read from now begins after such a round ended."""
        self.reads = asyncio.Queue()
        for _ in range(3):
            await asyncio.wait_for(self.reads.get(), 10)

    async def schedule_records(self) -> list[ScheduleRecord]:
        found: list[ScheduleRecord] = await super().schedule_records()  # type: ignore[misc]
        if self.reads is not None:
            self.reads.put_nowait(None)
        return found

    def held_from_now(self) -> asyncio.Event:
        """Hold every schedule write from now; set the event returned to let them go."""
        self.hold, self.entered = asyncio.Event(), asyncio.Event()
        return self.hold

    async def _held(self) -> None:
        if self.hold is not None:
            self.entered.set()
            await self.hold.wait()

    async def save_schedules(self, records: Sequence[ScheduleRecord]) -> None:
        await self._held()
        await super().save_schedules(records)  # type: ignore[misc]

    async def advance_schedules(self, marks: Sequence[SlotMark]) -> None:
        await self._held()
        await super().advance_schedules(marks)  # type: ignore[misc]


class HeldSQLite(_Held, SQLiteStore):
    pass


class HeldFiles(_Held, FilesStore):
    pass


class HeldPostgres(_Held, PostgresStore):
    pass


AnyHeld = HeldSQLite | HeldFiles | HeldPostgres


@asynccontextmanager
async def storage(backend: str, tmp_path: Path) -> AsyncIterator[Callable[[], AnyHeld]]:
    """Store objects on one storage, one per replica (a process each)."""
    if backend == "postgres":
        async with fresh_schema() as schema:
            yield lambda: HeldPostgres(PG_DSN, schema=schema, pool_size=3)
        return
    if backend == "sqlite":
        yield lambda: HeldSQLite(tmp_path / "maiden.db", synchronous="off")
        return
    yield lambda: HeldFiles(tmp_path / "files", fsync=False)


@dataclass
class Replica:
    store: AnyHeld
    rt: Runtime
    book: ScheduleBook
    scheduler: Scheduler


@asynccontextmanager
async def replicas(backend: str, tmp_path: Path, defined: list[Schedule], clock: Clock,
                   n: int = 2) -> AsyncIterator[list[Replica]]:
    """``n`` replicas, each started (its book read) in turn."""
    async with storage(backend, tmp_path) as make, AsyncExitStack() as stack:
        found: list[Replica] = []
        for _ in range(n):
            store = make()
            await stack.enter_async_context(store)
            rt = await stack.enter_async_context(Runtime(store, EchoProvider()))
            book = ScheduleBook(store, defined, clock=clock)
            scheduler = await stack.enter_async_context(Scheduler(book, rt, timers=False))
            found.append(Replica(store, rt, book, scheduler))
        yield found


def every_minute(misfire: str = "once") -> list[Schedule]:
    return load_schedules([ScheduleConfig(name="tick", cron="* * * * *", prompt="p",
                                          misfire=misfire)],
                          default_timezone="UTC", channels=())


async def standup(book: ScheduleBook) -> None:
    await book.create(name="standup", cron="0 8 * * *", prompt="p", timezone="UTC",
                      thread_id="slack:C1", origin=Origin(channel="slack"),
                      request_key="req-1")


async def slot_keys(rt: Runtime, name: str) -> list[str]:
    return sorted(r.idempotency_key or "" for r in await rt.records.runs()
                  if (r.idempotency_key or "").startswith(f"schedule:{name}:"))


@pytest.mark.parametrize("action", ["pause", "delete"])
async def test_a_pause_or_delete_on_one_replica_is_not_undone_by_another(
        backend: str, action: str, tmp_path: Path) -> None:
    """A has read the book before B paused (or deleted) the chat schedule; A's timer goes
    off at the slot: nothing runs, and the schedule stays paused (or gone) for good."""
    clock = Clock(T0 - 5 * MINUTE)
    async with storage(backend, tmp_path) as make, make() as sa, make() as sb, \
            Runtime(sa, EchoProvider()) as a_rt, Runtime(sb, EchoProvider()) as b_rt:
        book_b = ScheduleBook(sb, clock=clock)
        async with Scheduler(book_b, b_rt, timers=False) as s_b:
            await standup(book_b)
            async with Scheduler(ScheduleBook(sa, clock=clock), a_rt, timers=False) as s_a:
                assert s_a.book.get("standup") is not None  # A's copy: active
                clock.now = T0 - timedelta(seconds=5)
                if action == "pause":
                    await book_b.set_paused("standup", True, thread_id="slack:C1")
                else:
                    await book_b.delete("standup", thread_id="slack:C1")
                clock.now = T0
                assert await s_a.fire_due(woken="standup") == []
                assert await s_b.fire_due(woken="standup") == []
                records = [(r.name, r.paused) for r in await b_rt.records.schedule_records()]
                assert records == ([("standup", True)] if action == "pause" else [])
                await s_b.sync()  # what its refresher does every refresh_s
                assert [s_b.book.active(s) for s in s_b.book.schedules()] == \
                    ([False] if action == "pause" else [])
                clock.now = T0 + DAY
                assert await s_a.fire_due() == [] and await s_b.fire_due() == []
                assert await slot_keys(b_rt, "standup") == []


async def test_a_resume_on_one_replica_starts_from_then_on_another(
        backend: str, tmp_path: Path) -> None:
    """Paused through B for two days, resumed; A, which never re-read the book in between,
    fires the next slot, and does not catch up the slots of the pause."""
    clock = Clock(T0 - 5 * MINUTE)
    async with storage(backend, tmp_path) as make, make() as sa, make() as sb, \
            Runtime(sa, EchoProvider()) as a_rt, Runtime(sb, EchoProvider()) as b_rt:
        book_b = ScheduleBook(sb, clock=clock)
        async with Scheduler(book_b, b_rt, timers=False):
            await standup(book_b)
            async with Scheduler(ScheduleBook(sa, clock=clock), a_rt, timers=False) as s_a:
                await book_b.set_paused("standup", True, thread_id="slack:C1")
                clock.now = T0 + 2 * DAY + 5 * MINUTE
                await book_b.set_paused("standup", False, thread_id="slack:C1")
                assert await s_a.fire_due() == []  # the pause's slots: not caught up
                clock.now = T0 + 3 * DAY
                fired = await s_a.fire_due(woken="standup")
                assert [f.slot for f in fired] == [T0 + 3 * DAY]
                assert await slot_keys(b_rt, "standup") == [slot_key("standup", T0 + 3 * DAY)]


async def test_a_late_write_never_moves_a_record_back(backend: str, tmp_path: Path) -> None:
    """A's write for slot s1 is held (a GC pause); meanwhile B claims s1 and s2 and writes;
    A's write lands last: the record stays at s2."""
    clock = Clock(T0 - timedelta(seconds=30))
    async with replicas(backend, tmp_path, every_minute(), clock) as (a, b):
        release = a.store.held_from_now()
        clock.now = T0
        pending = asyncio.create_task(a.scheduler.fire_due(woken="tick"))
        # Until A's fire has claimed s1 and is writing.
        await asyncio.wait_for(a.store.entered.wait(), 10)
        assert [f.slot for f in await b.scheduler.fire_due(woken="tick")] == [T0]
        clock.now = T0 + MINUTE
        assert [f.slot for f in await b.scheduler.fire_due(woken="tick")] == [T0 + MINUTE]
        release.set()
        assert [f.slot for f in await pending] == [T0]
        (record,) = await b.rt.records.schedule_records()
        s2 = (T0 + MINUTE).timestamp()
        assert (record.since, record.last_slot) == (s2, s2)
        (row,) = await b.scheduler.listing()
        assert row["last_slot"] == (T0 + MINUTE).isoformat()


async def test_a_slot_another_replica_claimed_is_not_reported_missed(
        backend: str, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """B's timer is late once: A claims 08:01 alone, its record write still under way when
    B's timer for 08:02 goes off. 08:01 is claimed, not missed: no warning says it is."""
    clock = Clock(T0 - timedelta(seconds=30))
    async with replicas(backend, tmp_path, every_minute(), clock) as (a, b):
        clock.now = T0
        await a.scheduler.fire_due(woken="tick")
        await b.scheduler.fire_due(woken="tick")
        release = a.store.held_from_now()
        clock.now = T0 + MINUTE
        pending = asyncio.create_task(a.scheduler.fire_due(woken="tick"))
        await asyncio.wait_for(a.store.entered.wait(), 10)
        clock.now = T0 + 2 * MINUTE
        with caplog.at_level(logging.WARNING, logger="maiden.schedules"):
            fired = await b.scheduler.fire_due(woken="tick")
        assert [r.getMessage() for r in caplog.records if "missed" in r.getMessage()] == []
        assert [f.slot for f in fired] == [T0 + MINUTE, T0 + 2 * MINUTE]  # found claimed
        release.set()
        await pending
        assert await slot_keys(b.rt, "tick") == [
            slot_key("tick", T0 + m * MINUTE) for m in range(3)]


async def test_pause_resume_delete_on_one_replica_reach_the_others_alarms(
        backend: str, tmp_path: Path) -> None:
    """With timers: what B does to a chat schedule, A's alarms follow within ``refresh_s``."""
    clock = Clock(T0 - 5 * MINUTE)
    async with storage(backend, tmp_path) as make, make() as sa, make() as sb, \
            Runtime(sa, EchoProvider()) as a_rt, Runtime(sb, EchoProvider()) as b_rt:
        book_b = ScheduleBook(sb, clock=clock)
        async with Scheduler(ScheduleBook(sa, clock=clock), a_rt, refresh_s=0.01) as s_a, \
                Scheduler(book_b, b_rt, refresh_s=3600):
            await standup(book_b)
            await sa.refreshed()
            assert [name for name, _ in s_a.next_alarms()] == ["standup"]
            await book_b.set_paused("standup", True, thread_id="slack:C1")
            await sa.refreshed()
            assert s_a.next_alarms() == []
            await book_b.set_paused("standup", False, thread_id="slack:C1")
            await sa.refreshed()
            assert [name for name, _ in s_a.next_alarms()] == ["standup"]
            await book_b.delete("standup", thread_id="slack:C1")
            await sa.refreshed()
            assert s_a.next_alarms() == []
