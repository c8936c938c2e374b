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


async def test_a_stream_whose_opening_was_lost_leaves_the_answer_once(tmp_path: Path) -> None:
    """chaos finding 12: the message that opens a stream reaches Discord, but its answer is
    lost (the connection dropped). The run's reply finds that message and finishes it with
    the answer: one message, the whole answer, never a second one beside it."""
    script = ScriptedProvider([{"text": ANSWER, "chunks": 3}])
    async with FakeDiscord() as fake, running(fake, tmp_path / "m.db", provider=script,
                                              edit_every_s=0.05) as d:
        fake.fail("POST /channels/{id}/messages", drop=True)
        sent = await fake.user_message(GENERAL_ID, HUMAN_ID, f"<@{BOT_ID}> hi",
                                       mentions=[BOT_ID])
        await asyncio.wait_for(d.channel.wait_handled(1), 10)
        await d.runtime.idle()
        for _ in range(2):  # the outbox's sweeps after it: nothing changes
            await d.runtime.operator.flush_deliveries()
        (message,) = bot_messages(fake)
    assert message["content"] == ANSWER
    assert message["message_reference"]["message_id"] == sent["id"]


async def test_a_stream_that_could_not_open_while_discord_was_down_leaves_the_answer_once(
        tmp_path: Path) -> None:
    """chaos finding 12: Discord down as the answer began to stream and as the run ended
    (the stream never opened; its reply stays in the outbox). Discord back, the outbox's
    sweep posts the answer, and the sweeps after it leave it as it is: it was edited to
    "…" before (the streamer kept the text of the stream that never opened, and finished
    the answer's message with it, as if it were that stream's)."""
    global released
    released = asyncio.Event()
    script = ScriptedProvider([
        {"tool_calls": [{"name": "lookup", "arguments": {"service": "api"}}]},
        {"text": ANSWER, "chunks": 3}])
    async with FakeDiscord() as fake, running(fake, tmp_path / "m.db", provider=script,
                                              tools=(lookup,), edit_every_s=0.05) as d:
        sent = await fake.user_message(GENERAL_ID, HUMAN_ID, f"<@{BOT_ID}> how is the api?",
                                       mentions=[BOT_ID])
        await fake.until(lambda: any(c.method == "POST" and c.route and "typing" in c.route
                                     for c in fake.calls()), what="the run's start")
        await fake.misbehave("down", 60)
        released.set()
        await asyncio.wait_for(d.channel.wait_handled(1), 10)
        await d.runtime.idle()
        assert bot_messages(fake) == []  # nothing got through
        fake.router.outage = None  # Discord is back
        for _ in range(3):  # the outbox's sweeps: the first posts it
            await d.runtime.operator.flush_deliveries()
        (message,) = bot_messages(fake)
    assert message["content"] == ANSWER
    assert message["message_reference"]["message_id"] == sent["id"]


async def test_a_stream_that_never_opened_leaves_the_reply_posted_later_as_it_is(
        tmp_path: Path) -> None:
    """Chaos finding 12 (seed 8, Discord down as a run ended): the stream's first post
    failed, then the run's reply could not go (looking for the stream's messages failed),
    leaving the reply and the stream's record in the outbox. The outbox's sweep posted the
    reply, then tidied the stream's record as it had read it before: it took the bot's
    message answering the person's (the reply) for the stream's, and finished it with the
    text the failed stream had shown here, nothing: the reply was edited to "…". The reply
    stays as it was posted."""
    script = ScriptedProvider([{"text": ANSWER, "chunks": 3}])
    async with FakeDiscord() as fake, running(fake, tmp_path / "m.db", provider=script,
                                              edit_every_s=0.05) as d:
        fake.fail("POST /channels/{id}/messages", status=503)  # the stream's first post
        fake.fail("GET /channels/{id}/messages", status=503)  # the run's end finds no stream
        sent = await fake.user_message(GENERAL_ID, HUMAN_ID, f"<@{BOT_ID}> how did it go?",
                                       mentions=[BOT_ID])
        await asyncio.wait_for(d.channel.wait_handled(1), 10)
        await d.runtime.idle()
        assert fake.pending_faults("GET /channels/{id}/messages") == 0
        assert bot_messages(fake) == []
        await d.runtime.operator.flush_deliveries()  # the sweep: reply, then stream
        (message,) = bot_messages(fake)
    assert message["content"] == ANSWER
    assert message["message_reference"]["message_id"] == sent["id"]
