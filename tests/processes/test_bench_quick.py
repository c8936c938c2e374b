"""`python -m bench --quick` keeps working. It prints figures; no timing is asserted here."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parents[2]
# One of the "heavy" group (pyproject addopts): run one at a time on one worker, so that
# no two of them starve each other of the two cores (or skew the figures printed here).
pytestmark = pytest.mark.xdist_group("heavy")


@pytest.mark.timeout(300)
def test_quick_benchmark_runs_and_prints_the_table(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--dir", str(tmp_path)],
        cwd=PROJECT, capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("maiden benchmarks (--quick)")
    assert lines[1].split() == ["workload", "measure", "maiden", "baseline", "ratio", "target"]
    for workload in ("1+2 thread", "3 resume", "4 concurrency", "5 memory", "6 slack ack",
                     "7 schedules", "10 slowloris", "11 live replies", "12 files", "13 agents",
                     "15 memories"):
        assert any(line.startswith(workload) for line in lines), done.stdout
    for measure in ("ms/message, all", "database MB", "cold load", "recovering",
                    'concurrency="thread"', 'concurrency="global"', "peak RSS",
                    "load + start()", "ms to RunStarted", "ms a recall", "recall@5"):
        assert measure in done.stdout, done.stdout

    # The commits and fsyncs a message are counted (the store's count beside the floor's,
    # and the system calls under strace where it can trace): printed as numbers.
    for measure in ("transactions a message", "fsyncs a message"):
        counted = [line for line in lines if measure in line]
        assert counted, done.stdout
        assert re.search(r"\)\s+\d+\.\d\d\s+\d+\.\d\d\s", counted[0]), counted[0]
    assert "fsync/fdatasync calls a message" in done.stdout or \
        "skipped: strace" in done.stdout, done.stdout
    assert "the same against the earlier floor (aiosqlite" in done.stdout, done.stdout
