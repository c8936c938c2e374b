"""Schedules on three replicas (issue 18): every replica may fire a slot, and the slot's
idempotency key lets exactly one claim win.

Three runtimes with their schedule runners, each on its own ``PostgresStore`` (its own
connection pool) over one schema, share one injected clock: nothing waits a real minute.
Five hours of an every-minute job and of a ten-minute job in Europe/Berlin across the
night clocks fall back; at each slot every live replica fires at once (``asyncio.gather``,
so they race for the same key), now and then twice, now and then one stalls. Replicas are
restarted twenty times: one or two while the others keep firing (down for a few slots, or
closed and opened again within the slot), and three times all of them, the clock jumping
over the slots nobody was up for. While any replica is up no slot is missed; after a time
when none was, ``misfire`` decides, exactly as it does for one process.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import Awaitable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from runtime import EchoProvider, RunState, Runtime, ScheduleRecord
from runtime.stores.postgres import PostgresStore
from schedules import Fired, Schedule, ScheduleBook, ScheduleConfig, Scheduler, load_schedules
from schedules.cron import next_fires, slot_key
from tests.clock import Clock
from tests.postgres import PG_DSN, fresh_schema

pytestmark = pytest.mark.timeout(60)

START = datetime(2026, 10, 24, 22, 0, tzinfo=UTC)
"""Midnight in Berlin; at 01:00 UTC (03:00 CEST) its clocks go back to 02:00 CET."""
MOMENTS = 300  # every-minute slots, 22:01 .. 03:00 UTC
CAP = 4  # max_catchup
ON_TIME = timedelta(seconds=60)
REPLICAS = 3


@dataclass(frozen=True)
class Outage:
    """After the fire at slot ``at`` every replica closes; ``missed`` slots later they come
    back ``back_s`` seconds after the last one missed: together, or one by one."""

    at: int
    missed: int
    back_s: int
    staggered: bool


OUTAGES = {
    47: Outage(47, 2, 5, staggered=False),  # 22:49, 22:50 (Berlin's, on time when back)
    # 23:47 .. 23:53 (Berlin's 23:50, late), back 90 s late: 23:54 is past too, on time.
    105: Outage(105, 7, 90, staggered=True),
    # 00:52 .. 01:25 UTC: the hour that Berlin has twice; the ten-minute job has no slot
    # in it (02:00-02:50 CET repeat 02:00-02:50 CEST, which ran), so none is caught up.
    171: Outage(171, 33, 5, staggered=False),
}
ROLLING: dict[int, list[int]] = {
    8: [0], 22: [1], 38: [2], 68: [0], 85: [1, 2], 125: [1], 140: [2], 215: [0], 235: [1],
    255: [2],
}
"""At these slots, these replicas close while the others fire; back some slots later."""


def restarts_planned() -> int:
    return REPLICAS * len(OUTAGES) + sum(len(r) for r in ROLLING.values())


def defined_schedules(policy: str) -> list[Schedule]:
    configs = [
        ScheduleConfig(name="tick", cron="* * * * *", prompt="tick", misfire=policy,
                       max_catchup=CAP),  # every run in the one thread schedule:tick
        ScheduleConfig(name="berlin", cron="*/10 * * * *", timezone="Europe/Berlin",
                       prompt="berlin", misfire=policy, max_catchup=CAP,
                       fresh_thread=True),
    ]
    return load_schedules(configs, default_timezone="UTC", channels=())


class Replica:
    """One ``maiden run``: a store of its own, a runtime, a schedule runner (no timers: the
    test is the alarm clock)."""

    def __init__(self, label: str, schema: str, defined: list[Schedule], clock: Clock) -> None:
        self.label = label
        self.schema = schema
        self.defined = defined
        self.clock = clock
        self._stack: AsyncExitStack | None = None
        self._rt: Runtime | None = None
        self._store: PostgresStore | None = None
        self._scheduler: Scheduler | None = None
        self.lives = 0

    @property
    def up(self) -> bool:
        return self._stack is not None

    @property
    def rt(self) -> Runtime:
        assert self._rt is not None, f"replica {self.label} is down"
        return self._rt

    @property
    def scheduler(self) -> Scheduler:
        assert self._scheduler is not None, f"replica {self.label} is down"
        return self._scheduler

    async def boot(self) -> None:
        """Open the store and start the runtime; the schedules not yet."""
        assert self._stack is None
        stack = AsyncExitStack()
        try:
            self._store = await stack.enter_async_context(
                PostgresStore(PG_DSN, schema=self.schema, pool_size=3))
            self._rt = await stack.enter_async_context(Runtime(self._store, EchoProvider()))
        except BaseException:
            await stack.aclose()
            raise
        self._stack = stack
        self.lives += 1

    async def start(self) -> list[Fired]:
        """Start the schedule runner; return what its catch-up claimed."""
        assert self._stack is not None and self._scheduler is None
        assert self._store is not None
        book = ScheduleBook(self._store, self.defined, clock=self.clock)
        scheduler = Scheduler(book, self.rt, timers=False)
        self._scheduler = await self._stack.enter_async_context(scheduler)
        return scheduler.started

    async def open(self) -> list[Fired]:
        await self.boot()
        return await self.start()

    async def close(self) -> None:
        stack, self._stack, self._rt, self._scheduler = self._stack, None, None, None
        assert stack is not None
        await stack.aclose()

    async def fire(self, rng: random.Random, moment: datetime) -> list[Fired]:
        """What its alarms do at ``moment``: either one look at every schedule, or the
        woken fire of each schedule whose timer goes off now (the ten-minute job's at every
        tenth minute, the repeated hour of the fall-back night included, as APScheduler
        does); a duplicate trigger now and then."""
        s = self.scheduler
        calls: list[Awaitable[list[Fired]]] = []
        for _ in range(rng.choice([1, 1, 1, 2])):
            if rng.random() < 0.5:
                calls.append(s.fire_due())
            else:
                calls.append(s.fire_due(woken="tick"))
                if moment.minute % 10 == 0:
                    calls.append(s.fire_due(woken="berlin"))
        return [f for fired in await asyncio.gather(*calls) for f in fired]


def chosen_after_downtime(policy: str, gap: list[datetime], back: datetime) -> list[datetime]:
    """The slots a process back at ``back`` runs of those that passed while none was up
    (the table of docs/guides/schedules.md, Missed slots; the newest, if at most a minute
    old, is on time)."""
    late = [s for s in gap if back - s > ON_TIME]
    on_time = [s for s in gap if s not in late]
    assert len(on_time) <= 1  # slots a minute apart or more
    if on_time:
        return (late[-(CAP - 1):] if policy == "all" else []) + on_time
    return {"skip": [], "once": late[-1:], "all": late[-CAP:]}[policy]


class Check:
    """What the store must hold: every slot claimed once, and records that never go back."""

    def __init__(self, names: Sequence[str]) -> None:
        self.expected: dict[str, set[str]] = {n: set() for n in names}
        self.newest: dict[str, float | None] = dict.fromkeys(names)
        self.since: dict[str, float] = {}

    def claim(self, name: str, slot: datetime) -> None:
        self.expected[name].add(slot_key(name, slot))
        self.newest[name] = slot.timestamp()

    async def records(self, rt: Runtime, now: datetime) -> None:
        records: dict[str, ScheduleRecord] = {
            r.name: r for r in await rt.records.schedule_records()}
        for name in self.expected:
            record = records[name]
            since = self.since.get(name, record.since)
            assert since <= record.since <= now.timestamp(), (name, since, record)
            self.since[name] = record.since
            assert record.last_slot == self.newest[name], (name, record, self.newest[name])


async def slot_runs(rt: Runtime, name: str) -> Counter[str]:
    runs = await rt.records.runs()
    return Counter(r.idempotency_key or "" for r in runs
                   if (r.idempotency_key or "").startswith(f"schedule:{name}:"))


async def scenario(policy: str, schema: str) -> None:
    rng = random.Random(f"replicas-{policy}")
    defined = defined_schedules(policy)
    tick, berlin = defined
    slots = next_fires(tick.cron, START, MOMENTS)
    # In UTC: an aware time in Berlin's repeated hour never equals one in another zone.
    by_name = {"tick": [s.astimezone(UTC) for s in slots],
               "berlin": [s.astimezone(UTC) for s in next_fires(berlin.cron, START, 40)
                          if s <= slots[-1]]}
    slots = by_name["tick"]
    # Crontab's fall back: 02:00-02:50 come once (CEST), the repeat in CET does not fire.
    utc_berlin = by_name["berlin"]
    assert not [s for s in utc_berlin if datetime(2026, 10, 25, 1, tzinfo=UTC) <= s
                < datetime(2026, 10, 25, 2, tzinfo=UTC)]
    assert datetime(2026, 10, 25, 0, 50, tzinfo=UTC) in utc_berlin
    assert datetime(2026, 10, 25, 2, 0, tzinfo=UTC) in utc_berlin
    assert restarts_planned() == 20

    clock = Clock(START)
    check = Check(["tick", "berlin"])
    replicas = [Replica(f"r{n}", schema, defined, clock) for n in range(REPLICAS)]
    back_at: dict[int, list[Replica]] = {}  # slot index -> replicas that start then
    restarts = 0
    try:
        first = await asyncio.gather(*(r.open() for r in replicas))
        assert first == [[], [], []]  # new to the store: from now, nothing replayed
        i = 0
        while i < len(slots):
            slot = slots[i]
            now = slot + timedelta(seconds=rng.choice([0, 0, 1, 30]))
            clock.now = now
            starting = back_at.pop(i, [])
            closing = [replicas[n] for n in ROLLING.get(i, [])]
            for r in starting:  # up by now; its runner starts while the others fire
                await r.boot()
            live = [r for r in replicas if r.up and r not in closing and r not in starting]
            # A stalled loop skips this slot now and then; some live replica always fires.
            firing = [r for r in live if rng.random() > 0.1] or live[:1]
            assert firing, f"slot {i}: nobody up to fire"
            work: list[Awaitable[Any]] = [r.fire(rng, slot) for r in firing]
            work += [r.start() for r in starting]
            work += [r.close() for r in closing]
            done = await asyncio.gather(*work)
            started: list[Fired] = [f for fired in done[len(firing):len(firing) + len(starting)]
                                    for f in fired]
            for name, own in by_name.items():
                if slot in own:
                    check.claim(name, slot)
            # A replica that starts while others fire claims at most this slot (its
            # catch-up reads the records the others keep current), never an old one.
            assert {f.key for f in started} <= check.expected["tick"] | check.expected["berlin"]
            for n in ROLLING.get(i, []):
                down = rng.choice([0, 0, 1, 3, 8])
                if down == 0:  # closed and opened again within the slot
                    await replicas[n].open()
                else:
                    back_at.setdefault(i + down, []).append(replicas[n])
                restarts += 1
            await check.records(firing[0].rt, now)
            i += 1
            outage = OUTAGES.get(i - 1)
            if outage is None:
                continue
            # Everybody down, the clock jumping over the slots nobody is up for.
            assert not back_at
            assert all(r.up for r in replicas)
            await asyncio.gather(*(r.close() for r in replicas))
            last_fire = clock.now
            back = slots[outage.at + outage.missed] + timedelta(seconds=outage.back_s)
            clock.now = back
            chosen: set[str] = set()
            for name, own in by_name.items():
                gap = [s for s in own if last_fire < s <= back]
                for s in chosen_after_downtime(policy, gap, back):
                    check.claim(name, s)
                    chosen.add(slot_key(name, s))
            i += len([s for s in slots[i:] if s <= back])
            coming = replicas[:1] if outage.staggered else replicas
            caught_up = await asyncio.gather(*(r.open() for r in coming))
            restarts += REPLICAS
            # Each that came back claimed what the policy says, or found it claimed.
            assert {f.key for fired in caught_up for f in fired} == chosen, (policy, outage)
            await check.records(coming[0].rt, back)
            if outage.staggered:
                back_at[i] = [replicas[1]]
                back_at[i + 3] = [replicas[2]]
        assert not back_at
        assert restarts == 20 and sum(r.lives for r in replicas) == REPLICAS + 20
        # Every run has ended, driven by the replicas that are up: once none has work left
        # (and nothing is submitted any more), none is left queued or half done.
        async with asyncio.timeout(20):
            await asyncio.gather(*(r.rt.idle() for r in replicas))
        runs = await replicas[0].rt.records.runs()
        assert [(r.id, r.thread_id, r.state) for r in runs if r.state != RunState.COMPLETED] \
            == []
        assert [r.id for r in runs if not r.idempotency_key] == []  # no slot claimed twice
        for name in by_name:
            counts = await slot_runs(replicas[2].rt, name)
            assert max(counts.values()) == 1, [k for k, n in counts.items() if n > 1]
            missing = sorted(check.expected[name] - set(counts))
            extra = sorted(set(counts) - check.expected[name])
            assert (missing, extra) == ([], []), name
        assert len(runs) == sum(len(keys) for keys in check.expected.values())
    finally:
        for r in replicas:
            if r.up:
                await r.close()


@pytest.mark.parametrize("policy", ["skip", "once", "all"])
async def test_schedules_on_three_replicas_each_slot_once_across_20_restarts(
        policy: str) -> None:
    async with fresh_schema() as schema, asyncio.timeout(55):
        await scenario(policy, schema)
