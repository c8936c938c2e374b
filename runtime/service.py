"""The runtime: the public face of the loop that channels, schedules and the CLI use.

    async with Runtime(store, provider, tools) as rt:      # recovers unfinished runs
        run = await rt.submit("slack:T1:C1:171.2", "hi", origin=origin,
                              idempotency_key="slack:T1:C1:171.2")
        async for event in rt.follow(run.id): ...           # ends with a RunEnded
        await rt.decide(run.id, call_id, approve=True, by="U2", approvers=["U2"])

Every inbound message is persisted as a queued run before ``submit`` returns.
Adapters use only these methods and the events; the store, the driver and the
event bus are the runtime's own. ``cancel``, ``decide`` and ``resume`` act on a
run wherever it lives: a run another live process on the same store is driving
is asked of that process (its tools stop where they run).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncGenerator, Callable, Coroutine, Iterable, Mapping, Sequence
from typing import Any

from .engine.agents import Agent, Agents
from .engine.caps import CapConfig, Caps
from .engine.drivers import Drivers
from .engine.files import Files
from .engine.intake import new_run
from .engine.loop import DRIVABLE, RunDriver
from .engine.stops import record_stop
from .engine.tracing import NO_TRACING, Tracing, traceparent_of
from .errors import MaidenError, RunError, StaleWrite, StoreError
from .model.attachments import FileRef, FileSource
from .model.budget import BudgetConfig
from .model.config import AgentConfig, FilesConfig, Prices, RuntimeConfig
from .model.decisions import approve_call, requeue
from .model.events import EventBus, RunEvent, Subscription
from .model.routing import Where
from .model.runs import Origin, Run, RunState, Said, Transition
from .outbox.delivery import Deliverer, Outbox, Sender
from .providers.base import Provider
from .serving.control import serve_requests
from .serving.erase import erase_thread
from .serving.feedback import Feedback
from .serving.leases import Leases, describe_holder
from .serving.notes import Notes
from .serving.peers import Asked, Peers
from .serving.records import Records
from .serving.upkeep import RuntimeUpkeep
from .serving.waiting import Waiting
from .serving.workers import ACTIVE, Workers
from .stores.base import Checkpoint, Store
from .stores.erasure import Erased
from .tools.registry import ToolRegistry

__all__ = ["ACTIVE", "Runtime"]

log = logging.getLogger("maiden.runtime")
S = RunState


class Runtime:
    """Owns the loop, the lock and the workers; shared by every entry point in a process.

    Built whole: what its tools may ask for in their context (``Tool.needs``) comes in
    as arguments. ``notes`` and ``send`` are its own; ``services`` adds the app's (the
    ``schedules`` book). ``channels`` names the chat channels the agent is configured
    for: where ``send`` may post (None: any), and whose file fetchers a run waits for
    rather than have its files refused, until the channel registers one
    (``files.add_fetcher``; `maiden run` opens its channels after recovery).
    """

    def __init__(
        self,
        store: Store,
        provider: Provider | None = None,
        tools: ToolRegistry | None = None,
        *,
        agent: AgentConfig | None = None,
        budget: BudgetConfig | None = None,
        prices: Prices | None = None,
        settings: RuntimeConfig | None = None,
        clock: Callable[[], float] = time.time,
        channels: Iterable[str] | None = None,
        services: Mapping[str, object] | None = None,
        files: FilesConfig | None = None,
        agents: Agents | None = None,
        caps: Sequence[CapConfig] = (),
        tracing: Tracing = NO_TRACING,
    ) -> None:
        if agents is None:
            if provider is None:
                raise ValueError("a runtime needs a provider, or agents")
            agents = Agents([Agent(agent or AgentConfig(), provider,
                                   tools if tools is not None else ToolRegistry(),
                                   budget or BudgetConfig(), prices or Prices())])
        elif provider is not None or tools is not None or agent is not None:
            raise ValueError("give either agents, or one agent's provider, tools and config")
        self.agents = agents
        """The agents, their routes and the default one."""
        chat = None if channels is None else frozenset(channels)
        self._tracing = tracing
        self.agent = agents.default.config
        """The default agent's settings (also where process-wide ones are read)."""
        self.tools = agents.default.tools
        self.settings = settings or RuntimeConfig()
        self.clock = clock
        self.instance_id = uuid.uuid4().hex[:12]
        self.records = Records(store)
        """What the store holds: runs, threads, entries, deliveries, approvals, stats."""
        self.notes = Notes(store, clock)
        """Notes kept in the store by key, written once per call (the ``notes`` service)."""
        self.feedback = Feedback(store, store, clock)
        """People's votes on replies (👍 / 👎), one per person per run."""
        self.files = Files(store, files, clock=clock, expected=chat or (),
                           arrived=self._fetcher_arrived)
        """Files people share: stored once by content, fetched as a run's first step."""
        self.caps = Caps(caps, store, default_agent=agents.default.name,
                         timezone=self.agent.timezone, clock=clock)
        """Spend caps per person, place and agent (``[[budgets]]``)."""
        self._store = store
        self._bus = EventBus()
        self._peers = Peers(store, self.instance_id)
        self._outbox = Outbox(store, born=clock(), clock=clock, tracing=tracing,
                              elsewhere=self._peers.elsewhere)
        self._bus.listen(self._outbox.live.on_event)
        provided: dict[str, object] = {
            "notes": self.notes,
            "send": Sender(self._outbox, chat),
            **(services or {})}
        cancel_reasons: dict[str, str] = {}
        drivers = {}
        for one in agents:
            one.tools.check_needs(provided)
            drivers[one.name] = RunDriver(
                store, one, self._bus, instance_id=self.instance_id,
                cancel_grace_s=self.settings.cancel_grace_s, clock=clock, services=provided,
                files=self.files, caps=self.caps, cancel_reasons=cancel_reasons,
                tracing=tracing,
                send_pending=self._outbox.send_pending)
        self._driver = Drivers(store, agents, drivers)
        self._leases = Leases(store, self.instance_id, self.settings.lease_ttl_s)
        self._workers = Workers(store, self._driver, self._bus, self.settings, self._leases,
                                peers=self._peers, outbox=self._outbox, files=self.files)
        self._waiting = Waiting(store, self._bus, self._workers, self._peers,
                                poll_interval_s=self.settings.poll_interval_s,
                                serving=lambda: self._serving is not None)
        self._upkeep = RuntimeUpkeep(store, self._driver, self._outbox, self._workers,
                                     self._peers, self._leases, waiting=self._waiting,
                                     instance_id=self.instance_id, clock=clock)
        self._tasks: set[asyncio.Task[None]] = set()
        self._closing = False
        self._stop = asyncio.Event()
        self._serving: asyncio.Task[None] | None = None
        self._started = False
        """``start`` was called: a deliverer added from now on gets its waiting records at
        once (``start`` sends those of the deliverers added before)."""
        self.recovered: list[Run] = []
        """The runs ``start()`` found unfinished, as they ended up."""

    @property
    def provider(self) -> Provider:
        """The default agent's model."""
        return self.agents.default.provider

    async def __aenter__(self) -> Runtime:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self, *, recover: bool = True, serve: bool = True) -> list[Run]:
        """Recover every unfinished run and send everything left in the outbox; return the
        runs recovered.

        Returns once recovery is done, so new work is served after the old. With
        ``serve``, also answer requests from other processes on the same store
        (`maiden approve`, `maiden cancel`), time out stale approvals and retry failed
        sends, in the background.
        """
        self._started = True
        if self.caps:  # made once; a cap's check reads a period's runs by its index
            await self._store.index_spend(self.caps.scopes)
        if serve and self._serving is None:
            self._serving = self.spawn(
                serve_requests(self, self._upkeep, self._store,
                               self.settings.poll_interval_s, self._stop,
                               adopt_every_s=self.settings.lease_ttl_s / 2),
                name="maiden-control")
        if not recover:
            return []
        unfinished = await self._store.list_runs(states=DRIVABLE)
        driven: set[str] = set()
        self._workers.driven = driven
        try:
            for thread_id in dict.fromkeys(r.thread_id for r in unfinished):
                self._workers.kick(thread_id)
            await self.idle()
        finally:
            self._workers.driven = None
        await self.flush_deliveries()
        await self._upkeep.expire_approvals()
        # Only what this process took up: with replicas, the others' runs are theirs.
        self.recovered = [await self._store.get_run(r.id) for r in unfinished
                          if r.id in driven]
        return self.recovered

    async def idle(self) -> None:
        """Wait until no thread has work in this process."""
        await self._workers.idle()

    async def close(self, *, grace_s: float | None = None) -> None:
        """Stop taking work; let each running run reach its next checkpoint (for at most
        ``grace_s``, default ``[runtime] shutdown_grace_s``), then stop it.

        Shutdown is not cancellation: a run stopped here is left at its checkpoint and
        continues when a runtime starts again on the same store.
        """
        self._closing = True
        self._workers.closing = True
        self._workers.stop_lingering()
        self._workers.stop_fetching()  # a download under way is made again at the next start
        self._stop.set()
        self._driver.stop()
        workers = self._workers.tasks() + list(self._tasks)
        if workers:
            grace = self.settings.shutdown_grace_s if grace_s is None else grace_s
            _, late = await asyncio.wait(workers, timeout=grace) if grace > 0 \
                else (set(), set(workers))
            for task in late:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
        await self._outbox.live.close()  # a stream left open is finished by its reply
        with contextlib.suppress(StoreError):
            await self._leases.close()
        # Whoever still waits on a run that did not get to end here is told so.
        for run_id in self._bus.watched():
            with contextlib.suppress(StoreError):
                run = await self._store.get_run(run_id)
                if run.state in DRIVABLE:
                    self._workers.publish_waiting(run, "shutting down")
        # No timer of this runtime is left on the loop (nor keeps it alive).
        self._waiting.close()

    def _fetcher_arrived(self, channel: str) -> None:
        """A channel registered its file fetcher: the threads whose runs waited for it go
        on."""
        self._workers.fetcher_arrived(channel)

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
        files: Sequence[FileRef] = (),
        fetch: Sequence[FileSource] = (),
        context: Sequence[Said] = (),
        agent: str | None = None,
        schedule: str | None = None,
        trace: str = "",
    ) -> Run:
        """Persist a message as a queued run and schedule it; return the run.

        The run's agent is its thread's: that of the thread's newest run, else ``agent``
        (the schedule's, or the model an OpenAI client asked for), else where the routes
        send a thread from ``origin`` (``schedule``: the schedule that sends it).

        ``files`` are files already stored (``files.put``); ``fetch``, files its platform
        announced, which the run fetches as its first step (DESIGN §2 Files). ``context``:
        earlier messages of a conversation held elsewhere, written into the thread before
        this one when the run starts (a thread seeded with them). ``trace``: the W3C
        ``traceparent`` of the request that brought it (``[otel]``: the run is traced
        beneath it; anything else is ignored).

        With an ``idempotency_key`` already used, the original run is returned and
        nothing new happens. An empty thread id (``InvalidThreadId``) or an empty message
        (``RunError("invalid_message")``) is refused. A message over ``[agent]
        max_message_chars`` is refused the same way when the origin has no target to
        answer (the HTTP API, the CLI); from a chat channel it is taken, and its run fails
        at once (``message_too_long``) with a reply naming the limit.
        """
        chosen = await self.agent_for(thread_id, origin or Origin(), agent, schedule)
        run = self._new_run(thread_id, text, origin, idempotency_key, files, fetch, context,
                            chosen)
        if traced := traceparent_of(trace):
            run = run.model_copy(update={"trace": traced})
        return await self._accept(run)

    def trace_link(self, run: Run) -> str | None:
        """Where the run's trace is shown (``[otel] trace_url``), if anywhere."""
        return self._tracing.link(run.trace) if run.trace else None

    async def send(self, thread_id: str, text: str, *, origin: Origin | None = None,
                   files: Sequence[FileRef] = (), agent: str | None = None) -> Run:
        """Submit a message and wait for its run to end or pause."""
        chosen = await self.agent_for(thread_id, origin or Origin(), agent)
        run = self._new_run(thread_id, text, origin, None, files, agent=chosen)
        async with self._bus.subscribe(run.id, ends_only=True) as events:  # before it starts
            await self._accept(run)
            return await self._waiting.until_ended(run, events)

    async def wait(self, run_id: str) -> Run:
        """Wait until the run is completed, failed, cancelled, timed out or paused.

        Events say so for runs driven here; the store is read now and then too, for a
        run that another process on the same store took up.
        """
        return await self._waiting.wait(run_id)

    def follow(self, run_id: str, *, accepted: bool = False
               ) -> AsyncGenerator[RunEvent, None]:
        """A run's events until it ends or pauses: for a run in progress here, from its
        start (or its last resumption) in this process; for one that has stopped, only
        its end. ``accepted``: the run was just submitted here (``submit`` gave it back
        queued), so it is followed from its start even if it stopped meanwhile (its
        worker starts while the message is flushed, and may be done before the follower
        comes; the bus keeps the events of the runs that stopped last).

        The last event is always a ``RunEnded``: the run's own, or one made from the
        store when the run had already stopped, or when it ends in another process.
        """
        return self._waiting.follow(run_id, accepted=accepted)

    def subscribe(
        self, run_id: str | None = None
    ) -> contextlib.AbstractAsyncContextManager[Subscription]:
        """Events of one run (ending with its ``run.*`` end event), or of all runs."""
        return self._bus.subscribe(run_id)

    def listen(self, listener: Callable[[RunEvent], None]) -> Callable[[], None]:
        """Call ``listener`` with every event of the runs this process drives, as it is
        published (it must not block: a channel spawns what it does about one); the
        function that stops it."""
        return self._bus.listen(listener)

    def _new_run(
        self, thread_id: str, text: str, origin: Origin | None, idempotency_key: str | None,
        files: Sequence[FileRef] = (), fetch: Sequence[FileSource] = (),
        context: Sequence[Said] = (), agent: str = "",
    ) -> Run:
        if self._closing:
            raise RunError("shutting_down", "the runtime is shutting down")
        return new_run(thread_id, text, origin, idempotency_key,
                       max_chars=self.agent.max_message_chars, now=self.clock(),
                       files=tuple(files), fetch=tuple(fetch), context=tuple(context),
                       agent=agent)

    async def agent_for(self, thread_id: str, origin: Origin, agent: str | None = None,
                        schedule: str | None = None) -> str:
        """The agent a message to ``thread_id`` goes to (``submit`` says how); ``""``
        where there is only one. ``RunError("unknown_agent")`` for an ``agent`` that is
        not configured."""
        if agent is not None and agent not in self.agents.by_name:
            raise RunError("unknown_agent", f"no agent is called {agent!r}; the agents are "
                           f"{', '.join(sorted(self.agents.by_name))}")
        if len(self.agents) == 1:
            return ""
        newest = await self._store.list_runs(thread_id=thread_id, limit=1)
        if newest:
            return newest[0].agent or self.agents.default.name
        return agent or self.agents.route(Where.of(thread_id, origin, schedule))

    async def _accept(self, run: Run) -> Run:
        accepted = await self._store.accept_run(run)
        self._workers.kick(run.thread_id, accepted.listed)
        if accepted.on_disk is not None:
            # Committed: its worker starts while the disk works (nothing it does before its
            # own first durable write leaves the process but the model's request); the
            # message is acknowledged once on disk.
            await accepted.on_disk
        return accepted.run

    # -- roles shared among processes

    async def take_lease(self, name: str, *, lost: Callable[[], None] | None = None
                         ) -> str | None:
        """Take a named lease among every process on the store (one Discord gateway
        connection among replicas): None when this runtime holds it now — renewed until
        ``release_lease`` or ``close`` — else who holds it (``process 12 on host-a``).
        ``lost`` is called if it could not be renewed in time (the store was out of reach
        for longer than ``[runtime] lease_ttl_s``): another process may have it by then."""
        other = await self._leases.take(name, lost=lost)
        return None if other is None else describe_holder(other)

    async def release_lease(self, name: str) -> None:
        """Give up a lease ``take_lease`` took (nothing if this runtime does not hold it)."""
        await self._leases.release(name)

    # -- health -----------------------------------------------------------------------------

    def holds(self, run_id: str) -> bool:
        """True while this process is driving the run."""
        return self._upkeep.holds(run_id)

    def health(self) -> str | None:
        """Why the store cannot be written now, or None: its file is gone (looked at now,
        one ``stat``), or what the serving loop last found."""
        return self._store.gone() or self._upkeep.problem

    async def check_writable(self) -> None:
        """Write to the store and take it back; ``StoreError`` if it cannot be written.

        The write is a heartbeat that is already stale (no process takes it for a live
        server) and is removed at once.
        """
        await self._upkeep.check_writable()

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
        A run that timed out waiting can still be approved: it is resumed. From a
        runtime that does not serve the store while another process does, the decision
        is handed to that process, which carries the run on.
        """
        if approvers is not None:
            allowed = list(approvers)
        elif len(self.agents) == 1:
            allowed = self.agent.approvers
        else:
            run = await self._store.get_run(run_id)
            allowed = self.agents.answering(run.agent).config.approvers
        if allowed and by not in allowed:
            raise RunError("not_an_approver", f"{by or 'an anonymous caller'} may not decide "
                           "approvals here")
        if await self._forward():
            return await self._asked("decide", run_id, tool_call_id=tool_call_id,
                                     approve=approve, by=by, reason=reason,
                                     arguments_hash=arguments_hash, approvers=allowed)
        run = await self._store.get_run(run_id)
        moved, step = approve_call(run, tool_call_id, approve=approve, by=by, reason=reason,
                                   arguments_hash=arguments_hash, now=self.clock(),
                                   owner=self.instance_id)
        await self._write_run(moved, step)
        if run.pending_approval is not None and moved.decisions:
            self._tracing.waited(run, run.pending_approval, moved.decisions[-1])
        self._workers.kick(run.thread_id)
        return moved

    async def resume(self, run_id: str) -> Run:
        """Queue a failed, cancelled or timed-out run again, from its last checkpoint."""
        if await self._forward():
            return await self._asked("resume", run_id)
        run = await self._store.get_run(run_id)
        moved, step = requeue(run, now=self.clock())
        await self._write_run(moved, step)
        self._workers.kick(run.thread_id)
        return moved

    async def cancel(self, run_id: str, *, by: str = "", forward: bool = True) -> Run:
        """Cancel a run: its model stream and running tools are cut off, every unanswered
        call gets a ``cancelled`` result, and the run ends ``cancelled``.

        A run that another live process is driving is cancelled by that process, so
        its tools stop where they run; with ``forward=False`` (answering that process's
        own request) it is not asked, and ``RunError("driven_elsewhere")`` says so.
        Cancelling a cancelled run returns it as it is.
        """
        reason = f"cancelled by {by}" if by else "cancelled"
        for _ in range(5):
            cut = await self._workers.cut_off(run_id, reason)
            run = await self._store.get_run(run_id)
            if cut and run.terminal:
                return run
            if run.state is S.CANCELLED:
                return run
            if run.terminal:
                raise RunError("already_ended", f"run {run_id} already ended {run.state}")
            if (holder := await self._peers.driving_elsewhere(run)) is not None:
                if not forward:
                    raise RunError("driven_elsewhere", f"run {run_id} is driven by {holder}")
                return await self._asked("cancel", run_id, by=by)
            try:
                run = await self._driver.end(run).cancel(run_id, reason, attempts=1)
            except StaleWrite:
                await asyncio.sleep(0)  # it changed under us: maybe a worker took it up
                continue
            await self._outbox.send_pending(run)
            self._workers.kick(run.thread_id)  # runs queued behind it may go now
            return run
        raise RunError("cancel_failed", f"run {run_id} kept changing; try again")

    async def stop(self, run_id: str, *, by: str, key: str) -> bool:
        """A person's stop of a run, made to outlive a crash: written (``stops``), then
        the run is cancelled in the background as by ``cancel``, so that the caller may
        acknowledge the request at once (a platform waits a few seconds at most; a
        cancellation waits up to ``cancel_grace_s`` for tools). ``key`` names the request:
        one written before (a platform's retry) does nothing more, and False is returned.
        A process killed before the cancellation leaves the stop written: the run ends
        ``cancelled`` when it is taken up again."""
        if not await record_stop(self._store, run_id, by=by, key=key, at=self.clock()):
            return False
        self.spawn(self._cancel_stopped(run_id, by), name=f"maiden-stop:{run_id}")
        return True

    async def _cancel_stopped(self, run_id: str, by: str) -> None:
        try:
            await self.cancel(run_id, by=by)
        except MaidenError as exc:
            log.warning("stop of run %s from %s: %s", run_id, by or "someone", exc)

    async def _forward(self) -> bool:
        """Whether control goes to another process: this runtime does not serve the store,
        and one that does is alive (it then carries the run on)."""
        return self._serving is None and bool(await self._peers.servers())

    async def _asked(self, kind: Asked, run_id: str, **payload: Any) -> Run:
        return await self._peers.ask(kind, run_id, payload, now=self.clock(),
                                     timeout_s=max(10.0, 10 * self.settings.poll_interval_s))

    async def _write_run(self, run: Run, step: Transition) -> None:
        await self._store.commit(Checkpoint(thread_id=run.thread_id, position=None, run=run,
                                            transitions=[step]))

    # -- erasure -----------------------------------------------------------------------------

    async def delete_thread(self, thread_id: str, *, by: str = "") -> Erased:
        """Erase a thread and everything of it (``stores.erasure`` says what; the result,
        what went): its runs that have not ended are cancelled first (``by`` whom), wherever
        they run; then the rest goes in one durable write, and this process keeps nothing
        of it. Idempotent: a thread never written, or erased already, is no error (nothing
        goes, and ``Erased.existed`` says so)."""
        erased = await erase_thread(self._store, thread_id,
                                    lambda run_id: self.cancel(run_id, by=by))
        self._driver.forget(thread_id)
        await self._workers.forget(thread_id)
        if erased.existed:
            log.info("thread erased%s: %d entries, %d runs", f" by {by}" if by else "",
                     erased.entries, erased.runs, extra={"thread_id": thread_id})
        return erased

    # -- delivery ----------------------------------------------------------------------------

    def add_deliverer(self, channel: str, deliverer: Deliverer) -> None:
        """Route replies and approval prompts of runs whose origin is ``channel`` through
        ``deliverer``; what waits in the outbox for it goes out at once, in order, in the
        background (once ``start`` has begun: ``start`` sends what waited for those added
        before), unless it says it is not connected yet (its ``offline``): then when its
        channel says it is up (``flush_deliveries``)."""
        self._outbox.add(channel, deliverer)
        if self._started and not self._closing and not getattr(deliverer, "offline", None):
            self.spawn(self._channel_up(channel), name=f"maiden-outbox:{channel}")

    async def _channel_up(self, channel: str) -> None:
        """What waits in the outbox for a channel that can post now (the replies of runs
        that ended before it was up, after a restart), sent in order: before the replies
        of the runs that come through it now, which wait behind them."""
        try:
            await self.flush_deliveries(channel)
        except MaidenError as exc:  # the store: the next sweep tries again
            log.warning("sending what waited in the outbox for %s failed: %s; it is tried "
                        "again", channel, exc)
        except Exception:
            log.exception("sending what waited in the outbox for %s failed; it is tried "
                          "again", channel)

    async def flush_deliveries(self, channel: str | None = None) -> None:
        """Send every recorded delivery that has no message id yet, reconciling first, in
        order: those a crash or a failed send left behind, or written while their channel
        was not up (``channel``: that channel's only, as one that has just connected
        asks). Serving runtimes call this now and then.

        A delivery of a run that another live process holds is left to that process.
        """
        await self._upkeep.flush_deliveries(channel)

