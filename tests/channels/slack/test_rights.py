"""Who may talk, approve and stop in Slack, through the real bolt app and a fake Slack:
rules name a place and optionally users, and both must match."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from runtime import tool
from tests.channels.slack.test_channel import C, D, Slack, running
from tests.fakes.slack import BOT_USER, FakeSlack, block_actions_payload

OPS = "C0OPS000001"


@pytest.fixture
async def fake() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as started:
        yield started


async def mention(fake: FakeSlack, s: Slack, channel: str, user: str, text: str) -> None:
    await fake.acked(await fake.socket_event(
        fake.user_event(channel, user, f"<@{BOT_USER}> {text}", mention=True)))
    await s.runtime.idle()


async def test_an_outsider_in_an_allowed_channel_is_refused(fake: FakeSlack,
                                                            tmp_path: Path) -> None:
    """allow_users and allow_channels together: a listed user in a listed channel, not
    anyone in the channel (the old users-OR-places let U9 in)."""
    async with running(fake, tmp_path / "m.db", allow_users=["U1"],
                       allow_channels=[C]) as s:
        await mention(fake, s, C, "U9", "let me in")
        assert await s.runtime.records.runs() == [] and s.replies() == []
        (notice,) = fake.ephemerals(C)
        assert notice["user"] == "U9" and "may not talk" in notice["text"]

        await mention(fake, s, OPS, "U1", "and here?")  # listed, but not a listed channel
        assert await s.runtime.records.runs() == [] and s.replies(OPS) == []

        await mention(fake, s, C, "U1", "hello")
        (run,) = await s.runtime.records.runs()
        assert run.reply == "echo: hello" and s.replies()[-1]["text"] == "echo: hello"
        # The rights the channel's rules grant there, on the run (what memories read).
        assert run.origin.rights == ("talk", "approve", "operate")


@pytest.mark.parametrize(("allow_dms", "served"), [(True, True), (False, False)])
async def test_a_dm_from_a_listed_user(fake: FakeSlack, tmp_path: Path, allow_dms: bool,
                                       served: bool) -> None:
    """Listing channels keeps the listed users' DMs, unless allow_dms = false."""
    async with running(fake, tmp_path / "m.db", allow_users=["U1"], allow_channels=[C],
                       allow_dms=allow_dms) as s:
        await fake.acked(await fake.socket_event(
            fake.user_event(D, "U1", "just us", channel_type="im")))
        await s.runtime.idle()
        replies = [r["text"] for r in s.replies(D)]
        assert replies == (["echo: just us"] if served else [])
        runs = await s.runtime.records.runs()
        assert len(runs) == (1 if served else 0)
        assert all(r.origin.private and r.origin.direct for r in runs)


RULES = [
    {"place": C, "rights": ["talk"]},
    {"place": C, "users": ["U2"], "rights": ["approve", "operate"]},
]


async def test_only_a_holder_of_approve_decides(fake: FakeSlack, tmp_path: Path) -> None:
    """No ``approvers`` anywhere: the channel's own rule is what refuses U1's click."""
    async with running(fake, tmp_path / "m.db", allow_users=[], rules=RULES) as s:
        await mention(fake, s, C, "U1", '/tool deploy {"env": "prod"}')
        (prompt,) = s.replies()
        approve = prompt["blocks"][1]["elements"][0]
        (run,) = await s.runtime.records.pending_approvals(channel="slack")
        for user in ("U1", "U2"):
            click = block_actions_payload(user, C, prompt["ts"], approve["action_id"],
                                          approve["value"], message=prompt)
            await fake.acked(await fake.socket_interactive(click))
            if user == "U1":
                assert (await s.runtime.records.get_run(run.id)).state == "awaiting_approval"
                (refusal,) = fake.ephemerals(C)
                assert refusal["user"] == "U1" and "may not decide" in refusal["text"]
        done = await s.runtime.wait(run.id)
        assert done.state == "completed" and [d.by for d in done.decisions] == ["U2"]


async def test_stop_needs_operate(fake: FakeSlack, tmp_path: Path) -> None:
    started = asyncio.Event()

    @tool
    async def wait_forever() -> str:
        """Never ends."""
        started.set()
        await asyncio.Event().wait()
        return "never"

    async with running(fake, tmp_path / "m.db", tools=(wait_forever,), allow_users=[],
                       rules=RULES) as s:
        sent = fake.user_event(C, "U1", f"<@{BOT_USER}> /tool wait_forever", mention=True)
        await fake.acked(await fake.socket_event(sent))
        await asyncio.wait_for(started.wait(), 10)
        root = sent["event"]["ts"]
        await fake.acked(await fake.socket_event(fake.user_event(C, "U1", "stop",
                                                                 thread_ts=root)))
        (refusal,) = fake.ephemerals(C)
        assert refusal["user"] == "U1" and "may not stop runs" in refusal["text"]
        (run,) = await s.runtime.records.runs()
        assert not (await s.runtime.records.get_run(run.id)).terminal  # still going

        await fake.acked(await fake.socket_event(fake.user_event(C, "U2", "stop",
                                                                 thread_ts=root)))
        ended = await s.runtime.wait(run.id)
        assert ended.state == "cancelled" and ended.reason == "cancelled by U2"
