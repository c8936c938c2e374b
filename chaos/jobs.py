"""Jobs without the model (issue 56): reminders and a tool-only check, in every replica's
agent.toml and asked for in chat (``job_plan.py`` draws them).

- ``remind-N``: one-shots of the config, ``at`` the plan's offset after the agent.toml is
  written, ``say = "reminder remind-N"``, ``misfire`` ``once`` or ``skip``, delivered into
  the Slack jobs channel (``delivering.py``'s) in a pass with Slack;
- ``rem-N``: a person's message in an HTTP thread asks for one (the model calls
  ``schedule_create`` with ``in = "1m"`` and ``say``); it runs in ``schedule:rem-N``;
- ``watch``: every minute, ``probe`` (``non_idempotent``, with a reconcile hook; what it
  finds changes every 100 s) with ``post = "on_change"``, delivered as the reminders are.

Checked (invariant 3) from the store's runs and records, the threads, the ledger and the
fake Slack: a one-shot has at most one run, under the key of its one time, and exactly one
when its time came with the store reachable, every clock right and a replica up (as a cron
slot that had to run: ``Schedules._quiet``); a one-shot that ran is recorded done; its run
says its words (no model asked), posted once; ``watch``: each slot at most one run, each
completed one ``probe`` once (the ledger), its answer the output when that differs from the
newest earlier run's that ended, else the quiet "nothing new" (and then nothing posted).
"""

from __future__ import annotations

import re
from collections import Counter
from datetime import UTC, datetime
from typing import Any

from runtime import Run
from tests.fakes.slack import BOT_USER, FakeSlack

from .delivering import SLACK_JOBS
from .invariants import TERMINAL, Stored, Violation
from .job_plan import CHAT_REMINDER, REMINDER, WATCH, Reminder
from .schedules import CUT_AFTER_S, MARGIN_S, Kept, Schedules

__all__ = ["QUIET", "check_jobs", "jobs_summary", "jobs_toml"]

QUIET = "Nothing new since the last run"
"""How a ``watch`` run that found nothing new ends (kept in its thread, not posted)."""


def jobs_toml(reminders: list[Reminder], written_at: float, slack: bool) -> str:
    """The replicas' one-shots (their times from ``written_at``, wall clock) and ``watch``."""
    deliver = f'deliver = "slack:{SLACK_JOBS}"\n' if slack else ""
    out = "".join(f'''
[[schedules]]
name = "{r.name}"
at = "{_at(r, written_at).isoformat()}"
say = "reminder {r.name}"
misfire = "{r.misfire}"
{deliver}''' for r in reminders)
    return out + f'''
[[schedules]]
name = "{WATCH}"
cron = "* * * * *"
tool = "probe"
args = {{tag = "{WATCH}", n = 0}}
post = "on_change"
misfire = "once"
{deliver}'''


def _at(reminder: Reminder, written_at: float) -> datetime:
    """A config one-shot's time, to the second (as its ``at`` says it)."""
    return datetime.fromtimestamp(written_at + reminder.after_s, UTC).replace(microsecond=0)


def _posts(slack: FakeSlack | None) -> list[str] | None:
    if slack is None:
        return None
    return [str(m.get("text") or "").strip() for m in slack.messages(SLACK_JOBS)
            if m.get("user") == BOT_USER]


def _moment(record: Any) -> float | None:
    """A one-shot's time, from its record (a chat one's definition), else None."""
    at = ((record.spec or {}).get("config") or {}).get("at") if record is not None else None
    return datetime.fromisoformat(at).timestamp() if at else None


def _slot(run: Run) -> tuple[str, float] | None:
    parts = (run.idempotency_key or "").split(":", 2)
    if len(parts) != 3 or parts[0] != "schedule" or parts[2].startswith("manual:"):
        return None
    return parts[1], datetime.fromisoformat(parts[2]).timestamp()


def check_jobs(jobs: Schedules, reminders: list[Reminder], written_at: float, kept: Kept,
               stored: Stored, slack: FakeSlack | None) -> list[Violation]:
    """Invariant 3 for the one-shots and ``watch`` (see the module's docstring)."""
    out: list[Violation] = []
    events = [(jobs.wall(t), kind, text) for t, kind, text in jobs.history.events]
    end = jobs.ended if jobs.ended is not None else datetime.now(UTC).timestamp()
    records = {r.name: r for r in kept.records}
    runs: dict[str, list[Run]] = {}
    for run in kept.runs:
        found = _slot(run)
        if found is not None:
            runs.setdefault(found[0], []).append(run)
    posts = _posts(slack)
    moments = {r.name: _at(r, written_at).timestamp() for r in reminders}
    moments.update({name: m for name, record in records.items()
                    if name.startswith(CHAT_REMINDER) and (m := _moment(record)) is not None})
    for name, moment in sorted(moments.items()):
        out += _one_shot(jobs, name, moment, runs.get(name, []), records.get(name), end,
                         events, posts if name.startswith(REMINDER) else None)
    out += _watch(runs.get(WATCH, []), stored, posts)
    return out


