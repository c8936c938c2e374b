"""👍 / 👎 under Slack answers (docs/guides/live-replies.md, Feedback on answers): the
buttons come with a completed run's answer, streamed or posted; a click is recorded once
per person per run, a change of mind replaces it, and a button cannot vote for someone
else or on another run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from channels.feedback import UNRECORDED
from runtime import EchoProvider, ScriptedProvider
from tests.channels.discord.test_feedback import VotesUnwritten
from tests.channels.slack.test_channel import C, running
from tests.fakes.slack import BOT_USER, FakeSlack, block_actions_payload, feedback_click


def bot_messages(fake: FakeSlack) -> list[dict[str, Any]]:
    return [m for m in fake.messages(C) if m.get("user") == BOT_USER]


def buttons(message: dict[str, Any]) -> list[dict[str, Any]]:
    return [b for b in message.get("blocks") or [] if b.get("type") == "context_actions"]


async def click(fake: FakeSlack, user: str, message: dict[str, Any], *, positive: bool,
                told: int) -> None:
    """Click, then wait until ``user`` has had ``told`` ephemeral lines in all."""
    await fake.acked(await fake.socket_interactive(
        feedback_click(user, C, message, positive=positive)))
    await fake.until(lambda: sum(e["user"] == user for e in fake.ephemerals(C)) >= told,
                     what=f"{user} told {told} times")


async def test_a_streamed_answer_takes_votes_once_per_person(tmp_path: Path) -> None:
    provider = ScriptedProvider([{"text": "All green.", "chunks": 3}])
    async with FakeSlack() as fake:
        async with running(fake, tmp_path / "m.db", provider=provider) as s:
            sent = fake.user_event(C, "U1", f"<@{BOT_USER}> status?", mention=True)
            await fake.acked(await fake.socket_event(sent))
            await s.runtime.idle()
            (answer,) = bot_messages(fake)
            assert fake.calls("chat.startStream")  # streamed natively
            (block,) = buttons(answer)
            (run,) = await s.runtime.records.runs()
            assert block["elements"][0]["positive_button"]["value"] == f"up:{run.id}"

            await click(fake, "U1", answer, positive=True, told=1)
            await click(fake, "U1", answer, positive=True, told=1)  # the same again
            await click(fake, "U2", answer, positive=False, told=1)
            await click(fake, "U1", answer, positive=False, told=2)  # changed their mind
            votes = await s.runtime.kept.feedback.votes(run_id=run.id)
            assert [(v.user, v.value) for v in votes] == [("U2", "down"), ("U1", "down")]
            assert all(v.message == answer["ts"] and v.place == C and v.thread_id == run.thread_id
                       for v in votes)
            assert [e["text"] for e in fake.ephemerals(C) if e["user"] == "U1"] == [
                "Thanks, noted: 👍 this answer helped.",
                "Thanks, noted: 👎 this answer did not help."]

            # Someone the channel does not serve: refused, nothing recorded.
            await click(fake, "U9", answer, positive=True, told=1)
            assert "may not rate answers" in fake.ephemerals(C)[-1]["text"]
            assert len(await s.runtime.kept.feedback.votes()) == 2
        # Kept across a restart: the same click again changes nothing.
        async with running(fake, tmp_path / "m.db", provider=provider) as s:
            await click(fake, "U2", answer, positive=False, told=1)
            assert len(await s.runtime.kept.feedback.votes(run_id=run.id)) == 2


async def test_posted_answers_carry_the_buttons_on_their_last_part_only(
        tmp_path: Path) -> None:
    long = "\n\n".join(f"Paragraph {i}: " + "word " * 150 for i in range(8))  # > 3,900
    async with FakeSlack() as fake, running(fake, tmp_path / "m.db", stream="off",
                       provider=ScriptedProvider([{"text": long}])) as s:
        sent = fake.user_event(C, "U1", f"<@{BOT_USER}> tell me everything", mention=True)
        await fake.acked(await fake.socket_event(sent))
        await s.runtime.idle()
        parts = bot_messages(fake)
        assert len(parts) > 1 and not fake.calls("chat.startStream")
        assert [bool(buttons(m)) for m in parts] == [False] * (len(parts) - 1) + [True]
        await click(fake, "U1", parts[-1], positive=True, told=1)
        (vote,) = await s.runtime.kept.feedback.votes()
        assert (vote.user, vote.value, vote.message) == ("U1", "up", parts[-1]["ts"])


async def test_no_buttons_without_an_answer_and_no_vote_on_a_forged_button(
        tmp_path: Path) -> None:
    async with FakeSlack() as fake:
        async with running(fake, tmp_path / "m.db", stream="off",
                           provider=EchoProvider()) as s:
            sent = fake.user_event(C, "U1", f"<@{BOT_USER}> hello", mention=True)
            await fake.acked(await fake.socket_event(sent))
            await s.runtime.idle()
            (answer,) = bot_messages(fake)
            assert buttons(answer)
            # A run of the terminal (not Slack's): a button naming it votes nothing.
            other = await s.runtime.send("cli-thread", "hi")
            forged = block_actions_payload("U1", C, answer["ts"], "maiden_feedback",
                                           f"up:{other.id}", message=answer)
            await fake.acked(await fake.socket_interactive(forged))
            await fake.until(lambda: len(fake.ephemerals(C)) == 1, what="a refusal")
            assert "does not belong to this message" in fake.ephemerals(C)[0]["text"]
            forged = block_actions_payload("U1", C, answer["ts"], "maiden_feedback",
                                           "up:0123456789abcdef", message=answer)
            await fake.acked(await fake.socket_interactive(forged))
            await fake.until(lambda: len(fake.ephemerals(C)) == 2, what="a refusal")
            assert "does not belong to this message" in fake.ephemerals(C)[1]["text"]
            assert await s.runtime.kept.feedback.votes() == []
        # A failed run's notice carries no buttons.
        async with running(fake, tmp_path / "m.db", stream="off",
                           provider=ScriptedProvider([])) as s:
            sent = fake.user_event(C, "U1", f"<@{BOT_USER}> again", mention=True)
            await fake.acked(await fake.socket_event(sent))
            await s.runtime.idle()
            notice = bot_messages(fake)[-1]
            assert notice["text"].startswith("Sorry") and not buttons(notice)


async def test_an_edited_answer_gets_the_buttons_in_its_last_edit(tmp_path: Path) -> None:
    provider = ScriptedProvider([{"text": "All green.", "chunks": 3}])
    async with FakeSlack() as fake:
        fake.api.streams.refuse("not_allowed")  # Slack will not stream here: post and edit
        async with running(fake, tmp_path / "m.db", provider=provider) as s:
            sent = fake.user_event(C, "U1", f"<@{BOT_USER}> status?", mention=True)
            await fake.acked(await fake.socket_event(sent))
            await s.runtime.idle()
            (answer,) = bot_messages(fake)
            assert answer["text"] == "All green." and fake.calls("chat.update")
            (run,) = await s.runtime.records.runs()
            (block,) = buttons(answer)
            assert block["elements"][0]["negative_button"]["value"] == f"down:{run.id}"


async def test_a_vote_lost_with_nobody_told_is_not_acknowledged(tmp_path: Path) -> None:
    """chaos seed 10808 (PostgreSQL cut, Slack answering 503 at once): the store could not
    take a click's vote and the line asking to click again could not be posted, yet the
    click was acknowledged, so the person believed it counted. Now such a click is not
    acknowledged (Slack shows them it failed); told, or once there is room, it counts."""
    VotesUnwritten.room = False
    async with FakeSlack() as fake, running(fake, tmp_path / "m.db",
                                            provider=ScriptedProvider([{"text": "All green."}]),
                                            store_class=VotesUnwritten) as s:
        sent = fake.user_event(C, "U1", f"<@{BOT_USER}> status?", mention=True)
        await fake.acked(await fake.socket_event(sent))
        await s.runtime.idle()
        (answer,) = bot_messages(fake)
        fake.fail("chat.postEphemeral", error="fatal_error")
        lost = await fake.socket_interactive(feedback_click("U1", C, answer, positive=True))
        await fake.until(lambda: bool(fake.calls("chat.postEphemeral")), what="the line tried")
        with pytest.raises(TimeoutError):  # a bounded wait for an ack that must not come
            await fake.acked(lost, timeout=1)

        await click(fake, "U1", answer, positive=True, told=1)  # told to click again: acked
        assert fake.ephemerals(C)[-1]["text"] == UNRECORDED

        # Any vote not counted, and not said (seed 11010: a click before the answer's id was
        # recorded, "try again" refused by Slack): here, a button naming another run.
        other = await s.runtime.send("cli-thread", "hi")
        fake.fail("chat.postEphemeral", error="fatal_error")
        forged = await fake.socket_interactive(block_actions_payload(
            "U1", C, answer["ts"], "maiden_feedback", f"up:{other.id}", message=answer))
        await fake.until(lambda: len(fake.calls("chat.postEphemeral")) == 3,
                         what="the refusal tried")
        with pytest.raises(TimeoutError):
            await fake.acked(forged, timeout=1)
        VotesUnwritten.room = True
        await click(fake, "U1", answer, positive=True, told=2)
        assert [v.value for v in await s.runtime.kept.feedback.votes()] == ["up"]
