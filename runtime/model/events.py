"""Run events: what subscribers (terminal, HTTP streams, channels) see of a run as it happens."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import SkipJsonSchema

from .entries import ToolCall, Usage
from .runs import Run, RunState

__all__ = [
    "ApprovalRequested",
    "EventBus",
    "ModelAnswered",
    "RunEnded",
    "RunEvent",
    "RunStarted",
    "StateChanged",
    "Subscription",
    "TextDelta",
    "ToolCallFinished",
    "ToolCallStarted",
]


class _Event(BaseModel):
    model_config = ConfigDict(frozen=True)

    run_id: str
    thread_id: str


class RunStarted(_Event):
    kind: Literal["run.started"] = "run.started"
    recovered: bool = False
    unsent: SkipJsonSchema[bool] = Field(default=False, exclude=True, repr=False)
    """Whether it may start with records in the outbox not sent yet (a notice written as it
    started, what an earlier life of it left unsent): the outbox sends them now, before its
    answer streams (not serialised)."""


class TextDelta(_Event):
    kind: Literal["text.delta"] = "text.delta"
    text: str


class ModelAnswered(_Event):
    """A model call came back: which model, its tokens, how long it took and, when it
    streamed, how long until its first text (the GenAI metrics are made of these)."""

    kind: Literal["model.answered"] = "model.answered"
    model: str
    input_tokens: int
    output_tokens: int
    seconds: float
    first_token_s: float | None = None


class ToolCallStarted(_Event):
    kind: Literal["tool.call"] = "tool.call"
    call: ToolCall


class ToolCallFinished(_Event):
    kind: Literal["tool.result"] = "tool.result"
    tool_call_id: str
    name: str
    content: Any
    is_error: bool


class ApprovalRequested(_Event):
    kind: Literal["approval.requested"] = "approval.requested"
    tool_call_id: str
    name: str
    arguments: Any
    arguments_hash: str
    """What a decision must carry to be bound to exactly this call."""
    reason: str
    channel: str = "cli"
    target: dict[str, str] = Field(default_factory=dict)
    """Where the run's message came from: where the prompt is posted."""


class StateChanged(_Event):
    kind: Literal["run.state"] = "run.state"
    state: RunState
    reason: str


class RunEnded(_Event):
    """The run stopped: completed, failed, cancelled, timed out, or paused for a person."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    kind: Literal["run.completed", "run.failed", "run.cancelled", "run.timed_out",
                  "run.paused"]
    state: RunState
    reason: str
    reply: str | None = None
    error: str | None = None
    usage: Usage = Usage()
    run: Run | None = Field(default=None, exclude=True, repr=False)
    """The run as it ended, for in-process waiters (not serialised)."""
    failure: SkipJsonSchema[Exception | None] = Field(default=None, exclude=True, repr=False)
    """Why this process stopped driving a run that has not ended, when the store failed
    (a damaged page, a deleted file): ``Runtime.wait`` raises it rather than hand back a
    run that looks merely queued (not serialised)."""

    @classmethod
    def of(cls, run: Run, reason: str | None = None) -> RunEnded:
        """The end event for ``run`` as it stands; a run still going is ``run.paused`` (this
        process stopped driving it), with ``reason`` saying why."""
        return cls(kind=_ENDED_KIND.get(run.state, "run.paused"), run_id=run.id,
                   thread_id=run.thread_id, state=run.state,
                   reason=run.reason if reason is None else reason, reply=run.reply,
                   error=run.error, usage=run.usage, run=run)


_ENDED_KIND: dict[RunState, Any] = {
    RunState.COMPLETED: "run.completed",
    RunState.FAILED: "run.failed",
    RunState.CANCELLED: "run.cancelled",
    RunState.TIMED_OUT: "run.timed_out",
}


RunEvent = Annotated[
    RunStarted | TextDelta | ModelAnswered | ToolCallStarted | ToolCallFinished
    | ApprovalRequested | StateChanged | RunEnded,
    Field(discriminator="kind"),
]


class Subscription(AbstractAsyncContextManager["Subscription"]):
    """An async iterator over the events one subscriber asked for, from the bus's
    ``subscribe``: the events come while its ``async with`` block runs."""

    def __init__(self, bus: EventBus, run_id: str | None, *, replay: bool = False,
                 ends_only: bool = False) -> None:
        self.run_id = run_id
        self.ends_only = ends_only
        """Only the run's ``RunEnded`` (a caller that waits for the end, not a follower)."""
        self._bus = bus
        self._replay = replay
        self._queue: asyncio.Queue[RunEvent | None] = asyncio.Queue()
        """The events, and None for each ``nudge``."""
        self._group: set[Subscription] = set()
        """The bus's set it is in, while it is."""

    async def __aenter__(self) -> Subscription:
        self._group = self._bus._join(self, self._replay)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._bus._leave(self, self._group)

    def _offer(self, event: RunEvent) -> None:
        """(The bus offers only the events asked for: of this run, or only its end.)"""
        self._queue.put_nowait(event)

    def nudge(self) -> None:
        """Wake ``next_or_nudge`` with None, as if an event had come (a waiter's turn to
        look at the store: one timer for every waiter, not one each)."""
        self._queue.put_nowait(None)

    def __aiter__(self) -> AsyncIterator[RunEvent]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[RunEvent]:
        while True:
            event = await self.next()
            yield event
            if self.run_id is not None and isinstance(event, RunEnded):
                return

    async def next(self) -> RunEvent:
        event = await self._queue.get()
        while event is None:  # a nudge (nobody nudges a subscription read this way)
            event = await self._queue.get()
        return event

    async def next_or_nudge(self) -> RunEvent | None:
        """The next event, or None if ``nudge`` came first."""
        return await self._queue.get()

    def ready(self) -> list[RunEvent]:
        """The events that have arrived and not been taken yet, without waiting."""
        found = []
        while not self._queue.empty():
            event = self._queue.get_nowait()
            if event is not None:
                found.append(event)
        return found


