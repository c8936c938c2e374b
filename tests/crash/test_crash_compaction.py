"""Compaction in the crash drill: kill -9 while the model summarises, or right after the
summary is stored; the restart finishes the run, and the thread ends as an uninterrupted one
does: the same summaries (each made once), the same answers."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.crash import launch
from tests.crash.outcome import tail

TEXT = "a long message about the quarterly plan, the budget and who does what " * 3


def drive(root: Path, *args: str) -> tuple[int, dict[str, Any]]:
    proc = launch.run("--db", str(root / "maiden.db"), "--effect", "read_only",
                      "--workdir", str(root / "traces"), "--compaction", *args)
    assert proc.returncode in (0, -signal.SIGKILL), tail(proc.stderr)
    return proc.returncode, json.loads(proc.stdout) if proc.returncode == 0 else {}


def thread(summary: dict[str, Any]) -> list[tuple[str, str]]:
    """The thread as (kind or notice code, text), ids and clocks aside."""
    return [(e.get("code") or e["kind"], e.get("text") or "")
            for e in summary["threads"]["t"]]


def conversation(root: Path, kill: str | None) -> dict[str, Any]:
    (root / "traces").mkdir(parents=True)
    for i in range(4):
        drive(root, "--send", "t", f"{i}: {TEXT}")
    if kill is None:
        return drive(root, "--send", "t", f"4: {TEXT}")[1]
    code, _ = drive(root, "--send", "t", f"4: {TEXT}", "--kill-at", kill)
    assert code == -signal.SIGKILL, f"not killed at {kill}"
    return drive(root, "--recover")[1]


@pytest.mark.parametrize("point", ["in_summary", "after_summary"])
def test_a_kill_during_compaction(tmp_path: Path, point: str) -> None:
    base = conversation(tmp_path / "base", None)
    crashed = conversation(tmp_path / "crashed", point)
    assert thread(crashed) == thread(base)
    summaries = [t for kind, t in thread(base) if kind == "summary"]
    assert summaries, "the drill's thread is long enough to be summarised"
    assert all(r["state"] == "completed" for r in crashed["runs"])
