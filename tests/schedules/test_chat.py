"""Schedules made from chat: created by the agent's tools, kept in the store, run in the
conversation that made them and answered there; limited, owned, and never self-made."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from runtime import (
    Origin,
    Runtime,
    ScriptedProvider,
    SQLiteStore,
    ToolRegistry,
    ToolResult,
)
from schedules import ScheduleBook, ScheduleConfig, Scheduler, load_schedules, schedule_tools
from tests.clock import Clock
from tests.fakes.chat import MemoryChat
from tests.scripted import call

ROOM = Origin(channel="chat", target={"room": "r1"}, user="u1")
MONDAY_7 = datetime(2026, 3, 2, 7, 0, tzinfo=UTC)  # a Monday



@asynccontextmanager
async def agent(db: Path, script: list[dict[str, Any]], clock: Clock,
                configured: list[ScheduleConfig] = (),  # type: ignore[assignment]
                limit: int = 10) -> AsyncIterator[tuple[Runtime, Scheduler, MemoryChat]]:
    chat = MemoryChat()
    async with SQLiteStore(db, synchronous="off") as store:
        defined = load_schedules(configured, default_timezone="UTC", channels=[])
        book = ScheduleBook(store, defined, max_per_thread=limit, clock=clock)
        rt = Runtime(store, ScriptedProvider(script), ToolRegistry(schedule_tools()),
                     services={"schedules": book}, deliverers={"chat": chat})
        async with rt, Scheduler(book, rt, timers=False) as scheduler:
            yield rt, scheduler, chat


async def results(rt: Runtime, thread_id: str) -> list[ToolResult]:
    return [e for e in await rt.records.entries(thread_id) if isinstance(e, ToolResult)]


async def test_remind_me_every_monday_survives_a_restart_and_answers_where_asked(
        tmp_path: Path) -> None:
    script = [call("schedule_create", name="standup", cron="0 8 * * mon",
                   prompt="remind the team of the standup"),
              {"text": "Done: every Monday at 8."},
              {"text": "Standup in 0 minutes!"}]
    clock = Clock(MONDAY_7)
    async with agent(tmp_path / "m.db", script, clock) as (rt, _, chat):
        run = await rt.send("room", "remind me every Monday at 8", origin=ROOM)
        assert run.reply == "Done: every Monday at 8."
        (created,) = await results(rt, "room")
        assert not created.is_error
        assert created.content["created"]["next_fires"][0] == "2026-03-02T08:00:00+00:00"
    # Restarted: the schedule is read back from the store and fires at 8:00.
    async with agent(tmp_path / "m.db", script, clock) as (rt, scheduler, chat):
        (schedule,) = scheduler.book.schedules()
        assert (schedule.name, schedule.source, schedule.thread) == ("standup", "chat", "room")
        clock.now = MONDAY_7 + timedelta(hours=1)
        (fired,) = await scheduler.fire_due()
        run = await rt.wait(fired.run.id)
        await rt.idle()
        assert run.thread_id == "room" and run.reply == "Standup in 0 minutes!"
        assert [m.text for m in chat.posted] == ["Standup in 0 minutes!"]
        assert chat.posted[0].target == {"room": "r1"}


async def test_a_scheduled_run_cannot_create_schedules(tmp_path: Path) -> None:
    script = [call("schedule_create", name="more", cron="* * * * *", prompt="again"),
              {"text": "tried"}]
    job = ScheduleConfig(name="job", cron="0 8 * * *", prompt="make another schedule")
    clock = Clock(MONDAY_7)
    async with agent(tmp_path / "m.db", script, clock, [job]) as (rt, scheduler, _):
        clock.now = MONDAY_7 + timedelta(hours=1)
        (fired,) = await scheduler.fire_due()
        run = await rt.wait(fired.run.id)
        assert run.reply == "tried"
        (refused,) = await results(rt, "schedule:job")
        assert refused.is_error
        assert "a run started by a schedule cannot create schedules" in str(refused.content)
        await scheduler.book.load()
        assert [s.name for s in scheduler.book.schedules()] == ["job"]


async def test_the_limit_per_conversation(tmp_path: Path) -> None:
    script = [call("schedule_create", name="a", cron="0 8 * * *", prompt="p"),
              call("schedule_create", name="b", cron="0 9 * * *", prompt="p"),
              {"text": "ok"}]
    async with agent(tmp_path / "m.db", script, Clock(MONDAY_7), limit=1) as (rt, _, _c):
        await rt.send("room", "two please", origin=ROOM)
        first, second = await results(rt, "room")
        assert not first.is_error
        assert second.is_error and "max_per_thread" in str(second.content)


async def test_config_schedules_are_read_only_and_others_are_not_yours(
        tmp_path: Path) -> None:
    script = [call("schedule_create", name="mine", cron="0 8 * * *", prompt="p"),
              {"text": "made"}]
    other = [call("schedule_pause", name="job"), call("schedule_delete", name="mine"),
             call("schedule_create", name="job", cron="0 8 * * *", prompt="p"),
             call("schedule_create", name="../x", cron="0 8 * * *", prompt="p"),
             call("schedule_create", name="bad", cron="0 25 * * *", prompt="p"),
             call("schedule_create", name="tz", cron="0 8 * * *", prompt="p",
                  timezone="Mars/Olympus"),
             call("schedule_list"),
             {"text": "no luck"}]
    job = ScheduleConfig(name="job", cron="0 8 * * *", prompt="p")
    clock = Clock(MONDAY_7)
    async with agent(tmp_path / "m.db", script, clock, [job]) as (rt, _, _c):
        await rt.send("room", "make one", origin=ROOM)
    async with agent(tmp_path / "m.db", other, clock, [job]) as (rt, _, _c):
        await rt.send("elsewhere", "meddle", origin=ROOM)
        found = await results(rt, "elsewhere")
    messages = [str(r.content) for r in found]
    assert all(r.is_error for r in found[:6])
    assert "defined in agent.toml and cannot be changed from chat" in messages[0]
    assert "belongs to another conversation" in messages[1]
    assert "defined in agent.toml; choose another name" in messages[2]
    assert "is not a schedule name" in messages[3]
    assert "25 is not an hour" in messages[4]
    assert "Mars/Olympus" in messages[5]
    listed = found[6].content["schedules"]
    assert [(s["name"], s["origin"]) for s in listed] == [("job", "config")]


async def test_pause_resume_delete_from_the_conversation(tmp_path: Path) -> None:
    script = [call("schedule_create", name="tick", cron="* * * * *", prompt="tick"),
              call("schedule_pause", name="tick"),
              {"text": "paused"},
              call("schedule_resume", name="tick"),
              {"text": "resumed"},
              {"text": "tick!"},  # the scheduled run, in the same conversation
              call("schedule_delete", name="tick"),
              call("schedule_delete", name="tick"),
              {"text": "deleted"}]
    clock = Clock(MONDAY_7)
    async with agent(tmp_path / "m.db", script, clock) as (rt, scheduler, _c):
        await rt.send("room", "every minute, then pause", origin=ROOM)
        clock.now += timedelta(minutes=30)
        assert await scheduler.fire_due() == []  # paused: its slots pass
        await rt.send("room", "resume", origin=ROOM)
        # Resumed from now: the thirty minutes paused are not caught up.
        assert await scheduler.fire_due() == []
        clock.now += timedelta(minutes=1)
        (fired,) = await scheduler.fire_due()
        assert fired.slot == clock.now
        await rt.wait(fired.run.id)
        run = await rt.send("room", "delete it", origin=ROOM)
        assert run.reply == "deleted"
        second_delete = (await results(rt, "room"))[-1]
        assert not second_delete.is_error  # retried or repeated: already gone is done
        clock.now += timedelta(minutes=1)
        assert await scheduler.fire_due() == []
        assert scheduler.book.schedules() == []


async def test_the_tools_are_offered_unless_turned_off(tmp_path: Path) -> None:
    from bot.app import open_runtime
    from bot.config import LoadedConfig, parse_config

    for limit, offered in ((10, True), (0, False)):
        cfg = parse_config(f'[store]\npath = "m{limit}.db"\n'
                           f"[schedules_limits]\nmax_per_thread = {limit}\n")
        loaded = LoadedConfig(cfg, tmp_path / "agent.toml", exists=True)
        async with open_runtime(loaded, recover=False) as rt:
            assert ("schedule_create" in rt.operator.agents.default.tools) is offered
            assert ("schedule_list" in rt.operator.agents.default.tools) is offered


async def test_a_schedule_made_paused_from_chat_fires_only_once_resumed(
        tmp_path: Path) -> None:
    """"Every minute, but not yet": ``schedule_create`` with ``paused`` (issue 56)."""
    script = [call("schedule_create", name="tick", cron="* * * * *", prompt="tick",
                   paused=True),
              {"text": "made, paused"},
              call("schedule_resume", name="tick"),
              {"text": "resumed"},
              {"text": "tick!"}]
    clock = Clock(MONDAY_7)
    async with agent(tmp_path / "m.db", script, clock) as (rt, scheduler, _c):
        await rt.send("room", "every minute, paused for now", origin=ROOM)
        (created,) = await results(rt, "room")
        assert created.content["created"]["paused"] is True
        assert created.content["created"]["next_fires"] == []
        clock.now += timedelta(minutes=5)
        assert await scheduler.fire_due() == []  # made paused: nothing fires
        await rt.send("room", "go", origin=ROOM)
        clock.now += timedelta(minutes=1)
        (fired,) = await scheduler.fire_due()
        assert (await rt.wait(fired.run.id)).reply == "tick!"


async def test_a_chat_schedule_takes_a_jitter_within_bounds(tmp_path: Path) -> None:
    script = [call("schedule_create", name="late", cron="0 9 * * *", prompt="p",
                   jitter_s=400),
              call("schedule_create", name="spread", cron="0 9 * * *", prompt="p",
                   jitter_s=45),
              {"text": "done"}]
    clock = Clock(MONDAY_7)
    async with agent(tmp_path / "m.db", script, clock) as (rt, scheduler, _c):
        await rt.send("room", "every day at 9, spread out", origin=ROOM)
        refused, made = await results(rt, "room")
        (schedule,) = scheduler.book.schedules()
    assert refused.is_error and "300" in str(refused.content)
    assert not made.is_error and schedule.config.jitter_s == 45
