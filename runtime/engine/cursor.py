"""A run and its thread as loaded, kept in step with every checkpoint the loop writes.

Every checkpoint is written when it is made, before the loop goes on: nothing is held in
memory to be written later. Whether a write is also flushed to disk is the one rule of
``durability.py``, asked here for each write by its kind.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Unpack

from ..model.durability import Write, durability
from ..model.entries import AssistantTurn, Entry, ToolCall, ToolResult, UserMessage
from ..model.events import EventBus, RunEvent, StateChanged
from ..model.runs import Delivery, Run, RunChanges, RunState, changed, transition
from ..stores.base import Checkpoint, Store
from ..stores.tail import Tail, first_loaded
from .tracing import NO_TRACING, Tracing

__all__ = ["RunCursor", "unanswered"]


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
        tracing: Tracing = NO_TRACING,
    ) -> None:
        self.store = store
        self.bus = bus
        self.run = run
        self.entries = entries
        self.clock = clock
        self.tracing = tracing
        """Durable checkpoints get a span each (``[otel]``)."""
        self._stored = run.version
        """The run's version as written."""
        self._failed = False
        """A write failed (or was cut off): the store may hold more than ``entries``."""
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
        write: Write,
        effect: bool = False,
        to: RunState | None = None,
        reason: str = "",
        deliveries: Sequence[Delivery] = (),
        checked: bool = True,
        announce: Sequence[RunEvent] = (),
        **changes: Unpack[RunChanges],
    ) -> None:
        """One checkpoint: new entries plus the run's new state, atomically, written now.

        ``write`` is its kind and ``effect`` whether it is of a call with an effect: with
        whether it holds an outbox record, they say whether it is flushed to disk before
        this returns (``durability``). Once it is written, ``announce`` is published, then
        the state change: what happened comes before the state it led to (``run.started``
        before ``run.state running``, ``tool.result`` before ``run.state running``).

        ``checked=False`` writes the run without checking the thread's position (for a
        thread that cannot be read, so its position is unknown; the run's version is
        still checked)."""
        now = self.clock()
        transitions = []
        changes["version"] = self._stored + 1
        if to is not None:
            run, moved = transition(self.run, to, reason, now=now, **changes)
            transitions.append(moved)
        else:
            run = changed(self.run, now, **changes)
        fsync = durability(write, effect=effect, sends=bool(deliveries)).fsync
        checkpoint = Checkpoint(
            thread_id=run.thread_id, position=len(self.entries) if checked else None,
            entries=entries, run=run, transitions=transitions, deliveries=deliveries,
            durable=fsync)
        if fsync:
            with self.tracing.checkpoint(len(entries)):
                await self._commit(checkpoint)
        else:
            await self._commit(checkpoint)
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
        """Whether every write landed: the entries here are the store's, at their place
        (a list of them may then stand for the thread's start)."""
        return not self._failed

    async def _commit(self, checkpoint: Checkpoint) -> None:
        self._failed = True
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
        self._failed = False


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
