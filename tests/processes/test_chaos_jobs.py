"""The soak's jobs without the model (chaos/jobs.py, chaos/job_plan.py), without a soak:
what the replicas are given loads, the model asks for a reminder with ``in``, and
invariant 3's check of the one-shots and of ``watch`` finds what it should."""

from __future__ import annotations

import json
import time
import tomllib
from datetime import UTC, datetime

from chaos.invariants import Stored
from chaos.job_plan import Reminder
from chaos.jobs import QUIET, check_jobs, jobs_toml
from chaos.model import _arguments
from chaos.plan import make_plan
from chaos.schedules import Kept, Schedules
from chaos.system import History
from runtime.model.requests import ScheduleRecord
from runtime.model.runs import Run, RunState
from schedules import At, ScheduleConfig, load_schedules


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="seconds")


def test_the_jobs_the_replicas_are_given_load() -> None:
    written = 1_790_000_000.0
    loaded = tomllib.loads(jobs_toml([Reminder("remind-0", 20.0, "skip")], written, True))
    found = load_schedules([ScheduleConfig(**s) for s in loaded["schedules"]],
                           default_timezone="UTC", channels=["slack"])
    remind, watch = found
    assert isinstance(remind.cron, At) and remind.cron.moment.timestamp() == written + 20
    assert remind.config.job is not None and remind.config.job.say == "reminder remind-0"
    assert remind.config.misfire == "skip" and remind.origin.target == {
        "channel": "C0CHAOSJOBS"}
    assert watch.config.job is not None and watch.config.job.tool == "probe"
    assert watch.config.job.post == "on_change"


def test_the_model_asks_for_a_reminder_in_a_minute() -> None:
    tool, arguments = _arguments("remind=rem-0", "m95000", 0)
    assert tool == "schedule_create"
    assert json.loads(arguments) == {"name": "rem-0", "in": "1m", "say": "reminder rem-0"}


def _run(key: str, reply: str, state: RunState = RunState.COMPLETED) -> Run:
    return Run(id=f"r-{key}", thread_id=f"schedule:{key.split(':')[1]}", text="t",
               state=state, idempotency_key=key, reply=reply)


def _entries(run: Run, found: str | None, *, quiet: bool) -> list[dict[str, object]]:
    call = f"job_{run.id}"
    out: list[dict[str, object]] = [
        {"kind": "user", "run_id": run.id, "text": "(scheduled check: probe {})"},
        {"kind": "assistant", "run_id": run.id, "tool_calls": [{"id": call}]}]
    if found is not None:
        out.append({"kind": "tool_result", "run_id": run.id, "tool_call_id": call,
                    "name": "probe", "is_error": False, "content": found})
    out.append({"kind": "assistant", "run_id": run.id, "tool_calls": [],
                "text": QUIET if quiet else found})
    return out


def test_invariant_3_finds_a_one_shot_twice_one_missed_and_a_check_that_posted_no_news(
) -> None:
    now = float(int(time.time()))
    written = now - 400
    reminders = [Reminder("remind-0", 100.0, "once"), Reminder("remind-1", 200.0, "skip"),
                 Reminder("remind-2", 300.0, "once")]
    jobs = Schedules(make_plan(1, 10, "sqlite", 1), [], None, History())  # type: ignore[arg-type]
    jobs.ended = now
    at = [written + r.after_s for r in reminders]
    runs = [_run(f"schedule:remind-0:{_iso(at[0])}", "reminder remind-0"),
            _run(f"schedule:remind-0:{_iso(at[0] + 60)}", "reminder remind-0"),  # twice
            _run(f"schedule:remind-2:{_iso(at[2])}", "reminder remind-2")]  # remind-1 missed
    records = [ScheduleRecord(name=r.name, origin="config", since=written + 1,
                              created_at=written + 1, last_slot=at[i])
               for i, r in enumerate(reminders)]
    # Asked for in chat "in 1m": its time has microseconds, its key names it to the second.
    asked = written + 150.25
    records.append(ScheduleRecord(
        name="rem-0", origin="chat", since=asked - 60, created_at=asked - 60, last_slot=asked,
        spec={"config": {"at": datetime.fromtimestamp(asked, UTC).isoformat()}}))
    runs.append(_run(f"schedule:rem-0:{_iso(asked)}", "reminder rem-0"))
    slots = [_iso(now - 200), _iso(now - 140), _iso(now - 80)]
    watch = [_run(f"schedule:watch:{slot}", reply) for slot, reply in zip(
        slots, ["probe status 1", QUIET, "probe status 1"], strict=True)]
    entries = (_entries(watch[0], "probe status 1", quiet=False)
               + _entries(watch[1], "probe status 1", quiet=True)
               + _entries(watch[2], "probe status 1", quiet=False))  # no news, posted
    ledger = [{"tool": "probe", "applied": True, "run": r.id} for r in watch]
    ledger.append({"tool": "probe", "applied": True, "run": watch[1].id})  # probed twice
    stored = Stored(runs=[], entries={"schedule:watch": entries}, ledger=ledger, details={},
                    leases=[], live=set())
    found = check_jobs(jobs, reminders, written, Kept([*runs, *watch], records), stored, None)
    what = sorted(v.what for v in found)
    assert what == sorted([
        f"the one-shot remind-0 has 2 runs: {[runs[0].idempotency_key, runs[1].idempotency_key]}",
        f"the one-shot remind-0 (at {_iso(at[0])}) ran under {runs[1].idempotency_key}",
        f"the one-shot remind-1 (at {_iso(at[1])}) never ran; its time came with the store "
        "reachable and a replica up",
        f"schedule:watch:{slots[1]} completed and probed 2 times",
        f"schedule:watch:{slots[2]} found 'probe status 1' again and answered 'probe status "
        "1', not that nothing is new"]), what
    assert all(v.invariant == 3 for v in found)