def _one_shot(jobs: Schedules, name: str, moment: float, runs: list[Run], record: Any,
              end: float, events: list[tuple[float, str, str]], posts: list[str] | None
              ) -> list[Violation]:
    out: list[Violation] = []
    where = f"schedule:{name}"
    at = datetime.fromtimestamp(moment, UTC).isoformat(timespec="seconds")
    if len(runs) > 1:
        out.append(Violation(3, where, runs[0].id, f"the one-shot {name} has {len(runs)} "
                             f"runs: {[r.idempotency_key for r in runs]}"))
    for run in runs:
        slot = _slot(run)
        if slot is None or slot[1] != float(int(moment)):  # (a key names it to the second)
            out.append(Violation(3, where, run.id, f"the one-shot {name} (at {at}) ran under "
                                 f"{run.idempotency_key}"))
        if run.state == "completed" and not _says(run.reply or "", name):
            out.append(Violation(3, where, run.id, f"the one-shot {name} said {run.reply!r}"))
        if record is not None and record.last_slot is None and run.state in TERMINAL:
            out.append(Violation(3, where, run.id, f"the one-shot {name} ran, and its record "
                                 "does not say so (it is not shown done)"))
    required = record is not None and record.created_at + MARGIN_S < moment \
        and moment + CUT_AFTER_S <= end and jobs._quiet(moment, events)
    if required:
        jobs.required += 1
        if not runs:
            out.append(Violation(3, where, None, f"the one-shot {name} (at {at}) never ran; "
                                 "its time came with the store reachable and a replica up"))
    if posts is not None:
        shown = sum(1 for text in posts if _says(text, name))
        done = [r for r in runs if r.state == "completed"]
        if shown != len(done):
            out.append(Violation(1, where, runs[0].id if runs else None, f"the one-shot {name}"
                                 f" is posted {shown} times in {SLACK_JOBS}, its completed "
                                 f"runs {len(done)}"))
    return out


def _watch(runs: list[Run], stored: Stored, posts: list[str] | None) -> list[Violation]:
    """``watch``: one run a slot, ``probe`` once a completed run, posted on change only."""
    out: list[Violation] = []
    where = f"schedule:{WATCH}"
    per_slot = Counter(run.idempotency_key for run in runs)
    out += [Violation(3, where, None, f"{key} has {n} runs") for key, n in per_slot.items()
            if n > 1]
    probes = Counter(line["run"] for line in stored.ledger
                     if line["tool"] == "probe" and line["applied"])
    mine = {run.id for run in runs}
    out += [Violation(3, "?", run_id, f"probe ran {n} times for a run of no {WATCH} slot")
            for run_id, n in probes.items() if run_id not in mine]
    entries = stored.entries.get(where, [])
    expected_posts: list[str] = []
    for run in runs:
        if run.state != "completed":
            continue
        if probes[run.id] != 1:
            out.append(Violation(3, where, run.id, f"{run.idempotency_key} completed and "
                                 f"probed {probes[run.id]} times"))
        output = _output(entries, run.id)
        before = _last_output(entries, run.id)
        reply = run.reply or ""
        if output is None:
            continue  # failed check: said so (``The check `probe` failed``)
        if output == before and not reply.startswith(QUIET):
            out.append(Violation(3, where, run.id, f"{run.idempotency_key} found {output!r} "
                                 f"again and answered {reply!r}, not that nothing is new"))
        elif output != before and reply != output:
            out.append(Violation(3, where, run.id, f"{run.idempotency_key} found {output!r} "
                                 f"(the last was {before!r}) and answered {reply!r}"))
        if not reply.startswith(QUIET):
            expected_posts.append(reply)
    if posts is not None:
        shown = Counter(text for text in posts if text.startswith("probe status")
                        or text.startswith("The check `probe`"))
        if shown != Counter(expected_posts):
            out.append(Violation(1, where, None, f"{WATCH} posted {dict(shown)} in "
                                 f"{SLACK_JOBS}; its runs that found something new answered "
                                 f"{dict(Counter(expected_posts))}"))
    return out


def _output(entries: list[dict[str, Any]], run_id: str) -> str | None:
    """What the run's probe found (None: no result, or an error)."""
    for e in entries:
        if e["kind"] == "tool_result" and e["run_id"] == run_id and e["name"] == "probe":
            return None if e["is_error"] else str(e["content"])
    return None


def _last_output(entries: list[dict[str, Any]], run_id: str) -> str | None:
    """The newest output found before ``run_id``'s first entry in the thread, by a run
    that got to its final words."""
    first = next((i for i, e in enumerate(entries) if e["run_id"] == run_id), len(entries))
    ended = {e["run_id"] for e in entries[:first]
             if e["kind"] == "assistant" and not e["tool_calls"]}
    for e in reversed(entries[:first]):
        if e["kind"] == "tool_result" and e["run_id"] in ended and e["name"] == "probe" \
                and not e["is_error"]:
            return str(e["content"])
    return None


def jobs_summary(reminders: list[Reminder], kept: Kept) -> str:
    def ran(prefix: str) -> int:
        return sum(1 for r in kept.runs if (r.idempotency_key or "").startswith(
            f"schedule:{prefix}"))

    chat = sum(1 for r in kept.records if r.name.startswith(CHAT_REMINDER))
    watch = [r for r in kept.runs if (r.idempotency_key or "").startswith(f"schedule:{WATCH}:")]
    quiet = sum(1 for r in watch if (r.reply or "").startswith(QUIET))
    return (f"  jobs       reminders: config {len(reminders)} ({ran(REMINDER)} ran), chat "
            f"{chat} made ({ran(CHAT_REMINDER)} ran); {WATCH} {len(watch)} slots run, "
            f"{quiet} found nothing new")


def _says(text: str, name: str) -> bool:
    """Whether ``text`` is one-shot ``name``'s words (perhaps with "(late by …)" after):
    ``remind-1``'s, not ``remind-10``'s (seed 9191: the check counted those too)."""
    return re.match(rf"reminder {re.escape(name)}(?![\w.-])", text) is not None
