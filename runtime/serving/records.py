"""The runtime's records as they stand: runs, threads and their history, deliveries,
notes, schedule records, a thread's export. Read-only: ``Runtime.records``; what drives
runs is in ``service``."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence

from ..model.entries import Entry
from ..model.requests import Note, ScheduleRecord, SlotMark
from ..model.runs import Delivery, Run, RunState, Transition
from ..stores.base import Store, StoreStats, ThreadInfo
from .export import ThreadExport
from .workers import ACTIVE

__all__ = ["Records", "ScheduleRecords"]

S = RunState


class Records:
    """What a store holds, read on a caller's behalf (``Runtime.records``)."""

    def __init__(self, store: Store) -> None:
        self._store = store

    async def get_run(self, run_id: str) -> Run:
        """The run as stored now, or ``NotFound``."""
        return await self._store.get_run(run_id)

    async def run_for_key(self, idempotency_key: str) -> Run | None:
        """The run that holds an idempotency key (a redelivered event's, a schedule
        slot's), or None."""
        return await self._store.run_for_key(idempotency_key)

    async def runs(
        self,
        *,
        thread_id: str | None = None,
        states: Sequence[RunState] | None = None,
        limit: int | None = None,
    ) -> list[Run]:
        """Runs, oldest first, optionally of one thread or some states; with ``limit``, the
        newest ``limit`` of them."""
        return await self._store.list_runs(thread_id=thread_id, states=states, limit=limit)

    async def threads(self, *, offset: int = 0, limit: int | None = None) -> list[ThreadInfo]:
        """Threads, most recently updated first (a page of them)."""
        return await self._store.list_threads(offset=offset, limit=limit)

    async def entries(self, thread_id: str, *, offset: int = 0, limit: int | None = None
                      ) -> list[Entry]:
        """A thread's history in order (a page of it with ``offset``/``limit``); ``[]`` for
        a thread never written."""
        return await self._store.load_entries(thread_id, offset=offset, limit=limit)

    async def export(self, thread_id: str, *, secrets: Iterable[str] = ()) -> ThreadExport:
        """The thread as JSON lines (``ThreadExport.lines``; ``export`` says what they
        hold), with each of ``secrets`` written ``[redacted]``; ``NotFound`` if there is no
        such thread."""
        return await ThreadExport.of(self._store, thread_id, at=time.time(), secrets=secrets)

    async def thread_length(self, thread_id: str) -> int:
        """How many entries the thread holds."""
        return await self._store.thread_length(thread_id)

    async def transitions(self, run_id: str) -> list[Transition]:
        """Every state change of a run, with its reason."""
        return await self._store.transitions(run_id)

    async def deliveries(
        self, *, run_id: str | None = None, pending: bool | None = None
    ) -> list[Delivery]:
        """Outbox records (replies and approval prompts), oldest first; ``pending=True``:
        those not posted yet."""
        return await self._store.deliveries(run_id=run_id, pending=pending)

    async def stats(self) -> StoreStats:
        """Counts of runs by state, threads and deliveries (for listings and metrics)."""
        return await self._store.stats()

    async def active_run(self, thread_id: str) -> Run | None:
        """The thread's run that has not ended and goes first (running, or waiting for a
        tool, a person, or its turn), e.g. for a channel's ``stop`` command."""
        active = await self._store.list_runs(thread_id=thread_id, states=ACTIVE)
        return active[0] if active else None

    async def pending_approvals(self, *, channel: str | None = None) -> list[Run]:
        """Runs waiting for a person's decision; with ``channel``, those asked there."""
        waiting = await self._store.list_runs(states=[S.AWAITING_APPROVAL])
        return [r for r in waiting if r.pending_approval is not None
                and (channel is None or r.pending_approval.channel == channel)]

    async def notes(self, scope: str) -> list[Note]:
        """The ``memory`` notes of a scope (``thread:{id}`` or ``agent``), by key."""
        return await self._store.notes(scope)

    async def schedule_records(self) -> list[ScheduleRecord]:
        """Every schedule record in the store, by name."""
        return await self._store.schedule_records()


class ScheduleRecords:
    """What the schedules package keeps between restarts, written through the runtime's
    API (the ``ScheduleBook`` is made before the runtime: the schedule tools need it)."""

    def __init__(self, store: Store) -> None:
        self._store = store

    async def all(self) -> list[ScheduleRecord]:
        """Every schedule record, by name."""
        return await self._store.schedule_records()

    async def save(self, records: Sequence[ScheduleRecord]) -> None:
        """Insert or replace whole records (by name) in one write."""
        await self._store.save_schedules(records)

    async def advance(self, marks: Sequence[SlotMark]) -> None:
        """Move records forward to what fires decided, never back, in one write."""
        await self._store.advance_schedules(marks)

    async def delete(self, name: str) -> bool:
        """Remove a record; False if there was none."""
        return await self._store.delete_schedule(name)
