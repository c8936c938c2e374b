"""The soak's schedules (invariant 3: each slot ran at most once, exactly once where the
misfire policy says so).

Every replica's agent.toml has two jobs firing every minute (``* * * * *``):

- ``minute``: each slot in a thread of its own (``fresh_thread``: ``schedule:minute:{slot}``),
  every missed slot caught up (``misfire = "all"``): the one-slot-per-minute job;
- ``pulse``: every slot in the one thread ``schedule:pulse``, the newest missed slot only
  (``misfire = "once"``), paused and resumed through the HTTP API at the plan's times.

Chat schedules (``chat-N``) are created, paused and resumed by messages of the plan (the
model calls ``schedule_create`` / ``schedule_pause`` / ``schedule_resume``) in HTTP threads,
where their runs land between the people's messages. Each job's run calls ``tick``
(``non_idempotent``, with a reconcile hook), which writes the ledger.

At the end every schedule is paused (so no slot fires while the store is read) and the slots
are checked from the store (each run's idempotency key ``schedule:{name}:{slot}``, read with
the runtime's own store class), the threads and the ledger: no slot claimed twice, no slot
run twice (a second ``tick``, a second message in a slot's thread), no slot run while its
schedule was known to be paused (or not made yet), and every slot that had to run ran once:
one whose alarm went off with the store reachable, every replica's clock right, some
replica up, and the store taking that instant's claims in time (for ``all``: any slot
before such an alarm, caught up).

"Taking claims in time" is measured, not assumed from the fault events: ``minute``
(``misfire = "all"``, never paused, a fresh thread per slot) has every slot claimed sooner
or later, and its run is stamped as it is claimed. When its claim of an instant came later
than ``CLAIMED_S``, the replicas could not claim then (the store stalled after a cut or a
restart, a process stalled holding a transaction the others' claims wait for): a ``once``
slot of that instant is then decided by whichever fire gets through first, and when that is
after the next slot's alarm, the newest slot is the one run (chaos finding 38).
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from runtime import Records, Run, ScheduleRecord, ScheduleRecords, StoreConfig, make_store

from .fault_plan import SKEW_MAX_S
from .invariants import TERMINAL, Stored, Violation
from .job_plan import job_schedule
from .model import CRON, job_prompt
from .outages import STORE_OUTAGES
from .plan import CHAT_TAG, CONFIG_SCHEDULES, DELIVERING
from .schedule_toggles import Change, Toggles
from .sent import Sent
from .system import StoreSpec

__all__ = ["Kept", "Schedules", "claim_times", "manual_run", "read_kept",
           "schedules_toml"]

# Around a pause or a resume, a slot may or may not run (a fire that read the store just
# before; a replica whose clock is off stamps a resume with its time).
MARGIN_S = 2.0 + SKEW_MAX_S
CUT_AFTER_S = 6.0  # a slot's alarm and claim are over this long after it
LATE_S = 50.0  # a replica back within this of a slot catches it up on start
# A slot's claim stamped later than this after it (a replica's clock may be ahead): the
# store did not take that instant's claims in time (the module's docstring).
CLAIMED_S = CUT_AFTER_S + SKEW_MAX_S
PACER = "minute"  # the schedule whose claims say when the store took claims


def schedules_toml() -> str:
    return "".join(f'''
[[schedules]]
name = "{name}"
cron = "{CRON}"
prompt = "{job_prompt(name)}"
misfire = "{misfire}"
fresh_thread = {"true" if name == "minute" else "false"}
''' for name, misfire in CONFIG_SCHEDULES.items() if name not in DELIVERING)


@dataclass
class Kept:
    """What the store holds of the schedules, read with the runtime's store class."""

    runs: list[Run]
    records: list[ScheduleRecord]


async def read_kept(spec: StoreSpec, work: Path, dsn: str) -> Kept:
    config = StoreConfig.model_validate({
        "kind": spec.kind, "path": spec.path or "unused.db", "dsn_env": "CHAOS_PG_DSN",
        **({"schema": spec.schema} if spec.schema else {})})
    store = make_store(config, work, env={"CHAOS_PG_DSN": dsn})
    await store.open()
    try:
        return Kept(await Records(store).runs(), await ScheduleRecords(store).all())
    finally:
        await store.close()


