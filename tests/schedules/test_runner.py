"""Firing schedules: each slot exactly once, with an injected clock (no test waits a minute)."""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from runtime import EchoProvider, NotFound, RunStarted, Runtime, SQLiteStore
from schedules import Schedule, ScheduleBook, ScheduleConfig, Scheduler, load_schedules
from schedules.cron import jitter, next_fires, parse_crontab, slot_key
from schedules.trigger import SlotTrigger
from tests.clock import Clock

MINUTE = timedelta(minutes=1)
T0 = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)


def schedules(*configs: dict[str, Any], channels: tuple[str, ...] = ()) -> list[Schedule]:
    return load_schedules([ScheduleConfig(**c) for c in configs], default_timezone="UTC",
                          channels=channels)


@asynccontextmanager
async def opened(db: Path) -> AsyncIterator[tuple[SQLiteStore, Runtime]]:
    # No fsync: what is tested is which slots are claimed, and a thousand of them are.
    async with SQLiteStore(db, synchronous="off") as store, \
            Runtime(store, EchoProvider()) as rt:
        yield store, rt


@asynccontextmanager
async def scheduler(store: SQLiteStore, rt: Runtime, defined: list[Schedule], clock: Clock,
                    **kwargs: Any) -> AsyncIterator[Scheduler]:
    book = ScheduleBook(store, defined, clock=clock)
    async with Scheduler(book, rt, timers=False, **kwargs) as s:
        yield s


async def slot_runs(rt: Runtime, name: str) -> Counter[str]:
    """How many runs hold each slot key of ``name`` (a key can only ever be held once;
    a second run for one slot would show up under the same slot with another key)."""
    runs = await rt.records.runs()
    return Counter(r.idempotency_key or "" for r in runs
                   if (r.idempotency_key or "").startswith(f"schedule:{name}:"))


async def test_a_slot_due_now_runs_once_in_its_thread(tmp_path: Path) -> None:
    clock = Clock(T0 - MINUTE)
    async with opened(tmp_path / "m.db") as (store, rt):
        defined = schedules({"name": "daily", "cron": "0 8 * * *", "prompt": "summarise"})
        async with scheduler(store, rt, defined, clock) as s:
            assert await s.fire_due() == []
            clock.now = T0 + timedelta(seconds=2)
            fired = await s.fire_due()
            assert [f.key for f in fired] == ["schedule:daily:2026-03-02T08:00:00+00:00"]
            again = await s.fire_due()  # a duplicate trigger
            assert again == []
            run = await rt.wait(fired[0].run.id)
        assert run.thread_id == "schedule:daily" and run.text == "summarise"
        assert run.reply and "summarise" in run.reply


async def test_a_duplicate_trigger_and_a_second_process_claim_nothing(tmp_path: Path) -> None:
    clock = Clock(T0 - MINUTE)
    defined = schedules({"name": "daily", "cron": "0 8 * * *", "prompt": "p"})
    async with opened(tmp_path / "m.db") as (store_one, one), \
            opened(tmp_path / "m.db") as (store_two, two), \
            scheduler(store_one, one, defined, clock) as a, \
            scheduler(store_two, two, defined, clock) as b:
        clock.now = T0
        results = await asyncio.gather(a.fire_due(), b.fire_due(), a.fire_due(woken="daily"),
                                       b.fire_due(woken="daily"))
        keys = {f.key for fired in results for f in fired}
        runs = {f.run.id for fired in results for f in fired}
        assert keys == {slot_key("daily", T0)} and len(runs) == 1
        assert await slot_runs(one, "daily") == Counter({slot_key("daily", T0): 1})


async def test_a_schedule_new_to_the_store_starts_from_now(tmp_path: Path) -> None:
    clock = Clock(T0 + timedelta(days=30))
    defined = schedules({"name": "often", "cron": "* * * * *", "prompt": "p",
                         "misfire": "all"})
    async with opened(tmp_path / "m.db") as (store, rt), scheduler(store, rt, defined, clock) as s:
        assert await s.fire_due() == []
        assert await rt.records.runs() == []


