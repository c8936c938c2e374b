"""Reminders asked in chat, through a real `maiden run` and the fake Slack and Discord: the
tool reads the person's zone (Slack's ``users.info``) and says when it fires there; it
fires once, as the bot's message where it was asked, mentioning the person; `maiden
schedules` shows it done in the config's zone and in the person's."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path

import pytest

from tests.fakes.discord import BOT_ID, GENERAL_ID, HUMAN_ID, FakeDiscord
from tests.fakes.slack import BOT_USER, FakeSlack
from tests.processes.test_channels_down_at_boot import Lines, maiden_run
from tests.processes.test_discord_cli import configure as discord_configure
from tests.processes.test_discord_cli import env as discord_env
from tests.processes.test_slack_cli import configure, env, maiden

pytestmark = pytest.mark.timeout(120)

C = "C0GENERAL01"


async def stopped(proc: asyncio.subprocess.Process, err: Lines) -> None:
    """SIGTERM, and the process ended cleanly."""
    proc.send_signal(signal.SIGTERM)
    await asyncio.wait_for(proc.wait(), 30)
    assert proc.returncode == 0, err.text()[-2000:]


async def test_a_reminder_asked_in_slack_fires_once_in_its_thread(home: Path) -> None:
    async with FakeSlack() as fake:
        fake.person("U1", tz="America/Sao_Paulo")
        configure(home, fake)
        async with maiden_run(home, env(fake)) as (proc, out, err):
            await out.wait_for("Ctrl-C stops.")
            # The offline echo model calls a tool when told to (`/tool NAME {json}`).
            asked = json.dumps({"name": "deploy-check", "in": "3s", "say": "check the deploy"})
            event = fake.user_event(C, "U1", f"<@{BOT_USER}> /tool schedule_create {asked}",
                                    mention=True)
            await fake.acked(await fake.socket_event(event), timeout=30)
            thread = event["event"]["ts"]
            _, answer = await fake.wait_messages(C, 2, timeout=30)
            assert "America/Sao_Paulo" in answer["text"] and "UTC" in answer["text"]
            assert answer["thread_ts"] == thread
            *_, reminder = await fake.wait_messages(C, 3, timeout=30)
            assert reminder["text"] == "<@U1> check the deploy"
            assert reminder["thread_ts"] == thread and reminder.get("bot_id")
            assert len(fake.calls("users.info")) == 1
            await stopped(proc, err)
        assert len(fake.messages(C)) == 3  # asked, said back, reminded: once
    code, listing, _ = await maiden(home, env(fake), "schedules")
    assert code == 0, listing
    listed = next(row for row in listing.splitlines() if row.startswith("deploy-check"))
    assert "once at " in listed and "UTC (" in listed and "America/Sao_Paulo)" in listed
    assert "(done)" in listed and "origin=chat" in listed


async def test_a_reminder_asked_in_discord_mentions_the_person_once(home: Path) -> None:
    async with FakeDiscord() as fake:
        discord_configure(home, fake)
        async with maiden_run(home, discord_env(fake)) as (proc, out, err):
            await out.wait_for("Ctrl-C stops.")
            asked = json.dumps({"name": "tea", "in": "3s", "say": "tea is ready"})
            await fake.user_message(GENERAL_ID, HUMAN_ID,
                                    f"<@{BOT_ID}> /tool schedule_create {asked}",
                                    mentions=[BOT_ID])
            *_, reminder = await fake.wait_messages(GENERAL_ID, 3, timeout=30)
            _, answer, _ = fake.messages(GENERAL_ID)
            # Discord tells no zone: the agent's (the default agent.toml's, UTC); the
            # answer (a live reply, finished by now) says when.
            assert "UTC, in " in answer["content"] and "⏳" not in answer["content"]
            assert reminder["content"] == f"<@{HUMAN_ID}> tea is ready"
            assert reminder["author"]["id"] == str(BOT_ID)
            await stopped(proc, err)
        assert len(fake.messages(GENERAL_ID)) == 3
