"""``/maiden stop``, killed around its effect (``COMMAND_KILL_POINTS``), both stores: the run
waits for an approval, the person stops it, the process dies; after the restart the person,
who was told nothing, asks again. The run is cancelled once, its "Stopped" notice is in the
channel once, and the second ask finds nothing left to stop — what an uninterrupted stop
and a second ask end with.

The command's answer and its line for everyone (``Answer.announce``, which a platform's
adapter posts directly, not through the outbox) are lost with the process: the person
asks again and is told there is nothing left to stop, and the channel has the run's own
notice. At most once, never twice; the test says which.

``/maiden schedules run job`` and ``/maiden schedules pause job``, killed around their
effects (``SCHEDULE_COMMAND_KILL_POINTS``), both stores: after the restart the same
request again (a platform's retry of it) finds what the first did — the one run it
started, run once, or the schedule paused — and nothing is done twice."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.crash.driver import (
    CHANNEL_FILE,
    COMMAND_KILL_POINTS,
    COMMANDS_FILE,
    SCHEDULE_COMMAND_KILL_POINTS,
    read_lines,
)
from tests.crash.outcome import finished as _done
from tests.crash.outcome import run_driver


def _driver(root: Path, store: str, *args: str) -> subprocess.CompletedProcess[str]:
    return run_driver(root, store, "--requires-approval", *args)


def _ending(root: Path, summary: dict[str, Any]) -> dict[str, Any]:
    """What the people see and the store holds, without ids and times."""
    (run,) = summary["runs"]
    return {
        "run": (run["state"], run["reason"]),
        "channel": [(m["kind"], m.get("text")) for m in read_lines(root / CHANNEL_FILE)],
        "outbox": [(d["kind"], d["remote_id"] is not None) for d in summary["deliveries"]],
        "told": [line["text"] for line in read_lines(root / COMMANDS_FILE)],
    }


def _stopped(*told: str) -> dict[str, Any]:
    """The ending of a stopped run: cancelled once, its prompt and its notice posted once
    each; the person told ``told``."""
    return {
        "run": ("cancelled", "cancelled by testchat:u1"),
        "channel": [("approval", 'effect_tool {"n":1} needs approval.'),
                    ("reply", "Stopped (cancelled by testchat:u1).")],
        "outbox": [("approval", True), ("reply", True)],
        "told": list(told),
    }


def _asked_to_wait(root: Path, store: str) -> None:
    _done(_driver(root, store, "--send", "t", "go", "--placed"))


@pytest.mark.parametrize("store", ["sqlite", "files"])
def test_an_uninterrupted_stop_and_a_second_ask(tmp_path: Path, store: str) -> None:
    _asked_to_wait(tmp_path, store)
    _done(_driver(tmp_path, store, "--command", "stop"))
    ending = _ending(tmp_path, _done(_driver(tmp_path, store, "--command", "stop")))
    assert ending == _stopped("Stopped 1 run(s).", "Nothing is running here.")
    assert [line["announce"] for line in read_lines(tmp_path / COMMANDS_FILE)] == [
        "⏹ <@u1> stopped 1 run(s) here.", None]


@pytest.mark.parametrize("store", ["sqlite", "files"])
@pytest.mark.parametrize("point", COMMAND_KILL_POINTS)
def test_a_stop_killed_midway_ends_as_one_uninterrupted(tmp_path: Path, store: str,
                                                        point: str) -> None:
    _asked_to_wait(tmp_path, store)
    killed = _driver(tmp_path, store, "--command", "stop", "--kill-at", point)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert read_lines(tmp_path / COMMANDS_FILE) == []  # the person was told nothing
    _done(_driver(tmp_path, store, "--recover"))  # the restart sends what is owed
    ending = _ending(tmp_path, _done(_driver(tmp_path, store, "--command", "stop")))
    assert ending == _stopped("Nothing is running here.")  # asked again: nothing to stop
    # The line for everyone went with the killed process; the second ask has none to post.
    assert [line["announce"] for line in read_lines(tmp_path / COMMANDS_FILE)] == [None]


def _asked(root: Path, store: str, words: str, *kill: str) -> subprocess.CompletedProcess[str]:
    return run_driver(root, store, "--command", words, *kill)


def _schedule_runs(summary: dict[str, Any]) -> list[tuple[str, str, int]]:
    """Each run: its state, its key and how many entries its thread has."""
    return [(run["state"], run["idempotency_key"], len(summary["threads"][run["thread_id"]]))
            for run in summary["runs"]]


@pytest.mark.parametrize("store", ["sqlite", "files"])
@pytest.mark.parametrize("point", ["after_queued", "after_final_answer"])
def test_a_schedule_run_from_chat_killed_midway_runs_once(tmp_path: Path, store: str,
                                                          point: str) -> None:
    assert point in SCHEDULE_COMMAND_KILL_POINTS
    clean, killed = tmp_path / "clean", tmp_path / "killed"
    _done(_asked(clean, store, "schedules run job"))
    expected = _done(_asked(clean, store, "schedules run job"))  # the same request again
    ((state, key, entries),) = _schedule_runs(expected)
    assert state == "completed" and key.startswith("schedule:job:manual:") and entries > 1
    (run,) = expected["runs"]
    started = f"Schedule `job` started: run `{run['id'][-8:]}`."
    assert [line["text"] for line in read_lines(clean / COMMANDS_FILE)] == [started] * 2

    crashed = _asked(killed, store, "schedules run job", "--kill-at", point)
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-2000:]
    assert read_lines(killed / COMMANDS_FILE) == []  # the person was told nothing
    _done(run_driver(killed, store, "--recover"))  # the run goes on, or has ended
    again = _done(_asked(killed, store, "schedules run job"))
    assert _schedule_runs(again) == _schedule_runs(expected)  # one run, run once
    (run,) = again["runs"]
    assert [line["text"] for line in read_lines(killed / COMMANDS_FILE)] == [
        f"Schedule `job` started: run `{run['id'][-8:]}`."]


@pytest.mark.parametrize("store", ["sqlite", "files"])
def test_a_schedule_pause_from_chat_killed_once_stored_stands(tmp_path: Path,
                                                              store: str) -> None:
    # The first save is the schedule's record, made as the scheduler starts on a fresh store.
    crashed = _asked(tmp_path, store, "schedules pause job",
                     "--kill-at", "after_schedule_saved", "--kill-count", "2")
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-2000:]
    assert read_lines(tmp_path / COMMANDS_FILE) == []
    _done(_asked(tmp_path, store, "schedules pause job"))
    _done(_asked(tmp_path, store, "schedules"))
    assert [line["text"] for line in read_lines(tmp_path / COMMANDS_FILE)] == [
        "Schedule `job` is already paused.", "• `job` (paused): no next fire; last: never run"]
