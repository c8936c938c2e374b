"""The store contract, schedule records (DESIGN §3): saved, advanced only forward, deleted, on
every backend."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from runtime.model.requests import ScheduleRecord, SlotMark
from tests.runtime.stores.contract import AnyStore


async def test_schedule_records(store: AnyStore, new_store: Callable[[], AnyStore]) -> None:
    daily = ScheduleRecord(name="daily", origin="config", since=10.0, created_at=1.0)
    remind = ScheduleRecord(name="remind-0", origin="chat", created_by="slack:C1",
                            spec={"cron": "0 8 * * 1", "prompt": "standup"},
                            request_key="k1", since=20.0, created_at=2.0)
    assert await store.schedule_records() == []
    await store.save_schedules([remind, daily])
    await store.save_schedules([])
    claimed = daily.model_copy(update={"last_slot": 30.0, "last_run_id": "r1"})
    await store.save_schedules([claimed])  # replaced, by name
    async with new_store() as other:  # another process, or a restart, sees them
        assert await other.schedule_records() == [claimed, remind]
    assert await store.delete_schedule("remind-0") is True
    assert await store.delete_schedule("remind-0") is False
    assert await store.schedule_records() == [claimed]


async def test_a_saved_record_keeps_newer_slot_bookkeeping(
        store: AnyStore, new_store: Callable[[], AnyStore]) -> None:
    """A pause saved from a copy read before another process's fire changes the pause,
    not how far the fire got."""
    read = ScheduleRecord(name="daily", origin="config", since=10.0, created_at=1.0)
    await store.save_schedules([read])
    async with new_store() as other:
        await other.advance_schedules([SlotMark(name="daily", since=30.0, last_slot=30.0,
                                                last_run_id="r3")])
    await store.save_schedules([read.model_copy(update={"paused": True})])
    (saved,) = await store.schedule_records()
    assert (saved.paused, saved.since, saved.last_slot, saved.last_run_id) == \
        (True, 30.0, 30.0, "r3")
    # A newer save moves them on as it says.
    later = saved.model_copy(update={"paused": False, "since": 40.0})
    await store.save_schedules([later])
    assert await store.schedule_records() == [later]


async def test_a_slot_mark_only_moves_a_record_forward(
        store: AnyStore, new_store: Callable[[], AnyStore]) -> None:
    daily = ScheduleRecord(name="daily", origin="config", since=10.0, last_slot=10.0,
                           last_run_id="r1", created_at=1.0)
    remind = ScheduleRecord(name="remind-0", origin="chat", created_by="slack:C1",
                            spec={"config": {"cron": "0 8 * * 1"}}, request_key="k1",
                            paused=True, since=20.0, created_at=2.0)
    await store.save_schedules([daily, remind])
    await store.advance_schedules([])
    await store.advance_schedules([
        SlotMark(name="remind-0", since=25.0, last_slot=24.0, last_run_id="r2"),
        SlotMark(name="daily", since=5.0, last_slot=5.0, last_run_id="r0"),  # older
        SlotMark(name="never-made", since=30.0, last_slot=30.0, last_run_id="r9")])
    moved = remind.model_copy(update={"since": 25.0, "last_slot": 24.0, "last_run_id": "r2"})
    assert await store.schedule_records() == [daily, moved]  # paused, spec: as they were
    # A slot decided again later (a second fire of it) keeps the run that claimed it.
    await store.advance_schedules([SlotMark(name="remind-0", since=26.0, last_slot=24.0,
                                            last_run_id="other")])
    moved = moved.model_copy(update={"since": 26.0})
    # In one write, in any order: the newest slot and the latest since win.
    await store.advance_schedules([
        SlotMark(name="daily", since=40.0, last_slot=40.0, last_run_id="r4"),
        SlotMark(name="daily", since=12.0, last_slot=35.0, last_run_id="r3")])
    daily = daily.model_copy(update={"since": 40.0, "last_slot": 40.0, "last_run_id": "r4"})
    async with new_store() as other:
        assert await other.schedule_records() == [daily, moved]
        await other.advance_schedules([SlotMark(name="daily", since=41.0)])  # no slot run
    daily = daily.model_copy(update={"since": 41.0})
    assert await store.schedule_records() == [daily, moved]
    # Deleted by one process; another's fire from its old copy does not bring it back.
    assert await store.delete_schedule("remind-0") is True
    async with new_store() as other:
        await other.advance_schedules([SlotMark(name="remind-0", since=50.0, last_slot=50.0,
                                                last_run_id="r5")])
    assert await store.schedule_records() == [daily]


async def test_slot_marks_from_two_processes_never_move_a_record_back(
        new_store: Callable[[], AnyStore]) -> None:
    async with new_store() as one, new_store() as two:
        await one.save_schedules([ScheduleRecord(name="tick", origin="config", since=0.0)])
        for n in range(1, 21):
            newer = SlotMark(name="tick", since=n, last_slot=n, last_run_id=f"r{n}")
            older = SlotMark(name="tick", since=n - 1, last_slot=n - 1, last_run_id=f"r{n - 1}")
            first, second = (one, two) if n % 2 else (two, one)
            await asyncio.gather(first.advance_schedules([newer]),
                                 second.advance_schedules([older]))
            (record,) = await two.schedule_records()
            assert (record.since, record.last_slot, record.last_run_id) == (n, n, f"r{n}")
        # A delete racing a fire: the record is gone either way.
        gone = await asyncio.gather(
            one.delete_schedule("tick"),
            two.advance_schedules([SlotMark(name="tick", since=99.0, last_slot=99.0)]))
        assert gone[0] is True
        assert await one.schedule_records() == []


@pytest.mark.parametrize("name", ["../x", "a/b", ".", "", "x" * 5_000])
async def test_schedule_names_are_only_keys(store: AnyStore, name: str) -> None:
    await store.save_schedules([ScheduleRecord(name=name, origin="chat", since=1.0)])
    await store.advance_schedules([SlotMark(name=name, since=2.0)])
    assert [(r.name, r.since) for r in await store.schedule_records()] == [(name, 2.0)]
    assert await store.delete_schedule(name) is True
