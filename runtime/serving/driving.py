"""Driving one run in a worker: its announced files fetched ahead of the global lock, then,
under the lock and the thread's lease, a task that drives it (which ``cut_off`` cancels),
and what it left in the outbox sent once it stops."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from ..engine.drivers import Drivers
from ..engine.files import Files
from ..errors import StaleWrite, StoreError
from ..logcontext import RUN_CONTEXT
from ..model.config import RuntimeConfig
from ..model.events import EventBus, RunEnded
from ..model.runs import Run, RunState
from ..outbox.delivery import Outbox
from .leases import Leases, describe_holder, thread_lease

__all__ = ["Driving"]

log = logging.getLogger("maiden.runtime")
S = RunState


class Driving:
    """The driving of one run, for ``Workers`` (which has these attributes)."""

    _stop: asyncio.Event
    _recording: set[str] | None
    _lock: asyncio.Lock
    _settings: RuntimeConfig
    _files: Files | None
    _fetching: set[asyncio.Task[None]]
    _leases: Leases
    _lingered: set[str]
    _driver: Drivers
    _driving: dict[str, tuple[asyncio.Task[Run], asyncio.Future[None]]]
    _outbox: Outbox
    _bus: EventBus

    async def _drive(self, run: Run) -> str | None:
        """Drive the run here; or, if another process holds its thread's lease, who."""
        lock = self._lock if self._settings.concurrency == "global" \
            else contextlib.nullcontext()
        # A queued run as listed a moment ago, if nothing is waited for before its task is
        # made (``_drive_locked``): then it need not be read again.
        listed: Run | None = run if run.state is S.QUEUED else None
        if self._files is not None and lock is self._lock and run.fetch and not self._stop.is_set():
            # Its thread's lease first: nothing is downloaded for a thread another process
            # drives (chaos seed 10404: a replica downloaded the same file about once a
            # second while another held its thread).
            holder = await self._held_elsewhere(run)
            if holder is not None:
                return holder
            await self._prefetch(run, self._files)  # not while the lock keeps others waiting
            listed = None
        if lock is self._lock and self._lock.locked():
            listed = None
        try:
            return await self._drive_locked(run, lock, listed)
        finally:
            if self._files is not None:
                self._files.forget(run.id)

    async def _held_elsewhere(self, run: Run) -> str | None:
        """Who drives the run's thread, if another process does (asked to hand it over
        once done); None once this one holds its lease."""
        other = await self._leases.take(thread_lease(run.thread_id))
        if other is None:
            return None
        await self._leases.ask_for_thread(run.thread_id)
        return describe_holder(other)

    async def _prefetch(self, run: Run, files: Files) -> None:
        """``files.prefetch(run)``, cut off by ``stop_fetching`` (then the run is left as
        it is: ``_drive_locked`` finds the runtime closing)."""
        task = asyncio.create_task(files.prefetch(run), name=f"maiden-fetch:{run.id}")
        self._fetching.add(task)
        try:
            await task
        except asyncio.CancelledError:
            me = asyncio.current_task()
            if not task.cancelled() or (me is not None and me.cancelling()):
                raise
        finally:
            self._fetching.discard(task)

    async def _drive_locked(self, run: Run, lock: asyncio.Lock | contextlib.nullcontext[None],
                            listed: Run | None) -> str | None:
        async with lock:
            if self._stop.is_set():
                self.publish_waiting(run, "shutting down")
                return None
            if not self._leases.kept(thread_lease(run.thread_id)):
                listed = None  # the store is asked for the lease: time passes
            holder = await self._held_elsewhere(run)
            if holder is not None:
                return holder
            self._lingered.discard(run.thread_id)
            # The run is read again inside if it may have changed since it was listed (a
            # wait for the lock, a prefetch, a trip to the store for the lease). Else it is
            # driven as listed: once its task is registered below, a cancellation reaches
            # the task, and a change another process makes meanwhile fails the run's first
            # write (its version), as one made a moment later would.
            token = RUN_CONTEXT.set((run.thread_id, run.id))
            try:
                task = asyncio.create_task(self._driver.drive(run.id, listed),
                                           name=f"maiden-run:{run.id}")
            finally:
                RUN_CONTEXT.reset(token)
            settled: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._driving[run.id] = task, settled
            if self._recording is not None:
                self._recording.add(run.id)
            try:
                ended = await self._ended(run, task)
            except StaleWrite as exc:
                # Not an end for whoever waits here: the run goes on in the other writer,
                # and a waiter keeps waiting (reading the store) as for a thread held
                # elsewhere.
                log.warning("run %s: another writer holds thread %r (%s); leaving it to them",
                            run.id, run.thread_id, exc)
                return "another process writing this thread"
            except StoreError as exc:
                self.publish_waiting(run, f"store error: {exc}", failure=exc)
                raise
            finally:
                self._driving.pop(run.id, None)
                settled.set_result(None)
            await self._outbox.send_pending(ended)
            return None

    async def _ended(self, run: Run, task: asyncio.Task[Run]) -> Run:
        """The run as its task left it; one whose task was cancelled (``cut_off``) before
        its driver could take the cancellation (before the task's first step, or while it
        read the run and its thread) is ended cancelled here."""
        try:
            return await task
        except asyncio.CancelledError:
            me = asyncio.current_task()
            if not task.cancelled() or (me is not None and me.cancelling()):
                raise  # this worker is stopping (shutdown)
            reason = self._driver.cancellations.pop(run.id)
            if reason is None:
                raise
            return await self._driver.end(run).cancel(run.id, reason)

    def publish_waiting(self, run: Run, reason: str, failure: StoreError | None = None
                        ) -> None:
        """Tell waiters that this process stopped driving a run that has not ended
        (``failure``: because the store failed; a waiter gets that error)."""
        self._bus.publish(RunEnded.of(run, reason).model_copy(update={"failure": failure}))