@pytest.mark.parametrize("policy", ["skip", "once", "all"])
async def test_slots_missed_while_down_follow_the_misfire_policy(
        tmp_path: Path, policy: str) -> None:
    defined = schedules({"name": "hourly", "cron": "0 * * * *", "prompt": "p",
                         "misfire": policy, "max_catchup": 3})
    clock = Clock(T0 - MINUTE)
    async with opened(tmp_path / "m.db") as (store, rt), scheduler(store, rt, defined, clock) as s:
        clock.now = T0
        assert len(await s.fire_due()) == 1
    clock.now = T0 + timedelta(hours=5, minutes=30)  # 09:00 .. 13:00 passed while down
    async with opened(tmp_path / "m.db") as (store, rt), scheduler(store, rt, defined, clock) as s:
        caught_up = [f.slot.hour for f in s.started]
        assert await s.fire_due() == []  # and a second look claims nothing more
    assert caught_up == {"skip": [], "once": [13], "all": [11, 12, 13]}[policy]


async def test_a_late_timer_still_claims_its_slot(tmp_path: Path) -> None:
    """The timer went off late (a stalled loop): its slot is not treated as missed."""
    defined = schedules({"name": "daily", "cron": "0 8 * * *", "prompt": "p",
                         "misfire": "skip"})
    clock = Clock(T0 - MINUTE)
    async with opened(tmp_path / "m.db") as (store, rt), scheduler(store, rt, defined, clock) as s:
        clock.now = T0 + timedelta(minutes=10)
        assert [f.slot for f in await s.fire_due(woken="daily")] == [T0]


@pytest.mark.parametrize(("zone", "day"), [("Europe/Berlin", "2026-03-29"),
                                           ("America/New_York", "2026-03-08")])
async def test_spring_forward_fires_once_at_the_transition(
        tmp_path: Path, zone: str, day: str) -> None:
    defined = schedules({"name": "night", "cron": "30 2 * * *", "prompt": "p",
                         "timezone": zone})
    tz = ZoneInfo(zone)
    midnight = datetime.fromisoformat(day).replace(tzinfo=tz)
    clock = Clock(midnight)
    async with opened(tmp_path / "m.db") as (store, rt), scheduler(store, rt, defined, clock) as s:
        transition = midnight.replace(hour=3)  # 02:30 does not exist that night
        clock.now = transition
        fired = await s.fire_due()
        # APScheduler 3.11 sets its alarm for 03:30; it goes off and claims nothing new.
        clock.now = transition + timedelta(minutes=30)
        assert await s.fire_due(woken="night") == []
    assert [f.slot.astimezone(UTC) for f in fired] == [transition.astimezone(UTC)]


@pytest.mark.parametrize(("zone", "day"), [("Europe/Berlin", "2026-10-25"),
                                           ("America/New_York", "2026-11-01")])
async def test_fall_back_fires_once(tmp_path: Path, zone: str, day: str) -> None:
    hour = 2 if zone == "Europe/Berlin" else 1
    defined = schedules({"name": "night", "cron": f"30 {hour} * * *", "prompt": "p",
                         "timezone": zone})
    tz = ZoneInfo(zone)
    first = datetime.fromisoformat(day).replace(hour=hour, minute=30, tzinfo=tz)
    second = first.replace(fold=1)
    assert second.astimezone(UTC) - first.astimezone(UTC) == timedelta(hours=1)
    clock = Clock(first - MINUTE)
    async with opened(tmp_path / "m.db") as (store, rt), scheduler(store, rt, defined, clock) as s:
        fired = []
        for moment in (first, second):  # APScheduler 3.11 goes off at both
            clock.now = moment
            fired += await s.fire_due(woken="night")
        assert len(fired) == 1 and fired[0].slot.astimezone(UTC) == first.astimezone(UTC)
        assert len(await slot_runs(rt, "night")) == 1


