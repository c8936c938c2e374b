"""``overlap``: a schedule whose run waits for an approval does not pile up a run per slot
behind it (one a minute for ``* * * * *``); each such slot is recorded as skipped, with why,
and ``maiden schedules`` says so. ``overlap = "queue"`` queues them, as before."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from runtime import EchoProvider, Run, RunState, Runtime, SQLiteStore, ToolRegistry, tool
from schedules import ScheduleBook, ScheduleConfig, Scheduler, load_schedules, statuses
from tests.clock import Clock
from tests.http_helpers import served
from tests.processes.test_cli import maiden

MINUTE = timedelta(minutes=1)
T0 = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)
ASK = '/tool deploy {"env": "qa"}'  # the echo model calls the tool; it needs an approval


@tool(requires_approval=True)
def deploy(env: str) -> str:
    """Deploy somewhere."""
    return f"deployed to {env}"


@asynccontextmanager
async def firing(db: Path, clock: Clock, **config: Any
                 ) -> AsyncIterator[tuple[Runtime, Scheduler]]:
    defined = load_schedules([ScheduleConfig(name="tick", cron="* * * * *", prompt=ASK,
                                             **config)], default_timezone="UTC", channels=())
    async with SQLiteStore(db) as store, \
            Runtime(store, EchoProvider(), ToolRegistry([deploy])) as rt, \
            Scheduler(ScheduleBook(store, defined, clock=clock), rt, timers=False) as scheduler:
        yield rt, scheduler


async def waiting_run(rt: Runtime, scheduler: Scheduler, clock: Clock) -> Run:
    clock.now = T0
    (fired,) = await scheduler.fire_due()
    run = await rt.wait(fired.run.id)
    assert run.state is RunState.AWAITING_APPROVAL
    return run


async def test_slots_while_a_run_waits_for_approval_are_skipped_with_why(
    tmp_path: Path,
) -> None:
    clock = Clock(T0 - MINUTE)
    async with firing(tmp_path / "m.db", clock) as (rt, scheduler):
        waiting = await waiting_run(rt, scheduler, clock)
        for minutes in (1, 2, 3):
            clock.now = T0 + minutes * MINUTE
            assert await scheduler.fire_due(woken="tick") == []
        assert [r.id for r in await rt.records.runs()] == [waiting.id]  # nothing queued behind it
        why = f'the previous run {waiting.id} is still awaiting approval (overlap = "skip")'
        (status,) = await statuses(scheduler.book)
        assert status.skipping and status.skipped_why == why
        assert status.skipped_slot == T0 + 3 * MINUTE
        async with served(rt, token="t0k", schedules=scheduler) as (client, _):
            (listed,) = (await client.get("/v1/schedules")).json()["schedules"]
            assert listed["skipped"] == {"slot": "2026-03-02T08:03:00+00:00", "why": why}
            assert listed["overlap"] == "skip"
            history = (await client.get("/v1/schedules/tick/history",
                                        params={"limit": 4})).json()["slots"]
            # Each slot held back says why, the older ones too (the record keeps them).
            assert [h["outcome"] for h in history][:3] == [f"skipped: {why}"] * 3

        # Decided: the run ends, and the next slot runs again.
        pending = waiting.pending_approval
        assert pending is not None
        await rt.decide(waiting.id, pending.tool_call_id, approve=True)
        assert (await rt.wait(waiting.id)).state is RunState.COMPLETED
        clock.now = T0 + 4 * MINUTE
        (fired,) = await scheduler.fire_due(woken="tick")
        assert fired.slot == T0 + 4 * MINUTE
        (status,) = await statuses(scheduler.book)
        assert not status.skipping  # the newest slot ran


async def test_overlap_queue_queues_behind_the_waiting_run(tmp_path: Path) -> None:
    clock = Clock(T0 - MINUTE)
    async with firing(tmp_path / "m.db", clock, overlap="queue") as (rt, scheduler):
        waiting = await waiting_run(rt, scheduler, clock)
        clock.now = T0 + MINUTE
        (queued,) = await scheduler.fire_due(woken="tick")
        assert queued.run.id != waiting.id and queued.run.state is RunState.QUEUED
        (status,) = await statuses(scheduler.book)
        assert status.skipped_slot is None


@pytest.mark.parametrize("overlap", [None, "queue"])
async def test_maiden_schedules_says_a_slot_was_skipped(
    home: Path, overlap: str | None
) -> None:
    settings = {} if overlap is None else {"overlap": overlap}
    clock = Clock(T0 - MINUTE)
    async with firing(home / "data" / "maiden.db", clock, **settings) as (rt, scheduler):
        waiting = await waiting_run(rt, scheduler, clock)
        clock.now = T0 + MINUTE
        await scheduler.fire_due(woken="tick")
    with (home / "agent.toml").open("a") as f:
        f.write(f'\n[[schedules]]\nname = "tick"\ncron = "* * * * *"\nprompt = \'{ASK}\'\n'
                + (f'overlap = "{overlap}"\n' if overlap else ""))
    listed = maiden(home, "schedules")
    assert listed.returncode == 0, listed.stderr
    skipped = [line for line in listed.stdout.splitlines() if "skipped" in line]
    if overlap == "queue":
        assert skipped == []
    else:
        assert skipped == [f"    skipped: 2026-03-02T08:01:00+00:00  the previous run "
                           f"{waiting.id} is still awaiting approval (overlap = \"skip\")"]


async def test_a_slot_whose_agent_or_channel_is_gone_is_skipped_with_why(
        tmp_path: Path) -> None:
    """A chat schedule made before the config changed: its agent, or the channel it
    answers in, is no longer there. Its slot is recorded skipped, with why, and costs
    nothing (issue 56: a slot that cannot run)."""
    clock = Clock(T0)
    async with SQLiteStore(tmp_path / "m.db") as store, \
            Runtime(store, EchoProvider()) as rt:
        gone = [ScheduleConfig(name="eng", cron="* * * * *", prompt="p", agent="eng"),
                ScheduleConfig(name="slack", cron="* * * * *", prompt="p",
                               deliver="slack:C1")]
        book = ScheduleBook(store, load_schedules(gone, default_timezone="UTC",
                                                  channels=["slack"]), clock=clock)
        async with Scheduler(book, rt, timers=False, clock=clock, channels=[]) as scheduler:
            clock.now = T0 + MINUTE
            assert await scheduler.fire_due() == []
            skipped = {s.schedule.name: s.skipped_why for s in await statuses(book)}
        assert await rt.records.runs() == []
    assert skipped == {"eng": "its agent 'eng' is not configured",
                       "slack": "it delivers to slack, which is not configured"}
