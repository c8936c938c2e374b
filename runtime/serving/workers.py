"""Who drives which run, when: one worker task per thread, and the runtime lock.

A thread's runs go strictly in order: its worker drives the oldest unfinished run,
then the next, until none is left. ``concurrency = "global"`` makes every worker
share one lock (one loop at a time in the process); ``"thread"`` lets threads run
side by side. A worker drives only while it holds the thread's lease in the store
(``thread:{id}``), so a thread is driven by one process at a time, in any number of
processes and machines; and a run that another live process is driving is never taken
over.

A worker that runs out of runs keeps the thread's lease for ``lease_linger_s`` (parked):
the thread's next message, if it comes soon, finds it held, which saves the two writes
of giving it up and taking it again. When the time is up, the thread's worker runs once
more to let go of it (and to look for a run another process queued meanwhile). Not while
other runtimes serve the store: the thread's next message may reach one of them, which
then drives it at once.

A process that finds a thread's lease held while it has a run of the thread to drive asks
for the thread (``Leases.ask_for_thread``): where the store carries the news (PostgreSQL),
the holder's worker looks at the thread at once (``heard``) and drives that run, whether its
lease lingered (it had not yet seen the other process: a replica that just started, a
terminal's ``maiden chat``) or its worker was finishing the run before. So a thread's next
message that lands on another replica waits for neither the linger nor a poll.

A thread whose next run waits for a channel's file fetcher (``Files.awaits``: the channel
is configured, and this runtime was built without its fetcher) is left, its lease given
up, for a runtime that has it (`maiden run`'s); a download under way at shutdown is cut
off (``stop_fetching``), and made again at the next start.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Collection, Iterator

from ..engine.drivers import Drivers
from ..engine.files import Files
from ..errors import StoreError, StoreGone
from ..logcontext import RUN_CONTEXT
from ..model.config import RuntimeConfig
from ..model.events import EventBus, StateChanged
from ..model.requests import News, thread_key
from ..model.runs import Run, RunState
from ..outbox.delivery import Outbox
from ..stores.base import RunStore
from .deadlines import Deadlines
from .driving import Driving
from .leases import Leases, thread_lease
from .peers import Peers

__all__ = ["ACTIVE", "Workers"]

log = logging.getLogger("maiden.runtime")
S = RunState

ACTIVE = (S.QUEUED, S.RUNNING, S.AWAITING_TOOL, S.AWAITING_APPROVAL)
"""States of a run that has not ended: it holds up the runs queued behind it."""

UNDER_WAY = (S.RUNNING, S.AWAITING_TOOL)
"""States of a run whose rounds have begun: it is finished before another run of its
thread begins, or their rounds would interleave in the thread."""


class Workers(Driving):
    """The per-thread worker tasks of one runtime."""

    def __init__(
        self,
        store: RunStore,
        driver: Drivers,
        bus: EventBus,
        settings: RuntimeConfig,
        leases: Leases,
        *,
        peers: Peers,
        outbox: Outbox,
        files: Files | None = None,
        stop: asyncio.Event | None = None,
    ) -> None:
        self._store = store
        self._files = files
        """Fetches a run's announced files before it waits for the global lock."""
        self._driver = driver
        self._bus = bus
        self._settings = settings
        self._leases = leases
        self._peers = peers
        """Which live process (other than this one) drives a run, if any."""
        self._outbox = outbox
        """Sends what each run this process stopped driving left in the outbox."""
        self._lock = asyncio.Lock()
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._dirty: set[str] = set()
        self._listed: dict[str, list[Run]] = {}
        """Threads whose worker has yet to start, and their runs as its kick found them."""
        self._driving: dict[str, tuple[asyncio.Task[Run], asyncio.Future[None]]] = {}
        """The task driving each run here, and when the worker is done with it."""
        self._recording: set[str] | None = None
        """While not None (``recording``), the id of every run it starts driving is added."""
        self._stop = stop or asyncio.Event()
        """Set as the runtime closes: no work is taken any more."""
        self._linger_s = min(settings.lease_linger_s, settings.lease_ttl_s / 3)
        self._parked: Deadlines[str] = Deadlines(self._lingered_enough)
        """Threads whose lease is kept after their last run, until it is given up."""
        self._lingered: set[str] = set()
        """Threads whose lease was kept long enough: their worker gives it up."""
        self.crowded = False
        """Whether other runtimes serve the store (as the control loop last found): then a
        lease is given up at once."""
        self._awaiting: dict[str, dict[str, str]] = {}
        """Per channel, the threads whose next run waits for its fetcher (and that run)."""
        self._fetching: set[asyncio.Task[None]] = set()
        """The downloads made ahead of the lock now (``prefetch``)."""
        self._woken: dict[str, asyncio.Event] = {}
        """Threads whose worker waits for another process (``_look_again``)."""

    @property
    def closing(self) -> bool:
        return self._stop.is_set()

    @contextlib.contextmanager
    def recording(self) -> Iterator[set[str]]:
        """The ids of the runs this process starts driving meanwhile (recovery's)."""
        driven: set[str] = set()
        self._recording = driven
        try:
            yield driven
        finally:
            self._recording = None

    def kick(self, thread_id: str, active: list[Run] | None = None) -> None:
        """Make sure the thread's worker runs (and looks again if it is running now).
        ``active``: the thread's runs that have not ended, as a write just left them (a
        worker started now begins with them instead of reading them again)."""
        if self.closing:
            return
        self._parked.pop(thread_id)
        self._dirty.add(thread_id)
        if (woken := self._woken.get(thread_id)) is not None:
            woken.set()
        if active is None or thread_id in self._tasks:
            self._listed.pop(thread_id, None)  # whatever was listed may have changed
        else:
            self._listed[thread_id] = active
        if thread_id not in self._tasks:
            token = RUN_CONTEXT.set((thread_id, None))
            try:
                task = asyncio.create_task(self._work(thread_id),
                                           name=f"maiden-thread:{thread_id}")
            finally:
                RUN_CONTEXT.reset(token)
            self._tasks[thread_id] = task

    def heard(self, news: News, key: str) -> None:
        """A process asked for a thread (``asked``): if this runtime holds its lease
        (lingering, or its worker finishing a run), its worker looks at the thread now.
        (Only the holder: the asker hears itself too, and must not wake itself to ask
        again.)"""
        if news == "asked":
            for thread_id in [*self._parked, *self._tasks]:
                if thread_key(thread_id) == key and \
                        self._leases.holds(thread_lease(thread_id)):
                    self.kick(thread_id)

    def report_peers(self, others: int) -> None:
        """How many other runtimes serve the store (the control loop found): once there are
        any, no lease lingers, and the ones lingering now are given up."""
        self.crowded = others > 0
        if self.crowded:
            for thread_id in self._parked:
                self._unpark(thread_id)

    def stop_fetching(self) -> None:
        """Shutdown: cut off the downloads made ahead of the lock (the run has not started;
        the next start fetches its files again, and stores each blob once)."""
        for task in self._fetching:
            task.cancel()

    def stop_lingering(self) -> None:
        """Shutdown: no parked lease is given up later (closing the leases gives them up)."""
        self._parked.clear()

    def _unpark(self, thread_id: str) -> None:
        if self._parked.pop(thread_id):
            self._lingered_enough(thread_id)

    def _lingered_enough(self, thread_id: str) -> None:
        """The thread's lease was kept long enough: its worker gives it up."""
        self._lingered.add(thread_id)
        self.kick(thread_id)

    def _park(self, thread_id: str) -> None:
        """Keep the thread's lease ``_linger_s`` longer."""
        self._parked.set(thread_id, self._linger_s)

    def busy(self, thread_id: str) -> bool:
        return thread_id in self._tasks

    def driving(self, run_id: str) -> asyncio.Task[Run] | None:
        """The task driving ``run_id`` in this process, if any."""
        driving = self._driving.get(run_id)
        return None if driving is None else driving[0]

    async def forget(self, thread_id: str) -> None:
        """The thread was erased: a lease kept for it (lingering) is given up now, unless
        its worker is at work (a run of the thread begun anew)."""
        if thread_id not in self._tasks:
            await self._give_up(thread_id)

    async def cut_off(self, run_id: str, reason: str) -> bool:
        """Cancel the run this process drives, for ``reason``, and wait until its worker
        is done with it (it ends ``cancelled``); False if no worker here drives it, or its
        task had ended (paused or ended) before it could be cut off."""
        driving = self._driving.get(run_id)
        if driving is None:
            return False
        task, settled = driving
        self._driver.cancellations.note(run_id, reason)
        cut = task.cancel()
        await asyncio.wait([settled])
        if not cut:
            # Its task had ended already (the run paused or ended a moment ago, and the
            # worker had yet to see it): nothing was cut off here.
            self._driver.cancellations.pop(run_id)
        return cut

    def tasks(self) -> list[asyncio.Task[None]]:
        return list(self._tasks.values())

    async def idle(self, threads: Collection[str] | None = None) -> None:
        """Wait until no thread (of ``threads``, if given) has work."""
        while busy := [task for thread_id, task in self._tasks.items()
                       if threads is None or thread_id in threads]:
            await asyncio.gather(*busy, return_exceptions=True)

    async def _work(self, thread_id: str) -> None:
        failed = False
        announced: set[str] = set()
        try:
            while not self.closing:
                active = await self._next_runs(thread_id)
                if not active:
                    if thread_id in self._dirty or await self._let_go(thread_id):
                        continue
                    return
                if self._files is not None and \
                        (channel := self._files.awaits(active[0])) is not None:
                    # Not driven (nor refused) here, where its channel cannot fetch its
                    # files: left for a runtime that can.
                    self._await_fetcher(active[0], channel)
                    await self._give_up(thread_id)
                    if thread_id in self._dirty:
                        continue
                    return
                holder = await self._peers.held_elsewhere(active[0])
                if holder is not None:
                    # Its owner drives it (a decision made there, say): the thread's lease,
                    # if this worker still has it, is the owner's to take.
                    await self._give_up(thread_id)
                else:
                    holder = await self._drive(active[0])
                if holder is not None:
                    if not await self._wait_for(holder, thread_id, active, announced):
                        return
                    continue
                if len(active) == 1 and thread_id not in self._dirty \
                        and not await self._let_go(thread_id):
                    return  # it was the only one, and nothing came in meanwhile
        except StoreError as exc:
            # Said to whoever waits on the run (``publish_waiting``); one line here, since
            # the reason is the store's, not a bug with a traceback worth reading (and none
            # for a lost store, which has said so once already).
            failed = True
            if not isinstance(exc, StoreGone):
                log.warning("the worker for thread %r stopped: %s", thread_id, exc)
        except Exception:
            failed = True
            log.exception("the worker for thread %r stopped", thread_id)
        finally:
            try:
                if thread_id not in self._parked:
                    with contextlib.suppress(StoreError):
                        await self._leases.release(thread_lease(thread_id))
            finally:
                # Whatever the release raised: a thread left in ``_tasks`` would look busy
                # for good, and no kick (nor the look for orphans) would start it again.
                self._listed.pop(thread_id, None)
                self._tasks.pop(thread_id, None)
                if failed and thread_id in self._dirty and not self.closing:
                    # Someone asked for this thread after the failed attempt began: look
                    # again.
                    self.kick(thread_id)

    async def _next_runs(self, thread_id: str) -> list[Run]:
        """The thread's runs to drive now: a run already under way first (one stopped at a
        checkpoint by a shutdown, say), then the others oldest first; none while the first
        awaits approval. (An older run can be queued behind one under way: an approval
        that timed out, decided late while the thread's next run was being driven.)"""
        self._dirty.discard(thread_id)
        active = self._listed.pop(thread_id, None)
        if active is None:
            active = await self._store.list_runs(thread_id=thread_id, states=ACTIVE)
        active = sorted(active, key=lambda r: r.state not in UNDER_WAY)  # (stable)
        if active and active[0].state is S.AWAITING_APPROVAL:
            # A run waiting for a person holds up the runs queued behind it.
            for blocked in active[1:]:
                self.publish_waiting(blocked, f"waiting behind run {active[0].id}, "
                                     "which awaits approval")
            active = []
        return active

    async def _wait_for(self, holder: str, thread_id: str, active: list[Run],
                        announced: set[str]) -> bool:
        """Another live process (``holder``) is driving this thread's current run: never
        "recover" it under its feet. Wait for it (True: then look again) only if someone
        here waits on this thread; otherwise leave the thread to that process (False)."""
        watched = set(self._bus.watched())
        if not any(r.id in watched for r in active):
            return False
        for run in active[1:]:
            if run.id not in announced:
                announced.add(run.id)
                self._bus.publish(StateChanged(
                    run_id=run.id, thread_id=run.thread_id, state=run.state,
                    reason=f"waiting for {holder} to finish run {active[0].id}"))
        await self._look_again(thread_id)
        return True

    async def _look_again(self, thread_id: str) -> None:
        """Wait ``poll_interval_s`` before the worker looks at its thread again, held by
        another process, or less: until a message here ``kick``s it (its next run must not
        wait for the poll)."""
        woken = self._woken[thread_id] = asyncio.Event()
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(woken.wait(), self._settings.poll_interval_s)
        finally:
            self._woken.pop(thread_id, None)
        self._dirty.add(thread_id)

    def _await_fetcher(self, run: Run, channel: str) -> None:
        """Leave the run's thread to a runtime with ``channel``'s fetcher; say so once."""
        waiting = self._awaiting.setdefault(channel, {})
        if waiting.get(run.thread_id) == run.id:
            return
        waiting[run.thread_id] = run.id
        reason = f"waiting for the {channel} channel to download its files"
        log.info("run %s: %s", run.id, reason)
        self._bus.publish(StateChanged(run_id=run.id, thread_id=run.thread_id,
                                       state=run.state, reason=reason))

    async def _give_up(self, thread_id: str) -> None:
        """Release the thread's lease now, lingering or not."""
        self._parked.pop(thread_id)
        self._lingered.discard(thread_id)
        lease = thread_lease(thread_id)
        if self._leases.holds(lease):
            await self._leases.release(lease)

    async def _let_go(self, thread_id: str) -> bool:
        """Give up the thread's lease, if this worker has it; then whether a run came in
        meanwhile after all (queued by another process, which found the lease taken and
        left the run to this one: looking after letting go, one of the two sees it)."""
        lease = thread_lease(thread_id)
        if not self._leases.holds(lease):
            return False
        if self._linger_s > 0 and thread_id not in self._lingered and not self.closing \
                and not self.crowded:
            self._park(thread_id)
            return False
        self._lingered.discard(thread_id)
        await self._leases.release(lease)
        active = await self._store.list_runs(thread_id=thread_id, states=ACTIVE)
        return bool(active) and active[0].state is not S.AWAITING_APPROVAL
