"""Jobs without the model (issue 56), killed with SIGKILL at their fire and around their
post, on every store (SQLite, files, PostgreSQL): a reminder of the config (``at`` +
``say``; also one whose time passed while maiden was down), one asked for in chat
(``schedule_create`` with ``in``; also killed while it is asked for), and a tool-only
check (``post = "on_change"``). Each crashed process is followed by a restart that only
recovers (``--recover``) and one whose scheduler starts late and catches up (``--fire``
again, with a duplicate trigger and a second scheduler on the store); the end is the
uninterrupted one: one run for the slot's key, named by every claim, one post, the tool's
effect once, a one-shot shown done, and the model never asked (``tests/crash/jobs.py``
says what each ``--job`` defines)."""

from __future__ import annotations

import signal
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from runtime.model.runs import idempotency_key
from tests.crash import launch
from tests.crash.driver import CHANNEL_FILE, EFFECTS_FILE, REQUESTS_FILE, read_lines
from tests.crash.jobs import CHECK, NUDGE, REMINDER, SAY, STATUS_FILE, chat_due
from tests.crash.outcome import STORES, finished, store_args

pytestmark = pytest.mark.timeout(240)

SLOT = "2026-03-02T09:00:00+00:00"
NEXT = "2026-03-03T09:00:00+00:00"
"""The check's second slot (its output the same as the first's, or not)."""
ASKED = "remind me in 2 hours to check the deploy"

REMINDER_POINTS = ("after_queued", "after_slot_recorded", "after_final_answer",
                   "after_delivery_sent", "after_delivery_recorded")
CHAT_POINTS = ("after_queued", "after_delivery_sent")
TOOL_CASES = [("idempotent_write", point) for point in (
    "after_queued", "after_intent", "in_tool_after_effect", "after_tool_result",
    "after_final_answer", "after_delivery_sent")] + [
    ("non_idempotent_reconcile", "in_tool_after_effect"),
    ("non_idempotent_reconcile", "after_tool_result")]

RUN_FIELDS = ("state", "reason", "text", "reply", "idempotency_key", "thread_id", "job",
              "turns", "tool_calls", "usage", "origin", "pending_approval", "decisions")


def _drive(root: Path, store: str, effect: str, *args: str) -> subprocess.CompletedProcess[str]:
    return launch.run(*store_args(root, store), "--effect", effect, "--workdir", str(root),
                      *args)


def _fire(root: Path, store: str, effect: str, job: str, slot: str = SLOT,
          *args: str) -> dict[str, Any]:
    return finished(_drive(root, store, effect, "--fire", slot, "--job", job, *args))


def _killed(root: Path, store: str, effect: str, point: str, *args: str) -> None:
    crashed = _drive(root, store, effect, *args, "--kill-at", point)
    assert crashed.returncode == -signal.SIGKILL, \
        f"not killed at {point} (exit {crashed.returncode}):\n{crashed.stderr[-2000:]}"


def _anon(value: Any, names: dict[str, str]) -> Any:
    """``value`` with every run id and key in it (inside a string too: ``job_<run>``)
    replaced by the name it stands for, and no clocks."""
    if isinstance(value, str):
        for raw, name in names.items():
            value = value.replace(raw, name)
        return value
    if isinstance(value, list):
        return [_anon(v, names) for v in value]
    if isinstance(value, dict):
        return {k: _anon(v, names) for k, v in value.items() if k != "at"}
    return value


def _names(summary: dict[str, Any]) -> dict[str, str]:
    names: dict[str, str] = {}
    for run in summary["runs"]:
        name = f"<{run['idempotency_key'] or run['thread_id']}>"
        names[run["id"]] = name
        names[idempotency_key(run["id"], f"job_{run['id']}")] = f"<key of {name}>"
    return names


def ending(root: Path, summary: dict[str, Any]) -> dict[str, Any]:
    """What must be as without the crash: the runs, their threads, the posts, the effects,
    the record of the schedule and how it is listed."""
    names = _names(summary)
    posts = read_lines(root / CHANNEL_FILE)
    return {
        "runs": sorted((_anon({f: run[f] for f in RUN_FIELDS}, names)
                        for run in summary["runs"]), key=lambda r: str(r["idempotency_key"])),
        "threads": _anon(summary["threads"], names),
        "posts": [(p["kind"], _anon(p["run_id"], names), p["target"], p["text"])
                  for p in posts],
        "posted keys": sorted(Counter(p["key"] for p in posts).values()),
        "effects": sorted(_anon(e["key"], names) for e in read_lines(root / EFFECTS_FILE)),
        "records": [(r["name"], _anon(r["last_run_id"], names), r["last_slot"])
                    for r in summary.get("schedules", [])],
        "listing": summary.get("listing"),
        "model asked": len(read_lines(root / REQUESTS_FILE)),
    }