@pytest.mark.parametrize("policy", ["skip", "once", "all"])
async def test_twenty_restarts_across_a_thousand_slots(tmp_path: Path, policy: str) -> None:
    """A thousand minutes of an every-minute job, with maiden down twenty times for a few
    minutes (or only a few seconds), timers late, duplicated, or going off early: every
    slot while up runs exactly once, the missed ones as the policy says, nothing twice."""
    rng = random.Random(f"restarts-{policy}")
    cap = 4
    defined = schedules({"name": "tick", "cron": "* * * * *", "prompt": "p",
                         "misfire": policy, "max_catchup": cap})
    slots = next_fires(defined[0].cron, T0, 1000)
    downs = [40 + 45 * k + rng.randint(0, 20) for k in range(20)]  # where each outage starts
    outages = {start: rng.choice([0, 1, 2, 7, 12]) for start in downs}  # slots missed
    expected: set[str] = set()
    clock = Clock(T0)
    i = 0
    life = 0
    while i < len(slots):
        async with opened(tmp_path / "m.db") as (store, rt):
            book = ScheduleBook(store, defined, clock=clock)
            async with Scheduler(book, rt, timers=False) as s:
                if life == 0:
                    assert s.started == []
                while i < len(slots):
                    slot = slots[i]
                    clock.now = slot + timedelta(seconds=rng.choice([0, 0, 1, 30]))
                    for _ in range(rng.choice([1, 1, 2])):  # a duplicate trigger now and then
                        await s.fire_due(woken="tick")
                    expected.add(slot_key("tick", slot))
                    i += 1
                    if i - 1 in outages:
                        break
                await rt.idle()
        life += 1
        if i >= len(slots):
            break
        # Down for a few slots; back a few seconds, or a minute and a half, after the last
        # slot missed (then the slot after it is past too, and counts as on time).
        down_until = slots[i - 1 + outages[i - 1]] if outages[i - 1] else slots[i - 1]
        clock.now = down_until + timedelta(seconds=rng.choice([5, 90]))
        gap = [s for s in slots[i:] if s <= clock.now]
        i += len(gap)
        late = [s for s in gap if clock.now - s > timedelta(seconds=60)]
        on_time = [s for s in gap if s not in late]
        chosen = {"skip": [], "once": late[-1:], "all": late[-cap:]}[policy]
        if on_time:
            chosen = (late[-(cap - 1):] if policy == "all" else []) + on_time
        expected.update(slot_key("tick", s) for s in chosen)
    async with opened(tmp_path / "m.db") as (store, rt):
        counts = await slot_runs(rt, "tick")
    assert life == 21
    assert max(counts.values()) == 1
    assert set(counts) == expected


def test_the_runner_sets_one_alarm_per_active_schedule(tmp_path: Path) -> None:
    """The APScheduler jobs (checked without waiting for them: see the wake test)."""
    defined = schedules({"name": "a", "cron": "0 9 * * 1-5", "prompt": "p"},
                        {"name": "b", "cron": "0 9 * * *", "prompt": "p", "enabled": False})

    async def main() -> list[tuple[str, datetime | None]]:
        async with opened(tmp_path / "m.db") as (store, rt), \
                Scheduler(ScheduleBook(store, defined), rt) as s:
            assert s.aps is not None
            # Our slots' alarm (at a spring-forward transition, not half an hour after it).
            assert [type(job.trigger) for job in s.aps.get_jobs()] == [SlotTrigger]
            return list(s.next_alarms())

    alarms = asyncio.run(main())
    assert [name for name, _ in alarms] == ["a"]
    when = alarms[0][1]
    assert when is not None and when.weekday() < 5 and when.hour == 9


async def test_an_alarm_that_goes_off_claims_the_slot_of_the_clock(tmp_path: Path) -> None:
    """The real APScheduler path: the job's alarm is moved to now, it goes off, and the
    wake claims the slot the (injected) clock is at."""
    clock = Clock(T0 - MINUTE)
    defined = schedules({"name": "daily", "cron": "0 8 * * *", "prompt": "p"})
    async with opened(tmp_path / "m.db") as (store, rt), rt.subscribe() as events:
        book = ScheduleBook(store, defined, clock=clock)
        async with Scheduler(book, rt) as s:
            assert s.aps is not None
            clock.now = T0
            s.aps.modify_job("daily", next_run_time=datetime.now(UTC))
            async with asyncio.timeout(10):
                while not isinstance(event := await events.next(), RunStarted):
                    pass
        run = await rt.records.get_run(event.run_id)
        assert run.idempotency_key == slot_key("daily", T0)


