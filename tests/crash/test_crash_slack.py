"""Slack as the origin in the crash drill: kill -9 around the post, restart, one reply.

The fake Slack runs in the test's process and outlives the driver processes, as the
real Slack outlives maiden: after a kill between ``chat.postMessage`` succeeding and
its ``ts`` being recorded, the restart must find the message by its metadata key and
post nothing more.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.crash import launch
from tests.crash.driver import EFFECTS, SUMMARY_TEXT
from tests.crash.launch import Driver
from tests.crash.streams import STREAM_KILL_POINTS, STREAM_SCRIPT
from tests.fakes.slack import BOT_USER, FakeSlack

C = "C0GENERAL01"
DM = "D0PERSON001"
STREAM_ANSWER = str(STREAM_SCRIPT[-1]["text"])
STREAM_WHOLE = str(STREAM_SCRIPT[0]["text"]) + STREAM_ANSWER


async def spawn(root: Path, fake: FakeSlack, thread_ts: str, *args: str, where: str = C
                ) -> Driver:
    return launch.start("--db", str(root / "maiden.db"), "--effect", EFFECTS[0],
                        "--workdir", str(root / "traces"),
                        "--slack", fake.api_url, fake.bot_token, where, thread_ts, *args)


async def finished(proc: Driver) -> tuple[int, str]:
    done = await proc.finished()
    assert done.returncode in (0, -signal.SIGKILL), done.stderr[-2000:]
    return done.returncode, done.stdout


async def drive(root: Path, fake: FakeSlack, thread_ts: str, *args: str, where: str = C
                ) -> tuple[int, str]:
    return await finished(await spawn(root, fake, thread_ts, *args, where=where))


@pytest.mark.parametrize("point", ["after_final_answer", "before_delivery_recorded",
                                   "after_delivery_recorded"])
async def test_a_slack_reply_is_posted_once_across_a_kill(tmp_path: Path, point: str) -> None:
    (tmp_path / "traces").mkdir()
    async with FakeSlack() as fake:
        root = fake.post_as_user(C, "U1", "please do the thing")
        code, _ = await drive(tmp_path, fake, root["ts"], "--send", "slack:t", "go",
                              "--kill-at", point)
        assert code == -signal.SIGKILL
        code, out = await drive(tmp_path, fake, root["ts"], "--recover")
        assert code == 0
        summary: dict[str, Any] = json.loads(out)
        replies = [m for m in fake.messages(C) if m.get("user") == BOT_USER]
        assert [m["text"] for m in replies] == ["done"], replies
        assert replies[0]["thread_ts"] == root["ts"]
        (record,) = summary["deliveries"]
        assert record["remote_id"] == replies[0]["ts"]
        assert replies[0]["metadata"]["event_payload"]["key"] == record["key"]
        posts = fake.calls("chat.postMessage")
        # Killed before the post: one post. Killed after it: none again (reconciled).
        assert len(posts) == 1


@pytest.mark.parametrize(("point", "count"), [
    ("after_intent", 1), ("after_claim", 1),
    ("before_delivery_recorded", 1),  # the summary is posted, its message id not stored
    ("after_delivery_recorded", 1),   # stored, the call's result not yet
])
async def test_send_message_posts_once_across_a_kill(
        tmp_path: Path, point: str, count: int) -> None:
    """The built-in send_message, killed around its post: after the restart the summary is
    in #team once (reconciled by its key, never posted twice), the answer once."""
    (tmp_path / "traces").mkdir()
    team = "C0TEAM00001"
    async with FakeSlack() as fake:
        root = fake.post_as_user(C, "U1", "post the weekly summary to #team")
        code, _ = await drive(tmp_path, fake, root["ts"], "--send-message", team,
                              "--send", "slack:t", "go", "--kill-at", point,
                              "--kill-count", str(count))
        assert code == -signal.SIGKILL
        code, out = await drive(tmp_path, fake, root["ts"], "--send-message", team,
                                "--recover")
        assert code == 0
        summary: dict[str, Any] = json.loads(out)
        (run,) = summary["runs"]
        assert run["state"] == "completed" and run["reply"] == "done"
        posted = [m for m in fake.messages(team) if m.get("user") == BOT_USER]
        assert [m["text"] for m in posted] == [SUMMARY_TEXT]
        (result,) = [e for e in summary["threads"]["slack:t"] if e["kind"] == "tool_result"]
        assert result["content"] == {"sent": f"slack:{team}", "message_id": posted[0]["ts"]}
        replies = [m for m in fake.messages(C) if m.get("user") == BOT_USER]
        assert [m["text"] for m in replies] == ["done"]


