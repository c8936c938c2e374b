"""A scheduled run's answer goes through the outbox to Slack or Discord, once, and its status
says where it went (or that it has not gone yet): the real channels against the fakes."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from channels.base import Channel
from channels.discord import DiscordConfig
from channels.discord.channel import DiscordChannel, DiscordOutbound
from channels.slack import SlackConfig, SlackSecrets
from channels.slack.channel import SlackChannel, SlackOutbound
from runtime import (
    Deliverer,
    EchoProvider,
    Origin,
    Records,
    ReplyDelivery,
    Run,
    RunState,
    Runtime,
    RuntimeConfig,
    SQLiteStore,
)
from schedules import (
    ScheduleBook,
    ScheduleConfig,
    Scheduler,
    ScheduleStatus,
    load_schedules,
    statuses,
)
from schedules.status import outcome
from tests.clock import Clock
from tests.fakes.discord import BOT_ID, GENERAL_ID, FakeDiscord
from tests.fakes.slack import BOT_USER, FakeSlack

C = "C0GENERAL01"
SLOT = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


ChannelMaker = Callable[[Records], tuple[str, Deliverer, Callable[[Runtime], Channel]]]
"""A chat channel in two steps, as `maiden run` makes it: its name and deliverer (the
runtime is built with it), then the channel over the runtime."""


@asynccontextmanager
async def scheduled(
    db: Path, channel: ChannelMaker, channels: list[str], *configs: ScheduleConfig,
) -> AsyncIterator[tuple[Runtime, Scheduler, Clock]]:
    """A runtime with one chat channel and the schedules, the clock just before SLOT."""
    clock = Clock(SLOT - timedelta(minutes=1))
    async with SQLiteStore(db) as store, AsyncExitStack() as stack:
        name, deliverer, make = channel(Records(store))
        runtime = Runtime(store, EchoProvider(), settings=RuntimeConfig(poll_interval_s=0.1),
                          deliverers={name: deliverer})
        await stack.enter_async_context(runtime)
        await stack.enter_async_context(make(runtime))
        book = ScheduleBook(store, load_schedules(configs, default_timezone="UTC",
                                                    channels=channels), clock=clock)
        scheduler = await stack.enter_async_context(Scheduler(book, runtime, timers=False))
        yield runtime, scheduler, clock
        await runtime.idle()


async def fire_and_settle(runtime: Runtime, scheduler: Scheduler, clock: Clock,
                          ) -> dict[str, ScheduleStatus]:
    clock.now = SLOT + timedelta(seconds=1)
    fired = await scheduler.fire_due()
    for f in fired:
        await runtime.wait(f.run.id)
    await runtime.idle()
    assert await scheduler.fire_due() == []  # a second look claims nothing
    return {s.schedule.name: s for s in await statuses(scheduler.book)}


def slack_channel(fake: FakeSlack) -> ChannelMaker:
    def made(records: Records) -> tuple[str, Deliverer, Callable[[Runtime], Channel]]:
        slack = SlackOutbound(SlackConfig(api_url=fake.api_url, allow_users=["U1"]),
                              SlackSecrets(bot_token=fake.bot_token, app_token=fake.app_token,
                                           signing_secret="s" * 32), records, pace_s=0)
        return slack.name, slack.deliverer, lambda runtime: SlackChannel(runtime, slack)
    return made


async def test_to_a_slack_channel_and_into_a_slack_thread(tmp_path: Path) -> None:
    async with FakeSlack() as fake:
        root = fake.post_as_user(C, "U1", "the weekly thread")
        configs = [
            ScheduleConfig(name="team", cron="0 9 * * *", prompt="summary for the team",
                           deliver=f"slack:{C}"),
            ScheduleConfig(name="threaded", cron="0 9 * * *", prompt="reply in the thread",
                           deliver=f"slack:{C}:{root['ts']}"),
        ]
        async with scheduled(tmp_path / "m.db", slack_channel(fake), ["slack"],
                             *configs) as (rt, scheduler, clock):
            found = await fire_and_settle(rt, scheduler, clock)
        posted = {m["text"]: m for m in fake.messages(C) if m.get("user") == BOT_USER}
        assert set(posted) == {"echo: summary for the team", "echo: reply in the thread"}
        assert "thread_ts" not in posted["echo: summary for the team"] or \
            posted["echo: summary for the team"]["thread_ts"] == \
            posted["echo: summary for the team"]["ts"]
        assert posted["echo: reply in the thread"]["thread_ts"] == root["ts"]
        team_ts = posted["echo: summary for the team"]["ts"]
        assert found["team"].outcome == f"completed; delivered to slack {C} as {team_ts}"
        assert found["team"].as_json()["last_run"]["delivered"] == [team_ts]
        assert len(fake.calls("chat.postMessage")) == 2


async def test_a_refused_delivery_is_reported_not_ok(tmp_path: Path) -> None:
    async with FakeSlack() as fake:
        fake.fail("chat.postMessage", error="channel_not_found")
        config = ScheduleConfig(name="lost", cron="0 9 * * *", prompt="hello",
                                deliver="slack:C0NOSUCH001")
        async with scheduled(tmp_path / "m.db", slack_channel(fake), ["slack"], config) as \
                (rt, scheduler, clock):
            found = await fire_and_settle(rt, scheduler, clock)
            assert found["lost"].outcome == (
                "completed; NOT delivered to slack C0NOSUCH001 yet; 1 failed attempt(s), the "
                "last: Slack chat.postMessage failed: channel_not_found")
            # Tried again (as a serving runtime does now and then): this time it goes.
            await rt.operator.flush_deliveries()
            (status,) = await statuses(scheduler.book)
        (posted,) = [m for m in fake.messages("C0NOSUCH001") if m.get("user") == BOT_USER]
        assert status.outcome == f"completed; delivered to slack C0NOSUCH001 as {posted['ts']}"


async def test_to_a_discord_channel(tmp_path: Path) -> None:
    async with FakeDiscord() as fake:
        def make(records: Records) -> tuple[str, Deliverer, Callable[[Runtime], Channel]]:
            discord = DiscordOutbound(DiscordConfig(api_url=fake.api_url), fake.token,
                                      guild_ready_timeout=0.05)
            return discord.name, discord.deliverer, \
                lambda runtime: DiscordChannel(runtime, discord)

        config = ScheduleConfig(name="daily", cron="0 9 * * *", prompt="good morning",
                                deliver=f"discord:{GENERAL_ID}")
        async with scheduled(tmp_path / "m.db", make, ["discord"], config) as \
                (rt, scheduler, clock):
            found = await fire_and_settle(rt, scheduler, clock)
        mine = [m for m in fake.messages(GENERAL_ID) if str(m["author"]["id"]) == str(BOT_ID)]
        assert [m["content"] for m in mine] == ["echo: good morning"]
        assert found["daily"].outcome == \
            f"completed; delivered to discord {GENERAL_ID} as {mine[0]['id']}"


def _reply(n: int, remote_id: str | None = None, failed: int = 0,
           error: str | None = None) -> ReplyDelivery:
    return ReplyDelivery(key=f"k:{n}", run_id="r1", thread_id="schedule:daily",
                         channel="slack", target={"channel": "C1"}, text="the summary",
                         remote_id=remote_id, attempts_failed=failed, last_error=error)


@pytest.mark.parametrize(("state", "target", "replies", "error", "said"), [
    (None, None, [], None, "-"),
    (RunState.COMPLETED, {}, [], None, "completed (in thread schedule:daily)"),
    (RunState.COMPLETED, {"channel": "C1"}, [], None,
     "completed; the answer is not delivered yet"),
    (RunState.COMPLETED, {"channel": "C1"}, [_reply(0, "171.1"), _reply(1, "171.2")], None,
     "completed; delivered to slack C1 as 171.1, 171.2"),
    (RunState.COMPLETED, {"channel": "C1"}, [_reply(0)], None,
     "completed; NOT delivered to slack C1 yet"),  # waiting for its first try: no error
    (RunState.COMPLETED, {"channel": "C1"}, [_reply(0, "171.1"), _reply(1, None, 2, "boom")],
     None, "completed; NOT delivered to slack C1 yet; 2 failed attempt(s), the last: boom"),
    (RunState.FAILED, {"channel": "C1"}, [], "provider_error: 500", "failed: provider_error: 500"),
])
def test_the_outcome_says_what_came_of_a_slot(
        state: RunState | None, target: dict[str, str] | None, replies: list[ReplyDelivery],
        error: str | None, said: str) -> None:
    run = None if state is None else Run(
        id="r1", thread_id="schedule:daily", text="p", state=state, error=error,
        origin=Origin(channel="schedule" if not target else "slack", target=target or {}))
    assert outcome(run, replies) == said
