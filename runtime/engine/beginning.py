"""A run's first step in this process: started (its message, with its files and the
earlier messages it brought, put in the thread), resumed, continued after a clean
shutdown, or recovered after a crash; or refused before it enters the thread (a message
too long, a spend cap reached, a run that keeps killing its process, a stop written
before a crash)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from ..model.config import AgentConfig
from ..model.decisions import asked_again
from ..model.durability import Write
from ..model.entries import AssistantTurn, Entry, Notice, UserMessage
from ..model.events import EventBus, RunStarted
from ..model.guards import too_long
from ..model.runs import Delivery, Run, RunState
from ..stores.base import Store
from ..tools.prelude import Opening
from ..tools.registry import ToolRegistry
from .caps import Caps
from .cursor import RunCursor, unanswered
from .endings import Endings
from .files import Files, Taken
from .history import resumed_notice
from .preludes import preludes
from .stops import stop_requested
from .tracing import Span

__all__ = ["Beginning"]

log = logging.getLogger("maiden.loop")

S = RunState


class Beginning:
    """The first step of ``RunDriver``'s runs (which has these attributes)."""

    store: Store
    agent: AgentConfig
    bus: EventBus
    clock: Callable[[], float]
    instance_id: str
    files: Files
    caps: Caps | None
    tools: ToolRegistry
    services: Mapping[str, Any]
    end: Endings
    _capped_at_start: set[str]
    _born: float
    _limit: Callable[[], int | None]

    async def _stopped(self, run: Run) -> str | None:
        """Who asked to stop a run that an earlier process had (recovered, continued, or
        queued before this one started) and may not have cancelled before it died
        (``stops``); None for the rest, which are not looked up."""
        earlier = run.owner != self.instance_id if run.state is not S.QUEUED \
            else run.created_at < self._born
        return await stop_requested(self.store, run.id) if earlier else None

    async def _begin(self, cur: RunCursor, span: Span) -> bool:
        """The run's first step here: started, resumed, continued or recovered (or refused:
        then False, and it has ended)."""
        run = cur.run
        started_at, me = run.started_at or self.clock(), self.instance_id
        trace = run.trace or span.traceparent()  # the run's trace, else this stretch's
        started = [RunStarted(run_id=run.id, thread_id=run.thread_id)]
        if run.state is S.QUEUED:
            return await self._start(cur, started_at, trace, started)
        elif run.owner is None:
            # Released at a clean shutdown: carrying on is not a crash recovery.
            # What it left unsent goes before its answer (``RunStarted.unsent``).
            await cur.commit(write=Write.RESUME, to=S.RUNNING,
                             reason="continued after restart",
                             started_at=started_at, owner=me, trace=trace,
                             announce=[RunStarted(run_id=run.id, thread_id=run.thread_id,
                                                  unsent=True)])
        elif run.owner != self.instance_id:
            return await self._recover(cur, span, started_at, trace)
        else:  # this process takes it up again (a decision was made here)
            self.bus.publish(started[0])
        return True

    async def _refused(self, cur: RunCursor) -> bool:
        """Whether a new run is refused before its message enters the thread (too long; a
        spend cap reached): it has ended, failed, the person told why with one reply."""
        run = cur.run
        refused = too_long(len(run.text), self.agent.max_message_chars)
        if refused is not None:
            # Not put in the thread: the model never sees it, and the person is told
            # why (a run resumed after the limit was raised goes on as usual).
            await self.end.fail(cur, "message_too_long", f"the message has "
                                f"{len(run.text):,} characters; [agent] max_message_chars "
                                f"is {self.agent.max_message_chars:,}", notice=refused)
            self.end.published(cur.run)
            return True
        if self.caps:
            hit = await self.caps.reached(run)
            if hit is not None:
                await self.end.fail(cur, "spend_cap", hit.detail, notice=hit.notice())
                self.end.published(cur.run)
                return True
            self._capped_at_start.add(run.id)
        return False

    async def _start(self, cur: RunCursor, started_at: float, trace: str,
                     started: list[RunStarted]) -> bool:
        """A queued run's first step: refused (False), or its message put in the thread (or,
        resumed, taken up where it stood)."""
        run, me = cur.run, self.instance_id
        if cur.start is None and await self._refused(cur):
            return False
        if cur.start is None:
            # The files first: fetched and stored before the message enters the thread
            # (a crash before that fetches again; storing a blob twice writes it once).
            taken = await self.files.take(run, self._limit()) \
                if run.files or run.fetch else Taken()
            # The tools' preludes (recalled memories) go before the message, in this
            # first checkpoint: asked once, never again for this run (``preludes``).
            said_before = await self._preludes(cur)
            user = UserMessage(run_id=run.id, text=run.text, user=run.origin.user,
                               at=self.clock(), files=taken.refs)
            entries: list[Entry] = [*self._context(run), *said_before, user]
            deliveries: list[Delivery] = []
            if taken.refused:
                entries.append(Notice(run_id=run.id, code="files_refused",
                                      text=taken.notice, at=self.clock()))
                deliveries = self.end.notice(cur, "files_refused", taken.notice)
            # Committed before the model is asked (a run that kills every process
            # then ends as a poison run, its message in the thread); flushed only
            # with a notice to send (``durability``), which the outbox sends as it hears
            # of the start, before the answer streams (``RunStarted.unsent``).
            announce = [started[0].model_copy(update={"unsent": bool(deliveries)})]
            await cur.commit(entries, write=Write.START, to=S.RUNNING, reason="started",
                             started_at=started_at, owner=me, announce=announce,
                             first_entry=len(cur.entries), deliveries=deliveries,
                             trace=trace)
        else:  # an explicitly resumed run: its message is already in the thread
            again = asked_again(run, cur.own, await self.store.transitions(run.id),
                                now=self.clock())
            # The thread may have gone on meanwhile: its history would end with another
            # run's answer, and the model would answer that run's message again. (A call
            # it waits on, decided late, is answered first: its result says so, ``history``.)
            went_on = None if unanswered(cur.own) else resumed_notice(
                run.id, run.text, bool(run.files), cur.entries, at=self.clock())
            await cur.commit([e for e in (went_on, again) if e is not None],
                             write=Write.RESUME, to=S.RUNNING,
                             reason="resumed",
                             stalled_recoveries=0, started_at=started_at, owner=me,
                             announce=started,
                             trace=trace)
        return True

    async def _recover(self, cur: RunCursor, span: Span, started_at: float, trace: str) -> bool:
        """A run that a process died driving taken up again; or failed, poison (False)."""
        run, me = cur.run, self.instance_id
        # Only crashes in a row with no progress in between make a run poison: a long
        # run interrupted by unrelated restarts keeps going.
        moved_on = run.recovered_at is not None and len(cur.entries) > run.recovered_at
        stalled = 1 if moved_on else run.stalled_recoveries + 1
        if stalled > self.agent.max_recovery_attempts:
            await self.end.fail(cur, "poison_run",
                                f"the process died {run.stalled_recoveries} times in a row "
                                "while running this run; giving up instead of crash-looping")
            self.end.published(cur.run)
            return False
        attempt = run.recovery_attempts + 1
        log.warning("recovering run %s (attempt %d) from %s", run.id, attempt, run.state)
        span.recovered(attempt)
        await cur.commit(write=Write.RESUME, to=S.RUNNING,
                         reason=f"recovered after crash (attempt {attempt})",
                         recovery_attempts=attempt, stalled_recoveries=stalled,
                         recovered_at=len(cur.entries), started_at=started_at, owner=me,
                         trace=trace,
                         announce=[RunStarted(run_id=run.id, thread_id=run.thread_id,
                                              recovered=True, unsent=True)])
        return True

    async def _preludes(self, cur: RunCursor) -> list[Notice]:
        """What the agent's tools put before the run's first turn (``tools.prelude``)."""
        if not any(t.prelude is not None for t in self.tools):
            return []
        run = cur.run
        opening = Opening(run_id=run.id, thread_id=run.thread_id, agent=self.agent.name,
                          text=run.text, origin=run.origin, at=self.clock(),
                          window=self._limit(), idempotency_key=run.idempotency_key,
                          thread=cur.entries)
        return await preludes(self.tools, opening, self.services)

    def _context(self, run: Run) -> list[Entry]:
        """The earlier messages the run brought (``Run.context``), as the thread keeps them."""
        at = self.clock()
        return [UserMessage(run_id=run.id, text=said.text, user=run.origin.user, at=at)
                if said.role == "user" else AssistantTurn(run_id=run.id, text=said.text, at=at)
                for said in run.context]
