"""A webhook's delivery (``[[hooks]]``), killed around its effects (``HOOK_KILL_POINTS``),
every store: the sender, told nothing, delivers it again (as GitHub and every sender do
when an answer is lost), and the end is the uninterrupted one: one run for the delivery
id, its tools run once, its answer posted once, and the sender told that run."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.crash.driver import CHANNEL_FILE, EFFECTS_FILE, HOOK_KILL_POINTS, HOOKS_FILE, read_lines
from tests.crash.outcome import STORES, run_driver
from tests.crash.outcome import finished as _done


def _hook(root: Path, store: str, *args: str) -> subprocess.CompletedProcess[str]:
    return run_driver(root, store, "--hook", "delivery-1", *args)


def _ending(root: Path, summary: dict[str, Any]) -> dict[str, Any]:
    (run,) = summary["runs"]
    return {
        "run": (run["state"], run["text"], run["idempotency_key"].split(":")[:2]),
        "channel": [(m["kind"], m.get("text")) for m in read_lines(root / CHANNEL_FILE)],
        "effects": len(read_lines(root / EFFECTS_FILE)),
        "told": [(line["run_id"] == run["id"], line["state"])
                 for line in read_lines(root / HOOKS_FILE)],
    }


@pytest.mark.parametrize("store", STORES)
@pytest.mark.parametrize("point", HOOK_KILL_POINTS)
def test_a_delivery_killed_midway_and_sent_again_runs_once(tmp_path: Path, store: str,
                                                           point: str) -> None:
    clean, killed = tmp_path / "clean", tmp_path / "killed"
    _done(_hook(clean, store))
    expected = _ending(clean, _done(_hook(clean, store)))  # a redelivery: nothing more
    assert expected["run"] == ("completed", "ana pushed main", ["hook", "gh"])
    assert expected["channel"] == [("reply", "done")]
    assert [line["again"] for line in read_lines(clean / HOOKS_FILE)] == [False, True]

    crashed = _hook(killed, store, "--kill-at", point)
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-2000:]
    # Told nothing, unless the run had answered it before its reply was posted (the
    # reply is sent after the sender hears back). On PostgreSQL the run's end is told to
    # its waiter by the commit's NOTIFY, which may come while the committing task still
    # hands its connection back to the pool (asyncpg resets it, awaiting the server):
    # the sender may then hear of the completed run before the kill at its commit.
    told = len(read_lines(killed / HOOKS_FILE))
    if point == "after_final_answer" and store == "postgres":
        assert told in (0, 1)
    else:
        assert told == (1 if point == "after_delivery_sent" else 0)
    _done(run_driver(killed, store, "--recover"))  # the run goes on, or has ended
    again = _ending(killed, _done(_hook(killed, store)))
    assert again == {**expected, "told": expected["told"][:told + 1]}
    assert [line["again"] for line in read_lines(killed / HOOKS_FILE)][told:] == [True]
