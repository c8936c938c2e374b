"""A run and its thread as loaded, kept in step with every checkpoint the loop writes.

A checkpoint that is not a durable point (``durable=False``: a start, a read-only call's
turn or result) is held in memory and written with the next one, in one transaction: a
message whose model asks one read-only tool then answers costs two commits (its
acceptance, then everything else with the answer), not five. What is held is lost to a
crash exactly as an unsynced write is lost to a power cut, and recovery already redoes
it (a start is started again, a read-only call is run again). It is written anyway
before a tool with an effect runs (``flush``), before a spend cap sums the store's
spend, and after ``hold_s`` without a next checkpoint (a slow model or a slow read-only
tool: the store shows the run running, as a person looking at it expects): ``Holds``,
one timer for the cursors of a driver.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence
from typing import Unpack, cast

from .deadlines import Deadlines
from .entries import AssistantTurn, Entry, ToolCall, ToolResult, UserMessage
from .errors import StaleWrite, StoreError
from .events import EventBus, RunEvent, StateChanged
from .runs import Delivery, Run, RunChanges, RunState, changed, transition
from .stores.base import Checkpoint, Store
from .tail import Tail, first_loaded
from .tracing import NO_TRACING, Tracing

__all__ = ["Holds", "RunCursor", "unanswered"]


class Holds:
    """When what cursors hold is to be written: ``hold_s`` after each one's last held
    checkpoint, on one timer for them all (``Deadlines``)."""

    def __init__(self, hold_s: float) -> None:
        self.hold_s = hold_s
        """How long a checkpoint that is not a durable point may wait for the next one."""
        self._due: Deadlines[RunCursor] = Deadlines(RunCursor._begin_later)

    def hold(self, cursor: RunCursor) -> None:
        """``cursor`` held a checkpoint: what it holds is written ``hold_s`` from now."""
        self._due.set(cursor, self.hold_s)

    def release(self, cursor: RunCursor) -> None:
        """``cursor`` holds nothing now (it wrote it, or dropped it)."""
        self._due.pop(cursor)

    def close(self) -> None:
        """Shutdown, once the runs have stopped (each wrote what it held): no timer is left
        on the loop."""
        self._due.clear()


class RunCursor:
    """The in-memory image of one run's thread; ``commit`` writes and advances it."""

    def __init__(
        self,
        store: Store,
        bus: EventBus,
        run: Run,
        entries: list[Entry] | Tail,
        clock: Callable[[], float] = time.time,
        *,
        holds: Holds | None = None,
        tracing: Tracing = NO_TRACING,
    ) -> None:
        self.store = store
        self.bus = bus
        self.run = run
        self.entries = entries
        self.clock = clock
        self.tracing = tracing
        """Durable checkpoints get a span each (``[otel]``)."""
        self.holds = holds
        """When a checkpoint that is not a durable point is written if no next one comes
        first (None: none is held)."""
        self._stored = run.version
        """The run's version as written (held checkpoints all carry the next one)."""
        self._held: list[Checkpoint] = []
        self._later: asyncio.Task[None] | None = None
        """Writes what is held, begun by ``holds`` when it is due."""
        # A run that never started has no entries yet: don't search the thread for them.
        fresh = run.state is RunState.QUEUED and run.started_at is None
        self.start = None if fresh else _run_start(entries, run.id)
        self._own: list[Entry] | None = None
        """``own`` once looked for, grown by each commit (entries only ever grow)."""

    @property
    def own(self) -> Sequence[Entry]:
        """This run's entries (normally the thread's tail)."""
        if self.start is None:
            return ()
        if self._own is None:
            self._own = [e for e in self.entries[self.start:] if e.run_id == self.run.id]
        return self._own

    async def commit(
        self,
        entries: Sequence[Entry] = (),
        *,
        to: RunState | None = None,
        reason: str = "",
        deliveries: Sequence[Delivery] = (),
        checked: bool = True,
        durable: bool = True,
        hold: bool = True,
        announce: Sequence[RunEvent] = (),
        **changes: Unpack[RunChanges],
    ) -> None:
        """One checkpoint: new entries plus the run's new state, atomically.

        Once it is written, ``announce`` is published, then the state change: what
        happened comes before the state it led to (``run.started`` before ``run.state
        running``, ``tool.result`` before ``run.state running``).

        ``checked=False`` writes the run without checking the thread's position (for a
        thread that cannot be read, so its position is unknown; the run's version is
        still checked). ``durable=False`` for a write that is not a durable point (see
        ``Checkpoint.durable``); such a write is held for the next one unless ``hold`` is
        False."""
        await self._settle_later()
        now = self.clock()
        transitions = []
        changes["version"] = self._stored + 1
        if to is not None:
            run, moved = transition(self.run, to, reason, now=now, **changes)
            transitions.append(moved)
        else:
            run = changed(self.run, now, **changes)
        checkpoint = Checkpoint(
            thread_id=run.thread_id, position=len(self.entries) if checked else None,
            entries=entries, run=run, transitions=transitions, deliveries=deliveries,
            durable=durable)
        if hold and not durable and not deliveries and checked and self.holds is not None:
            self._held.append(checkpoint)
            self.holds.hold(self)
        else:
            await self._write([checkpoint])
        if self.start is None:
            # The run's message (after any earlier messages it brought, Run.context).
            found = _run_start(entries, run.id)
            if found is not None:
                self.start = len(self.entries) + found
        elif self._own is not None:
            self._own.extend(e for e in entries if e.run_id == run.id)
        self.entries.extend(entries)
        self.run = run
        for event in announce:
            self.bus.publish(event)
        if to is not None:
            self.bus.publish(StateChanged(run_id=run.id, thread_id=run.thread_id, state=to,
                                          reason=reason))

    def written(self) -> bool:
        """Whether every entry held here is in the store, at its place: nothing is held
        and the last write landed (a list of them may then stand for the thread's start)."""
        return not self._held and (self._later is None or self._later.done()) \
            and self._stored == self.run.version

    async def flush(self) -> None:
        """Write what is held now (before a tool with an effect runs)."""
        await self._settle_later()
        if self._held:
            await self._write([])

    async def drop(self) -> None:
        """Forget what is held (the run was cut off: what handles that reads the store),
        letting a write already begun land first."""
        self._held.clear()
        self._disarm()
        with contextlib.suppress(StaleWrite, StoreError):
            await self._settle_later()

    def _begin_later(self) -> None:
        """What is held is due (``holds``): write it."""
        if self._held:
            self._later = asyncio.create_task(self._write([]),
                                              name=f"maiden-hold:{self.run.id}")

    def _disarm(self) -> None:
        if self.holds is not None:
            self.holds.release(self)

    async def _settle_later(self) -> None:
        """Wait for the write ``holds`` began, if it has (whose error, if it failed, is
        this write's)."""
        later = self._later
        if later is not None:
            # Kept until it is done: a cancellation of this task does not reach it, and
            # whoever handles that cancellation waits for it here again.
            await asyncio.wait([later])
            self._later = None
            if not later.cancelled() and later.exception() is not None:
                raise cast(BaseException, later.exception())

    async def _write(self, new: list[Checkpoint]) -> None:
        """What is held and then ``new`` (a checkpoint or none), in one write."""
        parts, self._held = [*self._held, *new], []
        self._disarm()
        if len(parts) > 1 and parts[-1].position is None:
            # Written unchecked (the thread's position is unknown): what is held goes first.
            await self._write_one(_merged(parts[:-1]))
            parts = parts[-1:]
        await self._write_one(_merged(parts))

    async def _write_one(self, checkpoint: Checkpoint) -> None:
        if checkpoint.durable:
            with self.tracing.checkpoint(len(checkpoint.entries)):
                await self._commit(checkpoint)
        else:
            await self._commit(checkpoint)

    async def _commit(self, checkpoint: Checkpoint) -> None:
        write = self.store.commit(checkpoint)
        # Shielded: a cancellation arriving mid-write must not leave the cursor unsure
        # whether the checkpoint landed. The write finishes; whoever handles the
        # cancellation reads the store afresh.
        if getattr(self.store, "commit_survives_cancel", False):
            await write  # no task to shield it: the store finishes a write once it is begun
        else:
            await asyncio.shield(write)
        assert checkpoint.run is not None
        self._stored = checkpoint.run.version


def _merged(parts: list[Checkpoint]) -> Checkpoint:
    """Checkpoints of one run, in order, as one: the entries of each, the last run."""
    if len(parts) == 1:
        return parts[0]
    first, last = parts[0], parts[-1]
    return Checkpoint(thread_id=last.thread_id, position=first.position,
                      entries=[e for p in parts for e in p.entries], run=last.run,
                      transitions=[t for p in parts for t in p.transitions],
                      deliveries=[d for p in parts for d in p.deliveries],
                      durable=any(p.durable for p in parts))


def _run_start(entries: Sequence[Entry], run_id: str) -> int | None:
    for i in range(len(entries) - 1, first_loaded(entries) - 1, -1):
        entry = entries[i]
        if isinstance(entry, UserMessage) and entry.run_id == run_id:
            return i
    return None


def unanswered(own: Sequence[Entry]) -> list[ToolCall]:
    """Calls of the run's newest assistant turn that have no recorded result."""
    turn = next((e for e in reversed(own) if isinstance(e, AssistantTurn)), None)
    if turn is None:
        return []
    done = {e.tool_call_id for e in own if isinstance(e, ToolResult)}
    return [c for c in turn.tool_calls if c.id not in done]
