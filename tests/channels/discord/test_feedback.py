"""👍 / 👎 under Discord answers (docs/guides/live-replies.md, Feedback on answers):
buttons with persistent custom_ids on a completed run's answer, streamed or posted; a
click is recorded once per person per run, a change of mind replaces it, and the buttons
work after a restart."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from channels.feedback import UNRECORDED
from runtime import ScriptedProvider, SQLiteStore, StoreFull
from tests.channels.discord.test_channel import Discord, running
from tests.fakes.discord import BOT_ID, GENERAL_ID, HUMAN_ID, FakeDiscord, new_id


def bot_messages(fake: FakeDiscord) -> list[dict[str, Any]]:
    return [m for m in fake.messages(GENERAL_ID) if str(m["author"]["id"]) == str(BOT_ID)]


def custom_ids(message: dict[str, Any]) -> list[str]:
    return [b["custom_id"] for row in message.get("components") or []
            for b in row["components"]]


async def answered(d: Discord) -> dict[str, Any]:
    """The bot's answer to a person's "status?" in #general (the only bot message)."""
    await d.fake.user_message(GENERAL_ID, HUMAN_ID, f"<@{BOT_ID}> status?", mentions=[BOT_ID])
    await asyncio.wait_for(d.channel.wait_handled(1), 10)
    await d.runtime.idle()
    (answer,) = bot_messages(d.fake)
    return answer


async def click(fake: FakeDiscord, message: dict[str, Any], custom_id: str, user: Any,
                answered: int) -> str:
    """Click and wait for the interaction's answer: its (ephemeral) text, edited into the
    "thinking" line the click was acknowledged with."""
    clicked = await fake.click(message, custom_id, user_id=user)
    await fake.until(lambda: len(fake.interaction_responses()) == answered
                     and bool(fake.shown(clicked)), what="an answer")
    assert fake.interaction_responses()[-1].type == 5  # acknowledged before it is recorded
    (shown,) = fake.shown(clicked)
    assert shown["flags"] == 64
    return str(shown["content"])


async def test_votes_on_a_streamed_answer_once_per_person(tmp_path: Path) -> None:
    other = new_id()
    script = ScriptedProvider([{"text": "All green.", "chunks": 3}])
    async with FakeDiscord() as fake:
        fake.world.add_user(other, "other")
        allowed = [str(HUMAN_ID), str(other)]
        async with running(fake, tmp_path / "m.db", provider=script, edit_every_s=0.05,
                           allow_users=allowed) as d:
            answer = await answered(d)
            (run,) = await d.runtime.records.runs()
            assert answer["content"] == "All green."
            up, down = custom_ids(answer)
            assert (up, down) == (f"maiden:f:up:{run.id}", f"maiden:f:down:{run.id}")
            assert "👍" in await click(fake, answer, up, HUMAN_ID, 1)
            await click(fake, answer, up, HUMAN_ID, 2)  # the same again
            await click(fake, answer, down, other, 3)
        async with running(fake, tmp_path / "m.db", provider=script,
                           allow_users=allowed) as d:  # buttons from before the restart
            assert "👎" in await click(fake, answer, down, HUMAN_ID, 4)
            votes = await d.runtime.kept.feedback.votes(run_id=run.id)
            assert [(v.user, v.value) for v in votes] == [(str(other), "down"),
                                                          (str(HUMAN_ID), "down")]
            assert all(v.channel == "discord" and v.message == answer["id"] for v in votes)
            stranger = new_id()
            fake.world.add_user(stranger, "stranger")
            assert "may not rate answers" in await click(fake, answer, up, stranger, 5)
            forged = await click(fake, answer, "maiden:f:up:0123abcd", HUMAN_ID, 6)
            assert "does not belong to this message" in forged
            assert len(await d.runtime.kept.feedback.votes()) == 2


@pytest.mark.parametrize("stream", ["off", "edit"])
async def test_a_long_answer_has_the_buttons_on_its_last_message(
        tmp_path: Path, stream: str) -> None:
    """Posted whole in parts, or streamed past 2,000 characters into new messages."""
    text = "\n\n".join(f"Part {i}: " + "word " * 80 for i in range(8))
    script = ScriptedProvider([{"text": text, "chunks": 6}])
    async with FakeDiscord() as fake, running(fake, tmp_path / "m.db", stream=stream,
                                              edit_every_s=0.05, provider=script) as d:
        await fake.user_message(GENERAL_ID, HUMAN_ID, f"<@{BOT_ID}> a lot", mentions=[BOT_ID])
        await asyncio.wait_for(d.channel.wait_handled(1), 10)
        await d.runtime.idle()
        parts = bot_messages(fake)
        assert len(parts) > 1
        assert [bool(custom_ids(m)) for m in parts] == [False] * (len(parts) - 1) + [True]


class VotesUnwritten(SQLiteStore):
    """Its disk full for votes, until ``room``."""

    room = False

    async def put_vote(self, *args: Any, **kwargs: Any) -> Any:
        if not VotesUnwritten.room:
            raise StoreFull("m.db: the disk is full (database or disk is full)")
        return await super().put_vote(*args, **kwargs)


async def test_a_vote_the_store_cannot_take_is_said_so_to_the_clicker(tmp_path: Path) -> None:
    """chaos seed 10303 (SQLite, its disk full): a click's vote failed to be written and the
    interaction went unanswered (discord.py: "Ignoring exception in on_interaction"; the
    person sees "This interaction failed"). The clicker is told to click again; once there
    is room, the click counts."""
    VotesUnwritten.room = False
    async with FakeDiscord() as fake, running(
            fake, tmp_path / "m.db", provider=ScriptedProvider([{"text": "All green."}]),
            store_class=VotesUnwritten) as d:
        answer = await answered(d)
        up, _ = custom_ids(answer)
        assert await click(fake, answer, up, HUMAN_ID, 1) == UNRECORDED
        VotesUnwritten.room = True
        assert "👍" in await click(fake, answer, up, HUMAN_ID, 2)
        assert len(await d.runtime.kept.feedback.votes()) == 1
