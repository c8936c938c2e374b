"""How a caller waits on a run (``Runtime.wait``, ``send``, ``follow``): the events of a run
driven here, and the store read for one that another process took up — as soon as the store
tells that a run of its thread ended or paused (``heard``: PostgreSQL's notifications), and
now and then in any case; a run nobody drives is taken up here."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Callable

from ..engine.loop import DRIVABLE
from ..errors import StoreError
from ..model.events import EventBus, RunEnded, RunEvent, Subscription
from ..model.requests import News, thread_key
from ..model.runs import Run
from ..stores.base import RunStore
from .peers import Peers
from .workers import Workers

__all__ = ["Waiting"]

log = logging.getLogger("maiden.runtime")


class Waiting:
    """The waits of one runtime over its store, bus and workers."""

    def __init__(self, store: RunStore, bus: EventBus, workers: Workers, peers: Peers, *,
                 poll_interval_s: float, serving: Callable[[], bool]) -> None:
        self._store = store
        self._bus = bus
        self._workers = workers
        self._peers = peers
        self._every = 4 * poll_interval_s
        self._serving = serving
        self._waiters: dict[Subscription, str] = {}
        """The subscriptions of those waiting now, with their run's ``thread_key``: each is
        nudged every ``_every`` seconds (one timer for all), and when the store tells of
        its thread, to look at the store in case another process drives its run."""
        self._ticker: asyncio.TimerHandle | None = None

    async def wait(self, run_id: str) -> Run:
        """Until the run is completed, failed, cancelled, timed out or paused."""
        async with self._bus.subscribe(run_id, ends_only=True) as events:
            run = await self._store.get_run(run_id)
            if run.state not in DRIVABLE:
                return run
            await self.take_up(run)
            return await self.until_ended(run, events)

    async def follow(self, run_id: str, *, accepted: bool = False
                     ) -> AsyncGenerator[RunEvent, None]:
        """A run's events until it ends or pauses, the last one always a ``RunEnded``
        (``Runtime.follow``)."""
        async with self._bus.subscribe(run_id, replay=True) as events:
            run = await self._look(run_id)
            if run is None or run.state in DRIVABLE:
                if run is not None:
                    await self.take_up(run)
            elif not accepted or not self._bus.telling(run_id):
                # Just submitted, and stopped here a moment ago (even during that read):
                # its kept events, from its start.
                done = self._bus.kept_to_the_end(run_id) if accepted else None
                for kept in done or (RunEnded.of(run),):
                    yield kept
                return
            # (Else just submitted, its end committed and not yet told: it comes on events,
            # after what was replayed.)
            self._nudge(events, run)
            try:
                heard = False  # since the last nudge: a run whose events flow is not read
                while True:
                    event = await events.next_or_nudge()
                    if event is None and heard:
                        heard = False
                        continue
                    if event is None:
                        run = await self._look(run_id)
                        if run is None:
                            continue
                        if run.state not in DRIVABLE:
                            yield RunEnded.of(run)
                            return
                        self._nudge(events, run)
                        await self.take_up(run)
                        continue
                    heard = True
                    yield event
                    if isinstance(event, RunEnded):
                        return
            finally:
                self._waiters.pop(events, None)

    async def _look(self, run_id: str) -> Run | None:
        """The run as the store has it, or None while the store cannot be read: a follower
        is shown what it has already (events keep coming from a run driven here) and looks
        again at its next nudge (chaos seed 10202: an event stream broke, mid-answer, when
        one look met PostgreSQL cut for a moment)."""
        try:
            return await self._store.get_run(run_id)
        except StoreError as exc:
            log.info("following run %s: the store cannot be read now (%s); looking again "
                     "soon", run_id, exc)
            return None

    async def until_ended(self, run: Run, events: Subscription) -> Run:
        """The run as it ends or pauses, from ``events`` (subscribed before it could end)
        or, when they stay silent, from the store."""
        self._nudge(events, run)
        try:
            while True:
                event = await events.next_or_nudge()
                if event is None:
                    run = await self._store.get_run(run.id)
                    if run.state not in DRIVABLE:
                        return run
                    await self.take_up(run)
                    continue
                if isinstance(event, RunEnded):
                    if event.failure is not None:
                        raise event.failure
                    return event.run or await self._store.get_run(run.id)
        finally:
            self._waiters.pop(events, None)

    def heard(self, news: News, key: str) -> None:
        """A run of the thread ``key`` names ended or paused (``ended``), maybe in another
        process: whoever waits here on a run of that thread looks at the store now."""
        if news == "ended":
            for events, thread in self._waiters.items():
                if thread == key:
                    events.nudge()

    def _nudge(self, events: Subscription, run: Run | None) -> None:
        """``events`` nudged every ``_every`` seconds until taken out of ``_waiters``: its
        first look at the store comes within that time, and one every that time after
        (``run``: as last read, for the news of its thread; None if it could not be)."""
        self._waiters[events] = thread_key(run.thread_id) if run is not None else ""
        if self._ticker is None:
            self._ticker = asyncio.get_running_loop().call_later(self._every, self._tick)

    def close(self) -> None:
        """Shutdown, once the waiters have been told: the nudges' timer goes."""
        if self._ticker is not None:
            self._ticker.cancel()
            self._ticker = None

    def _tick(self) -> None:
        self._ticker = None
        for events in self._waiters:
            events.nudge()
        if self._waiters:
            self._ticker = asyncio.get_running_loop().call_later(self._every, self._tick)

    async def take_up(self, run: Run) -> None:
        """Drive the run's thread here, unless a live process that serves the store will
        (this runtime does not serve, or another process holds the run)."""
        if self._workers.busy(run.thread_id):
            return
        if not self._serving() and await self._peers.servers():
            return
        self._workers.kick(run.thread_id)
