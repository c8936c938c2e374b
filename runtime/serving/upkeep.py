"""What a serving runtime does now and then besides driving runs (``control.Upkeep``): time
out approvals, send again what waits in the outbox, take up the runs of processes that
died; and what it last found of its store."""

from __future__ import annotations

from collections.abc import Callable

from ..engine.drivers import Drivers
from ..engine.loop import DRIVABLE
from ..model.requests import News
from ..model.runs import Run, RunState
from ..outbox.delivery import Outbox
from ..stores.base import Store
from .control import Instance
from .leases import Leases
from .peers import Peers
from .waiting import Waiting
from .workers import Workers

__all__ = ["RuntimeUpkeep"]


class RuntimeUpkeep:
    """The control loop's side of one runtime: its workers, outbox and store."""

    def __init__(self, store: Store, driver: Drivers, outbox: Outbox, workers: Workers,
                 peers: Peers, leases: Leases, *, waiting: Waiting, instance_id: str,
                 clock: Callable[[], float]) -> None:
        self._store = store
        self._driver = driver
        self._outbox = outbox
        self._workers = workers
        self._waiting = waiting
        self._peers = peers
        self.leases = leases
        self.instance_id = instance_id
        self.clock = clock
        self.problem: str | None = None
        """Why the store could not be written when the control loop last tried, or None."""

    async def check_writable(self) -> None:
        """Write to the store and take it back; ``StoreError`` if it cannot be written.

        The write is a heartbeat that is already stale (no process takes it for a live
        server) and is removed at once.
        """
        probe = Instance(id=f"probe-{self.instance_id}", pid=0, host="", started_at=0.0,
                         beat_at=0.0)
        await self._store.beat(probe)
        await self._store.beat(probe, gone=True)

    def report_store(self, problem: str | None) -> None:
        self.problem = problem

    def report_peers(self, others: int) -> None:
        self._workers.report_peers(others)

    def heard(self, news: News, key: str) -> None:
        self._workers.heard(news, key)
        self._waiting.heard(news, key)

    def holds(self, run_id: str) -> bool:
        """True while this process is driving the run."""
        return self._workers.driving(run_id) is not None

    async def adopt_orphans(self) -> None:
        """Look at every thread with an unfinished run that no worker here has: a thread
        whose driver died (on another machine: once its lease has expired) is taken up
        here; one that a live process holds is left to it."""
        if self._workers.closing:
            return
        for run in await self._store.list_runs(states=DRIVABLE):
            if not self._workers.busy(run.thread_id):
                self._workers.kick(run.thread_id)

    async def expire_approvals(self) -> list[Run]:
        """Time out every approval that waited longer than ``approval_timeout_s``."""
        if not self._driver.approval_timeouts:
            return []
        waiting = await self._store.list_runs(states=[RunState.AWAITING_APPROVAL])
        expired = [await self._driver.end(r).expire(r.id) for r in waiting]
        expired = [r for r in expired if r.state is RunState.TIMED_OUT]
        for run in expired:
            await self._outbox.send_pending(run)
            self._workers.kick(run.thread_id)
        return expired

    async def flush_deliveries(self, channel: str | None = None) -> None:
        """Send every recorded delivery that has no message id yet, reconciling first, in
        order: those a crash or a failed send left behind (``channel``: that channel's
        only). A delivery of a run that another live process holds is left to that
        process, and one of a run a worker here drives to that worker, which sends it as
        the run ends (a sweep meanwhile would send it as the run's last commit is
        written: before, not after, a process killed right then has answered)."""
        elsewhere = self._peers.elsewhere()

        async def skip(run_id: str) -> bool:
            return self.holds(run_id) or await elsewhere(run_id)

        await self._outbox.flush(skip, channel=channel)
