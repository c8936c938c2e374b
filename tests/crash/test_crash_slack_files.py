"""A Slack file being downloaded when `maiden run` is killed (or stopped), restarted while
Slack is still out of reach: the file is fetched again once Slack can be reached, never
refused because Slack was down as recovery ran.

Real `maiden run` processes against the fake Slack. The fake holds a download half-way
(``SharedFiles.hold``); the process is killed there: in the first file's download
(``in_fetch``), or in the second's, the first one's blob stored (``after_blob_stored``); or
stopped there with SIGTERM. The restart finds Slack down (a port nothing listens on):
recovery takes the run up, its download tried again in the background, the channel opens
and keeps trying, and only then does the fake come up where it was. The message is
answered once, the model having received each file once (the echo model says what it
received), and each file is stored once.

A file a tool made, uploaded into the thread (the crash driver with ``--slack
--make-file``), killed around its upload's steps with the fake Slack's clock 30 s behind
the host's: after the restart the file is in the thread once. The upload's id is recorded
before it is completed and reconciled by that id (``files.info``), never by comparing
Slack's timestamps with the host's clock.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from runtime import SQLiteStore, UserMessage
from tests.crash.files import MADE
from tests.crash.test_crash_slack import drive, finished, spawn
from tests.fakes.site import free_port
from tests.fakes.slack import BOT_USER, FakeSlack, Workspace
from tests.processes.test_channels_down_at_boot import maiden_run, stopped
from tests.samples import png

ROOT = Path(__file__).resolve().parents[2]
C = "C0GENERAL01"
SHOT = png(320, 200)
DATA = b"city,rain_mm\n" + b"".join(f"town{n},{n * 3}\n".encode() for n in range(400))


def agent_toml(home: Path, base_url: str) -> None:
    (home / "agent.toml").write_text(
        (ROOT / "agent.toml").read_text() + "\n[http]\nport = 0\n\n[channels.slack]\n"
        f'api_url = "{base_url}/api/"\nfile_hosts = ["{base_url}"]\nallow_users = ["U1"]\n'
        'reconnect_max_s = 1\nstream = "off"\n')


@pytest.mark.parametrize(("held", "stop"), [
    (0, signal.SIGKILL),  # in_fetch: half of the first file read, nothing stored
    (1, signal.SIGKILL),  # after_blob_stored: the first file stored, the second half-read
    (0, signal.SIGTERM),  # stopped mid-download: the run is left queued, as it was
])
async def test_a_file_cut_off_by_a_restart_is_fetched_when_slack_is_back(
        home: Path, held: int, stop: signal.Signals) -> None:
    port, workspace = free_port(), Workspace()
    fake = FakeSlack(workspace, port=port)
    agent_toml(home, f"http://127.0.0.1:{port}")
    environ = {**os.environ, "PYTHONPATH": str(ROOT), "SLACK_BOT_TOKEN": workspace.bot_token,
               "SLACK_APP_TOKEN": workspace.app_token}
    async with asyncio.timeout(120):
        async with fake, maiden_run(home, environ) as (proc, out, err):
            await out.wait_for("Ctrl-C stops.")
            await fake.wait_connected()
            sent = fake.share_file(C, "U1", f"<@{BOT_USER}> what do these say?", [
                ("shot.png", SHOT, "image/png"), ("data.csv", DATA, "text/csv")])
            under_way = fake.shared.hold(sent["event"]["files"][held]["id"])
            await fake.acked(await fake.socket_event(sent), timeout=30)
            await under_way.wait()
            proc.send_signal(stop)
            code = await proc.wait()
            assert code == (0 if stop == signal.SIGTERM else -signal.SIGKILL), err.text()
        assert not [m for m in fake.messages(C) if m.get("user") == BOT_USER]

        # Slack is down at the restart: recovery takes the run up (the runtime is built
        # with Slack's fetcher), its download tried again while the channel keeps trying;
        # Ready does not wait for it.
        async with maiden_run(home, environ) as (proc, out, err):
            await out.wait_for("Ctrl-C stops.")
            assert "slack       connecting: cannot reach" in out.text()
            assert "recovering  1 of 1 unfinished run(s) still, in the background" \
                in out.text()  # neither refused nor waited for
            async with fake:
                await fake.wait_messages(C, 2, timeout=60)  # the person's, and the answer
                await stopped(proc, err)
    replies = [m["text"] for m in fake.messages(C) if m.get("user") == BOT_USER]
    assert len(replies) == 1, replies
    lines = replies[0].splitlines()
    assert lines[0] == "echo: what do these say?"
    assert lines[1].startswith("[received shot.png (image/png, 320x200, ")
    assert lines[2].startswith("[received data.csv (text/csv, ")
    assert len(lines) == 3
    assert "not running here" not in err.text() + out.text()
    async with SQLiteStore(home / "data" / "maiden.db") as store:
        (run,) = await store.list_runs()
        assert run.state.value == "completed"
        users = [e for e in await store.load_entries(run.thread_id)
                 if isinstance(e, UserMessage)]
        assert [[f.name for f in u.files] for u in users] == [["shot.png", "data.csv"]]
        assert sorted(b.size for b in await store.blobs()) == sorted([len(SHOT), len(DATA)])


SKEW_S = -30.0
"""The fake Slack's clock against the host's."""
UPLOAD_POINTS = [
    "mid_get_upload_url",      # by the fake: the ticket made, its answer never received
    "before_upload_recorded",  # the ticket and the bytes are Slack's, the id not stored
    "after_upload_recorded",   # the id stored, the upload not completed
    "after_upload_completed",  # shared in the thread, the delivery not recorded
]


@pytest.mark.parametrize("point", UPLOAD_POINTS)
async def test_a_file_uploaded_to_slack_is_in_the_thread_once_across_a_kill(
        tmp_path: Path, point: str) -> None:
    """Killed between the upload's steps, restarted: the file is shared into the thread
    once, the answer before it. An upload whose id was not recorded was never completed
    (so never shown) and is made anew; one whose id was recorded is completed, or found
    shared by that id, though every time Slack shows is 30 s before the records'."""
    (tmp_path / "traces").mkdir()
    async with FakeSlack() as fake:
        fake.store.skew_s = SKEW_S
        root = fake.post_as_user(C, "U1", "the report, please")
        args = ["--make-file", "--send", "slack:t", "report"]
        if point == "mid_get_upload_url":
            proc = await spawn(tmp_path, fake, root["ts"], *args)
            fake.after_call["files.getUploadURLExternal"] = \
                lambda n: os.kill(proc.pid, signal.SIGKILL)
            code, _ = await finished(proc)
            del fake.after_call["files.getUploadURLExternal"]
        else:
            code, _ = await drive(tmp_path, fake, root["ts"], *args, "--kill-at", point)
        assert code == -signal.SIGKILL
        code, out = await drive(tmp_path, fake, root["ts"], "--make-file", "--recover")
        assert code == 0
        summary: dict[str, Any] = json.loads(out)
    answer, shared = [m for m in fake.messages(C) if m.get("user") == BOT_USER]
    assert answer["text"] == "Here is the report."
    assert shared["thread_ts"] == root["ts"]
    (item,) = shared["files"]
    assert (item["title"], fake.uploads.uploaded[item["id"]]) == ("report.csv", MADE.data)
    assert list(fake.uploads.uploaded) == [item["id"]]  # completed once
    (record,) = [d for d in summary["deliveries"] if d["kind"] == "file"]
    assert record["remote_id"] == record["upload_id"] == item["id"]
    assert float(shared["ts"]) < record["created_at"] - 20  # Slack's clock is behind
    # A ticket whose id was not recorded is left to expire, and another one taken.
    anew = point in ("mid_get_upload_url", "before_upload_recorded")
    assert len(fake.calls("files.getUploadURLExternal")) == (2 if anew else 1)
    assert len(fake.calls("files.completeUploadExternal")) == 1
    assert len(fake.uploads.pending) == (1 if anew else 0)