@pytest.mark.parametrize("point", ["after_queued", "after_run_failed",
                                   "before_delivery_recorded", "after_delivery_recorded"])
async def test_the_too_long_notice_is_posted_once_across_a_kill(
        tmp_path: Path, point: str) -> None:
    """A message over [agent] max_message_chars: its run fails at once and the notice that
    names the limit goes through the outbox, so a kill anywhere posts it exactly once."""
    (tmp_path / "traces").mkdir()
    async with FakeSlack() as fake:
        root = fake.post_as_user(C, "U1", "x" * 50)
        limit = ("--max-message-chars", "20")
        code, _ = await drive(tmp_path, fake, root["ts"], "--send", "slack:t", "x" * 50,
                              "--key", f"slack:T:{C}:{root['ts']}", *limit, "--kill-at", point)
        assert code == -signal.SIGKILL
        code, out = await drive(tmp_path, fake, root["ts"], "--recover", *limit)
        assert code == 0
        summary: dict[str, Any] = json.loads(out)
        replies = [m for m in fake.messages(C) if m.get("user") == BOT_USER]
        assert [m["text"] for m in replies] == [
            "Your message is too long: it has 50 characters and the limit is 20. Please "
            "shorten it or send it in parts."], replies
        (run,) = summary["runs"]
        assert (run["state"], run["reason"]) == ("failed", "message_too_long")
        assert len(fake.calls("chat.postMessage")) == 1


SLACK_STREAM_POINTS = [p for p in STREAM_KILL_POINTS if p != "mid_stream"] + ["mid_append"]


@pytest.mark.parametrize("where", [C, DM])
@pytest.mark.parametrize("point", SLACK_STREAM_POINTS)
async def test_a_streamed_slack_reply_is_one_message_across_a_kill(
        tmp_path: Path, point: str, where: str) -> None:
    """Native streaming (chat.startStream / appendStream / stopStream) killed at each point
    of the stream's life (``mid_append``: by the fake Slack, once the first append has been
    carried out), in a channel (the stream names the person it goes to) and in a DM's
    thread: after the restart the thread holds one bot message, stopped, showing the final
    answer, and the reply is recorded as that message."""
    (tmp_path / "traces").mkdir()
    async with FakeSlack() as fake:
        root = fake.post_as_user(where, "U1", "how did the deploy go?")
        args = ["--stream", "--send", "slack:t", "go"]
        if point == "mid_append":
            proc = await spawn(tmp_path, fake, root["ts"], *args, where=where)
            fake.after_call["chat.appendStream"] = \
                lambda n: os.kill(proc.pid, signal.SIGKILL) if n == 1 else None
            code, _ = await finished(proc)
            del fake.after_call["chat.appendStream"]
        else:
            code, _ = await drive(tmp_path, fake, root["ts"], *args, "--kill-at", point,
                                  where=where)
        assert code == -signal.SIGKILL
        code, out = await drive(tmp_path, fake, root["ts"], "--stream", "--recover",
                                where=where)
        assert code == 0
        summary: dict[str, Any] = json.loads(out)
        (run,) = summary["runs"]
        assert run["state"] == "completed" and run["reply"] == STREAM_ANSWER
        (message,) = [m for m in fake.messages(where) if m.get("user") == BOT_USER]
        assert message["thread_ts"] == root["ts"]
        assert message["text"] in (STREAM_ANSWER, STREAM_WHOLE)
        assert fake.api.streams.streaming == set()  # nothing left streaming
        # It ends with the run's 👍 / 👎 (stopStream's blocks, or the edit that finished it).
        (feedback,) = [b for b in message["blocks"] if b["type"] == "context_actions"]
        assert feedback["elements"][0]["positive_button"]["value"] == f"up:{run['id']}"
        # Opened once (never again after the restart), or never and posted whole.
        opened = 0 if point == "after_stream_opening" else 1
        assert len(fake.calls("chat.startStream")) == opened
        assert len(fake.calls("chat.postMessage")) == 1 - opened
        (reply,) = [d for d in summary["deliveries"] if d["kind"] == "reply"]
        assert reply["remote_id"] == message["ts"]
        assert all(d["state"] == "finished" for d in summary["deliveries"]
                   if d["kind"] == "stream")