def assert_claims_name_one_run(summary: dict[str, Any], name: str, slot: str) -> None:
    """Every claim of the slot, by any scheduler, named the one run holding its key."""
    key = f"schedule:{name}:{slot}"
    (run,) = [r for r in summary["runs"] if r["idempotency_key"] == key]
    assert all(f["key"] == key and f["run_id"] == run["id"] for f in summary["fired"]), \
        summary["fired"]
    assert run["state"] == "completed", run


# -- a reminder of the config: at + say ------------------------------------------------------


def _reminder(root: Path, store: str, point: str | None) -> dict[str, Any]:
    if point is not None:
        _killed(root, store, "read_only", point, "--fire", SLOT, "--job", "say")
        finished(_drive(root, store, "read_only", "--recover"))
    return _fire(root, store, "read_only", "say", SLOT, "--late", "30")


@pytest.mark.parametrize("store", STORES)
@pytest.mark.parametrize("point", REMINDER_POINTS)
def test_a_reminder_killed_at_its_fire_or_post_is_posted_once(tmp_path: Path, store: str,
                                                              point: str) -> None:
    clean = tmp_path / "clean"
    base = _fire(clean, store, "read_only", "say")
    again = _fire(clean, store, "read_only", "say", SLOT, "--late", "30")
    expected = ending(clean, again)
    assert [f["by"] for f in base["fired"]] == ["alarm"] and again["fired"] == []
    assert expected["posts"] == [("reply", f"<schedule:{REMINDER}:{SLOT}>", {"room": "r1"},
                                  f"<@u1> {SAY}")]
    assert expected["posted keys"] == [1]
    assert expected["listing"] == [{"name": REMINDER, "done": True, "active": True}]
    assert expected["model asked"] == 0

    killed = tmp_path / "killed"
    summary = _reminder(killed, store, point)
    assert_claims_name_one_run(summary, REMINDER, SLOT)
    assert ending(killed, summary) == expected


@pytest.mark.parametrize("store", STORES)
@pytest.mark.parametrize("point", ["after_queued", "after_delivery_sent"])
def test_a_reminder_missed_while_down_fires_once_late(tmp_path: Path, store: str,
                                                      point: str) -> None:
    """maiden went down before the reminder's time (its record written, the slot not
    claimed) and came back ten minutes after it: the start's catch-up posts it once, saying
    it is late (misfire = "once"); killed at that fire, the restart posts that same one."""
    late = ("--late", "600")
    clean, killed = tmp_path / "clean", tmp_path / "killed"
    for root in (clean, killed):
        _killed(root, store, "read_only", "after_schedule_saved", "--fire", SLOT, "--job", "say")
    _fire(clean, store, "read_only", "say", SLOT, *late)
    expected = ending(clean, _fire(clean, store, "read_only", "say", SLOT, *late))
    note = "(late by 10 min: maiden was not running at the time)"
    assert [p[3] for p in expected["posts"]] == [f"<@u1> {SAY} {note}"]
    assert expected["listing"] == [{"name": REMINDER, "done": True, "active": True}]

    _killed(killed, store, "read_only", point, "--fire", SLOT, "--job", "say", *late)
    finished(_drive(killed, store, "read_only", "--recover"))
    summary = _fire(killed, store, "read_only", "say", SLOT, *late)
    assert_claims_name_one_run(summary, REMINDER, SLOT)
    assert ending(killed, summary) == expected


# -- a reminder asked for in chat: schedule_create with in ------------------------------------


def _asked(root: Path, store: str) -> dict[str, Any]:
    return finished(_drive(root, store, "read_only", "--send", "t1", ASKED, "--job", "chat"))


@pytest.mark.parametrize("store", STORES)
@pytest.mark.parametrize("point", CHAT_POINTS)
def test_a_reminder_asked_for_in_chat_fires_once_across_a_kill(tmp_path: Path, store: str,
                                                               point: str) -> None:
    due = chat_due().isoformat()
    clean = tmp_path / "clean"
    _asked(clean, store)
    _fire(clean, store, "read_only", "chat", due)
    expected = ending(clean, _fire(clean, store, "read_only", "chat", due, "--late", "30"))
    assert [p[3] for p in expected["posts"]] == ["I will remind you.", SAY]
    assert expected["listing"] == [{"name": NUDGE, "done": True, "active": True}]
    assert expected["model asked"] == 2  # the person's run only: the reminder asks nothing

    killed = tmp_path / "killed"
    _asked(killed, store)
    _killed(killed, store, "read_only", point, "--fire", due, "--job", "chat")
    finished(_drive(killed, store, "read_only", "--recover"))
    summary = _fire(killed, store, "read_only", "chat", due, "--late", "30")
    assert_claims_name_one_run(summary, NUDGE, due)
    assert ending(killed, summary) == expected


