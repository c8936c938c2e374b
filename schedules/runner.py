"""Firing: each slot of each schedule becomes one run, exactly once.

A slot is claimed by submitting its run with ``idempotency_key = slot_key(name, slot)``:
the store writes the key with the queued run, in one transaction, so a second claim of
the slot (a duplicate timer, a restart, another process on the store) creates nothing.

APScheduler is the alarm clock only. Each schedule is an ``AsyncIOScheduler`` job on a
``SlotTrigger``, whose fire times are the slot arithmetic's (``schedules.cron``); when it
goes off, :meth:`Scheduler.fire_due` decides what to claim from that arithmetic and the
clock. The same entry point catches up at startup and is what tests drive, with an
injected clock, without sleeping.

Which slots run: those in ``(mark, now]``, where ``mark`` is the later of the schedule's
last claimed slot and the instant up to which its slots were decided. The newest slot is
on time when the timer went off for it, or when it is at most ``ON_TIME`` old; older ones
were missed (maiden was down, or the process stalled) and ``misfire`` decides: ``skip``
none, ``once`` the newest (unless the on-time slot runs anyway), ``all`` up to
``max_catchup``. A schedule new to the store starts from now. A slot already claimed (by
another process on the store, or by a claim whose record a crash lost) is not missed.

Several processes (replicas) on one store may each fire every schedule. Each fire first
re-reads the records, so a schedule paused or deleted by another process is not fired
(one caught between that read and its claim runs that slot, and no later one), and the
slots to decide start after the latest any process recorded. A fire writes back only how
far it got (a ``SlotMark``), which the store applies forward only and never to a deleted
record: a fire from an old copy can neither undo a pause, a resume or a delete, nor move a
record back. Whole records are written only by definitions made or changed (the book).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from apscheduler.schedulers.asyncio import AsyncIOScheduler  # type: ignore[import-untyped]

from runtime import MaidenError, NotFound, Run, Runtime, ScheduleRecord, SlotMark

from .book import Clock, ScheduleBook, ScheduleError
from .config import Schedule
from .cron import due_slots, due_until, jitter, slot_key, slots_between
from .crontab import At
from .hooks import take
from .marks import Fired, decided, later, manual_key
from .skips import cannot_run, still_running
from .status import slot_history, statuses
from .trigger import SlotTrigger

__all__ = ["ON_TIME", "Fired", "Scheduler", "manual_key"]

log = logging.getLogger("maiden.schedules")

ON_TIME = timedelta(seconds=60)
"""How late a slot may be found and still count as on time rather than missed."""


class Scheduler:
    """Fires a book's schedules into a runtime. ``async with`` starts and stops it.

    ``timers=False`` sets no alarms: the owner calls :meth:`fire_due` (tests, with
    ``clock``). ``refresh_s``: how often the store is re-read for schedules that another
    process created, paused, resumed or deleted, to set the alarms (each fire re-reads it
    too, so what it claims is never older than the fire).
    """

    def __init__(
        self,
        book: ScheduleBook,
        runtime: Runtime,
        *,
        clock: Clock | None = None,
        timers: bool = True,
        refresh_s: float = 10.0,
        channels: Sequence[str] | None = None,
    ) -> None:
        self.book = book
        self.channels = channels
        """The chat channels configured (None: not known, any): a slot whose schedule
        delivers elsewhere is skipped, with why."""
        self.runtime = runtime
        self.clock = clock or book.clock
        self.timers = timers
        self.refresh_s = refresh_s
        self.aps: AsyncIOScheduler | None = None
        self._marks: dict[str, datetime] = {}
        self._last_runs: dict[str, str] = {}
        """The run of each schedule's newest slot this process claimed (the record may
        not have it yet)."""
        self._locks: dict[str, asyncio.Lock] = {}
        self._saving = asyncio.Lock()
        self._staged: dict[str, SlotMark] = {}
        self._refresher: asyncio.Task[None] | None = None
        self.started: list[Fired] = []
        """What the catch-up at ``start`` claimed."""

    async def __aenter__(self) -> Scheduler:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- lifecycle

    async def start(self) -> list[Fired]:
        """Read the store, catch up on the slots missed while down, set the alarms; return
        what the catch-up claimed."""
        await self.book.load()
        now = self.clock()
        await self._forget_removed()
        await self._mark_all(now)
        self.started = fired = await self._fire_loaded(now, woken=None)
        if self.timers:
            self.aps = AsyncIOScheduler(timezone=UTC, job_defaults={
                "coalesce": True, "max_instances": 1, "misfire_grace_time": None})
            self._set_alarms()
            self.aps.start()
            self._refresher = asyncio.create_task(self._refresh_forever(),
                                                  name="schedules-refresh")
        self.book.listeners.append(self.sync)
        return fired

    async def close(self) -> None:
        """Stop the alarms; a fire in progress is a runtime task and finishes with it."""
        with contextlib.suppress(ValueError):
            self.book.listeners.remove(self.sync)
        if self._refresher is not None:
            self._refresher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._refresher
            self._refresher = None
        if self.aps is not None and self.aps.running:
            self.aps.shutdown(wait=False)
        self.aps = None

    async def sync(self) -> None:
        """Take in changes to the book (chat schedules made, paused, resumed, deleted)."""
        await self.book.load()
        for name in [n for n in self._marks if self.book.get(n) is None]:
            del self._marks[name]  # deleted: a new schedule of that name starts afresh
            self._last_runs.pop(name, None)
        await self._mark_all(self.clock())
        if self.aps is not None:
            self._set_alarms()
        await self._overdue()

    async def _overdue(self) -> list[Fired]:
        """Fire the one-shots whose time has passed with nothing decided. A recurring
        schedule's next alarm catches up a slot its own alarm could not claim (the store
        out of reach then, or this process's clock behind); a one-shot has no next alarm,
        and one made for a time just passed never gets one."""
        now = self.clock()
        return await self._fire_each([
            s for s in self.book.schedules() if isinstance(s.cron, At)
            and s.cron.moment <= now and self.book.active(s) and not self.book.finished(s)],
            now, on_time=False)

    # -- firing

    async def fire_due(self, now: datetime | None = None, *,
                       woken: str | None = None) -> list[Fired]:
        """Claim every slot that is due at ``now`` (default: the clock), for every active
        schedule (or only ``woken``, whose timer just went off). Safe to call any time and
        any number of times: a slot already claimed is not claimed again. The store is
        re-read first: what another process paused or deleted is not fired."""
        now = now or self.clock()
        await self.book.load()
        return await self._fire_loaded(now, woken=woken)

    async def _fire_loaded(self, now: datetime, *, woken: str | None) -> list[Fired]:
        return await self._fire_each([
            s for s in self.book.schedules()
            if (woken is None or s.name == woken) and self.book.active(s)],
            now, on_time=woken is not None)

    async def _fire_each(self, schedules: list[Schedule], now: datetime, *, on_time: bool
                         ) -> list[Fired]:
        """Fire each of ``schedules`` at ``now``, then record how far they got at once."""
        fired: list[Fired] = []
        marks: list[SlotMark] = []
        for schedule in schedules:
            claimed, mark = await self._fire(schedule, now, on_time=on_time)
            fired += claimed
            if mark is not None:
                marks.append(mark)
        if marks:
            await self._advance(marks)
        return fired

    async def _advance(self, marks: list[SlotMark]) -> None:
        """Record how far fires got (the store only ever moves a record forward, so fires
        may finish in any order), in as few writes as there are writers waiting: whoever
        holds the lock writes everything staged by then."""
        for mark in marks:
            staged = self._staged.get(mark.name)
            self._staged[mark.name] = mark if staged is None else later(staged, mark)
        async with self._saving:
            if not self._staged:
                return  # written by the writer before
            batch = list(self._staged.values())
            self._staged.clear()
            await self.book.advance(batch)

    async def run_now(self, name: str, *, request: str | None = None) -> Run:
        """Run a schedule once now, outside its slots, under its own key (``NotFound``: no
        such schedule); the same ``request`` (a chat command's id) again is the same run."""
        schedule = await self._named(name)
        return await self._submit(schedule, manual_key(name, request))

    async def _submit(self, schedule: Schedule, key: str, late: timedelta | None = None
                      ) -> Run:
        """The run of a slot (or a run asked for by hand) under ``key``."""
        text, job = schedule.asked(late)
        return await self.runtime.submit(
            schedule.thread_for(key.split(":", 2)[2]), text, origin=schedule.origin,
            idempotency_key=key, agent=schedule.config.agent, schedule=schedule.name, job=job)

    async def hook(self, name: str, body: bytes, headers: Mapping[str, str]
                   ) -> tuple[Run, bool]:
        """A webhook's delivery (``hooks.py``): checked (``HookRefused``; ``NotFound``: no
        such hook), then one run under the delivery's key; True with the run a delivery sent
        before made (nothing more is run)."""
        hook = self.book.hooks.get(name)
        if hook is None:
            raise NotFound(f"there is no hook {name!r}")
        return await take(self.runtime, hook, body, headers)

    async def _fire(
        self, schedule: Schedule, now: datetime, *, on_time: bool
    ) -> tuple[list[Fired], SlotMark | None]:
        name = schedule.name
        async with self._locks.setdefault(name, asyncio.Lock()):
            self._marks[name] = mark = self._mark(name, now)
            cap = schedule.config.max_catchup
            now = due_until(schedule.cron, name, schedule.config.jitter_s, mark, now)
            slots = slots_between(schedule.cron, mark, now, limit=cap + 1)
            if not slots:
                return [], None
            late = now - slots[-1] - jitter(name, slots[-1], schedule.config.jitter_s)
            due = due_slots(slots, schedule.config.misfire, cap,
                            on_time=on_time or late <= ON_TIME)
            # overlap = "skip": while the run of an earlier slot waits for a person's
            # decision, a slot due now is decided as skipped, not queued behind it (one more
            # run a minute for `* * * * *`, each waiting for the same person).
            record = self.book.record(name)
            blocked = cannot_run(schedule, self.runtime.operator.agents, self.channels) \
                or await still_running(schedule, self.runtime.records, [
                    self._last_runs.get(name), record.last_run_id if record else None])
            held_back, due = (due, []) if blocked is not None else ([], due)
            fired = await self._claim(schedule, due, now)
            skipped = [slot for slot in slots if slot not in due]
            if skipped:
                # Claimed already, by another process whose record is not written yet, or
                # just before a crash that lost the record: its run exists (recovery
                # finishes it), so it is not a missed slot.
                for slot in skipped:
                    key = slot_key(name, slot)
                    held = await self.runtime.records.run_for_key(key)
                    if held is not None:
                        fired.append(Fired(name, slot, key, held))
                fired.sort(key=lambda f: f.slot)
                skipped = [slot for slot in skipped if all(f.slot != slot for f in fired)]
            held_back = [slot for slot in held_back if slot in skipped]
            missed = [slot for slot in skipped if slot not in held_back]
            return fired, decided(name, self._marks[name], [(f.slot, f.run) for f in fired],
                                  missed, held_back, blocked, schedule.config.misfire)

    async def _claim(self, schedule: Schedule, due: list[datetime],
                     now: datetime) -> list[Fired]:
        """Submit each due slot's run under the slot's key, oldest first, moving the mark
        past each one claimed (to ``now`` when all are); stop at the first that fails."""
        name = schedule.name
        fired: list[Fired] = []
        for slot in due:
            key = slot_key(name, slot)
            try:
                run = await self._submit(schedule, key, now - slot)
            except MaidenError as exc:
                # Not claimed; the mark stays before it, so the next fire tries again.
                log.error("schedule %r could not claim slot %s: %s", name,
                          slot.isoformat(), exc)
                break
            fired.append(Fired(name, slot, key, run))
            self._marks[name] = slot
            self._last_runs[name] = run.id
        else:
            self._marks[name] = now
        return fired

    def _mark(self, name: str, now: datetime) -> datetime:
        """Where the slots still to decide start: the latest of what this process decided
        and what the record says (another process's fires; a resume, from then)."""
        stamps = [m.timestamp()] if (m := self._marks.get(name)) is not None else []
        record = self.book.record(name)
        if record is not None:
            stamps += [record.since, record.last_slot or record.since]
        return datetime.fromtimestamp(max(stamps), UTC) if stamps else now

    async def listing(self) -> list[dict[str, Any]]:
        """Every schedule as JSON, with its next fires and what its last slot did."""
        return [status.as_json() for status in await statuses(self.book)]

    async def set_paused(self, name: str, paused: bool) -> None:
        """Pause or resume any schedule (the operator's console); ``NotFound`` if none."""
        try:
            await self.book.set_paused(name, paused, thread_id=None)
        except ScheduleError as exc:
            raise NotFound(str(exc)) from exc

    async def history(self, name: str, limit: int = 20) -> list[dict[str, Any]]:
        """The schedule's newest slots, newest first, with their runs and outcomes."""
        schedule = await self._named(name)
        return await slot_history(self.book, schedule, now=self.clock(), limit=limit)

    async def _named(self, name: str) -> Schedule:
        """The schedule of that name (re-reading the store for one made since), or
        ``NotFound``."""
        schedule = self.book.get(name)
        if schedule is None:
            await self.book.load()
            schedule = self.book.get(name)
        if schedule is None:
            raise NotFound(f"no schedule named {name!r}")
        return schedule

    # -- marks and alarms

    async def _mark_all(self, now: datetime) -> None:
        """Each schedule's mark from its record; a schedule new to the store gets a record
        that starts now."""
        new: list[ScheduleRecord] = []
        for schedule in self.book.schedules():
            record = self.book.record(schedule.name)
            if record is None:
                record = ScheduleRecord(name=schedule.name, origin=schedule.source,
                                        since=now.timestamp(), created_at=now.timestamp())
                new.append(record)
            if not self.book.active(schedule):
                self._marks.pop(schedule.name, None)
                continue
            if schedule.name in self._marks:
                continue
            stamps = [record.since, record.last_slot or record.since]
            self._marks[schedule.name] = datetime.fromtimestamp(max(stamps), UTC)
        if new:
            await self.book.save(new)

    async def _forget_removed(self) -> None:
        """Records of config schedules no longer in the config: a schedule added back later
        under the same name starts afresh."""
        names = {s.name for s in self.book.schedules()}
        for record in self.book.records():
            if record.origin == "config" and record.name not in names:
                await self.book.forget(record.name)

    def _set_alarms(self) -> None:
        assert self.aps is not None
        wanted = {s.name: s for s in self.book.schedules() if self.book.active(s)}
        for job in self.aps.get_jobs():
            if job.id not in wanted:
                job.remove()
        for name, schedule in wanted.items():
            if self.aps.get_job(name) is None:
                self.aps.add_job(self._wake, trigger=SlotTrigger(
                    schedule.cron, name=name, jitter_s=schedule.config.jitter_s), args=[name],
                                 id=name, name=f"schedule {name}")

    async def _wake(self, name: str) -> None:
        # A runtime task, so shutdown waits for a claim in progress instead of cutting it.
        self.runtime.spawn(self._fire_woken(name), name=f"schedule-{name}")

    async def _fire_woken(self, name: str) -> None:
        try:
            await self.fire_due(self.clock(), woken=name)
        except Exception:
            log.exception("schedule %r: firing failed; the next fire tries again", name)

    async def _refresh_forever(self) -> None:
        while True:
            await asyncio.sleep(self.refresh_s)
            try:
                await self.sync()
            except Exception:
                log.exception("schedules: re-reading the store failed; trying again")

    def next_alarms(self) -> Sequence[tuple[str, datetime | None]]:
        """Each job's next alarm, as APScheduler has it (for checks and tests)."""
        if self.aps is None:
            return []
        return [(job.id, job.next_run_time) for job in self.aps.get_jobs()]

