"""A Discord button decides only its own run, in its own place (DESIGN §6,
``channels.clicks``): another run's ``custom_id`` on a message is refused with an ephemeral
line and decides (or votes) nothing. Through the real discord.py client and a fake Discord."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from channels.clicks import FOREIGN
from runtime import tool
from tests.channels.discord.test_channel import running, settle
from tests.fakes.discord import BOT_ID, GENERAL_ID, GUILD_ID, HUMAN_ID, FakeDiscord, new_id

LEAD = new_id()
OPS = new_id()
RULES = [  # the human talks and approves in #general only; the lead in #ops only
    {"place": str(GENERAL_ID), "users": [str(HUMAN_ID)], "rights": ["talk", "approve"]},
    {"place": str(OPS), "users": [str(LEAD)], "rights": ["talk", "approve"]},
]

ran: list[str] = []


@tool(requires_approval=True)
def shell(command: str) -> str:
    """Run a shell command."""
    ran.append(command)
    return f"ran {command}"


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as started:
        started.world.add_member(GUILD_ID, LEAD)
        started.world.add_text_channel(OPS, GUILD_ID, "ops")
        yield started


def custom_ids(message: dict[str, Any]) -> list[str]:
    return [b["custom_id"] for row in message.get("components") or []
            for b in row["components"]]


def bot_messages(fake: FakeDiscord, channel: int) -> list[dict[str, Any]]:
    return [m for m in fake.messages(channel) if str(m["author"]["id"]) == str(BOT_ID)]


async def answered(fake: FakeDiscord, clicked: dict[str, Any]) -> str:
    """The text the clicker was shown in answer to ``clicked``, once there (a line only they
    see)."""
    await fake.until(lambda: bool(fake.shown(clicked)), what="an answer")
    (shown,) = fake.shown(clicked)
    assert shown["flags"] == 64
    return str(shown["content"])


async def test_another_runs_custom_id_on_this_prompt_decides_nothing(
        fake: FakeDiscord, tmp_path: Path) -> None:
    ran.clear()
    async with running(fake, tmp_path / "m.db", tools=(shell,), allow_users=[],
                       rules=RULES) as d:
        prompts = []
        for handled, (channel, user, command) in enumerate(
                ((GENERAL_ID, HUMAN_ID, "rm -rf /srv/general"), (OPS, LEAD, "uptime")), 1):
            await fake.user_message(channel, user, f'<@{BOT_ID}> /tool shell '
                                    f'{{"command": "{command}"}}', mentions=[BOT_ID])
            await fake.wait_messages(channel, 2)  # theirs, and the prompt
            await settle(d, handled)
            (prompt,) = bot_messages(fake, channel)
            prompts.append(prompt)
        general, ops = prompts
        theirs, mine = sorted(await d.runtime.records.pending_approvals(),
                              key=lambda r: r.origin.target["channel"] != str(GENERAL_ID))

        # The lead, who may approve in #ops only, clicks #ops's prompt with #general's id.
        foreign = await fake.click(ops, custom_ids(general)[0], user_id=LEAD)
        assert await answered(fake, foreign) == FOREIGN
        await d.runtime.idle()
        for run in (theirs, mine):
            still = await d.runtime.records.get_run(run.id)
            assert still.state == "awaiting_approval" and still.decisions == ()
        assert ran == []

        own = await fake.click(ops, custom_ids(ops)[0], user_id=LEAD)  # its own: decides
        await fake.until(lambda: bool(fake.shown(own)), what="the update")
        (update,) = fake.shown(own)  # the prompt itself says who decided
        assert update["id"] == ops["id"] and update["components"] == []
        assert update["content"] == f"Approved by <@{LEAD}>: `shell`"
        done = await d.runtime.wait(mine.id)
        assert done.state == "completed" and ran == ["uptime"]
        assert (await d.runtime.records.get_run(theirs.id)).state == "awaiting_approval"


async def test_a_vote_carrying_another_runs_custom_id_is_refused(
        fake: FakeDiscord, tmp_path: Path) -> None:
    rules = [{"place": str(GENERAL_ID), "users": [str(HUMAN_ID)], "rights": ["talk"]},
             {"place": str(OPS), "users": [str(LEAD)], "rights": ["talk"]}]
    async with running(fake, tmp_path / "m.db", stream="off", allow_users=[],
                       rules=rules) as d:
        await fake.user_message(GENERAL_ID, HUMAN_ID, f"<@{BOT_ID}> hi", mentions=[BOT_ID])
        await fake.user_message(OPS, LEAD, f"<@{BOT_ID}> hello", mentions=[BOT_ID])
        await fake.wait_messages(GENERAL_ID, 2)
        await fake.wait_messages(OPS, 2)
        await settle(d, 2)
        (here,) = bot_messages(fake, GENERAL_ID)
        (elsewhere,) = [r for r in await d.runtime.records.runs()
                        if r.origin.target["channel"] == str(OPS)]
        foreign = await fake.click(here, f"maiden:f:up:{elsewhere.id}", user_id=HUMAN_ID)
        assert await answered(fake, foreign) == FOREIGN
        assert await d.runtime.kept.feedback.votes() == []

        own = await fake.click(here, custom_ids(here)[0], user_id=HUMAN_ID)  # its own: counted
        assert "👍" in await answered(fake, own)
        (vote,) = await d.runtime.kept.feedback.votes()
        assert vote.run_id != elsewhere.id and vote.place == str(GENERAL_ID)

