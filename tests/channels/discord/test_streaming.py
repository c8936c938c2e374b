"""Live replies in Discord (docs/guides/live-replies.md): the real channel against the fake
Discord — the reply posted with its first text and edited as it grows, the running tool
on a last line, a new message past 2,000 characters, `stream = "off"`."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from runtime import ScriptedProvider, tool
from tests.channels.discord.test_channel import running
from tests.fakes.discord import BOT_ID, GENERAL_ID, HUMAN_ID, FakeDiscord

ANSWER = "The deploy went out at 09:14; every check is green."
released = asyncio.Event()
"""Lets the held tool finish; made anew by each ``ask`` (an event is bound to the loop it
is first awaited on, and each test has its own)."""


@tool
async def lookup(service: str) -> str:
    """Look a service up (waits until the test lets it finish)."""
    await released.wait()
    return f"{service}: green"


def bot_messages(fake: FakeDiscord) -> list[dict[str, Any]]:
    return [m for m in fake.messages(GENERAL_ID) if str(m["author"]["id"]) == str(BOT_ID)]


async def test_a_reply_is_edited_as_it_grows_its_tool_on_a_last_line(tmp_path: Path) -> None:
    global released
    released = asyncio.Event()
    script = ScriptedProvider([
        {"text": "Let me look that up. ", "chunks": 2,
         "tool_calls": [{"name": "lookup", "arguments": {"service": "api"}}]},
        {"text": ANSWER, "chunks": 5}])
    async with FakeDiscord() as fake, running(fake, tmp_path / "m.db", provider=script,
                                              tools=(lookup,), edit_every_s=0.05) as d:
        sent = await fake.user_message(GENERAL_ID, HUMAN_ID, f"<@{BOT_ID}> how did it go?",
                                       mentions=[BOT_ID])
        await fake.until(lambda: any("⏳ lookup(service=api)…" in m["content"]
                                     for m in bot_messages(fake)), what="the tool's line")
        (first,) = bot_messages(fake)
        assert first["content"].startswith("Let me look that up.")
        released.set()
        await asyncio.wait_for(d.channel.wait_handled(1), 10)
        await d.runtime.idle()
        (message,) = bot_messages(fake)  # the same message, edited: one reply
        assert message["id"] == first["id"]
        assert message["content"] == "Let me look that up. " + ANSWER
        assert message["message_reference"]["message_id"] == sent["id"]
        assert message["edited_timestamp"] is not None


async def test_a_long_reply_goes_on_in_a_new_message(tmp_path: Path) -> None:
    text = "\n\n".join(f"Part {i}: " + "word " * 80 for i in range(8))
    assert len(text) > 3_000
    script = ScriptedProvider([{"text": text, "chunks": 6}])
    async with FakeDiscord() as fake, running(fake, tmp_path / "m.db", provider=script,
                                              edit_every_s=0.05) as d:
        await fake.user_message(GENERAL_ID, HUMAN_ID, f"<@{BOT_ID}> write a lot",
                                mentions=[BOT_ID])
        await asyncio.wait_for(d.channel.wait_handled(1), 10)
        await d.runtime.idle()
        contents = [m["content"] for m in bot_messages(fake)]
    assert len(contents) >= 2 and all(len(c) <= 2_000 for c in contents)
    assert " ".join(" ".join(contents).split()) == " ".join(text.split())


async def test_stream_off_posts_the_finished_reply(tmp_path: Path) -> None:
    script = ScriptedProvider([{"text": ANSWER, "chunks": 5}])
    async with FakeDiscord() as fake, running(fake, tmp_path / "m.db", provider=script,
                                              stream="off") as d:
        await fake.user_message(GENERAL_ID, HUMAN_ID, f"<@{BOT_ID}> hi", mentions=[BOT_ID])
        await asyncio.wait_for(d.channel.wait_handled(1), 10)
        await d.runtime.idle()
        (message,) = bot_messages(fake)
    assert message["content"] == ANSWER and message["edited_timestamp"] is None


async def test_edits_past_discords_rate_limit_wait_and_the_reply_ends_whole(
        tmp_path: Path) -> None:
    """The fake enforces a per-channel bucket for sends and edits (here 3 per 0.5 s): the
    edits that come too fast get a 429 with Retry-After, discord.py waits it out, and the
    reply still ends as one message with the whole answer."""
    script = ScriptedProvider([{"text": ANSWER * 4, "chunks": 20, "chunk_delay_s": 0.01}])
    async with FakeDiscord() as fake, running(fake, tmp_path / "m.db", provider=script,
                                              edit_every_s=0.01) as d:
        fake.router.message_limit = (3, 0.5)
        await fake.user_message(GENERAL_ID, HUMAN_ID, f"<@{BOT_ID}> hi", mentions=[BOT_ID])
        await asyncio.wait_for(d.channel.wait_handled(1), 20)
        await d.runtime.idle()
        (message,) = bot_messages(fake)
    assert message["content"] == ANSWER * 4
    assert fake.router.limited.get(str(GENERAL_ID), 0) >= 1


async def test_a_stream_that_never_opened_leaves_the_reply_posted_on_its_own_alone(
        tmp_path: Path) -> None:
    """Discord goes down as the reply starts streaming: its first post is cut unanswered
    (shown or not, unknown: the stream's record stays open), and the reply's post when the
    run ends fails too. Discord back, the outbox's sweep posts the reply as a message of its
    own, then tidies the stream's record: it used to look the stream's messages up in the
    channel, take the reply (the bot's answer to the same message) for one, and finish it
    with what the stream had shown, nothing: the answer edited away to "…"
    (chaos/README.md, finding 12: seed 7, PostgreSQL, three runs out of three)."""
    script = ScriptedProvider([{"text": ANSWER, "chunks": 5, "chunk_delay_s": 0.2}])
    async with FakeDiscord() as fake, running(fake, tmp_path / "m.db", provider=script,
                                              edit_every_s=0.05) as d:
        sent = await fake.user_message(GENERAL_ID, HUMAN_ID, f"<@{BOT_ID}> how did it go?",
                                       mentions=[BOT_ID])
        await asyncio.wait_for(d.channel.wait_handled(1), 10)
        await fake.misbehave("down", 60.0)  # before the first chunk (0.2 s in) is shown
        await d.runtime.idle()
        await fake.misbehave("status", 0.0)  # Discord back
        assert bot_messages(fake) == []  # neither went out: the reply waits in the outbox
        await d.runtime.flush_deliveries()  # the sweep: the reply, then the stream's record
        (message,) = bot_messages(fake)
    assert message["content"] == ANSWER, message["content"]
    assert message["message_reference"]["message_id"] == sent["id"]
