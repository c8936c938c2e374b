"""What people do while the gateway connection is away and the session is then RESUMEd: Discord
keeps the session's dispatches and replays them in order on RESUME
(https://discord.com/developers/docs/events/gateway#resuming), interactions included. A
RESUME is not a new session: nothing is read back (that is for a session identified anew,
catchup.py), and what is replayed is answered once, as it would have been live; an
interaction replayed after its 3 s can no longer be answered (Discord refuses the callback,
10062, https://discord.com/developers/docs/interactions/receiving-and-responding#responding-to-an-interaction)
and is let go. Through the real discord.py client against the fake Discord."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.channels.discord.test_channel import Discord, running, settle
from tests.fakes.discord import BOT_ID, GENERAL_ID, HUMAN_ID, FakeDiscord

STATUS = [{"name": "status", "type": 1, "options": []}]


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as started:
        yield started


def bot_texts(fake: FakeDiscord) -> list[str]:
    return [str(m["content"]) for m in fake.messages(GENERAL_ID)
            if str(m["author"]["id"]) == str(BOT_ID)]


def answers_to(fake: FakeDiscord, interaction: dict[str, Any]) -> list[Any]:
    return [r for r in fake.interaction_responses() if r.interaction_id == interaction["id"]]


async def refused(fake: FakeDiscord, interaction: dict[str, Any]) -> None:
    """Until the bot tried to answer ``interaction`` and Discord refused it (10062)."""
    path = f"/interactions/{interaction['id']}/"
    await fake.until(lambda: any(c.path.startswith(path) and c.status == 404
                                 for c in fake.calls()), what="a refused callback")


async def asked_and_answered(fake: FakeDiscord, d: Discord) -> tuple[dict[str, Any], Any]:
    """A mention answered (with its 👍 / 👎) while the connection is up: the message, its
    answer as stored."""
    asked = await fake.user_message(GENERAL_ID, HUMAN_ID, f"<@{BOT_ID}> before",
                                    mentions=[BOT_ID])
    await settle(d, 1)
    await fake.until(lambda: bot_texts(fake) == ["echo: before"], what="the first answer")
    (answer,) = [m for m in fake.messages(GENERAL_ID) if str(m["author"]["id"]) == str(BOT_ID)]
    return asked, answer


async def away(fake: FakeDiscord, code: int | None) -> None:
    """The live connection goes (op 7, or closed with a resumable ``code``); the client's
    RESUME is held until ``fake.gateway.release_resumes()``."""
    fake.gateway.hold_resumes()
    if code is None:
        await fake.reconnect()
    else:
        await fake.close_gateway(code)
    assert fake.gateway.held() is not None


@pytest.mark.parametrize("code", [None, 4000], ids=["op7", "close4000"])
async def test_what_came_while_away_is_replayed_on_resume_and_answered_once(
    fake: FakeDiscord, tmp_path: Path, code: int | None
) -> None:
    async with running(fake, tmp_path / "m.db", stream="off") as d:
        _, answer = await asked_and_answered(fake, d)
        (first,) = await d.runtime.records.runs()
        read_back = d.channel.inbound.read_back
        await away(fake, code)
        # While no connection holds the session: a mention, a 👍 on the first answer and
        # /maiden status, each dispatched to the session (held, not sent).
        asked = await fake.user_message(GENERAL_ID, HUMAN_ID, f"<@{BOT_ID}> while away",
                                        mentions=[BOT_ID])
        vote = await fake.click(answer, f"maiden:f:up:{first.id}")
        status = await fake.command("maiden", STATUS)
        assert fake.interaction_responses() == []
        fake.gateway.release_resumes()
        await fake.resumed()
        await fake.until(lambda: bool(fake.shown(vote)) and bool(fake.shown(status)),
                         what="both interactions answered", timeout=10)
        await settle(d, 2)
        assert len(fake.gateway.identifies) == 1  # resumed, not a new session
        assert d.channel.inbound.read_back == read_back  # nothing read back on a RESUME
        assert bot_texts(fake) == ["echo: before", "echo: while away"]
        assert fake.messages(GENERAL_ID)[-1]["message_reference"]["message_id"] == asked["id"]
        assert [r.idempotency_key for r in await d.runtime.records.runs()].count(
            f"discord:{asked['id']}") == 1
        assert [r.type for r in answers_to(fake, vote) + answers_to(fake, status)] == [5, 5]
        (voted,) = fake.shown(vote)
        assert voted["flags"] == 64 and "👍" in voted["content"]
        (told,) = fake.shown(status)
        assert told["flags"] == 64  # the status runs once acknowledged: the mention's run
        assert told["content"] == "Nothing is running here." \
            or "while away" in told["content"]  # may have started by then
        (kept,) = await d.runtime.kept.feedback.votes()
        assert (kept.run_id, kept.value) == (first.id, "up")


async def test_an_interaction_replayed_after_its_deadline_is_let_go(tmp_path: Path) -> None:
    """Replayed past Discord's 3 s (here 0.3 s), its callback is refused: nothing is answered
    or recorded for it, nothing breaks, and what comes next is answered."""
    async with FakeDiscord(interaction_deadline=0.3) as fake, \
            running(fake, tmp_path / "m.db", stream="off") as d:
        _, answer = await asked_and_answered(fake, d)
        (first,) = await d.runtime.records.runs()
        await away(fake, None)
        asked = await fake.user_message(GENERAL_ID, HUMAN_ID, f"<@{BOT_ID}> while away",
                                        mentions=[BOT_ID])
        late_vote = await fake.click(answer, f"maiden:f:down:{first.id}")
        late_status = await fake.command("maiden", STATUS)
        await asyncio.sleep(0.5)  # past the interactions' deadline while held
        fake.gateway.release_resumes()
        await fake.resumed()
        await settle(d, 2)
        await refused(fake, late_vote)
        await refused(fake, late_status)
        assert bot_texts(fake) == ["echo: before", "echo: while away"]
        assert fake.messages(GENERAL_ID)[-1]["message_reference"]["message_id"] == asked["id"]
        assert answers_to(fake, late_vote) == answers_to(fake, late_status) == []
        status = await fake.command("maiden", STATUS)  # live again: answered
        await fake.until(lambda: bool(answers_to(fake, status)), what="the next answer")
        assert d.channel.status().startswith("connected as ")


async def test_a_click_replayed_after_its_deadline_changes_nothing(tmp_path: Path) -> None:
    """Acknowledged before it acts: Discord refuses the late acknowledgement (and tells the
    person it failed), so the vote is not recorded."""
    async with FakeDiscord(interaction_deadline=0.3) as fake, \
            running(fake, tmp_path / "m.db", stream="off") as d:
        _, answer = await asked_and_answered(fake, d)
        (first,) = await d.runtime.records.runs()
        await away(fake, None)
        late_vote = await fake.click(answer, f"maiden:f:down:{first.id}")
        await asyncio.sleep(0.5)  # past the interaction's deadline while held
        fake.gateway.release_resumes()
        await fake.resumed()
        await refused(fake, late_vote)
        assert answers_to(fake, late_vote) == []
        assert await d.runtime.kept.feedback.votes() == []  # the person was told it failed


async def test_an_approval_replayed_after_its_deadline_decides_nothing(tmp_path: Path) -> None:
    """The risky one: an Approve replayed past its 3 s is not acknowledged, so the call is
    not decided (the person, told "This interaction failed", may still Deny), and the
    prompt keeps its buttons; a click in time then decides, and the prompt says so."""
    async with FakeDiscord(interaction_deadline=0.3) as fake, \
            running(fake, tmp_path / "m.db", stream="off") as d:
        await fake.user_message(GENERAL_ID, HUMAN_ID, f'<@{BOT_ID}> /tool deploy {{"env": "qa"}}',
                                mentions=[BOT_ID])
        (prompt,) = (await fake.wait_messages(GENERAL_ID, 2))[1:]
        await settle(d, 1)
        approve, deny = (b["custom_id"] for b in prompt["components"][0]["components"])
        await away(fake, None)
        late = await fake.click(prompt, approve)
        await asyncio.sleep(0.5)  # past the interaction's deadline while held
        fake.gateway.release_resumes()
        await fake.resumed()
        await refused(fake, late)
        (run,) = await d.runtime.records.pending_approvals()
        assert run.decisions == () and fake.shown(late) == []
        assert fake.messages(GENERAL_ID)[1]["components"] == prompt["components"]
        denied = await fake.click(prompt, deny)
        await fake.until(lambda: bool(fake.shown(denied)), what="the prompt edited")
        (shown,) = fake.shown(denied)
        assert shown["content"] == f"Denied by <@{HUMAN_ID}>: `deploy`"
        assert shown["components"] == []
        done = await d.runtime.wait(run.id)
        assert [x.approve for x in done.decisions] == [False]


async def test_a_resume_from_an_earlier_seq_makes_no_second_run_or_answer(
    fake: FakeDiscord, tmp_path: Path
) -> None:
    """Discord may send again on a RESUME what the client had handled (its ``seq`` behind):
    the message, the vote and the command were answered once, and are not again."""
    async with running(fake, tmp_path / "m.db", stream="off") as d:
        await fake.until(lambda: fake.gateway.current is not None, what="a session")
        assert fake.gateway.current is not None
        start = fake.gateway.current.seq
        asked, answer = await asked_and_answered(fake, d)
        (first,) = await d.runtime.records.runs()
        vote = await fake.click(answer, f"maiden:f:up:{first.id}")
        status = await fake.command("maiden", STATUS)
        await fake.until(lambda: bool(fake.shown(vote)) and bool(fake.shown(status)),
                         what="two answers")
        await fake.reconnect(replay_from=start)  # all of it again
        await fake.resumed()
        again = await fake.user_message(GENERAL_ID, HUMAN_ID, f"<@{BOT_ID}> after",
                                        mentions=[BOT_ID])
        await settle(d, 2)
        await fake.until(lambda: len(bot_texts(fake)) == 2, what="the next answer")
        assert bot_texts(fake) == ["echo: before", "echo: after"]
        assert [r.idempotency_key for r in await d.runtime.records.runs()] == [
            f"discord:{asked['id']}", f"discord:{again['id']}"]
        assert len(answers_to(fake, vote)) == len(answers_to(fake, status)) == 1
        assert len(await d.runtime.kept.feedback.votes()) == 1
        assert len(fake.gateway.identifies) == 1
