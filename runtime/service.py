"""The runtime: the public face of the loop that channels, schedules and the CLI use.

    async with Runtime(store, provider, tools) as rt:      # recovers unfinished runs
        run = await rt.submit("slack:T1:C1:171.2", "hi", origin=origin)
        async with rt.subscribe(run.id) as events: ...
        run = await rt.wait(run.id)

Every inbound message is persisted as a queued run before ``submit`` returns.
Runs are driven by one worker task per thread, so a thread's runs go strictly in
order; ``concurrency = "global"`` also makes all workers share one lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from typing import Literal

from .config import AgentConfig
from .delivery import Deliverer, deliver
from .errors import RunError, StaleWrite, StoreError
from .events import EventBus, RunEnded, Subscription
from .loop import RunDriver
from .providers.base import Provider
from .runs import Decision, Delivery, Origin, Run, RunState, transition
from .stores.base import Checkpoint, Store, check_thread_id
from .tools import ToolRegistry

__all__ = ["ACTIVE", "Runtime"]

log = logging.getLogger("maiden.runtime")
S = RunState

ACTIVE = (S.QUEUED, S.RUNNING, S.AWAITING_TOOL, S.AWAITING_APPROVAL)
_DRIVABLE = (S.QUEUED, S.RUNNING, S.AWAITING_TOOL)


class Runtime:
    """Owns the loop, the lock and the workers; shared by every entry point in a process."""

    def __init__(
        self,
        store: Store,
        provider: Provider,
        tools: ToolRegistry | None = None,
        *,
        agent: AgentConfig | None = None,
        concurrency: Literal["global", "thread"] = "global",
    ) -> None:
        self.store = store
        self.provider = provider
        self.tools = tools if tools is not None else ToolRegistry()
        self.agent = agent or AgentConfig()
        self.concurrency = concurrency
        self.bus = EventBus()
        self.instance_id = uuid.uuid4().hex[:12]
        self.driver = RunDriver(store, provider, self.tools, self.agent, self.bus,
                                instance_id=self.instance_id)
        self._global_lock = asyncio.Lock()
        self._workers: dict[str, asyncio.Task[None]] = {}
        self._dirty: set[str] = set()
        self._deliverers: dict[str, Deliverer] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._closing = False
        self.recovered: list[Run] = []
        """The runs ``start()`` found unfinished, as they ended up."""

    async def __aenter__(self) -> Runtime:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> list[Run]:
        """Recover every unfinished run and send every unsent reply; return the runs recovered.

        Returns once recovery is done, so new work is served after the old.
        """
        unfinished = await self.store.list_runs(states=_DRIVABLE)
        for thread_id in dict.fromkeys(r.thread_id for r in unfinished):
            self._kick(thread_id)
        await self.idle()
        await self.flush_deliveries()
        self.recovered = [await self.store.get_run(r.id) for r in unfinished]
        return self.recovered

    async def idle(self) -> None:
        """Wait until no thread has work in this process."""
        while self._workers:
            await asyncio.gather(*self._workers.values(), return_exceptions=True)

    async def close(self) -> None:
        """Stop taking work; let running work finish."""
        self._closing = True
        await self.idle()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    # -- intake ------------------------------------------------------------------------------

    async def submit(
        self,
        thread_id: str,
        text: str,
        *,
        origin: Origin | None = None,
        idempotency_key: str | None = None,
    ) -> Run:
        """Persist a message as a queued run and schedule it; return the run.

        With an ``idempotency_key`` already used, the original run is returned and
        nothing new happens.
        """
        if self._closing:
            raise RunError("shutting_down", "the runtime is shutting down")
        check_thread_id(thread_id)
        run = Run(id=uuid.uuid4().hex, thread_id=thread_id, text=text,
                  origin=origin or Origin(), idempotency_key=idempotency_key)
        stored = await self.store.create_run(run)
        self._kick(thread_id)
        return stored

    async def send(self, thread_id: str, text: str, *, origin: Origin | None = None) -> Run:
        """Submit a message and wait for its run to end or pause."""
        run = await self.submit(thread_id, text, origin=origin)
        return await self.wait(run.id)

    async def wait(self, run_id: str) -> Run:
        """Wait until the run is completed, failed, cancelled, timed out or paused."""
        async with self.bus.subscribe(run_id) as events:
            run = await self.store.get_run(run_id)
            if run.state not in _DRIVABLE:
                return run
            if run.thread_id not in self._workers:
                self._kick(run.thread_id)
            async for _ in events:
                pass
        return await self.store.get_run(run_id)

    def subscribe(self, run_id: str | None = None) -> contextlib.AbstractAsyncContextManager[
            Subscription]:
        """Events of one run (ending with its ``run.*`` end event), or of all runs."""
        return self.bus.subscribe(run_id)

    # -- decisions ---------------------------------------------------------------------------

    async def decide(
        self, run_id: str, tool_call_id: str, *, approve: bool, by: str = "", reason: str = ""
    ) -> Run:
        """Answer a pending approval; the run continues in the background."""
        run = await self.store.get_run(run_id)
        pending = run.pending_approval
        if run.state is not S.AWAITING_APPROVAL or pending is None:
            raise RunError("not_awaiting_approval",
                           f"run {run_id} is {run.state}, not awaiting approval")
        if pending.tool_call_id != tool_call_id:
            raise RunError("stale_approval", f"run {run_id} is waiting for call "
                           f"{pending.tool_call_id}, not {tool_call_id}")
        decision = Decision(tool_call_id=tool_call_id, approve=approve, by=by, reason=reason,
                            arguments_hash=pending.arguments_hash, at=time.time())
        verb = "approved" if approve else "denied"
        moved, step = transition(
            run, S.AWAITING_TOOL, f"{verb} by {by or 'someone'}: {pending.name}",
            decisions=(*run.decisions, decision), pending_approval=None, owner=self.instance_id)
        moved = moved.model_copy(update={"version": run.version + 1})
        await self.store.commit(Checkpoint(thread_id=run.thread_id, position=None, run=moved,
                                           transitions=[step]))
        self._kick(run.thread_id)
        return moved

    async def resume(self, run_id: str) -> Run:
        """Queue a failed, cancelled or timed-out run again, from its last checkpoint."""
        run = await self.store.get_run(run_id)
        moved, step = transition(run, S.QUEUED, "resumed by request", error=None)
        moved = moved.model_copy(update={"version": run.version + 1})
        await self.store.commit(Checkpoint(thread_id=run.thread_id, position=None, run=moved,
                                           transitions=[step]))
        self._kick(run.thread_id)
        return moved

    # -- delivery ----------------------------------------------------------------------------

    def add_deliverer(self, channel: str, deliverer: Deliverer) -> None:
        """Route replies of runs whose origin is ``channel`` through ``deliverer``."""
        self._deliverers[channel] = deliverer

    async def flush_deliveries(self) -> None:
        """Send every recorded reply that has no remote id yet (reconciling first)."""
        for delivery in await self.store.deliveries(pending=True):
            await self._deliver(delivery, fresh=False)

    async def _deliver(self, delivery: Delivery, *, fresh: bool) -> None:
        deliverer = self._deliverers.get(delivery.channel)
        if deliverer is None:
            log.warning("no %r channel to deliver run %s's reply; it stays in the outbox",
                        delivery.channel, delivery.run_id)
            return
        try:
            await deliver(self.store, deliverer, delivery, fresh=fresh)
        except Exception:
            log.exception("delivering run %s's reply failed; it stays in the outbox",
                          delivery.run_id)

    # -- workers -----------------------------------------------------------------------------

    def _kick(self, thread_id: str) -> None:
        self._dirty.add(thread_id)
        if thread_id not in self._workers:
            task = asyncio.create_task(self._work(thread_id), name=f"maiden-thread:{thread_id}")
            self._workers[thread_id] = task

    async def _work(self, thread_id: str) -> None:
        try:
            while True:
                self._dirty.discard(thread_id)
                active = await self.store.list_runs(thread_id=thread_id, states=ACTIVE)
                if active and active[0].state is S.AWAITING_APPROVAL:
                    # A run waiting for a person holds up the runs queued behind it.
                    for blocked in active[1:]:
                        self._publish_waiting(blocked, f"waiting behind run {active[0].id}, "
                                              "which awaits approval")
                    active = []
                if not active:
                    if thread_id in self._dirty:
                        continue
                    return
                await self._drive(active[0])
        except Exception:
            log.exception("the worker for thread %r stopped", thread_id)
        finally:
            self._workers.pop(thread_id, None)

    async def _drive(self, run: Run) -> None:
        lock = self._global_lock if self.concurrency == "global" else contextlib.nullcontext()
        async with lock:
            try:
                ended = await self.driver.drive(run.id)
            except StaleWrite as exc:
                log.warning("run %s: another writer holds thread %r (%s); leaving it to them",
                            run.id, run.thread_id, exc)
                self._publish_waiting(run, "another process is writing this thread")
                raise
            except StoreError as exc:
                self._publish_waiting(run, f"store error: {exc}")
                raise
            if ended.state is S.COMPLETED:
                for delivery in await self.store.deliveries(run_id=ended.id, pending=True):
                    await self._deliver(delivery, fresh=True)

    def _publish_waiting(self, run: Run, reason: str) -> None:
        """Tell waiters that this process stopped driving a run that has not ended."""
        self.bus.publish(RunEnded(kind="run.paused", run_id=run.id, thread_id=run.thread_id,
                                  state=run.state, reason=reason))

    async def get_run(self, run_id: str) -> Run:
        """The run as stored now, or ``NotFound``."""
        return await self.store.get_run(run_id)
