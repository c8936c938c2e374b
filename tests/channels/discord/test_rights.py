"""Who may talk and approve on Discord, through the real discord.py client and a fake
Discord: rules name a place (guild, channel, dm, *) and optionally users; both must match."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.channels.discord.test_channel import running, settle
from tests.fakes.discord import (
    BOT_ID,
    DM_ID,
    GENERAL_ID,
    GUILD_ID,
    HUMAN_ID,
    THREAD_ID,
    FakeDiscord,
    new_id,
)

STRANGER = new_id()
OPS = new_id()


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as started:
        started.world.add_member(GUILD_ID, STRANGER)
        started.world.add_text_channel(OPS, GUILD_ID, "ops")
        yield started


async def test_an_outsider_in_an_allowed_channel_is_refused(fake: FakeDiscord,
                                                            tmp_path: Path) -> None:
    """allow_users with allow_channels: a listed user in a listed channel (or its threads),
    not anyone there (the old users-OR-places let the stranger in)."""
    async with running(fake, tmp_path / "m.db", allow_users=[str(HUMAN_ID)],
                       allow_channels=[str(GENERAL_ID)]) as d:
        await fake.user_message(GENERAL_ID, STRANGER, f"<@{BOT_ID}> let me in",
                                mentions=[BOT_ID])
        await fake.user_message(OPS, HUMAN_ID, f"<@{BOT_ID}> not here", mentions=[BOT_ID])
        await settle(d, 2)
        assert await d.runtime.records.runs() == [] and d.replies() == [] and d.replies(OPS) == []

        await fake.user_message(GENERAL_ID, HUMAN_ID, f"<@{BOT_ID}> hello", mentions=[BOT_ID])
        await fake.user_message(THREAD_ID, HUMAN_ID, f"<@{BOT_ID}> in its thread",
                                mentions=[BOT_ID])
        await fake.wait_messages(THREAD_ID, 2)
        await settle(d, 4)
        assert [m["content"] for m in d.replies()] == ["echo: hello"]
        assert [m["content"] for m in d.replies(THREAD_ID)] == ["echo: in its thread"]


@pytest.mark.parametrize(("allow_dms", "served"), [(True, True), (False, False)])
async def test_a_dm_from_a_listed_user(fake: FakeDiscord, tmp_path: Path, allow_dms: bool,
                                       served: bool) -> None:
    """Listing a guild keeps the listed users' DMs, unless allow_dms = false."""
    async with running(fake, tmp_path / "m.db", allow_users=[str(HUMAN_ID)],
                       allow_guilds=[str(GUILD_ID)], allow_dms=allow_dms) as d:
        await fake.user_message(DM_ID, HUMAN_ID, "just us")
        if served:
            await fake.wait_messages(DM_ID, 2)
        await settle(d, 1)
        assert [m["content"] for m in d.replies(DM_ID)] == (["echo: just us"] if served
                                                             else [])


async def test_only_a_holder_of_approve_decides(fake: FakeDiscord, tmp_path: Path) -> None:
    """No ``approvers`` anywhere: the channel's own rule is what refuses the click."""
    lead = new_id()
    fake.world.add_member(GUILD_ID, lead)
    rules = [{"place": str(GUILD_ID), "rights": ["talk"]},
             {"place": str(GUILD_ID), "users": [str(lead)], "rights": ["approve"]}]
    async with running(fake, tmp_path / "m.db", allow_users=[], rules=rules) as d:
        await fake.user_message(GENERAL_ID, HUMAN_ID,
                                f'<@{BOT_ID}> /tool deploy {{"env": "prod"}}', mentions=[BOT_ID])
        (prompt,) = (await fake.wait_messages(GENERAL_ID, 2))[1:]
        await settle(d, 1)
        approve = prompt["components"][0]["components"][0]["custom_id"]
        (run,) = await d.runtime.records.pending_approvals()

        asked = await fake.click(prompt, approve, user_id=HUMAN_ID)  # may talk, not approve
        await fake.until(lambda: bool(fake.shown(asked)), what="a refusal")
        (refusal,) = fake.shown(asked)
        assert refusal["flags"] == 64 and "may not decide" in refusal["content"]
        assert (await d.runtime.records.get_run(run.id)).state == "awaiting_approval"

        decided = await fake.click(prompt, approve, user_id=lead)
        await fake.until(lambda: bool(fake.shown(decided)), what="the update")
        (update,) = fake.shown(decided)  # the prompt says who decided
        assert update["id"] == prompt["id"] and f"<@{lead}>" in update["content"]
        done = await d.runtime.wait(run.id)
        assert done.state == "completed" and [x.by for x in done.decisions] == [str(lead)]