@pytest.mark.parametrize("store", STORES)
@pytest.mark.parametrize("point", ["after_schedule_saved", "after_tool_result",
                                   "after_final_answer"])
def test_a_reminder_asked_for_by_a_run_killed_midway_is_made_once(tmp_path: Path, store: str,
                                                                  point: str) -> None:
    """Killed while the person's run asks for the reminder (``schedule_create``, an
    idempotent write: the record written, the call's result not yet; or after it): the
    restart finishes that run (the call again, under its key, makes nothing new) and the
    reminder fires once, as without the crash."""
    due = chat_due().isoformat()
    clean, killed = tmp_path / "clean", tmp_path / "killed"
    _asked(clean, store)
    expected = ending(clean, _fire(clean, store, "read_only", "chat", due))

    _killed(killed, store, "read_only", point, "--send", "t1", ASKED, "--job", "chat")
    finished(_drive(killed, store, "read_only", "--recover", "--job", "chat"))
    summary = _fire(killed, store, "read_only", "chat", due)
    assert_claims_name_one_run(summary, NUDGE, due)
    assert [r["name"] for r in summary["schedules"]] == [NUDGE]
    found = ending(killed, summary)
    # A model turn asked again after the kill is one more request; nothing else differs.
    assert found["model asked"] >= expected["model asked"]
    assert {**found, "model asked": 0} == {**expected, "model asked": 0}


# -- a tool-only check, posted on change -----------------------------------------------------


def _check(root: Path, store: str, effect: str, point: str | None = None,
           at: str | None = None) -> dict[str, Any]:
    """The check's first slot, killed at ``point`` (of slot ``at``) and restarted."""
    slot = at or SLOT
    if point is not None:
        _killed(root, store, effect, point, "--fire", slot, "--job", "tool")
        finished(_drive(root, store, effect, "--recover", "--job", "tool"))
        return _fire(root, store, effect, "tool", slot, "--late", "30")
    return _fire(root, store, effect, "tool", slot)


@pytest.mark.parametrize("store", STORES)
@pytest.mark.parametrize(("effect", "point"), TOOL_CASES,
                         ids=[f"{e}-{p}" for e, p in TOOL_CASES])
def test_a_check_killed_between_its_tool_and_its_post_runs_and_posts_once(
    tmp_path: Path, store: str, effect: str, point: str
) -> None:
    clean = tmp_path / "clean"
    first = ending(clean, _check(clean, store, effect))
    assert [p[3] for p in first["posts"]] == ['{\n "status": "green"\n}']
    assert first["effects"] == [f"<key of <schedule:{CHECK}:{SLOT}>>"]
    assert first["model asked"] == 0
    second = ending(clean, _check(clean, store, effect, at=NEXT))
    assert second["posts"] == first["posts"], "the same output was posted again"
    assert len(second["effects"]) == 2

    killed = tmp_path / "killed"
    summary = _check(killed, store, effect, point)
    assert_claims_name_one_run(summary, CHECK, SLOT)
    assert ending(killed, summary) == first
    summary = _check(killed, store, effect, at=NEXT)
    assert_claims_name_one_run(summary, CHECK, NEXT)
    assert ending(killed, summary) == second


@pytest.mark.parametrize("store", STORES)
@pytest.mark.parametrize("point", ["after_tool_result", "after_final_answer"])
def test_a_check_that_found_nothing_new_posts_nothing_across_a_kill(
    tmp_path: Path, store: str, point: str
) -> None:
    """Killed in the second slot, whose output is the first's: still nothing posted; a
    third slot whose output changed posts it."""
    clean, killed = tmp_path / "clean", tmp_path / "killed"
    for root in (clean, killed):
        _check(root, store, "idempotent_write")
    expected = ending(clean, _check(clean, store, "idempotent_write", at=NEXT))
    summary = _check(killed, store, "idempotent_write", point, at=NEXT)
    assert_claims_name_one_run(summary, CHECK, NEXT)
    assert ending(killed, summary) == expected
    assert len(expected["posts"]) == 1
    (quiet,) = [r for r in expected["runs"] if r["idempotency_key"].endswith(NEXT)]
    assert quiet["state"] == "completed" and quiet["reply"].startswith("Nothing new")

    (killed / STATUS_FILE).write_text("red\n")
    third = _check(killed, store, "idempotent_write", at="2026-03-04T09:00:00+00:00")
    assert [p[3] for p in ending(killed, third)["posts"]] == [
        '{\n "status": "green"\n}', '{\n "status": "red"\n}']
