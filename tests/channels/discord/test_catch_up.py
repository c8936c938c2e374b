"""Messages the gateway never handed in are read back at each new session (chaos/README.md,
finding 37): Discord sends a message once, to the sessions connected then, and a session
that identifies anew is sent nothing from before it. Through the real discord.py client
against the fake Discord, whose ``GET /channels/{id}/messages`` pages as Discord's does."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from channels.discord.inbound import DiscordInbound
from runtime.serving.leases import holder_name
from tests.channels.discord.test_channel import Discord, running
from tests.channels.discord.test_gateway_lease import SETTINGS, take_the_lease
from tests.fakes.discord import (
    BOT_ID,
    DM_ID,
    GENERAL_ID,
    HUMAN_ID,
    THREAD_ID,
    FakeDiscord,
    snowflake_at,
)
from tests.fakes.discord import payloads as p


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as started:
        yield started


def mention(fake: FakeDiscord, channel: int, text: str) -> dict[str, object]:
    """A person's message stored by Discord and sent to no session (none was connected)."""
    return fake.post_as_user(channel, HUMAN_ID, f"<@{BOT_ID}> {text}", mentions=[BOT_ID])


async def caught_up(inbound: DiscordInbound) -> None:
    await asyncio.wait_for(inbound.caught_up.wait(), 10)


async def answered(d: Discord, channel: int, texts: list[str]) -> None:
    await d.fake.until(lambda: [m["content"] for m in d.replies(channel)] == texts,
                       what=f"the answers {texts}", timeout=10)


async def test_a_message_sent_while_no_session_was_connected_is_answered_at_the_next(
    fake: FakeDiscord, tmp_path: Path
) -> None:
    asked = mention(fake, GENERAL_ID, "are you there?")
    async with running(fake, tmp_path / "m.db") as d:
        await answered(d, GENERAL_ID, ["echo: are you there?"])
        (run,) = await d.runtime.records.runs()
        assert run.idempotency_key == f"discord:{asked['id']}"
        assert d.replies()[0]["message_reference"]["message_id"] == asked["id"]
        assert d.channel.inbound.read_back == 1
    # The next start reads it back again, finds it taken, and answers nothing more.
    async with running(fake, tmp_path / "m.db") as d:
        await caught_up(d.channel.inbound)
        await d.runtime.idle()
        assert len(d.replies()) == 1
        assert len(await d.runtime.records.runs()) == 1


async def test_a_replica_taking_the_gateway_over_answers_what_came_in_between(
    fake: FakeDiscord, tmp_path: Path
) -> None:
    """A message the holder never took (it died holding it, or it never came) is answered
    by the replica that takes the gateway over, and the one answered before is not."""
    db = tmp_path / "m.db"
    async with running(fake, db, settings=SETTINGS) as first:
        await fake.user_message(GENERAL_ID, HUMAN_ID, f"<@{BOT_ID}> first", mentions=[BOT_ID])
        await answered(first, GENERAL_ID, ["echo: first"])
        async with running(fake, db, settings=SETTINGS) as second:
            assert second.channel.holder is not None  # standing by
            mention(fake, GENERAL_ID, "in the gap")  # sent to no session
            await take_the_lease(first, db, holder_name(second.runtime.operator.instance_id))
            await fake.identified(2, timeout=10)
            await answered(second, GENERAL_ID, ["echo: first", "echo: in the gap"])
            await caught_up(second.channel.inbound)
            await second.runtime.idle()
            assert len(await second.runtime.records.runs()) == 2


async def test_what_is_read_back_is_taken_before_what_the_new_session_hands_in(
    fake: FakeDiscord, tmp_path: Path
) -> None:
    """A thread's messages are taken in order: the new session's first message waits until
    the one it was not sent is taken."""
    mention(fake, GENERAL_ID, "older")
    async with running(fake, tmp_path / "m.db") as d:
        await fake.user_message(GENERAL_ID, HUMAN_ID, f"<@{BOT_ID}> newer", mentions=[BOT_ID])
        await answered(d, GENERAL_ID, ["echo: older", "echo: newer"])
        runs = await d.runtime.records.runs()
        assert [r.text for r in runs] == ["older", "newer"]


async def test_only_the_window_is_read_back_and_a_late_stop_stops_nothing(
    fake: FakeDiscord, tmp_path: Path
) -> None:
    long_ago = snowflake_at(int((time.time() - 3600) * 1000))
    fake.store.create(p.message(long_ago, GENERAL_ID, fake.world.user(HUMAN_ID),
                                f"<@{BOT_ID}> an hour ago",
                                mentions=[fake.world.user(BOT_ID)]))
    mention(fake, THREAD_ID, "stop")
    mention(fake, THREAD_ID, "in the thread")
    async with running(fake, tmp_path / "m.db", catch_up_s=600) as d:
        await answered(d, THREAD_ID, ["echo: in the thread"])
        await caught_up(d.channel.inbound)
        await d.runtime.idle()
        assert d.replies(GENERAL_ID) == []
        (run,) = await d.runtime.records.runs()
        assert (run.text, run.state) == ("in the thread", "completed")


async def test_a_dm_of_a_thread_the_store_knows_is_read_back(
    fake: FakeDiscord, tmp_path: Path
) -> None:
    async with running(fake, tmp_path / "m.db") as d:  # an earlier talk in the DM
        await fake.user_message(DM_ID, HUMAN_ID, "hello")
        await answered(d, DM_ID, ["echo: hello"])
    fake.post_as_user(DM_ID, HUMAN_ID, "while you were away")
    async with running(fake, tmp_path / "m.db") as d:
        await answered(d, DM_ID, ["echo: hello", "echo: while you were away"])


async def test_reading_back_can_be_turned_off(fake: FakeDiscord, tmp_path: Path) -> None:
    mention(fake, GENERAL_ID, "unseen")
    async with running(fake, tmp_path / "m.db", catch_up_s=0) as d:
        await fake.user_message(GENERAL_ID, HUMAN_ID, f"<@{BOT_ID}> seen", mentions=[BOT_ID])
        await answered(d, GENERAL_ID, ["echo: seen"])
        assert len(await d.runtime.records.runs()) == 1


async def test_a_place_discord_did_not_answer_for_is_read_again(
    fake: FakeDiscord, tmp_path: Path
) -> None:
    mention(fake, GENERAL_ID, "still there?")
    fake.fail("GET /channels/{id}/messages", status=503)  # discord.py does not retry a 503
    async with running(fake, tmp_path / "m.db") as d:
        await answered(d, GENERAL_ID, ["echo: still there?"])
        assert fake.pending_faults("GET /channels/{id}/messages") == 0
