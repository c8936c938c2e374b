"""Memories in the crash drill: kill -9 around the memory flush (as the model is asked what
to keep, around each of its writes, once they are written and the summary is being asked)
and around a ``remember`` call's write; the restart finishes the run, and the store ends
as after an uninterrupted run: the same memories, each once, and the same summaries; and
around the older tools' notes becoming memories, which the restart finishes with each note
one memory; on every store (a memory and the call that put it are one write on each)."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.crash import launch, notes
from tests.crash.outcome import STORES, store_args, tail

TEXT = "a long message about the quarterly plan, the budget and who does what " * 3
ASK = "4: remember: the staging database is db-7"


def drive(root: Path, store: str, *args: str) -> tuple[int, dict[str, Any]]:
    proc = launch.run(*store_args(root, store), "--effect", "read_only",
                      "--workdir", str(root / "traces"), "--compaction", "--memory", *args)
    assert proc.returncode in (0, -signal.SIGKILL), tail(proc.stderr)
    return proc.returncode, json.loads(proc.stdout) if proc.returncode == 0 else {}


def conversation(root: Path, store: str, kill: str | None, count: int) -> dict[str, Any]:
    (root / "traces").mkdir(parents=True)
    for i in range(4):
        drive(root, store, "--send", "t", f"{i}: {TEXT}")
    if kill is None:
        return drive(root, store, "--send", "t", ASK)[1]
    code, _ = drive(root, store, "--send", "t", ASK, "--kill-at", kill,
                    "--kill-count", str(count))
    assert code == -signal.SIGKILL, f"not killed at {kill}"
    return drive(root, store, "--recover")[1]


def thread(summary: dict[str, Any]) -> list[tuple[str, str]]:
    return [(e.get("code") or e["kind"], e.get("text") or "")
            for e in summary["threads"]["t"]]


def memories(summary: dict[str, Any]) -> list[tuple[str, str, str | None]]:
    """Each memory as (text, scope, via), the ids (of random run ids, for remember's) and
    the clocks aside; the test checks the ids are unique."""
    return [(m["text"], m["scope"]["kind"], m["provenance"]["via"])
            for m in summary["memories"]]


@pytest.mark.parametrize("store", STORES)
@pytest.mark.parametrize(("point", "count"), [
    ("in_flush", 1), ("before_flush_memory_written", 2), ("after_flush_memory_written", 1),
    ("in_summary", 1), ("before_remember_written", 1), ("after_remember_written", 1)])
def test_a_kill_around_a_memory_write(tmp_path: Path, store: str, point: str,
                                      count: int) -> None:
    base = conversation(tmp_path / "base", store, None, 0)
    crashed = conversation(tmp_path / "crashed", store, point, count)
    kept = memories(base)
    assert memories(crashed) == kept
    assert len(set(kept)) == len(kept), "each memory once"
    assert len({m["id"] for m in crashed["memories"]}) == len(kept)
    flushed = [m for m in kept if m[2] == "memory flush"]
    assert len(flushed) >= 2 and all(m[1] == "thread" for m in flushed)
    assert ("the staging database is db-7", "thread", None) in kept
    assert thread(crashed) == thread(base)
    assert [t for kind, t in thread(base) if kind == "summary"]
    assert all(r["state"] == "completed" for r in crashed["runs"])


def _notes(root: Path, store: str, *args: str) -> subprocess.CompletedProcess[str]:
    """One process of ``tests/crash/notes.py`` on the store of ``root``, to its end."""
    return launch.Driver([*store_args(root, store), *args], entry=notes.cli).wait()


def _adopted(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert done.returncode == 0, tail(done.stderr)
    summary: dict[str, Any] = json.loads(done.stdout)
    return summary


@pytest.mark.parametrize("store", STORES)
@pytest.mark.parametrize(("point", "count"), [
    ("before_note_memory_written", 1), ("after_note_memory_written", 3),
    ("after_note_memory_written", 8)])  # the last: every memory written, not the record
def test_notes_becoming_memories_killed_part_way(tmp_path: Path, store: str, point: str,
                                                 count: int) -> None:
    """Each note of the older tools becomes exactly one memory, wherever the process making
    them is killed: the restart writes those not yet written, and none twice."""
    clean, killed = tmp_path / "clean", tmp_path / "killed"
    for root in (clean, killed):
        assert _notes(root, store, "--seed").returncode == 0
    expected = _adopted(_notes(clean, store, "--adopt"))
    assert expected["written"] == 8 and len(expected["memories"]) == 8
    crashed = _notes(killed, store, "--adopt", "--kill-at", point, "--kill-count", str(count))
    assert crashed.returncode == -signal.SIGKILL, tail(crashed.stderr)
    again = _adopted(_notes(killed, store, "--adopt"))
    assert again["memories"] == expected["memories"]
    assert again["written"] == 8 - count + (point == "before_note_memory_written")
    assert _adopted(_notes(killed, store, "--adopt")) == {**again, "written": 0}
