"""What each schedule did last, told truthfully: a run that completed but whose answer is
still in the outbox is "not delivered yet", never "ok"."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from runtime import NotFound, ReplyDelivery, Run, RunState, ScheduleRecord

from .book import ScheduleBook
from .config import Schedule
from .cron import next_fires, slot_key, slots_between
from .crontab import At

__all__ = ["ScheduleStatus", "deliver_text", "outcome", "slot_history", "statuses"]


@dataclass(frozen=True, slots=True)
class ScheduleStatus:
    schedule: Schedule
    active: bool
    paused: bool
    next_fires: list[datetime]
    last_slot: datetime | None = None
    last_run: Run | None = None
    replies: list[ReplyDelivery] = field(default_factory=list)
    skipped_slot: datetime | None = None
    """The newest slot skipped because the run before it waited for an approval."""
    skipped_why: str | None = None
    done: bool = False
    """A one-shot whose time is decided (it ran, or was skipped): kept, never fired again."""

    @property
    def skipping(self) -> bool:
        """Whether the newest slot decided was skipped (not an older one, since run)."""
        return self.skipped_slot is not None and (
            self.last_slot is None or self.skipped_slot > self.last_slot)

    @property
    def outcome(self) -> str:
        return outcome(self.last_run, self.replies)

    def as_json(self) -> dict[str, Any]:
        config = self.schedule.config
        run = self.last_run
        delivered = [r.remote_id for r in self.replies if r.remote_id]
        return {
            "name": config.name,
            "origin": self.schedule.source,
            "cron": config.cron,
            "at": at.moment.isoformat() if isinstance(at := self.schedule.cron, At) else None,
            "done": self.done,
            "does": "say" if config.say is not None else "tool" if config.tool else "prompt",
            "timezone": self.schedule.cron.timezone,
            "thread": self.schedule.thread,
            "fresh_thread": config.fresh_thread,
            "deliver": deliver_text(self.schedule),
            "misfire": config.misfire,
            "enabled": config.enabled,
            "paused": self.paused,
            "next_fires": [f.isoformat() for f in self.next_fires],
            "last_slot": self.last_slot.isoformat() if self.last_slot else None,
            "last_run": None if run is None else {
                "id": run.id, "thread_id": run.thread_id, "state": run.state.value,
                "error": run.error, "delivered": delivered or None},
            "outcome": self.outcome,
            "overlap": config.overlap,
            "skipped": None if self.skipped_slot is None else {
                "slot": self.skipped_slot.isoformat(), "why": self.skipped_why},
        }


def outcome(run: Run | None, replies: list[ReplyDelivery]) -> str:
    """One line: the last run's state, and for a delivered answer its message id."""
    if run is None:
        return "-"
    if run.state == RunState.COMPLETED or replies:
        if not run.origin.target:
            return run.state.value if run.state != RunState.COMPLETED \
                else f"completed (in thread {run.thread_id})"
        if not replies:
            return f"{run.state.value}; the answer is not delivered yet"
        sent = [r.remote_id for r in replies if r.remote_id]
        where = f"{run.origin.channel} {_where(run)}"
        if len(sent) == len(replies):
            return f"{run.state.value}; delivered to {where} as {', '.join(sent)}"
        failed = [r for r in replies if not r.remote_id and r.last_error]
        why = f"; {failed[-1].attempts_failed} failed attempt(s), the last: " \
              f"{failed[-1].last_error}" if failed else ""
        return f"{run.state.value}; NOT delivered to {where} yet{why}"
    if run.error:
        return f"{run.state.value}: {run.error}"
    return run.state.value


async def statuses(book: ScheduleBook, *, now: datetime | None = None,
                   count: int = 3) -> list[ScheduleStatus]:
    """Every schedule in the book (``load`` it first), with its next ``count`` fires."""
    now = now or book.clock()
    found: list[ScheduleStatus] = []
    for schedule in book.schedules():
        record = book.record(schedule.name)
        active = book.active(schedule)
        upcoming = next_fires(schedule.cron, now, count) if active else []
        status = ScheduleStatus(schedule, active, bool(record and record.paused), upcoming,
                                done=book.finished(schedule))
        if record is not None and record.skipped_slot is not None:
            status = replace(status, skipped_slot=_local(record.skipped_slot, schedule),
                             skipped_why=record.skipped_why)
        if record is not None and record.last_run_id is not None:
            try:
                run = await book.runs.get_run(record.last_run_id)
            except NotFound:
                run = None
            replies = [d for d in await book.runs.deliveries(run_id=record.last_run_id)
                       if isinstance(d, ReplyDelivery)]
            slot = _local(record.last_slot, schedule) if record.last_slot is not None \
                else None
            status = replace(status, last_slot=slot, last_run=run, replies=replies)
        found.append(status)
    return found


async def slot_history(book: ScheduleBook, schedule: Schedule, *, now: datetime | None = None,
                       limit: int = 20) -> list[dict[str, Any]]:
    """The schedule's newest ``limit`` slots since it was first recorded, newest first: each
    slot's run (found by the slot's key, which is how a fire claims it) and its outcome."""
    now = now or book.clock()
    record = book.record(schedule.name)
    since = datetime.fromtimestamp(record.created_at if record else now.timestamp(), UTC)
    found: list[dict[str, Any]] = []
    for slot in reversed(slots_between(schedule.cron, since, now, limit)):
        run = await book.runs.run_for_key(slot_key(schedule.name, slot))
        entry: dict[str, Any] = {"slot": slot.isoformat(), "run": None,
                                 "outcome": _not_run(schedule, record, slot)}
        if run is not None:
            replies = [d for d in await book.runs.deliveries(run_id=run.id)
                       if isinstance(d, ReplyDelivery)]
            delivered = [r.remote_id for r in replies if r.remote_id]
            entry |= {"run": {"id": run.id, "thread_id": run.thread_id,
                              "state": run.state.value, "error": run.error,
                              "delivered": delivered or None},
                      "outcome": outcome(run, replies)}
        found.append(entry)
    return found


def _not_run(schedule: Schedule, record: ScheduleRecord | None, slot: datetime) -> str:
    """Why a slot has no run: skipped or missed, as the fire that decided it recorded
    (``ScheduleRecord.skips``); paused then; or not decided yet."""
    if record is None:
        return "no run"
    why = dict(record.skips).get(slot.timestamp())
    if why is not None:
        return why
    if record.skipped_slot == slot.timestamp():
        return f"skipped: {record.skipped_why}"
    if slot.timestamp() > max(record.since, record.last_slot or 0.0):
        return "due: not decided yet"
    # Not among the skips a fire recorded: its time passed while the schedule was paused
    # (a resume starts from then), or longer ago than a catch-up looks (max_catchup).
    return "no run: the schedule was paused then, or maiden down longer than a catch-up " \
        "looks back"


def deliver_text(schedule: Schedule) -> str | None:
    """Where its answers go, as ``deliver`` says it (``slack:C:TS``), or None: the thread."""
    origin = schedule.origin
    if not origin.target:
        return None
    return ":".join([origin.channel, *origin.target.values()])


def _local(stamp: float, schedule: Schedule) -> datetime:
    return datetime.fromtimestamp(stamp, UTC).astimezone(schedule.cron.zone)


def _where(run: Run) -> str:
    return ":".join(run.origin.target.values())
