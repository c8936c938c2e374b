"""The knowledge indexing pass killed (SIGKILL) right after some of its files were stored,
then run again: the store ends with exactly the files and passages of an uninterrupted
pass, none twice, none lost, on every store (a file's passages and its record are one
write; the next pass goes on from the digests)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.crash.outcome import store_args

ROOT = Path(__file__).resolve().parents[2]

FIRST = {"a.md": "# Deploys\n\nA drill on deploys.\n\n## Rollback\n\nThe rollback drill.",
         "b.txt": "A drill of text.\n\nAnother drill paragraph.",
         "c.html": "<h1>On call</h1><p>Page the drill lead.</p>"}
SECOND = {"a.md": "# Deploys\n\nThe deploy drill, changed.", "b.txt": None,
          "d.md": "# New\n\nA new drill.", "e/f.md": "# Deep\n\nA drill in a sub-folder."}
"""What changes between the passes: one file changed, one removed, two new."""


def _write(folder: Path, files: dict[str, str | None]) -> None:
    for name, text in files.items():
        path = folder / name
        if text is None:
            path.unlink()
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def _pass(root: Path, store: str, *kill: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "tests.crash.knowledge", *store_args(root, store),
         "--folder", str(root / "docs"), *kill],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)


def _held(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert done.returncode == 0, done.stderr[-3000:]
    summary: dict[str, Any] = json.loads(done.stdout)
    return summary


@pytest.mark.parametrize("store", ["sqlite", "files", "postgres"])
@pytest.mark.parametrize(("changes", "count"), [
    ({}, 2),  # the first pass: two of three files stored
    (SECOND, 1), (SECOND, 2)])  # a later pass: one or two of its three changes stored
def test_a_pass_killed_after_some_files_ends_as_an_uninterrupted_one(
        tmp_path: Path, store: str, changes: dict[str, str | None], count: int) -> None:
    clean, killed = tmp_path / "clean", tmp_path / "killed"
    for root in (clean, killed):
        _write(root / "docs", dict(FIRST))
        if changes:  # a first pass, uninterrupted, then the folder changes
            _held(_pass(root, store))
            _write(root / "docs", changes)
    expected = _held(_pass(clean, store))
    crashed = _pass(killed, store, "--kill-at", "after_file_indexed", "--kill-count",
                    str(count))
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-2000:]
    assert _held(_pass(killed, store)) == expected
    assert [f["path"] for f in expected["files"]] == (
        ["a.md", "c.html", "d.md", "e/f.md"] if changes else ["a.md", "b.txt", "c.html"])
    assert len({tuple(p) for p in expected["passages"]}) == len(expected["passages"])
