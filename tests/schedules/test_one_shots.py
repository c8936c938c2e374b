"""A one-shot has one alarm: when that alarm's fire claims nothing (the store out of reach
then, or the process's clock behind it), or there never is one (made for a time just
passed), the scheduler's next look at the book fires it, once."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

from runtime import EchoProvider, Origin, Runtime, SQLiteStore
from schedules import ScheduleBook, Scheduler, load_schedules
from schedules.config import ScheduleConfig
from tests.clock import Clock
from tests.http_helpers import served

T0 = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)
HERE = Origin(channel="schedule")


@asynccontextmanager
async def opened(db: Path) -> AsyncIterator[tuple[SQLiteStore, Runtime]]:
    async with SQLiteStore(db, synchronous="off") as store, \
            Runtime(store, EchoProvider()) as rt:
        yield store, rt


async def keys(rt: Runtime, name: str) -> list[str]:
    return sorted(r.idempotency_key or "" for r in await rt.records.runs()
                  if (r.idempotency_key or "").startswith(f"schedule:{name}:"))


async def test_a_one_shot_whose_alarm_claimed_nothing_fires_at_the_next_look(
    tmp_path: Path
) -> None:
    at = T0 + timedelta(minutes=5)
    clock = Clock(T0)
    defined = load_schedules([ScheduleConfig(name="nudge", at=at.isoformat(), say="go")],
                             default_timezone="UTC", channels=[])
    async with opened(tmp_path / "m.db") as (store, rt):
        book = ScheduleBook(store, defined, clock=clock)
        async with Scheduler(book, rt, timers=False) as s:
            # Its alarm goes off while this process's clock is a second behind: not due.
            assert await s.fire_due(at - timedelta(seconds=1), woken="nudge") == []
            clock.now = at + timedelta(seconds=10)
            await s.sync()  # the scheduler's refresh (every refresh_s)
            assert await keys(rt, "nudge") == [f"schedule:nudge:{at.isoformat()}"]
            await s.sync()
            assert len(await keys(rt, "nudge")) == 1
            for run in await rt.records.runs():
                assert (await rt.wait(run.id)).reply == "go"
            await book.load()
            (schedule,) = book.schedules()
            assert book.finished(schedule)


async def test_a_one_shot_made_for_a_time_just_passed_fires_once_at_once(
    tmp_path: Path
) -> None:
    clock = Clock(T0)
    just = T0 - timedelta(seconds=30)  # the tools take one up to a minute old
    async with opened(tmp_path / "m.db") as (store, rt):
        book = ScheduleBook(store, clock=clock)
        async with Scheduler(book, rt, timers=False):
            made = await book.create(name="now", thread_id="t", origin=HERE, request_key="k",
                                     at=just.isoformat(), say="look", thread=None)
            # Fired as it was made (the book tells the scheduler of the change).
            assert await keys(rt, "now") == [f"schedule:now:{just.isoformat()}"]
            (run,) = await rt.records.runs()
            assert (await rt.wait(run.id)).reply == "look"
            await book.load()
            assert book.finished(made)


async def test_the_http_listing_shows_a_one_shot_and_whether_it_is_done(
    tmp_path: Path
) -> None:
    at = T0 + timedelta(minutes=5)
    clock = Clock(T0)
    defined = load_schedules([ScheduleConfig(name="nudge", at=at.isoformat(), say="go"),
                              ScheduleConfig(name="daily", cron="0 9 * * *", prompt="p")],
                             default_timezone="UTC", channels=[])
    async with opened(tmp_path / "m.db") as (store, rt), \
            Scheduler(ScheduleBook(store, defined, clock=clock), rt, timers=False) as s, \
            served(rt, token="t0k", schedules=s) as (client, _):
        listed = (await client.get("/v1/schedules")).json()["schedules"]
        assert [(x["name"], x["cron"], x["at"], x["done"], x["does"]) for x in listed] == [
            ("nudge", None, at.isoformat(), False, "say"),
            ("daily", "0 9 * * *", None, False, "prompt")]
        clock.now = at
        await s.fire_due(woken="nudge")
        await rt.idle()
        (nudge, _) = (await client.get("/v1/schedules")).json()["schedules"]
        assert nudge["done"] and nudge["next_fires"] == []