async def test_run_now_has_its_own_key(tmp_path: Path) -> None:
    defined = schedules({"name": "daily", "cron": "0 8 * * *", "prompt": "p",
                         "fresh_thread": True})
    async with opened(tmp_path / "m.db") as (store, rt), \
            scheduler(store, rt, defined, Clock(T0)) as s:
        first, second = await s.run_now("daily"), await s.run_now("daily")
        assert first.id != second.id
        for run in (first, second):
            assert (run.idempotency_key or "").startswith("schedule:daily:manual:")
            assert run.thread_id.startswith("schedule:daily:manual:")
        with pytest.raises(NotFound):
            await s.run_now("nope")



async def test_a_claim_whose_record_a_crash_lost_is_not_a_missed_slot(tmp_path: Path) -> None:
    """Killed after the slot's run was stored, before the schedule's record said so: late
    back, under ``skip``, the slot is found claimed (its run is recovered), not skipped."""
    defined = schedules({"name": "daily", "cron": "0 8 * * *", "prompt": "p",
                         "misfire": "skip"})
    clock = Clock(T0 - MINUTE)
    async with opened(tmp_path / "m.db") as (store, rt), scheduler(store, rt, defined, clock):
        # What the fire did before the kill: the run under the slot's key, nothing more.
        claimed = await rt.submit("schedule:daily", "p", idempotency_key=slot_key("daily", T0))
    clock.now = T0 + timedelta(minutes=10)
    async with opened(tmp_path / "m.db") as (store, rt), scheduler(store, rt, defined, clock) as s:
        assert [(f.slot, f.run.id) for f in s.started] == [(T0, claimed.id)]
        (status,) = [r for r in await rt.records.schedule_records() if r.name == "daily"]
        assert status.last_run_id == claimed.id
        assert len(await slot_runs(rt, "daily")) == 1


async def test_a_jittered_slot_fires_its_jitter_late_once_in_every_replica(
        tmp_path: Path) -> None:
    """``jitter_s`` (issue 56): jobs made for the same minute do not all start at once;
    each slot fires up to that long late, the same in every process, and once."""
    clock = Clock(T0 - MINUTE)
    defined = schedules({"name": "a", "cron": "0 8 * * *", "prompt": "p", "jitter_s": 60},
                        {"name": "b", "cron": "0 8 * * *", "prompt": "p", "jitter_s": 60})
    late = {name: jitter(name, T0, 60) for name in "ab"}
    assert late["a"] != late["b"] and all(timedelta(0) <= d < MINUTE for d in late.values())
    async with opened(tmp_path / "m.db") as (store, rt), \
            scheduler(store, rt, defined, clock) as one, \
            scheduler(store, rt, defined, clock) as two:
        assert await one.fire_due() == []
        first, second = sorted("ab", key=late.__getitem__)
        clock.now = T0 + late[first] - timedelta(milliseconds=1)
        assert await one.fire_due() == [] and await two.fire_due() == []  # not yet
        clock.now = T0 + late[first]
        assert [f.schedule for f in await one.fire_due()] == [first]
        assert await two.fire_due() == []  # claimed once
        clock.now = T0 + late[second]
        assert [f.schedule for f in await two.fire_due()] == [second]
        clock.now = T0 + 2 * MINUTE
        assert await one.fire_due() == [] and await two.fire_due() == []
        counts = {name: await slot_runs(rt, name) for name in "ab"}
    assert all(list(c.values()) == [1] for c in counts.values()), counts


def test_the_trigger_sets_each_slots_alarm_its_jitter_late() -> None:
    cron = parse_crontab("0 * * * *", "UTC")
    trigger = SlotTrigger(cron, name="hourly", jitter_s=120)
    alarm = trigger.get_next_fire_time(None, T0 - MINUTE)
    assert alarm == T0 + jitter("hourly", T0, 120)
    # Asked just after the slot, before its alarm: that alarm is still to come.
    assert trigger.get_next_fire_time(None, T0 + timedelta(microseconds=1)) == alarm
    following = T0 + timedelta(hours=1)
    assert trigger.get_next_fire_time(alarm, alarm) == following + jitter(
        "hourly", following, 120)
