"""Discord as the origin in the crash drill: kill -9 around the send, restart, one reply.

The fake Discord runs in the test's process and outlives the driver processes. After a
kill between the create-message request succeeding and its id being recorded, the
restart finds the message in the channel's history (the bot's reply to the same message,
with the same text) and sends nothing more.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.crash import launch
from tests.crash.driver import EFFECTS
from tests.crash.launch import Driver
from tests.crash.streams import STREAM_KILL_POINTS, STREAM_SCRIPT
from tests.fakes.discord import BOT_ID, GENERAL_ID, HUMAN_ID, FakeDiscord

STREAM_ANSWER = str(STREAM_SCRIPT[-1]["text"])
STREAM_WHOLE = str(STREAM_SCRIPT[0]["text"]) + STREAM_ANSWER


async def spawn(root: Path, fake: FakeDiscord, asked: dict[str, Any], *args: str
                ) -> Driver:
    guild = str(fake.world.guild_of(GENERAL_ID))
    return launch.start("--db", str(root / "maiden.db"), "--effect", EFFECTS[0],
                        "--workdir", str(root / "traces"), "--discord", fake.api_url,
                        fake.token, str(GENERAL_ID), str(asked["id"]), guild, *args)


async def finished(proc: Driver) -> tuple[int, str]:
    done = await proc.finished()
    assert done.returncode in (0, -signal.SIGKILL), done.stderr[-2000:]
    return done.returncode, done.stdout


async def drive(root: Path, fake: FakeDiscord, asked: dict[str, Any], *args: str
                ) -> tuple[int, str]:
    return await finished(await spawn(root, fake, asked, *args))


@pytest.mark.parametrize("point", ["after_final_answer", "before_delivery_recorded",
                                   "after_delivery_recorded"])
async def test_a_discord_reply_is_sent_once_across_a_kill(tmp_path: Path, point: str) -> None:
    (tmp_path / "traces").mkdir()
    # A nonce is deduplicated for minutes; with no window the restart must rely on history.
    async with FakeDiscord(nonce_window=0.0) as fake:
        asked = fake.post_as_user(GENERAL_ID, HUMAN_ID, "please do the thing")
        code, _ = await drive(tmp_path, fake, asked, "--send", "discord:t", "go",
                              "--kill-at", point)
        assert code == -signal.SIGKILL
        code, out = await drive(tmp_path, fake, asked, "--recover")
        assert code == 0
        summary: dict[str, Any] = json.loads(out)
        replies = [m for m in fake.messages(GENERAL_ID)
                   if str(m["author"]["id"]) == str(BOT_ID)]
        assert [m["content"] for m in replies] == ["done"], replies
        assert replies[0]["message_reference"]["message_id"] == str(asked["id"])
        (record,) = summary["deliveries"]
        assert record["remote_id"] == str(replies[0]["id"])
        assert fake.uncovered == set()  # recovery too kept to Discord's documented routes


EDIT = "PATCH /channels/{channel_id}/messages/{message_id}"


@pytest.mark.parametrize("point", [*(p for p in STREAM_KILL_POINTS if p != "mid_stream"),
                                   "mid_edit"])
async def test_a_streamed_discord_reply_is_one_message_across_a_kill(
        tmp_path: Path, point: str) -> None:
    """A reply posted and edited as it is written, killed at each point of the stream's
    life (``mid_edit``: by the fake, once the first edit has been carried out): after the
    restart one bot message answers the person, showing the final answer (found again
    when its id was not recorded), recorded as the reply."""
    (tmp_path / "traces").mkdir()
    async with FakeDiscord(nonce_window=0.0) as fake:
        asked = fake.post_as_user(GENERAL_ID, HUMAN_ID, "how did the deploy go?")
        args = ["--stream", "--send", "discord:t", "go"]
        if point == "mid_edit":
            proc = await spawn(tmp_path, fake, asked, *args)
            fake.router.after_call[EDIT] = \
                lambda n: os.kill(proc.pid, signal.SIGKILL) if n == 1 else None
            code, _ = await finished(proc)
            del fake.router.after_call[EDIT]
        else:
            code, _ = await drive(tmp_path, fake, asked, *args, "--kill-at", point)
        assert code == -signal.SIGKILL
        code, out = await drive(tmp_path, fake, asked, "--stream", "--recover")
        assert code == 0
        summary: dict[str, Any] = json.loads(out)
        (run,) = summary["runs"]
        assert run["state"] == "completed" and run["reply"] == STREAM_ANSWER
        (message,) = [m for m in fake.messages(GENERAL_ID)
                      if str(m["author"]["id"]) == str(BOT_ID)]
        assert message["content"] in (STREAM_ANSWER, STREAM_WHOLE)
        assert message["message_reference"]["message_id"] == str(asked["id"])
        (row,) = message["components"]  # it ends with the run's 👍 / 👎
        assert [b["custom_id"] for b in row["components"]] == [
            f"maiden:f:up:{run['id']}", f"maiden:f:down:{run['id']}"]
        (reply,) = [d for d in summary["deliveries"] if d["kind"] == "reply"]
        assert reply["remote_id"] == str(message["id"])
        assert all(d["state"] == "finished" for d in summary["deliveries"]
                   if d["kind"] == "stream")
        assert fake.uncovered == set()