@dataclass
class Schedules(Toggles):
    """Invariant 3, over the changes ``Toggles`` made and followed."""

    claimed_at: dict[float, float] = field(default_factory=dict)  # PACER's slot: its claim
    required: int = 0  # slots that had to run (checked: each exactly once)

    def _chat_changes(self, sent: dict[str, Sent], stored: Stored) -> None:
        """The chat schedules' changes, from the messages that asked for them: in effect
        somewhere between the message's sending and its run's end, if its tool call has a
        result that is not an error; not in effect if every result is an error; unknown
        otherwise (no result: the call may have run before its run was cut off)."""
        runs = {r["text"]: r for r in stored.runs}
        results: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for entries in stored.entries.values():
            for e in entries:
                if e["kind"] == "tool_result":
                    results[e["run_id"]].append(e)
        for s in sorted(sent.values(), key=lambda s: s.op.at):
            if int(s.op.tag[1:]) < CHAT_TAG:
                continue
            tool, _, name = s.op.steps[0][0].partition("=")
            if job_schedule(name):
                continue  # a reminder asked for (chaos/jobs.py)
            state = "active" if tool in ("schedule_create", "schedule_resume") else "paused"
            run = runs.get(s.op.text)
            mine = results.get(run["run_id"] if run else "", [])
            if mine and all(r["is_error"] for r in mine):
                continue  # refused (no such schedule), or cut off: nothing changed
            # Done by the time its run last changed (a wait=true answer may come before:
            # the request's wait ran out while the run was queued behind others).
            end = max(run["updated_at"], self.wall(s.answered_at or 0.0)) \
                if mine and run is not None and run["state"] in TERMINAL else None
            self.changes[name].append(Change(state, self.wall(s.op.at) - 1.0, end))

    def _state(self, name: str, at: float) -> str | None:
        """What ``name`` was at ``at`` (wall): "active", "paused" (or not made yet), None
        if that is not known."""
        state: str | None = "active" if name in CONFIG_SCHEDULES else "paused"
        changes = self.changes.get(name, [])
        # In the order they took effect (the HTTP API's, the chat's and the chat tools'
        # are listed apart); two whose spans overlap may have taken effect in either order,
        # so if they disagree what came of them is not known until a later one.
        for change in sorted(changes, key=lambda c: c.start if c.end is None else c.end):
            if change.end is None and change.start - MARGIN_S <= at:
                return None
            if change.end is not None and change.start - MARGIN_S <= at <= change.end + \
                    MARGIN_S:
                return None
            if change.end is not None and change.end + MARGIN_S < at:
                state = None if any(_overlap(change, other) for other in changes
                                    if other.state != change.state) else change.state
        return state

    def _quiet(self, slot: float, history_wall: list[tuple[float, str, str]]) -> bool:
        """Whether the alarm of ``slot`` went off with the store reachable, every clock
        right (a replica behind claims it a minute late, by when ``misfire = "once"`` has
        moved on to the next) and a replica up (or one back within ``LATE_S``, which
        catches it up on start)."""
        lo, hi = slot - 1.0, slot + CUT_AFTER_S
        for begin, end in STORE_OUTAGES:  # a PostgreSQL cut or restart, a full disk
            for (a, b) in _spans(history_wall, begin, (end, "settle")):
                if a <= hi and b >= lo:
                    return False
        for (a, b) in _spans(history_wall, "skew", ("unskew", "settle")):
            if a <= hi and b >= lo:  # a replica behind claims it a minute late
                return False
        return all(not (a <= hi and b >= lo and b > slot + LATE_S) for a, b in self.gaps)

    def _taken(self, slot: float) -> bool:
        """Whether the store took the claims of ``slot``'s instant in time: ``PACER``'s
        claim of it stamped within ``CLAIMED_S`` (none: not taken)."""
        at = self.claimed_at.get(slot)
        return at is not None and at - slot <= CLAIMED_S

    def check(self, sent: dict[str, Sent], stored: Stored, kept: Kept) -> list[Violation]:
        """Invariant 3, from the store's runs and records, the threads and the ledger."""
        out: list[Violation] = []
        self._chat_changes(sent, stored)
        events = [(self.wall(t), kind, text) for t, kind, text in self.history.events]
        end = self.ended if self.ended is not None else time.time()
        records = {r.name: r for r in kept.records}
        self.claimed_at = claim_times(kept.runs, PACER)
        slots: dict[str, dict[float, list[Run]]] = defaultdict(lambda: defaultdict(list))
        by_run: dict[str, tuple[str, float]] = {}
        for run in kept.runs:
            key = run.idempotency_key or ""
            parts = key.split(":", 2)
            if parts[0] != "schedule" or len(parts) < 3 or parts[2].startswith("manual:") \
                    or job_schedule(parts[1]):
                continue  # chaos/runnow.py checks runs now, chaos/jobs.py the jobs
            slot = datetime.fromisoformat(parts[2]).timestamp()
            slots[parts[1]][slot].append(run)
            by_run[run.id] = (parts[1], slot)
        ticks: dict[tuple[str, float], list[dict[str, Any]]] = defaultdict(list)
        # chaos/runnow.py and chaos/hooks.py check those
        manual = {r.id for r in kept.runs if manual_run(r)
                  or (r.idempotency_key or "").startswith("hook:")}
        for line in stored.ledger:
            if line["tool"] == "tick" and line["applied"] and line["run"] not in manual:
                where = by_run.get(line["run"]) or _fresh(line.get("thread", ""))
                if where is not None:
                    ticks[where].append(line)
                else:
                    out.append(Violation(3, line.get("thread", "?"), line["run"], "a tick "
                                         "ran for a run that holds no schedule slot"))
        for (name, slot), lines in ticks.items():
            if len(lines) > 1:
                out.append(Violation(3, lines[0].get("thread", "?"), lines[0]["run"],
                                     f"{name} slot {_iso(slot)} ticked {len(lines)} times "
                                     f"(runs {sorted({x['run'] for x in lines})}, pids "
                                     f"{[x['pid'] for x in lines]})", known=None))
        for thread, entries in stored.entries.items():
            if thread.startswith("schedule:minute:"):
                users = sum(1 for e in entries if e["kind"] == "user")
                if users > 1:
                    out.append(Violation(3, thread, None, f"the slot's thread holds {users} "
                                         "messages"))
        names = set(slots) | set(records) | set(CONFIG_SCHEDULES) | set(self.changes)
        for name in sorted(n for n in names if not job_schedule(n)):
            claimed = slots.get(name, {})
            for slot, runs in sorted(claimed.items()):
                thread = runs[0].thread_id
                if len(runs) > 1:
                    out.append(Violation(3, thread, runs[0].id, f"{name} slot {_iso(slot)} "
                                         f"has {len(runs)} runs"))
                if self._state(name, slot) == "paused":
                    out.append(Violation(3, thread, runs[0].id, f"{name} slot {_iso(slot)} "
                                         "ran while the schedule was paused (or not made)"))
                for run in runs:
                    if run.state not in TERMINAL:
                        continue  # invariant 4 says so
                    if run.state == "completed" and not (run.reply or "").startswith(
                            f"answer to j{name}."):
                        out.append(Violation(3, thread, run.id, f"{name} slot {_iso(slot)} "
                                             f"answered {run.reply!r}"))
            record = records.get(name)
            if record is None:
                continue
            for slot in self._required(name, record, end, events):
                self.required += 1
                if slot not in claimed:
                    out.append(Violation(3, f"schedule:{name}", None, f"{name} slot "
                                         f"{_iso(slot)} never ran (misfire = "
                                         f"{self._policy(name)!r}; its alarm went off with "
                                         "the store reachable and a replica up, and the "
                                         "store took that instant's claims in time)"))
        return out

    @staticmethod
    def _policy(name: str) -> str:
        return CONFIG_SCHEDULES.get(name, "once")

    def _required(self, name: str, record: ScheduleRecord, end: float,
                  events: list[tuple[float, str, str]]) -> list[float]:
        """The slots of ``name`` that had to run exactly once."""
        first = record.created_at + MARGIN_S
        slots = [float(s) for s in range(int(first // 60 + 1) * 60, int(end), 60)]
        quiet = [s for s in slots if s + CUT_AFTER_S <= end and self._quiet(s, events)
                 and self._taken(s)]
        out = []
        for slot in slots:
            if self._policy(name) == "all":  # caught up at a later quiet alarm
                later = [b for b in quiet if slot <= b <= slot + 540]
                if any(all(self._state(name, t) == "active"
                           for t in range(int(slot), int(b) + 1, 5)) for b in later):
                    out.append(slot)
            elif slot in quiet and self._state(name, slot) == "active":
                out.append(slot)
        return out

    def summary(self, kept: Kept) -> str:
        runs: Counter[str] = Counter()
        for run in kept.runs:
            parts = (run.idempotency_key or "").split(":", 2)
            if parts[0] == "schedule" and len(parts) == 3 and not manual_run(run) \
                    and not job_schedule(parts[1]):
                runs["chat" if parts[1].startswith("chat-") else parts[1]] += 1
        chats = sum(1 for r in kept.records if r.origin == "chat")
        late = sum(1 for slot, at in claim_times(kept.runs, PACER).items()
                   if at - slot > CLAIMED_S)
        return (f"  schedules  slots run: {_count(runs)} ({self.required} had to; {late} "
                f"instant(s) whose claims the store took late, {PACER}'s); {chats} "
                f"made from chat; HTTP {_count(self.toggled)}; /maiden "
                f"{_count(self.chat_toggled) or 'none'}; {len(self.gaps)} time(s) no "
                "replica up")


def _overlap(one: Change, other: Change) -> bool:
    """Whether two changes' spans (each known to have happened) overlap: the soak's own
    clock, when it asked and when it heard back, so either may have taken effect first."""
    return other.end is not None and one.end is not None \
        and other.start <= one.end and one.start <= other.end


def claim_times(runs: list[Run], name: str) -> dict[float, float]:
    """Each slot of ``name`` (its key's instant) and when its run was made: when the slot
    was claimed (a run is stamped as it is submitted)."""
    out: dict[float, float] = {}
    for run in runs:
        parts = (run.idempotency_key or "").split(":", 2)
        if len(parts) == 3 and parts[:2] == ["schedule", name] and not manual_run(run):
            out[datetime.fromisoformat(parts[2]).timestamp()] = run.created_at
    return out


def manual_run(run: Run) -> bool:
    """A run asked for by hand (``schedule:{name}:manual:{id}``), outside the slots."""
    parts = (run.idempotency_key or "").split(":", 3)
    return len(parts) == 4 and parts[0] == "schedule" and parts[2] == "manual"


def _count(counter: Counter[str]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counter.items())) or "none"


def _spans(events: list[tuple[float, str, str]], start: str, ends: tuple[str, ...]
           ) -> list[tuple[float, float]]:
    """Intervals from each ``start`` event to the next of ``ends`` (by wall clock; a skew
    and its end name the same replica: ``r1 ...``)."""
    out: list[tuple[float, float]] = []
    for i, (t, kind, text) in enumerate(events):
        if kind != start:
            continue
        who = text.split(" ", 1)[0]
        until = next((u for u, k, x in events[i + 1:] if k in ends and (
            k == "settle" or start != "skew" or x.split(" ", 1)[0] == who)), float("inf"))
        out.append((t, until))
    return out


def _fresh(thread: str) -> tuple[str, float] | None:
    """``schedule:minute:{slot}``: the slot a fresh thread is for."""
    parts = thread.split(":", 2)
    if len(parts) == 3 and parts[0] == "schedule":
        with contextlib.suppress(ValueError):
            return parts[1], datetime.fromisoformat(parts[2]).timestamp()
    return None


def _iso(slot: float) -> str:
    return datetime.fromtimestamp(slot, UTC).isoformat(timespec="seconds")
