"""A streamed reply across kill -9 (issue 26): at every point of a stream's life, the
driver is killed, restarted, and the run ends with exactly one message showing the final
answer, not streaming, recorded as the reply's; the tool's effect happens as often as
in an uninterrupted run. On both stores.

Points: tests/crash/streams.py (``STREAM_KILL_POINTS``). The channel is the drill's
file-backed one with its streamer (the platform outlives the driver, as Slack does).
"""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.crash.driver import CALLS_FILE, CHANNEL_FILE, STREAMS_FILE, read_lines
from tests.crash.outcome import run_driver
from tests.crash.streams import STREAM_KILL_POINTS, STREAM_SCRIPT, read_streams

pytestmark = pytest.mark.xdist_group("crash_streams")

ANSWER = str(STREAM_SCRIPT[-1]["text"])
WHOLE = str(STREAM_SCRIPT[0]["text"]) + ANSWER


def _driver(root: Path, store: str, *args: str) -> subprocess.CompletedProcess[str]:
    return run_driver(root, store, "--stream", *args)


def _visible(root: Path) -> list[dict[str, Any]]:
    """What a person sees in the channel: every streamed message, then every plain post."""
    streamed = [{"id": i, **m} for i, m in read_streams(root / STREAMS_FILE).items()]
    return streamed + [{"id": m["id"], "text": m["text"], "streaming": False,
                        "feedback": m.get("feedback")} for m in read_lines(root / CHANNEL_FILE)]


def _reply(summary: dict[str, Any]) -> dict[str, Any]:
    (reply,) = [d for d in summary["deliveries"] if d["kind"] == "reply"]
    assert isinstance(reply, dict)
    return reply


def test_an_uninterrupted_stream_is_one_message_with_all_it_said(tmp_path: Path) -> None:
    done = _driver(tmp_path, "sqlite", "--send", "t", "go")
    assert done.returncode == 0, done.stderr[-2000:]
    (message,) = _visible(tmp_path)
    assert message["text"] == WHOLE and not message["streaming"]
    assert _reply(json.loads(done.stdout))["remote_id"] == message["id"]
    assert len(read_lines(tmp_path / CALLS_FILE)) == 1


@pytest.mark.parametrize("store", ["sqlite", "files"])
@pytest.mark.parametrize("point", STREAM_KILL_POINTS)
def test_a_stream_killed_anywhere_ends_as_one_message(
        tmp_path: Path, point: str, store: str) -> None:
    killed = _driver(tmp_path, store, "--send", "t", "go", "--kill-at", point)
    assert killed.returncode == -signal.SIGKILL, (point, killed.stderr[-2000:])
    recovered = _driver(tmp_path, store, "--recover")
    assert recovered.returncode == 0, recovered.stderr[-2000:]
    summary = json.loads(recovered.stdout)
    (run,) = summary["runs"]
    assert run["state"] == "completed" and run["reply"] == ANSWER
    (message,) = _visible(tmp_path)  # one message, never a second reply
    assert not message["streaming"]
    assert message["feedback"] == run["id"]  # it ends with the 👍 / 👎 of its run
    # Cut off before its end was recorded: the final answer replaces what it showed.
    assert message["text"] in (ANSWER, WHOLE)
    if point in ("before_stream_finished", "after_stream_finished"):
        assert message["text"] == WHOLE  # finished before the kill: left as it was
    assert _reply(summary)["remote_id"] == message["id"]
    streams = [d for d in summary["deliveries"] if d["kind"] == "stream"]
    assert all(s["state"] == "finished" for s in streams)
    # read_only: re-run after a crash that came before its result was recorded.
    assert 1 <= len(read_lines(tmp_path / CALLS_FILE)) <= 2
