"""People's 👍 / 👎 on a run's reply (runtime/serving/feedback.py, ``Runtime.feedback``):
one vote per person per run, a change of mind replacing it, the same click kept with its
first time, and every vote a button cannot honestly make refused."""

from __future__ import annotations

from typing import Any

import pytest

from runtime import Origin, RunError, tool

SLACK = Origin(channel="slack", target={"channel": "C1"}, user="U1")


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@tool(requires_approval=True)
def deploy() -> str:
    """Deploy."""
    return "done"


async def test_one_vote_per_person_per_run(make_runtime: Any) -> None:
    clock = Clock(1000.0)
    async with make_runtime([{"text": "hello"}], clock=clock) as (rt, _):
        run = await rt.send("t", "hi", origin=SLACK)
        vote, changed = await rt.kept.feedback.vote(run.id, "up", user="U1", channel="slack",
                                               place="C1", message="1.2")
        assert changed and (vote.value, vote.at, vote.thread_id) == ("up", 1000.0, "t")
        clock.now = 1010.0
        again, changed = await rt.kept.feedback.vote(run.id, "up", user="U1", channel="slack")
        assert not changed and again.at == 1000.0  # the same click: kept as it was
        clock.now = 1020.0
        turned, changed = await rt.kept.feedback.vote(run.id, "down", user="U1", channel="slack")
        assert changed and (turned.value, turned.at) == ("down", 1020.0)
        await rt.kept.feedback.vote(run.id, "up", user="U2", channel="slack")
        votes = await rt.kept.feedback.votes(run_id=run.id)
        assert sorted((v.user, v.value) for v in votes) == [("U1", "down"), ("U2", "up")]
        assert [v.user for v in await rt.kept.feedback.votes(since=1015.0)] == ["U1", "U2"]
        assert len(await rt.kept.feedback.votes(limit=1)) == 1


@pytest.mark.parametrize(("value", "user", "channel", "says"), [
    ("sideways", "U1", "slack", "a vote is up or down, not 'sideways'"),
    ("up", "", "slack", "a vote needs the person who gave it"),
    ("up", "U1", "discord", "did not answer in discord"),
])
async def test_a_vote_a_button_cannot_make_is_refused(
        make_runtime: Any, value: Any, user: str, channel: str, says: str) -> None:
    async with make_runtime([{"text": "hello"}]) as (rt, _):
        run = await rt.send("t", "hi", origin=SLACK)
        with pytest.raises(RunError, match=says) as refused:
            await rt.kept.feedback.vote(run.id, value, user=user, channel=channel)
        assert refused.value.reason == "vote_refused"
        assert await rt.kept.feedback.votes(run_id=run.id) == []


async def test_a_run_unknown_or_without_an_answer_takes_no_vote(make_runtime: Any) -> None:
    async with make_runtime([{"tool_calls": [{"name": "deploy"}]}], [deploy]) as (rt, _):
        with pytest.raises(RunError, match="no run nope"):
            await rt.kept.feedback.vote("nope", "up", user="U1", channel="slack")
        paused = await rt.send("t", "ship", origin=SLACK)
        with pytest.raises(RunError, match="has no answer to vote on \\(it is "
                                           "awaiting_approval\\)"):
            await rt.kept.feedback.vote(paused.id, "up", user="U1", channel="slack")
