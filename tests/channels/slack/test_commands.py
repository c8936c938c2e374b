"""``/maiden`` in Slack (docs/guides/slack.md, Commands): answered inside the acknowledgement,
ephemeral; a stop or a pause posted in the channel once, however often Slack delivers the
command; rights as everywhere else (status and usage: talk; stopping others' runs and
schedules: operate)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from channels import commands as shared
from channels.slack import commands
from channels.slack.channel import SlackChannel, SlackOutbound
from runtime import EchoProvider, Records, RunState, Runtime, SQLiteStore, tool
from schedules import ScheduleConfig
from tests.channels.slack.test_channel import SECRET, C, config, over_http, running, secrets
from tests.fakes.slack import BOT_USER, FakeSlack, signed_command, slash_command
from tests.fakes.slack.payloads import TEAM
from tests.http_helpers import scheduled

HOLD = asyncio.Event()
"""Lets the held tool finish; made anew by each test that holds it (``hold``): an event is
bound to the loop it is first awaited on, and each test has its own."""


def hold() -> None:
    global HOLD
    HOLD = asyncio.Event()


@tool
async def wait_here() -> str:
    """Wait until let go."""
    await HOLD.wait()
    return "let go"


RULES = [{"place": "*", "users": ["U1", "U2"], "rights": ["talk"]},
         {"place": "*", "users": ["UOPS"], "rights": ["talk", "operate"]}]


async def command(fake: FakeSlack, user: str, text: str, *, trigger: str | None = None
                  ) -> str:
    """Send ``/maiden text``; the ephemeral answer in the ack. The same ``trigger`` again
    is Slack delivering the same command again (a new envelope, the same payload)."""
    sent = await fake.socket_command(slash_command(TEAM, C, user, text, trigger_id=trigger))
    ack = await fake.acked(sent)
    payload: dict[str, Any] = ack.get("payload") or {}
    assert payload.get("response_type") == "ephemeral", ack
    return str(payload.get("text"))


def posted(fake: FakeSlack) -> list[str]:
    return [m["text"] for m in fake.messages(C) if m.get("user") == BOT_USER]


async def test_help_status_and_usage_for_anyone_who_may_talk(tmp_path: Path) -> None:
    async with FakeSlack() as fake, running(fake, tmp_path / "m.db", stream="off",
                                            allow_users=[], rules=RULES) as s:
        said = await command(fake, "U1", "help")
        assert "`/maiden status`" in said and "`/maiden usage [7d]`" in said
        assert await command(fake, "U1", "") == said
        assert await command(fake, "U1", "status") == "Nothing is running here."
        await fake.acked(await fake.socket_event(
            fake.user_event(C, "U1", f"<@{BOT_USER}> hello", mention=True)))
        await s.runtime.idle()
        usage = await command(fake, "U1", "usage 24h")
        assert usage.startswith("The last 24 hours:\n• here: 1 run(s)")
        assert "yours (everywhere on slack): 1 run(s)" in usage
        unknown = await command(fake, "U1", "dance")
        assert unknown.startswith("There is no `/maiden dance`.")
        refused = await command(fake, "U1", "schedules")
        assert refused == "You may not use `/maiden schedules` here (it needs the 'operate' right)."
        assert (await command(fake, "USTRANGER", "status")).startswith("You may not")


async def test_stop_is_posted_once_however_often_slack_delivers_it(tmp_path: Path) -> None:
    hold()
    async with FakeSlack() as fake, running(fake, tmp_path / "m.db", stream="off",
                                            tools=(wait_here,), allow_users=[],
                                            rules=RULES) as s:
        await fake.acked(await fake.socket_event(fake.user_event(
            C, "U1", f'<@{BOT_USER}> /tool wait_here {{}}', mention=True)))
        (run,) = await s.runtime.records.runs()
        while run.state is not RunState.AWAITING_TOOL:
            await asyncio.sleep(0.01)
            run = await s.runtime.records.get_run(run.id)
        status = await command(fake, "U2", "status")
        assert status.startswith("1 run(s) here:") and "by <@U1>" in status
        others = await command(fake, "U2", "stop")  # U1's run: U2 may only talk
        assert others == "The runs here are others'; stopping them needs the 'operate' right."
        stopped = await command(fake, "U1", "stop", trigger="t-stop")
        assert stopped == "Stopped 1 run(s)."
        assert (await s.runtime.records.get_run(run.id)).state is RunState.CANCELLED
        again = await command(fake, "U1", "stop", trigger="t-stop")
        assert again == "Nothing is running here."  # Slack's redelivery: nothing more
        await s.runtime.idle()
        announced = [t for t in posted(fake) if t.startswith("⏹")]
        assert announced == ["⏹ <@U1> stopped 1 run(s) here."]
        HOLD.set()


async def test_schedules_listed_run_once_and_paused_with_operate(tmp_path: Path) -> None:
    job = ScheduleConfig(name="standup", cron="0 9 * * 1-5", prompt="Post the standup")
    clock = lambda: datetime(2026, 12, 4, 8, 0, tzinfo=UTC)  # noqa: E731
    async with FakeSlack() as fake, SQLiteStore(tmp_path / "m.db") as store:
        slack = SlackOutbound(config(fake, allow_users=[], rules=RULES, stream="off"),
                              secrets(fake), Records(store), pace_s=0)
        async with Runtime(store, EchoProvider(),
                           deliverers={"slack": slack.deliverer}) as rt, \
                scheduled(rt, tmp_path / "m.db", [job], clock) as scheduler, \
                SlackChannel(rt, slack, schedules=scheduler):
            await fake.wait_connected()
            listed = await command(fake, "UOPS", "schedules")
            assert listed.startswith(
                "• `standup`: next 2026-12-04T09:00:00+00:00; last: never")
            ran = await command(fake, "UOPS", "schedules run standup", trigger="t-run")
            again = await command(fake, "UOPS", "schedules run standup", trigger="t-run")
            assert ran == again and ran.startswith("Schedule `standup` started: run `")
            assert len(await rt.records.runs()) == 1  # one run for one command
            paused = await command(fake, "UOPS", "schedules pause standup",
                                   trigger="t-pause")
            assert paused == "Schedule `standup` paused."
            redelivered = await command(fake, "UOPS", "schedules pause standup",
                                        trigger="t-pause")
            assert redelivered == "Schedule `standup` is already paused."
            assert await command(fake, "UOPS", "schedules resume standup") == \
                "Schedule `standup` resumed."
            assert (await command(fake, "UOPS", "schedules pause nope")
                    ).startswith("Not done")
            await rt.idle()
            assert [t for t in posted(fake) if "schedule" in t] == [
                "⏸ <@UOPS> paused the schedule `standup`.",
                "▶ <@UOPS> resumed the schedule `standup`."]


async def test_the_command_over_http_is_signed_and_answered(tmp_path: Path) -> None:
    async with FakeSlack() as fake, over_http(fake, tmp_path / "m.db") as (_, client):
        payload = slash_command(TEAM, C, "U1", "help")
        body, headers = signed_command(payload, SECRET)
        answered = await client.post("/slack/events", content=body, headers=headers)
        assert answered.status_code == 200
        assert answered.json()["response_type"] == "ephemeral"
        assert "`/maiden status`" in answered.json()["text"]
        forged = dict(headers, **{"X-Slack-Signature": "v0=" + "0" * 64})
        refused = await client.post("/slack/events", content=body, headers=forged)
        assert refused.status_code == 401


async def test_status_links_to_a_waiting_prompt(tmp_path: Path) -> None:
    async with FakeSlack() as fake, running(fake, tmp_path / "m.db", stream="off") as s:
        ask = fake.user_event(C, "U1", f'<@{BOT_USER}> /tool deploy {{"env": "qa"}}',
                              mention=True)
        await fake.acked(await fake.socket_event(ask))
        await s.runtime.idle()
        prompt = [m for m in fake.messages(C) if m.get("user") == BOT_USER][-1]
        status = await command(fake, "U1", "status")
        link = f"https://maiden-test.slack.com/archives/{C}/p{prompt['ts'].replace('.', '')}"
        assert f"`deploy` waits for a person (approve it on <{link}|its prompt>, or " \
               "`maiden approve " in status, status


async def test_a_later_answer_is_shown_though_slack_fails_at_first(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An answer not ready within the acknowledgement goes out as an ephemeral message when
    it is; Slack failing then (a 503, a rate limit) is tried again, not given up at once
    (chaos, seed 9292: "⏳ On it…", then nothing)."""
    monkeypatch.setattr(commands, "ANSWER_WITHIN_S", 0.0)  # every answer comes later
    async with FakeSlack() as fake, running(fake, tmp_path / "m.db", stream="off",
                                            allow_users=[], rules=RULES):
        fake.fail("chat.postEphemeral", status=503)
        fake.fail("chat.postEphemeral", error="ratelimited")
        assert await command(fake, "U1", "status") == "⏳ On it…"
        await fake.until(lambda: bool(fake.store.ephemerals.get(C)), what="the answer")
        assert [m["text"] for m in fake.store.ephemerals[C]] == ["Nothing is running here."]
        assert fake.pending_faults("chat.postEphemeral") == 0


async def test_an_answer_that_takes_too_long_says_it_failed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An answer that does not come within ``ANSWER_DEADLINE_S`` (the store out of reach)
    is given up: the person is told it failed and to try again, rather than left with "On
    it…" and an answer that may never come (chaos, seed 9393)."""
    monkeypatch.setattr(shared, "ANSWER_DEADLINE_S", 0.0)  # nothing answers in time
    async with FakeSlack() as fake, running(fake, tmp_path / "m.db", stream="off",
                                            allow_users=[], rules=RULES):
        said = await command(fake, "U1", "status")
        assert said.startswith("Something failed: no answer within 0 s"), said
        assert (await command(fake, "U1", "help")).startswith("Commands:")  # no store
