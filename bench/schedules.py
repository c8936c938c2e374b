"""Workload 7: schedules. Startup with many schedules; slot to run start with many due at once.

Startup: N ``[[schedules]]`` entries (varied crontabs and IANA zones) validated as the
config loader does, read by ``load_schedules``, put in a ``ScheduleBook``, a
``Scheduler(timers=False).start()`` on a fresh store (it writes a record per schedule),
and the next 3 fires of each (what the banner shows). Then the same again on the store
that now holds the records, and once more with the APScheduler alarms set (each the
median of 3 starts). Baseline: ``parse_crontab`` of the same N lines, the part no
scheduler can skip.

Slot to run start: ``due`` schedules all ``0 9 * * *`` (each its own thread); the
injected clock moves to 09:00 and the slot is fired, either by one ``fire_due`` (one
timer for the minute) or by ``due`` concurrent ``fire_due(woken=name)`` (one alarm per
schedule, as APScheduler goes off). For each run: the time from the fire call to its
``RunStarted`` event. Baseline: the same runs (same thread, text, origin, idempotency
key) submitted straight to ``Runtime.submit``, in a loop or all at once likewise. Each
round is a fresh store; p50 and p99 are medians over the rounds of each round's figure.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from runtime import (
    EchoProvider,
    RunStarted,
    RunState,
    Runtime,
    RuntimeConfig,
    SQLiteStore,
    Subscription,
)
from runtime.stores.sqlite import Synchronous
from schedules import (
    Schedule,
    ScheduleBook,
    ScheduleConfig,
    Scheduler,
    load_schedules,
    next_fires,
    parse_crontab,
    slot_key,
)

from .thread import remove_db

__all__ = ["FIRE_WAYS", "NEXT", "LatencyResult", "SchedulesResult", "StartupResult", "percentile",
           "run_schedules"]

CRONTABS = (
    "* * * * *",            # every minute
    "0 * * * *",            # hourly
    "0 9 * * 1-5",          # weekdays at 9:00
    "*/15 * * * *",
    "0 0 1 * mon",          # the 1st OR every Monday (crontab's day rule)
    "30 2 * * *",           # in a DST gap once a year where there is DST
    "*/5 9-17 * * mon-fri",
    "0 */6 * * *",
    "15 4 * * sun",
    "0 12 1,15 * *",
    "0 0 1 1 *",            # yearly: the longest backward walk at startup
    "45 23 * * 5-0",        # Friday to Sunday
)
ZONES = (None, "Europe/Berlin", "America/New_York", "Asia/Kolkata", "America/Los_Angeles",
         "Australia/Sydney", "Asia/Tokyo", "UTC")
NOW = datetime(2026, 3, 2, 8, 59, 30, tzinfo=UTC)
"""A Monday, no DST change within a day in any zone above (the slot walk's fast path)."""
SLOT = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
PROMPT = "summarise what happened overnight"
NEXT = 3
PARSES = 5
STARTS = 3

FireWay = Literal["once", "woken"]
FIRE_WAYS: dict[FireWay, str] = {
    # One fire_due for the minute; or one fire_due(woken=name) per schedule, all at once,
    # which is what the APScheduler alarms of schedules due in the same minute do.
    "once": "one fire_due",
    "woken": "{n} alarms",
}


def percentile(values: list[float], p: float) -> float:
    """Nearest rank; p100 is the max."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


@dataclass
class StartupResult:
    schedules: int
    load_ms: float
    """Configs validated (``ScheduleConfig``, as from agent.toml) and ``load_schedules``."""
    start_ms: float
    """``ScheduleBook`` + ``Scheduler.start()``: records read (and written when new), the
    catch-up decided for each schedule."""
    next_ms: float
    """``next_fires(cron, now, 3)`` for each."""

    @property
    def total_s(self) -> float:
        return (self.load_ms + self.start_ms + self.next_ms) / 1000


@dataclass
class LatencyResult:
    mode: Literal["global", "thread"]
    way: FireWay
    maiden_ms: list[list[float]] = field(default_factory=list)
    """Per round, per run: fire call to ``RunStarted``."""
    baseline_ms: list[list[float]] = field(default_factory=list)
    """The same runs submitted directly."""

    @staticmethod
    def typical(rounds: list[list[float]], p: float) -> float:
        """The median over the rounds of each round's ``p``-th percentile (one slow round,
        a neighbour's burst of fsyncs, does not make the figure); p100: the max of all."""
        if p >= 100:
            return max(max(ms) for ms in rounds)
        return statistics.median(percentile(ms, p) for ms in rounds)


@dataclass
class SchedulesResult:
    schedules: int
    parse_s: float
    """Baseline: ``parse_crontab`` of the N lines (median of ``PARSES``)."""
    fresh: StartupResult
    again: StartupResult
    timers: StartupResult
    """Second start again, with ``timers=True``: the APScheduler jobs made and started."""
    due: int
    rounds: int
    latency: list[LatencyResult]


class _Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def configs(n: int) -> list[dict[str, Any]]:
    """N schedules as ``[[schedules]]`` tables read from TOML: varied lines and zones."""
    tables = []
    for i in range(n):
        table: dict[str, Any] = {
            "name": f"job-{i:04d}", "cron": CRONTABS[i % len(CRONTABS)],
            "prompt": f"{PROMPT} ({i})"}
        zone = ZONES[(i // len(CRONTABS) + i) % len(ZONES)]
        if zone is not None:
            table["timezone"] = zone
        if i % 4 == 0:
            table["deliver"] = f"slack:C{i:08d}"
        if i % 5 == 0:
            table["misfire"] = ("skip", "all")[i % 2]
        tables.append(table)
    return tables


def _runtime(store: SQLiteStore, mode: Literal["global", "thread"] = "thread") -> Runtime:
    return Runtime(store, EchoProvider(), settings=RuntimeConfig(concurrency=mode))


def _parse_s(tables: list[dict[str, Any]]) -> float:
    times = []
    for _ in range(PARSES):
        start = time.perf_counter()
        for t in tables:
            parse_crontab(t["cron"], t.get("timezone", "UTC"))
        times.append(time.perf_counter() - start)
    return statistics.median(times)


async def _startup(path: Path, synchronous: Synchronous, tables: list[dict[str, Any]],
                   *, timers: bool = False) -> StartupResult:
    async with SQLiteStore(path, synchronous=synchronous) as store, _runtime(store) as rt:
        t0 = time.perf_counter()
        defined = load_schedules([ScheduleConfig.model_validate(t) for t in tables],
                                 default_timezone="UTC", channels=("slack",))
        t1 = time.perf_counter()
        scheduler = Scheduler(ScheduleBook(store, defined, clock=lambda: NOW), rt, timers=timers)
        fired = await scheduler.start()
        t2 = time.perf_counter()
        fires = [next_fires(s.cron, NOW, NEXT) for s in defined]
        t3 = time.perf_counter()
        await scheduler.close()
        records = await rt.records.schedule_records()
    if fired or len(records) != len(tables) or any(len(f) != NEXT for f in fires):
        raise RuntimeError(f"startup claimed {len(fired)} slots, stored {len(records)} "
                           f"records for {len(tables)} schedules")
    return StartupResult(schedules=len(tables), load_ms=(t1 - t0) * 1000,
                         start_ms=(t2 - t1) * 1000, next_ms=(t3 - t2) * 1000)


def _median(starts: list[StartupResult]) -> StartupResult:
    """The start with the median total (its parts as they were in that start)."""
    return sorted(starts, key=lambda s: s.total_s)[len(starts) // 2]


def _due(n: int) -> list[Schedule]:
    return load_schedules(
        [ScheduleConfig(name=f"due-{i:03d}", cron="0 9 * * *", prompt=PROMPT)
         for i in range(n)], default_timezone="UTC", channels=())


async def _watch(events: Subscription, started: dict[str, float], want: int,
                 all_started: asyncio.Event) -> None:
    async for event in events:
        if isinstance(event, RunStarted):
            started.setdefault(event.run_id, time.perf_counter())
            if len(started) >= want:
                all_started.set()


async def _fire(rt: Runtime, defined: list[Schedule], way: FireWay,
                scheduler: Scheduler | None) -> list[str]:
    """Fire the slot (with ``scheduler``) or submit its runs directly (without)."""
    if scheduler is not None:
        if way == "once":
            return [f.run.id for f in await scheduler.fire_due(SLOT)]
        woken = await asyncio.gather(*(scheduler.fire_due(SLOT, woken=s.name)
                                       for s in defined))
        return [f.run.id for fired in woken for f in fired]

    async def submit(s: Schedule) -> str:
        key = slot_key(s.name, SLOT)
        run = await rt.submit(s.thread_for(key.split(":", 2)[2]), s.config.message,
                              origin=s.origin, idempotency_key=key)
        return run.id

    if way == "once":
        return [await submit(s) for s in defined]
    return list(await asyncio.gather(*(submit(s) for s in defined)))


async def _round(path: Path, synchronous: Synchronous, mode: Literal["global", "thread"],
                 way: FireWay, due: int, *, direct: bool) -> list[float]:
    """One fresh store: ``due`` runs for the 09:00 slot, ms from the fire to each start."""
    remove_db(path)
    defined = _due(due)
    async with SQLiteStore(path, synchronous=synchronous) as store, \
            _runtime(store, mode) as rt:
        scheduler = None
        if not direct:
            clock = _Clock(SLOT - timedelta(seconds=30))
            scheduler = Scheduler(ScheduleBook(store, defined, clock=clock), rt, timers=False)
            await scheduler.start()
            clock.now = SLOT
        started: dict[str, float] = {}
        all_started = asyncio.Event()
        async with rt.subscribe() as events:
            watcher = asyncio.create_task(_watch(events, started, due, all_started))
            t0 = time.perf_counter()
            ids = await _fire(rt, defined, way, scheduler)
            await asyncio.wait_for(all_started.wait(), 120)
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
        await rt.idle()
        if scheduler is not None:
            await scheduler.close()
        for run_id in ids:
            run = await rt.records.get_run(run_id)
            if run.state is not RunState.COMPLETED:
                raise RuntimeError(f"run {run_id} ended {run.state}: {run.reason}")
    if len(ids) != due or set(ids) != set(started):
        raise RuntimeError(f"{len(ids)} runs fired for {due} schedules")
    return [(started[run_id] - t0) * 1000 for run_id in ids]


async def run_schedules(
    workdir: Path, synchronous: Synchronous, *, schedules: int = 1000, due: int = 100,
    rounds: int = 5, modes: tuple[Literal["global", "thread"], ...] = ("thread", "global"),
) -> SchedulesResult:
    """Workload 7: startup with ``schedules`` schedules, then ``due`` slots at once."""
    tables = configs(schedules)
    path = workdir / "schedules-startup.db"
    parse_s = _parse_s(tables)
    starts = min(STARTS, rounds)
    fresh, again, timers = [], [], []
    for _ in range(starts):
        remove_db(path)
        fresh.append(await _startup(path, synchronous, tables))
        again.append(await _startup(path, synchronous, tables))
        timers.append(await _startup(path, synchronous, tables, timers=True))

    latency = []
    for mode in modes:
        for way in FIRE_WAYS:
            result = LatencyResult(mode=mode, way=way)
            for r in range(rounds):  # alternating who goes first, as a neighbour hits both
                for direct in ((False, True) if r % 2 == 0 else (True, False)):
                    ms = await _round(workdir / "schedules-due.db", synchronous, mode, way,
                                      due, direct=direct)
                    (result.baseline_ms if direct else result.maiden_ms).append(ms)
            latency.append(result)
    return SchedulesResult(schedules=schedules, parse_s=parse_s, fresh=_median(fresh),
                           again=_median(again), timers=_median(timers), due=due,
                           rounds=rounds, latency=latency)
