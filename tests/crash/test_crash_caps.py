"""A message past a spend cap, killed around its refusal, both stores: the run fails
``spend_cap`` and the one reply that names the cap is posted exactly once, as when
nothing was killed; the refused message never reaches the model or a tool."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.crash.driver import CALLS_FILE, CHANNEL_FILE, read_lines
from tests.crash.outcome import run_driver

POINTS = ["after_queued", "after_run_failed", "after_delivery_sent",
          "before_delivery_recorded", "after_delivery_recorded"]
"""In the second message's process: its refusal is that process's one delivery."""

CAP = ("--cap-tokens", "30")  # one run of the script spends 30 tokens (two turns of 15)


def _send(root: Path, store: str, thread: str, *args: str) -> subprocess.CompletedProcess[str]:
    return run_driver(root, store, "--send", thread, f"message in {thread}", *CAP, *args)


def _outcome(done: subprocess.CompletedProcess[str], root: Path) -> dict[str, Any]:
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    runs = sorted(summary["runs"], key=lambda r: r["created_at"])
    return {"runs": [(r["thread_id"], r["state"], r["reason"]) for r in runs],
            "sent": [(m["kind"], m["text"]) for m in read_lines(root / CHANNEL_FILE)],
            "posted": sorted(d["text"] for d in summary["deliveries"] if d["remote_id"]),
            "tool_calls": len(read_lines(root / CALLS_FILE)),
            "refused_thread": summary["threads"].get("t2", [])}


@pytest.mark.parametrize("store", ["sqlite", "files"])
@pytest.mark.parametrize("point", POINTS)
def test_a_refusal_for_a_spent_cap_is_posted_once_across_a_kill(
        tmp_path: Path, store: str, point: str) -> None:
    clean, killed = tmp_path / "clean", tmp_path / "killed"
    for root in (clean, killed):
        root.mkdir()
        assert _send(root, store, "t1").returncode == 0  # spends the cap
    expected = _outcome(_send(clean, store, "t2"), clean)
    assert expected["runs"] == [("t1", "completed", "answered"), ("t2", "failed", "spend_cap")]
    (refusal,) = [text for kind, text in expected["sent"][1:]]
    assert refusal.startswith("Sorry, the daily spend cap for you is reached (30 of 30 tokens)")
    assert expected["tool_calls"] == 2 and expected["refused_thread"] == []

    crashed = _send(killed, store, "t2", "--kill-at", point)
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-2000:]
    assert _outcome(run_driver(killed, store, "--recover", *CAP), killed) == expected