class EventBus:
    """Fan-out of run events to in-process subscribers; publishing never blocks.

    The events of each run in progress are also kept (up to ``keep`` per run), so a
    subscriber that comes late (an HTTP stream opened after the message was accepted, a
    reconnecting client) still sees the run from its start in this process; and those of
    the ``ended`` runs that ended or paused last (``kept_to_the_end``), for the follower
    of a message just accepted, which its worker may have answered by then (it starts
    while the message is flushed).
    """

    def __init__(self, keep: int = 10_000, runs: int = 1_000, ended: int = 100, *,
                 listeners: Sequence[Callable[[RunEvent], None]] = ()) -> None:
        self._everything: set[Subscription] = set()
        self._by_run: dict[str, set[Subscription]] = {}
        self._ends: dict[str | None, set[Subscription]] = {}
        """The ``ends_only`` subscriptions, by run (None: of every run): offered only a
        ``RunEnded``, so the other events do not look at them."""
        # Oldest first; bounded, for runs that never end here (another process drives them).
        self._kept: dict[str, list[RunEvent]] = {}
        self._done: dict[str, list[RunEvent]] = {}
        """The kept events of the runs that ended or paused last (their end the last one),
        oldest first."""
        self._keep = keep
        self._runs = runs
        self._ended = ended
        self._listeners: list[Callable[[RunEvent], None]] = list(listeners)
        """Called with every event as it is published: those it is made with (the
        outbox's), then those ``listen`` adds (a channel's)."""

    def listen(self, listener: Callable[[RunEvent], None]) -> Callable[[], None]:
        """Call ``listener`` with every event as it is published (it must not block); the
        function that stops it."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners \
            else None

    def publish(self, event: RunEvent) -> None:
        run_id = event.run_id
        ended = type(event) is RunEnded
        if ended:
            kept = self._kept.pop(run_id, None)
            if kept is not None and self._ended:
                kept.append(event)
                if len(self._done) >= self._ended:
                    del self._done[next(iter(self._done))]
                self._done[run_id] = kept
        else:
            kept = self._kept.get(run_id)
            if kept is None:
                self._done.pop(run_id, None)  # a run resumed: a life of its own
                if len(self._kept) >= self._runs:
                    del self._kept[next(iter(self._kept))]
                kept = self._kept[run_id] = []
            if len(kept) < self._keep:
                kept.append(event)
        for listener in self._listeners:
            listener(event)
        # (Offering never changes these sets: a subscriber's wake-up runs later.)
        for sub in self._everything:
            sub._offer(event)
        for sub in self._by_run.get(run_id, ()):
            sub._offer(event)
        if ended:
            for sub in (*self._ends.get(run_id, ()), *self._ends.get(None, ())):
                sub._offer(event)

    def kept_to_the_end(self, run_id: str) -> list[RunEvent] | None:
        """The events of a run that stopped a moment ago (the last one its ``RunEnded``),
        if they are still kept."""
        return self._done.get(run_id)

    def telling(self, run_id: str) -> bool:
        """Whether the run's events are being kept and its end is not told yet (it may
        have committed that end: it is told after the checkpoint)."""
        return run_id in self._kept

    def watched(self) -> list[str]:
        """The runs someone is waiting on."""
        return [*self._by_run, *(r for r in self._ends if r is not None)]

    def subscribe(
        self, run_id: str | None = None, *, replay: bool = False, ends_only: bool = False
    ) -> Subscription:
        """Events of one run (the iterator ends with its ``RunEnded``), or of every run,
        while its ``async with`` block runs.

        With ``replay``, a run's subscription starts with the events the run has had so far;
        with ``ends_only``, it gets only ``RunEnded`` (a wait, not a follow).
        """
        return Subscription(self, run_id, replay=replay, ends_only=ends_only)

    def _join(self, sub: Subscription, replay: bool) -> set[Subscription]:
        """Offer ``sub`` what it asked for from now on; the set it is in."""
        run_id = sub.run_id
        if replay and run_id is not None and not sub.ends_only:
            for event in self._kept.get(run_id, ()):
                sub._offer(event)
        if sub.ends_only:
            group = self._ends.setdefault(run_id, set())
        elif run_id is None:
            group = self._everything
        else:
            group = self._by_run.setdefault(run_id, set())
        group.add(sub)
        return group

    def _leave(self, sub: Subscription, group: set[Subscription]) -> None:
        group.discard(sub)
        if not group and group is not self._everything:
            if sub.ends_only:
                self._ends.pop(sub.run_id, None)
            elif sub.run_id is not None:
                self._by_run.pop(sub.run_id, None)
