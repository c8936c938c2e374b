"""A message with files, killed while they are fetched and stored (``FILE_KILL_POINTS``)
and at the points around them, both stores: after the restart the run goes on from where
it stopped: each file stored once by its content, the message in the thread once with
every file, the answer posted once — what an uninterrupted run ends with."""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.crash.driver import CHANNEL_FILE
from tests.crash.files import FETCHES_FILE, MADE, SHARED
from tests.crash.outcome import run_driver
from tests.samples import png

POINTS = ("after_queued", "in_fetch", "after_blob_stored", "after_user_entry",
          "after_final_answer")


def _driver(root: Path, store: str, *args: str) -> subprocess.CompletedProcess[str]:
    return run_driver(root, store, *args)


def _share(root: Path) -> list[str]:
    shared = root / SHARED
    shared.mkdir(parents=True)
    (shared / "shot.png").write_bytes(png(200, 100))
    (shared / "notes.txt").write_bytes(b"remember the milk\n" * 50)
    (shared / "copy.png").write_bytes(png(200, 100))  # the same bytes as shot.png
    return ["--file", "shot.png", "--file", "notes.txt", "--file", "copy.png"]


def _outcome(done: subprocess.CompletedProcess[str], root: Path) -> dict[str, Any]:
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    (run,) = summary["runs"]
    (entries,) = summary["threads"].values()
    users = [e for e in entries if e["kind"] == "user"]
    return {"state": run["state"],
            "user_entries": [[(f["name"], f["digest"], f["media_type"]) for f in e["files"]]
                             for e in users],
            "blobs": sorted((b["digest"], b["size"]) for b in summary["blobs"]),
            "posted": [d["text"] for d in summary["deliveries"] if d["remote_id"]],
            "sent": [line["text"] for line in _lines(root / CHANNEL_FILE)]}


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.parametrize("store", ["sqlite", "files"])
@pytest.mark.parametrize("point", POINTS)
def test_a_message_with_files_killed_mid_way(tmp_path: Path, point: str, store: str) -> None:
    clean, killed = tmp_path / "clean", tmp_path / "killed"
    expected = _outcome(_driver(clean, store, "--send", "t", "look", *_share(clean)), clean)
    assert expected["state"] == "completed" and len(expected["blobs"]) == 2

    files = _share(killed)
    crashed = _driver(killed, store, "--send", "t", "look", *files, "--kill-at", point)
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-2000:]
    assert _outcome(_driver(killed, store, "--recover"), killed) == expected
    assert len(expected["sent"]) == 1  # the answer, once
    fetched = [json.loads(line)["name"] for line in
               (killed / FETCHES_FILE).read_text().splitlines()]
    if point in ("after_user_entry", "after_final_answer"):
        assert fetched == ["shot.png", "notes.txt", "copy.png"]  # never fetched again


@pytest.mark.parametrize("store", ["sqlite", "files"])
@pytest.mark.parametrize("point", ["in_fetch", "after_blob_stored"])
def test_files_cut_off_are_fetched_by_the_runtime_that_has_the_channel(
        tmp_path: Path, point: str, store: str) -> None:
    """A runtime without the channel's fetcher recovers first, then one built with it,
    whose platform is out of reach at first: the run waits for it, is never refused, and
    ends as an uninterrupted run does."""
    clean, killed = tmp_path / "clean", tmp_path / "killed"
    expected = _outcome(_driver(clean, store, "--send", "t", "look", *_share(clean)), clean)

    files = _share(killed)
    crashed = _driver(killed, store, "--send", "t", "look", *files, "--kill-at", point)
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-2000:]
    restarted = _driver(killed, store, "--recover", "--late-fetcher")
    assert _outcome(restarted, killed) == expected
    assert "not running here" not in restarted.stdout
    assert "could not be reached; trying again" in restarted.stderr


UPLOAD_POINTS = [("after_final_answer", 1), ("after_delivery_sent", 1),
                 ("before_delivery_recorded", 1), ("after_file_uploaded", 1),
                 ("before_delivery_recorded", 2), ("after_delivery_recorded", 2)]
"""Around the answer and its file: ``(point, count)`` (the file's record is the second
delivery recorded)."""


@pytest.mark.parametrize("store", ["sqlite", "files"])
@pytest.mark.parametrize(("point", "count"), UPLOAD_POINTS)
def test_a_file_a_tool_made_is_sent_once_whatever_the_kill(
        tmp_path: Path, point: str, count: int, store: str) -> None:
    crashed = _driver(tmp_path, store, "--send", "t", "report", "--make-file",
                      "--kill-at", point, "--kill-count", str(count))
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-2000:]
    done = _driver(tmp_path, store, "--recover")
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    sent = _lines(tmp_path / CHANNEL_FILE)
    assert [(m["kind"], m["text"]) for m in sent] == [("reply", "Here is the report."),
                                                      ("file", "report.csv")]
    assert sent[1]["sha256"] == hashlib.sha256(MADE.data).hexdigest()
    assert all(d["remote_id"] for d in summary["deliveries"])
    (blob,) = summary["blobs"]
    assert blob["size"] == len(MADE.data)


REFUSED_POINTS = [("after_user_entry", 1), ("after_delivery_sent", 1),
                  ("before_delivery_recorded", 1), ("after_delivery_recorded", 1),
                  ("after_final_answer", 1), ("after_delivery_sent", 2)]
"""Around the notice of a file that could not be read, sent as the run starts (recorded
with the start, then posted: the first delivery), and around the answer after it."""


@pytest.mark.parametrize("store", ["sqlite", "files"])
@pytest.mark.parametrize(("point", "count"), REFUSED_POINTS)
def test_a_refused_file_is_told_once_before_the_answer_whatever_the_kill(
        tmp_path: Path, point: str, count: int, store: str) -> None:
    clean, killed = tmp_path / "clean", tmp_path / "killed"
    message = ["--send", "t", "look", "--file", "notes.txt", "--file", "gone.txt"]
    _share(clean)
    expected = _outcome(_driver(clean, store, *message), clean)
    assert expected["state"] == "completed"
    assert expected["sent"] == ["I could not read gone.txt: the shelf no longer has it.",
                                "done"]  # the notice first, then the answer, once each

    _share(killed)
    crashed = _driver(killed, store, *message, "--kill-at", point, "--kill-count", str(count))
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-2000:]
    assert _outcome(_driver(killed, store, "--recover"), killed) == expected
