"""One-shot reminders and jobs without the model: "remind me in 2 hours", "tomorrow at 9"
in the asking person's own zone, exactly once, kept as done; a check's tool output posted,
or only when it changed."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from channels.slack.zones import SlackZones
from runtime import (
    ModelRequest,
    ModelResponse,
    Origin,
    Runtime,
    ScriptedProvider,
    SQLiteStore,
    ToolRegistry,
    ToolResult,
    tool,
)
from schedules import At, ScheduleBook, ScheduleConfig, Scheduler, load_schedules, schedule_tools
from schedules.once import parse_at, parse_in, when_text
from tests.clock import Clock
from tests.fakes.chat import MemoryChat
from tests.fakes.slack import FakeSlack
from tests.http_helpers import served
from tests.scripted import call

pytestmark = pytest.mark.timeout(60)

HERE = Origin(channel="slack", target={"channel": "C1", "thread_ts": "1.5"}, user="U1")
NOON = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)  # a Monday



class Status:
    now = "green"
    asked = 0


@tool(effect="read_only")
def status(service: str) -> str:
    """The status of a service."""
    Status.asked += 1
    return f"{service}: {Status.now}"


class ByThread:
    """A scripted model per thread (a one-shot's run is in a thread of its own)."""

    model = "scripted"

    def __init__(self, scripts: dict[str, list[dict[str, Any]]]) -> None:
        self.scripts = {thread: ScriptedProvider(turns) for thread, turns in scripts.items()}

    async def complete(self, request: ModelRequest, on_text: Any = None) -> ModelResponse:
        return await self.scripts[request.thread_id].complete(request, on_text)


@asynccontextmanager
async def agent(db: Path, script: list[dict[str, Any]] | ByThread, clock: Clock,
                configured: tuple[ScheduleConfig, ...] = (), zone: str | None = None,
                ) -> AsyncIterator[tuple[Runtime, Scheduler, MemoryChat]]:
    chat = MemoryChat()
    async with SQLiteStore(db, synchronous="off") as store:
        defined = load_schedules(configured, default_timezone="Europe/Paris",
                                 channels=["slack"])
        book = ScheduleBook(store, defined, default_timezone="Europe/Paris", clock=clock)
        if zone is not None:
            async def person_zone(user: str) -> str | None:
                return zone if user == "U1" else None

            book.zones["slack"] = person_zone
        model = script if isinstance(script, ByThread) else ScriptedProvider(script)
        rt = Runtime(store, model,
                     ToolRegistry([*schedule_tools(), status]), services={"schedules": book},
                     clock=lambda: clock.now.timestamp(), deliverers={"slack": chat})
        async with rt, Scheduler(book, rt, timers=False) as scheduler:
            yield rt, scheduler, chat


async def created(rt: Runtime, thread_id: str = "room") -> dict[str, Any]:
    (result,) = [e for e in await rt.records.entries(thread_id) if isinstance(e, ToolResult)]
    assert not result.is_error, result.content
    made: dict[str, Any] = result.content
    return made


async def fire(rt: Runtime, scheduler: Scheduler, when: datetime) -> list[str]:
    """Fire what is due at ``when``; the texts of the runs' replies."""
    fired = await scheduler.fire_due(when)
    replies = []
    for f in fired:
        run = await rt.wait(f.run.id)
        replies.append(run.reply or "")
    await settled(rt)
    return replies


async def settled(rt: Runtime) -> None:
    """Every run here ended and what they posted sent (the outbox's own sends too)."""
    await rt.idle()
    await rt.operator.flush_deliveries("slack")


async def test_remind_me_in_two_hours_posts_once_mentioning_the_person(tmp_path: Path) -> None:
    script = [call("schedule_create", name="deploy", **{"in": "2h"}, say="check the deploy"),
              {"text": "I will remind you at 15:00."}]
    clock = Clock(NOON)
    async with agent(tmp_path / "m.db", script, clock) as (rt, scheduler, chat):
        await rt.send("room", "remind me in 2 hours to check the deploy", origin=HERE)
        made = await created(rt)
        # Said in the person's zone (here the agent's: Slack told none) and as UTC.
        assert made["fires"] == "Mon 7 Dec 2026 15:00 Europe/Paris (2026-12-07 14:00 UTC), " \
            "in 2 h"
        assert made["created"]["at"] == "2026-12-07T15:00:00+01:00"
        await settled(rt)
        chat.posted.clear()
        assert await fire(rt, scheduler, NOON + timedelta(hours=1, minutes=59)) == []
        clock.now = NOON + timedelta(hours=2)
        assert await fire(rt, scheduler, clock.now) == ["<@U1> check the deploy"]
        assert [(p.text, p.target) for p in chat.posted] == [
            ("<@U1> check the deploy", {"channel": "C1", "thread_ts": "1.5"})]
        # Its own thread: the conversation holds no message "from" the person again.
        assert [e.text for e in await rt.records.entries("room") if e.kind == "user"] == [
            "remind me in 2 hours to check the deploy"]
        assert await fire(rt, scheduler, clock.now + timedelta(days=3)) == []
    # Restarted: kept, shown done, never fired again.
    async with agent(tmp_path / "m.db", [], clock) as (rt, scheduler, chat):
        (listed,) = await scheduler.listing()
        assert listed["done"] is True and listed["at"] == "2026-12-07T15:00:00+01:00"
        assert listed["next_fires"] == [] and listed["does"] == "say"
        assert await fire(rt, scheduler, clock.now + timedelta(days=3)) == []
        assert chat.posted == []


async def test_tomorrow_at_nine_is_nine_where_the_person_is(tmp_path: Path) -> None:
    script = ByThread({
        "room": [call("schedule_create", name="standup", at="2026-12-08T09:00",
                      prompt="post the standup notes"), {"text": "Set."}],
        "schedule:standup": [{"text": "Standup notes: …"}]})
    clock = Clock(NOON)
    async with agent(tmp_path / "m.db", script, clock, zone="America/Sao_Paulo") as (
            rt, scheduler, chat):
        await rt.send("room", "tomorrow at 9 post the standup notes here", origin=HERE)
        made = await created(rt)
        assert made["created"]["at"] == "2026-12-08T09:00:00-03:00"
        assert made["created"]["timezone"] == "America/Sao_Paulo"
        assert made["fires"].startswith("Tue 8 Dec 2026 09:00 America/Sao_Paulo "
                                         "(2026-12-08 12:00 UTC)")
        await settled(rt)
        chat.posted.clear()
        assert await fire(rt, scheduler, datetime(2026, 12, 8, 11, 59, tzinfo=UTC)) == []
        assert await fire(rt, scheduler, datetime(2026, 12, 8, 12, 0, tzinfo=UTC)) == [
            "Standup notes: …"]
        assert [p.text for p in chat.posted] == ["Standup notes: …"]


async def test_a_reminder_due_while_down_fires_once_late_or_is_skipped(tmp_path: Path) -> None:
    due = ScheduleConfig(name="late", at="2026-12-07T13:00:00+00:00", say="water the plants",
                         deliver="slack:C1")
    skipped = ScheduleConfig(name="gone", at="2026-12-07T13:00:00+00:00", say="too late",
                             deliver="slack:C1", misfire="skip")
    clock = Clock(NOON)
    async with agent(tmp_path / "m.db", [], clock, (due, skipped)):
        pass  # seen once before its time: recorded from noon
    clock.now = NOON + timedelta(hours=4)  # down from noon to 16:00
    async with agent(tmp_path / "m.db", [], clock, (due, skipped)) as (rt, scheduler, chat):
        (started,) = scheduler.started
        run = await rt.wait(started.run.id)
        await settled(rt)
        assert run.reply == "water the plants (late by 3 h: maiden was not running at the time)"
        assert [p.text for p in chat.posted] == [run.reply]
        assert await fire(rt, scheduler, clock.now + timedelta(hours=1)) == []
        listed = {s["name"]: s for s in await scheduler.listing()}
        assert listed["late"]["done"] and listed["gone"]["done"]


async def test_a_check_posts_its_output_only_when_it_changed(tmp_path: Path) -> None:
    check = ScheduleConfig(name="api", cron="*/5 * * * *", tool="status",
                           args={"service": "api"}, post="on_change", deliver="slack:C1")
    Status.now, Status.asked = "green", 0
    clock = Clock(NOON - timedelta(minutes=1))
    async with agent(tmp_path / "m.db", [], clock, (check,)) as (rt, scheduler, chat):
        replies = [await fire(rt, scheduler, NOON)]
        replies.append(await fire(rt, scheduler, NOON + timedelta(minutes=5)))
        Status.now = "red"
        replies.append(await fire(rt, scheduler, NOON + timedelta(minutes=10)))
        assert [p.text for p in chat.posted] == ["api: green", "api: red"]
        assert Status.asked == 3 and len(replies) == 3
        runs = [await rt.records.get_run(r.last_run_id) for r in scheduler.book.records()
                if r.last_run_id]
        assert all(run.usage.input_tokens == 0 for run in runs)


def test_durations_and_times() -> None:
    now = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
    assert parse_in("90m", now, "UTC").moment == now + timedelta(minutes=90)
    assert parse_in("1h30m", now, "UTC").moment == now + timedelta(minutes=90)
    assert parse_in("1d", now, "UTC").moment == now + timedelta(days=1)
    for bad in ("", "soon", "2 weeks", "0m"):
        with pytest.raises(Exception, match="in"):
            parse_in(bad, now, "UTC")
    assert parse_at("2026-12-07T09:00:00Z", "Asia/Tokyo").moment.isoformat() == \
        "2026-12-07T18:00:00+09:00"
    with pytest.raises(Exception, match="has passed"):
        parse_at("2026-12-07T09:00", "UTC", now=now)
    with pytest.raises(Exception, match="not an ISO 8601 time"):
        parse_at("tomorrow at 9", "UTC", now=now)
    with pytest.raises(Exception, match="five years"):
        parse_at("2126-12-07T09:00", "UTC", now=now)
    with pytest.raises(Exception, match="unknown timezone"):
        parse_at("2026-12-08T09:00", "Mars/Olympus", now=now)


@pytest.mark.parametrize(("zone", "asked", "now", "fires"), [
    # Chatham (+12:45, +13:45 in summer) springs forward at 02:45 -> 03:45 on the last
    # Sunday of September: 03:00 does not exist there that night; it is the gap's end.
    ("Pacific/Chatham", "2026-09-27T03:00", "2026-09-26T00:00:00+00:00",
     "2026-09-27T03:45:00+13:45"),
    # ...and falls back 03:45 -> 02:45 on the first Sunday of April: 03:00 happens twice;
    # the first one.
    ("Pacific/Chatham", "2026-04-05T03:00", "2026-04-04T00:00:00+00:00",
     "2026-04-05T03:00:00+13:45"),
    # Tomorrow at 9 across the change: 9:00 local, whatever the offset did overnight.
    ("Pacific/Chatham", "2026-09-27T09:00", "2026-09-26T09:00:00+12:45",
     "2026-09-27T09:00:00+13:45"),
    # Sao Paulo sprang forward at midnight on 4 Nov 2018 (its last DST): 00:30 was 01:00.
    ("America/Sao_Paulo", "2018-11-04T00:30", "2018-11-03T12:00:00-03:00",
     "2018-11-04T01:00:00-02:00"),
    # ...and fell back at midnight on 17 Feb 2019: 23:30 happened twice; the first one.
    ("America/Sao_Paulo", "2019-02-16T23:30", "2019-02-16T12:00:00-02:00",
     "2019-02-16T23:30:00-02:00"),
])
def test_a_time_across_a_dst_change_is_the_persons_wall_time(
        zone: str, asked: str, now: str, fires: str) -> None:
    at = parse_at(asked, zone, now=datetime.fromisoformat(now))
    assert at.moment.isoformat() == fires


def test_in_is_elapsed_time_across_a_dst_change() -> None:
    # 24 hours from Chatham's Saturday noon is Sunday 13:00 local (an hour was skipped).
    now = datetime.fromisoformat("2026-09-26T12:00:00+12:45")
    at = parse_in("1d", now, "Pacific/Chatham")
    assert at.moment.isoformat() == "2026-09-27T13:00:00+13:45"
    assert when_text(at, now).startswith("Sun 27 Sep 2026 13:00 Pacific/Chatham")


@pytest.mark.parametrize(("zone", "now", "asked", "fires"), [
    # Chatham: made the day before its spring-forward (+12:45 -> +13:45), for 9:00 the
    # next morning: 9:00 their time, not 9:00 at the day before's offset.
    ("Pacific/Chatham", "2026-09-26T09:00:00+12:45", "2026-09-27T09:00",
     "2026-09-27T09:00:00+13:45"),
    # ...and the day before it falls back (+13:45 -> +12:45).
    ("Pacific/Chatham", "2026-04-04T09:00:00+13:45", "2026-04-05T09:00",
     "2026-04-05T09:00:00+12:45"),
    # Sao Paulo's last DST (2018-19): springing forward at midnight on 4 Nov 2018, then
    # falling back at midnight on 17 Feb 2019.
    ("America/Sao_Paulo", "2018-11-03T09:00:00-03:00", "2018-11-04T09:00",
     "2018-11-04T09:00:00-02:00"),
    ("America/Sao_Paulo", "2019-02-16T09:00:00-02:00", "2019-02-17T09:00",
     "2019-02-17T09:00:00-03:00"),
])
async def test_a_slack_persons_reminder_across_their_dst_change_fires_once_at_their_nine(
        tmp_path: Path, zone: str, now: str, asked: str, fires: str) -> None:
    """The person's zone read from Slack (``users.info`` on the fake, through the Slack
    channel's own lookup), the reminder made the day before a DST change there, fired
    exactly once at 9:00 their time."""
    async with FakeSlack() as fake:
        fake.person("U1", tz=zone)
        script = [call("schedule_create", name="walk", at=asked, say="walk"), {"text": "ok"}]
        clock = Clock(datetime.fromisoformat(now))
        async with agent(tmp_path / "m.db", script, clock) as (rt, scheduler, chat):
            scheduler.book.zones["slack"] = SlackZones(
                AsyncWebClient(token=fake.bot_token, base_url=fake.api_url))
            await rt.send("room", "tomorrow at 9 remind me to walk", origin=HERE)
            made = await created(rt)
            assert made["created"]["at"] == fires and made["created"]["timezone"] == zone
            await settled(rt)
            chat.posted.clear()
            due = datetime.fromisoformat(fires)
            assert await fire(rt, scheduler, due - timedelta(minutes=1)) == []
            assert await fire(rt, scheduler, due) == ["<@U1> walk"]
            assert await fire(rt, scheduler, due + timedelta(hours=1)) == []
            assert [p.text for p in chat.posted] == ["<@U1> walk"]
        assert [str(c["user"]) for c in fake.calls("users.info")] == ["U1"]


def test_a_config_schedule_is_one_kind_of_each() -> None:
    with pytest.raises(Exception, match="either cron"):
        ScheduleConfig(name="x", prompt="p")
    with pytest.raises(Exception, match="either cron"):
        ScheduleConfig(name="x", cron="* * * * *", at="2026-12-07T09:00", prompt="p")
    with pytest.raises(Exception, match="one of prompt"):
        ScheduleConfig(name="x", cron="* * * * *", prompt="p", say="s")
    with pytest.raises(Exception, match="go with tool"):
        ScheduleConfig(name="x", cron="* * * * *", prompt="p", post="on_change")
    with pytest.raises(Exception, match="mention goes with say"):
        ScheduleConfig(name="x", cron="* * * * *", prompt="p", mention="U1")
    config = ScheduleConfig(name="x", at="2026-12-07T09:00", say="hi")
    (loaded,) = load_schedules([config], default_timezone="Asia/Tokyo", channels=[])
    assert isinstance(loaded.cron, At) and loaded.cron.moment.isoformat() == \
        "2026-12-07T09:00:00+09:00"


async def test_a_check_whose_tool_is_gone_is_skipped_with_why(tmp_path: Path) -> None:
    gone = ScheduleConfig(name="gone", cron="*/5 * * * *", tool="uptime", deliver="slack:C1")
    clock = Clock(NOON - timedelta(minutes=1))
    async with agent(tmp_path / "m.db", [], clock, (gone,)) as (rt, scheduler, chat):
        assert await fire(rt, scheduler, NOON) == []
        (listed,) = await scheduler.listing()
        assert listed["skipped"] == {
            "slot": "2026-12-07T13:00:00+01:00",  # in the schedule's zone (the agent's)
            "why": "its tool 'uptime' is not one of any agent's tools"}
        assert await rt.records.runs() == [] and chat.posted == []


async def test_the_api_lists_a_one_shot_with_its_time_and_done(tmp_path: Path) -> None:
    once = ScheduleConfig(name="launch", at="2026-12-07T13:00:00+00:00", say="launch day",
                          deliver="slack:C1")
    clock = Clock(NOON)
    async with agent(tmp_path / "m.db", [], clock, (once,)) as (rt, scheduler, _), \
            served(rt, token="t0k", schedules=scheduler) as (client, _http):
        (before,) = (await client.get("/v1/schedules")).json()["schedules"]
        assert (before["cron"], before["at"], before["done"], before["does"]) == (
            None, "2026-12-07T14:00:00+01:00", False, "say")
        assert before["next_fires"] == ["2026-12-07T14:00:00+01:00"]
        clock.now = NOON + timedelta(hours=1)
        assert await fire(rt, scheduler, clock.now) == ["launch day"]
        (after,) = (await client.get("/v1/schedules")).json()["schedules"]
        assert after["done"] is True and after["next_fires"] == []
