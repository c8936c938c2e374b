"""A vote on an answer, killed around its write (``VOTE_KILL_POINTS``), both stores: after
the restart the vote is there once or not at all (the person clicks again: it is recorded
once, keeping its first time), and a change of mind replaces it — the same votes as an
uninterrupted run's."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.crash.driver import VOTE_KILL_POINTS
from tests.crash.outcome import run_driver


def _driver(root: Path, store: str, *args: str) -> subprocess.CompletedProcess[str]:
    return run_driver(root, store, *args)


def _votes(done: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    assert done.returncode == 0, done.stderr[-2000:]
    votes: list[dict[str, Any]] = json.loads(done.stdout)["votes"]
    return votes


def _shown(votes: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(v["user"], v["value"]) for v in votes]


@pytest.mark.parametrize("store", ["sqlite", "files"])
def test_the_uninterrupted_votes(tmp_path: Path, store: str) -> None:
    assert _votes(_driver(tmp_path, store, "--send", "t", "go")) == []
    first = _votes(_driver(tmp_path, store, "--vote", "U1", "up"))
    assert _shown(first) == [("U1", "up")]
    assert _votes(_driver(tmp_path, store, "--vote", "U1", "up")) == first  # kept as it was
    assert _shown(_votes(_driver(tmp_path, store, "--vote", "U1", "down"))) == [("U1", "down")]


@pytest.mark.parametrize("store", ["sqlite", "files"])
@pytest.mark.parametrize("point", VOTE_KILL_POINTS)
def test_a_vote_killed_around_its_write(tmp_path: Path, point: str, store: str) -> None:
    assert _votes(_driver(tmp_path, store, "--send", "t", "go")) == []
    killed = _driver(tmp_path, store, "--vote", "U1", "up", "--kill-at", point)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    after = _votes(_driver(tmp_path, store, "--recover"))
    assert _shown(after) == ([] if point == "before_vote_recorded" else [("U1", "up")])
    again = _votes(_driver(tmp_path, store, "--vote", "U1", "up"))  # the person clicks again
    assert _shown(again) == [("U1", "up")]
    if after:
        assert again == after  # recorded once: the second click changed nothing
    assert _shown(_votes(_driver(tmp_path, store, "--vote", "U1", "down"))) == [("U1", "down")]
