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
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from .budget import BudgetConfig
from .config import AgentConfig, Prices, RuntimeConfig
from .control import ControlRequest, Instance, ask, live_instances, serve_requests
from .delivery import Deliverer, deliver
from .errors import RunError, StaleWrite, StoreError
from .events import EventBus, RunEnded, StateChanged, Subscription
from .logcontext import RUN_CONTEXT
from .loop import DRIVABLE, RunDriver
from .providers.base import Provider
from .runs import Decision, Delivery, Origin, Run, RunState, Transition, transition
from .stores.base import Checkpoint, Store, check_thread_id
from .tools import ToolRegistry

__all__ = ["ACTIVE", "Runtime"]

log = logging.getLogger("maiden.runtime")
S = RunState

ACTIVE = (S.QUEUED, S.RUNNING, S.AWAITING_TOOL, S.AWAITING_APPROVAL)


class Runtime:
    """Owns the loop, the lock and the workers; shared by every entry point in a process."""

    def __init__(
        self,
        store: Store,
        provider: Provider,
        tools: ToolRegistry | None = None,
        *,
        agent: AgentConfig | None = None,
        budget: BudgetConfig | None = None,
        prices: Prices | None = None,
        settings: RuntimeConfig | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.provider = provider
        self.tools = tools if tools is not None else ToolRegistry()
        self.agent = agent or AgentConfig()
        self.settings = settings or RuntimeConfig()
        self.clock = clock
        self.bus = EventBus()
        self.instance_id = uuid.uuid4().hex[:12]
        self._born = clock()
        self.driver = RunDriver(store, provider, self.tools, self.agent, self.bus,
                                instance_id=self.instance_id, budget=budget, prices=prices,
                                cancel_grace_s=self.settings.cancel_grace_s, clock=clock)
        self._global_lock = asyncio.Lock()
        self._workers: dict[str, asyncio.Task[None]] = {}
        self._dirty: set[str] = set()
        self._driving: dict[str, asyncio.Task[Run]] = {}
        self._deliverers: dict[str, Deliverer] = {}
        self._sending: set[str] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._closing = False
        self._stop = asyncio.Event()
        self._serving: asyncio.Task[None] | None = None
        self.recovered: list[Run] = []
        """The runs ``start()`` found unfinished, as they ended up."""

    async def __aenter__(self) -> Runtime:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self, *, recover: bool = True, serve: bool = True) -> list[Run]:
        """Recover every unfinished run and send every unsent reply; return the runs recovered.

        Returns once recovery is done, so new work is served after the old. With
        ``serve``, also answer requests from other processes on the same store
        (`maiden approve`, `maiden cancel`) and time out stale approvals, in the background.
        """
        if serve and self._serving is None:
            self._serving = self.spawn(
                serve_requests(self, self.settings.poll_interval_s, self._stop),
                name="maiden-control")
        if not recover:
            return []
        unfinished = await self.store.list_runs(states=DRIVABLE)
        for thread_id in dict.fromkeys(r.thread_id for r in unfinished):
            self._kick(thread_id)
        await self.idle()
        await self.flush_deliveries()
        await self.expire_approvals()
        self.recovered = [await self.store.get_run(r.id) for r in unfinished]
        return self.recovered

    async def idle(self) -> None:
        """Wait until no thread has work in this process."""
        while self._workers:
            await asyncio.gather(*self._workers.values(), return_exceptions=True)

    async def close(self) -> None:
        """Stop taking work; let each running run reach its next checkpoint, then stop it.

        Shutdown is not cancellation: a run stopped here is left at its checkpoint and
        continues when a runtime starts again on the same store.
        """
        self._closing = True
        self._stop.set()
        self.driver.stopping = True
        workers = list(self._workers.values()) + list(self._tasks)
        if workers:
            _, late = await asyncio.wait(workers, timeout=self.settings.shutdown_grace_s)
            for task in late:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
        # Whoever still waits on a run that did not get to end here is told so.
        for run_id in self.bus.watched():
            with contextlib.suppress(StoreError):
                run = await self.store.get_run(run_id)
                if run.state in DRIVABLE:
                    self._publish_waiting(run, "shutting down")

    def spawn(self, coro: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        """Start a background task the runtime keeps a reference to and awaits on close."""
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

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
        return await self._accept(self._new_run(thread_id, text, origin, idempotency_key))

    async def send(self, thread_id: str, text: str, *, origin: Origin | None = None) -> Run:
        """Submit a message and wait for its run to end or pause."""
        run = self._new_run(thread_id, text, origin, None)
        async with self.bus.subscribe(run.id) as events:  # before the run can start
            await self._accept(run)
            return await self._until_ended(run, events)

    async def wait(self, run_id: str) -> Run:
        """Wait until the run is completed, failed, cancelled, timed out or paused.

        Events say so for runs driven here; the store is read now and then too, for a
        run that another process on the same store took up.
        """
        async with self.bus.subscribe(run_id) as events:
            run = await self.store.get_run(run_id)
            if run.state not in DRIVABLE:
                return run
            self._kick(run.thread_id)
            return await self._until_ended(run, events)

    def _new_run(
        self, thread_id: str, text: str, origin: Origin | None, idempotency_key: str | None
    ) -> Run:
        if self._closing:
            raise RunError("shutting_down", "the runtime is shutting down")
        check_thread_id(thread_id)
        now = self.clock()
        return Run(id=uuid.uuid4().hex, thread_id=thread_id, text=text, created_at=now,
                   updated_at=now, origin=origin or Origin(), idempotency_key=idempotency_key)

    async def _accept(self, run: Run) -> Run:
        stored = await self.store.create_run(run)
        self._kick(run.thread_id)
        return stored

    async def _until_ended(self, run: Run, events: Subscription) -> Run:
        while True:
            try:
                event = await asyncio.wait_for(events.next(), 4 * self.settings.poll_interval_s)
            except TimeoutError:
                run = await self.store.get_run(run.id)
                if run.state not in DRIVABLE:
                    return run
                if run.thread_id not in self._workers:
                    self._kick(run.thread_id)
                continue
            if isinstance(event, RunEnded):
                return event.run or await self.store.get_run(run.id)

    def subscribe(
        self, run_id: str | None = None
    ) -> contextlib.AbstractAsyncContextManager[Subscription]:
        """Events of one run (ending with its ``run.*`` end event), or of all runs."""
        return self.bus.subscribe(run_id)

    async def get_run(self, run_id: str) -> Run:
        """The run as stored now, or ``NotFound``."""
        return await self.store.get_run(run_id)

    def holds(self, run_id: str) -> bool:
        """True while this process is driving the run."""
        return run_id in self._driving

    async def servers(self) -> list[Instance]:
        """Runtimes that serve this store now (their heartbeat is fresh)."""
        return await live_instances(self.store, self.clock(), self.settings.poll_interval_s)

    async def ask(self, kind: str, run_id: str, **payload: Any) -> ControlRequest:
        """Ask the serving process(es) to decide, cancel or resume a run; wait for the answer."""
        request = ControlRequest.model_validate(
            {"kind": kind, "run_id": run_id, "payload": payload, "created_at": self.clock()})
        return await ask(self.store, request,
                         timeout_s=max(10.0, 10 * self.settings.poll_interval_s))

    # -- decisions and cancellation ------------------------------------------------------------

    async def decide(
        self,
        run_id: str,
        tool_call_id: str,
        *,
        approve: bool,
        by: str = "",
        reason: str = "",
        arguments_hash: str | None = None,
        approvers: Sequence[str] | None = None,
    ) -> Run:
        """Answer a pending approval; the run continues in the background.

        ``approvers`` (a channel's list) or else ``[agent] approvers`` restricts who may
        decide; ``arguments_hash`` binds the decision to the exact call the person saw.
        A run that timed out waiting can still be approved: it is resumed.
        """
        allowed = list(approvers) if approvers is not None else self.agent.approvers
        if allowed and by not in allowed:
            raise RunError("not_an_approver", f"{by or 'an anonymous caller'} may not decide "
                           "approvals here")
        run = await self.store.get_run(run_id)
        pending = run.pending_approval
        waiting = run.state is S.AWAITING_APPROVAL or (
            run.state is S.TIMED_OUT and run.reason == "approval_timeout")
        if not waiting or pending is None:
            raise RunError("not_awaiting_approval",
                           f"run {run_id} is {run.state}, not awaiting approval")
        if pending.tool_call_id != tool_call_id or (
                arguments_hash is not None and arguments_hash != pending.arguments_hash):
            raise RunError("stale_approval", f"run {run_id} is waiting for call "
                           f"{pending.tool_call_id} ({pending.name}), not the call decided on")
        decision = Decision(tool_call_id=tool_call_id, approve=approve, by=by, reason=reason,
                            arguments_hash=pending.arguments_hash, at=self.clock())
        verb = "approved" if approve else "denied"
        target = S.AWAITING_TOOL if run.state is S.AWAITING_APPROVAL else S.QUEUED
        moved, step = transition(
            run, target, f"{verb} by {by or 'someone'}: {pending.name}", now=self.clock(),
            decisions=(*run.decisions, decision), pending_approval=None,
            owner=self.instance_id, error=None)
        await self._write_run(moved.model_copy(update={"version": run.version + 1}), step)
        self._kick(run.thread_id)
        return moved

    async def resume(self, run_id: str) -> Run:
        """Queue a failed, cancelled or timed-out run again, from its last checkpoint."""
        run = await self.store.get_run(run_id)
        moved, step = transition(run, S.QUEUED, "resumed by request", now=self.clock(),
                                 error=None)
        await self._write_run(moved.model_copy(update={"version": run.version + 1}), step)
        self._kick(run.thread_id)
        return moved

    async def cancel(self, run_id: str, *, by: str = "") -> Run:
        """Cancel a run: its model stream and running tools are cut off, every unanswered
        call gets a ``cancelled`` result, and the run ends ``cancelled``."""
        reason = f"cancelled by {by}" if by else "cancelled"
        for _ in range(5):
            task = self._driving.get(run_id)
            if task is not None:
                self.driver.cancel_reasons[run_id] = reason
                task.cancel()
                await asyncio.wait([task])
                return await self.store.get_run(run_id)
            try:
                run = await self.driver.cancel(run_id, reason, attempts=1)
            except StaleWrite:
                await asyncio.sleep(0)  # it changed under us: maybe a worker took it up
                continue
            await self._send_replies(run)
            self._kick(run.thread_id)  # runs queued behind it may go now
            return run
        raise RunError("cancel_failed", f"run {run_id} kept changing; try again")

    async def expire_approvals(self) -> list[Run]:
        """Time out every approval that waited longer than ``approval_timeout_s``."""
        if self.agent.approval_timeout_s is None:
            return []
        waiting = await self.store.list_runs(states=[S.AWAITING_APPROVAL])
        expired = [await self.driver.expire(r.id) for r in waiting]
        expired = [r for r in expired if r.state is S.TIMED_OUT]
        for run in expired:
            await self._send_replies(run)
            self._kick(run.thread_id)
        return expired

    async def _write_run(self, run: Run, step: Transition) -> None:
        await self.store.commit(Checkpoint(thread_id=run.thread_id, position=None, run=run,
                                           transitions=[step]))

    # -- delivery ----------------------------------------------------------------------------

    def add_deliverer(self, channel: str, deliverer: Deliverer) -> None:
        """Route replies of runs whose origin is ``channel`` through ``deliverer``."""
        self._deliverers[channel] = deliverer

    async def flush_deliveries(self) -> None:
        """Send every recorded reply that has no remote id yet, reconciling first: those a
        crash or a failed send left behind. Serving runtimes call this now and then.

        A reply of a run that another live process holds is left to that process.
        """
        live: set[str] | None = None
        for delivery in await self.store.deliveries(pending=True):
            if delivery.key in self._sending or delivery.channel not in self._deliverers:
                continue
            run = await self.store.get_run(delivery.run_id)
            if run.owner not in (None, self.instance_id):
                if live is None:
                    live = {i.id for i in await self.servers()}
                if run.owner in live:
                    continue
            await self._deliver(delivery, fresh=False)

    async def _send_replies(self, run: Run) -> None:
        """Send what the run's end put in the outbox (a reply, or why it stopped)."""
        if run.terminal and run.origin.target:
            for delivery in await self.store.deliveries(run_id=run.id, pending=True):
                # Written since this runtime started: by it, and never tried before.
                await self._deliver(delivery, fresh=delivery.created_at >= self._born)

    async def _deliver(self, delivery: Delivery, *, fresh: bool) -> None:
        deliverer = self._deliverers.get(delivery.channel)
        if deliverer is None:
            log.warning("no %r channel to deliver run %s's reply; it stays in the outbox",
                        delivery.channel, delivery.run_id)
            return
        if delivery.key in self._sending:
            return  # already on its way
        self._sending.add(delivery.key)
        try:
            await deliver(self.store, deliverer, delivery, fresh=fresh)
        except Exception:
            log.exception("delivering run %s's reply failed; it stays in the outbox and is "
                          "tried again", delivery.run_id)
        finally:
            self._sending.discard(delivery.key)

    # -- workers -----------------------------------------------------------------------------

    def _kick(self, thread_id: str) -> None:
        if self._closing:
            return
        self._dirty.add(thread_id)
        if thread_id not in self._workers:
            token = RUN_CONTEXT.set((thread_id, None))
            try:
                task = asyncio.create_task(self._work(thread_id),
                                           name=f"maiden-thread:{thread_id}")
            finally:
                RUN_CONTEXT.reset(token)
            self._workers[thread_id] = task

    async def _work(self, thread_id: str) -> None:
        failed = False
        announced: set[str] = set()
        try:
            while not self._closing:
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
                holder = await self._held_elsewhere(active[0])
                if holder is not None:
                    # Another live process is driving this thread's current run: never
                    # "recover" it under its feet. Wait for it only if someone here waits
                    # on this thread; otherwise leave the thread to that process.
                    watched = set(self.bus.watched())
                    if not any(r.id in watched for r in active):
                        return
                    for run in active[1:]:
                        if run.id not in announced:
                            announced.add(run.id)
                            self._publish_progress(run, f"waiting for {holder} to finish run "
                                                   f"{active[0].id}")
                    await asyncio.sleep(self.settings.poll_interval_s)
                    self._dirty.add(thread_id)
                    continue
                await self._drive(active[0])
                if len(active) == 1 and thread_id not in self._dirty:
                    return  # it was the only one, and nothing came in meanwhile
        except Exception:
            failed = True
            log.exception("the worker for thread %r stopped", thread_id)
        finally:
            self._workers.pop(thread_id, None)
            if failed and thread_id in self._dirty and not self._closing:
                # Someone asked for this thread after the failed attempt began: look again.
                self._kick(thread_id)

    async def _drive(self, run: Run) -> None:
        lock = self._global_lock if self.settings.concurrency == "global" \
            else contextlib.nullcontext()
        async with lock:
            if self._closing:
                self._publish_waiting(run, "shutting down")
                return
            # The run is read again inside: it may have changed while we waited for the lock.
            token = RUN_CONTEXT.set((run.thread_id, run.id))
            try:
                task = asyncio.create_task(self.driver.drive(run.id),
                                           name=f"maiden-run:{run.id}")
            finally:
                RUN_CONTEXT.reset(token)
            self._driving[run.id] = task
            try:
                ended = await task
            except StaleWrite as exc:
                log.warning("run %s: another writer holds thread %r (%s); leaving it to them",
                            run.id, run.thread_id, exc)
                self._publish_waiting(run, "another process is writing this thread")
                raise
            except StoreError as exc:
                self._publish_waiting(run, f"store error: {exc}")
                raise
            finally:
                self._driving.pop(run.id, None)
            await self._send_replies(ended)

    async def _held_elsewhere(self, run: Run) -> str | None:
        """The live process (other than this one) that is driving ``run``, if any."""
        if run.state is S.QUEUED or run.owner in (None, self.instance_id):
            return None
        for instance in await self.servers():
            if instance.id == run.owner:
                return f"process {instance.pid} on {instance.host}"
        return None

    def _publish_progress(self, run: Run, reason: str) -> None:
        self.bus.publish(StateChanged(run_id=run.id, thread_id=run.thread_id, state=run.state,
                                      reason=reason))

    def _publish_waiting(self, run: Run, reason: str) -> None:
        """Tell waiters that this process stopped driving a run that has not ended."""
        self.bus.publish(RunEnded(kind="run.paused", run_id=run.id, thread_id=run.thread_id,
                                  state=run.state, reason=reason, run=run))
