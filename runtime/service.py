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
import time
import uuid
from collections.abc import AsyncGenerator, Callable, Coroutine, Iterable, Mapping, Sequence
from typing import Any

from .assembly import Parts, agents_of
from .engine.agents import Agents
from .engine.caps import CapConfig
from .engine.files import FileFetcher
from .engine.stops import record_stop
from .engine.tracing import NO_TRACING, Tracing
from .model.attachments import FileRef, FileSource
from .model.budget import BudgetConfig
from .model.config import AgentConfig, FilesConfig, Prices, RuntimeConfig
from .model.events import RunEvent, Subscription
from .model.jobs import Job
from .model.runs import Origin, Run, Said
from .outbox.deliverer import Deliverer
from .providers.base import Provider
from .serving.adopted import adopt_at_start
from .serving.kept import Kept
from .serving.operator import Operator
from .serving.workers import ACTIVE
from .stores.base import Store
from .stores.erasure import Erased
from .tools.registry import ToolRegistry

__all__ = ["ACTIVE", "Runtime"]


class Runtime:
    """Owns the loop, the lock and the workers; shared by every entry point in a process.

    Built whole: what it posts through and fetches files with, and what its tools may ask
    for in their context (``Tool.needs``), come in as arguments; nothing is added later.
    ``deliverers``: each chat channel's ``Deliverer`` by name (a reply for a channel with
    none here stays in the outbox); one that is not connected yet says so itself (its
    ``offline``), and its channel asks for what waited once it is up
    (``operator.flush_deliveries``). ``fetchers``: each channel's ``FileFetcher``.
    ``notes`` and ``send`` are its own services; ``services`` adds the app's (the
    ``schedules`` book). ``channels`` names the chat channels the agent is configured
    for: where ``send`` may post (None: any), and whose files a run waits for, rather than
    have them refused, where this runtime has no fetcher for them (a command that opens
    no channels leaves such a run to `maiden run`).
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
        deliverers: Mapping[str, Deliverer] | None = None,
        fetchers: Mapping[str, FileFetcher] | None = None,
        services: Mapping[str, object] | None = None,
        files: FilesConfig | None = None,
        agents: Agents | None = None,
        caps: Sequence[CapConfig] = (),
        tracing: Tracing = NO_TRACING,
    ) -> None:
        agents = agents_of(agents, provider, tools, agent, budget, prices)
        self._agents = agents
        self._tracing = tracing
        self._settings = settings = settings or RuntimeConfig()
        self._clock = clock
        instance_id = uuid.uuid4().hex[:12]
        self._stop = asyncio.Event()  # set as it closes: nothing more is taken
        parts = Parts(store, agents, settings, instance_id=instance_id, clock=clock,
                      channels=channels, deliverers=deliverers or {},
                      fetchers=fetchers or {}, services=services, files=files, caps=caps,
                      tracing=tracing, stop=self._stop)
        self.records = parts.records
        """What the store holds: runs, threads, entries, deliveries, approvals, stats."""
        self.kept = Kept(notes=parts.notes, memories=parts.memories, feedback=parts.feedback,
                         files=parts.files)
        """What it keeps beside runs: notes, memories, votes on replies, shared files."""
        self._caps = parts.caps
        self._parts = parts
        self._store = store
        self._bus = parts.bus
        self._workers = parts.workers
        self._waiting = parts.waiting
        self._upkeep = parts.upkeep
        self._admission = parts.admission
        self._steering = parts.steering
        self._tasks: set[asyncio.Task[None]] = set()
        self._recovered: list[Run] = []
        """What ``start`` recovered (filled in place: the operator reads the same list)."""
        self.operator = Operator(
            agents=agents, settings=settings, instance_id=instance_id, store=store,
            leases=parts.leases, upkeep=parts.upkeep, tracing=tracing,
            recovered=self._recovered)
        """The operator's levers: what it runs (agents, settings), leases among processes,
        health, the outbox's sweep."""

    async def __aenter__(self) -> Runtime:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self, *, recover: bool = True, serve: bool = True) -> list[Run]:
        """Recover every unfinished run and send everything left in the outbox; return the
        runs recovered. First, with ``recover``, the notes of the older ``memory`` tools
        become memories, once per store (``serving.adopted``).

        Returns once recovery is done, so new work is served after the old. With
        ``serve``, also answer requests from other processes on the same store
        (`maiden approve`, `maiden cancel`), time out stale approvals and retry failed
        sends, in the background.
        """
        if recover:  # the notes of the older memory tools, memories from now (once)
            await adopt_at_start(self._store, self._clock)
        if self._caps:  # made once; a cap's check reads a period's runs by its index
            await self._store.index_spend(self._caps.scopes)
        if serve:
            self._parts.serve(self.spawn)
        if not recover:
            return []
        self._recovered[:] = await self._parts.recover()
        return list(self._recovered)

    async def idle(self) -> None:
        """Wait until no thread has work in this process."""
        await self._workers.idle()

    async def close(self, *, grace_s: float | None = None) -> None:
        """Stop taking work; let each running run reach its next checkpoint (for at most
        ``grace_s``, default ``[runtime] shutdown_grace_s``), then stop it.

        Shutdown is not cancellation: a run stopped here is left at its checkpoint and
        continues when a runtime starts again on the same store.
        """
        grace = self._settings.shutdown_grace_s if grace_s is None else grace_s
        await self._parts.close(self._tasks, grace)

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
        job: Job | None = None,
    ) -> Run:
        """Persist a message as a queued run and schedule it; return the run.

        The run's agent is its thread's: that of the thread's newest run, else ``agent``
        (the schedule's, or the model an OpenAI client asked for), else where the routes
        send a thread from ``origin`` (``schedule``: the schedule that sends it).

        ``files`` are files already stored (``files.put``); ``fetch``, files its platform
        announced, which the run fetches as its first step (DESIGN §2 Files). ``context``:
        earlier messages of a conversation held elsewhere, written into the thread before
        this one when the run starts (a thread seeded with them). ``job``: its first
        steps fixed rather than the model's (a reminder's words, a scheduled check's tool:
        ``Job``). ``trace``: the W3C
        ``traceparent`` of the request that brought it (``[otel]``: the run is traced
        beneath it; anything else is ignored).

        With an ``idempotency_key`` already used, the original run is returned and
        nothing new happens. An empty thread id (``InvalidThreadId``) or an empty message
        (``RunError("invalid_message")``) is refused. A message over ``[agent]
        max_message_chars`` is refused the same way when the origin has no target to
        answer (the HTTP API, the CLI); from a chat channel it is taken, and its run fails
        at once (``message_too_long``) with a reply naming the limit.
        """
        return await self._admission.submit(
            thread_id, text, origin=origin, idempotency_key=idempotency_key, files=files,
            fetch=fetch, context=context, agent=agent, schedule=schedule, trace=trace,
            job=job)

    async def send(self, thread_id: str, text: str, *, origin: Origin | None = None,
                   files: Sequence[FileRef] = (), agent: str | None = None) -> Run:
        """Submit a message and wait for its run to end or pause."""
        return await self._admission.send(thread_id, text, origin=origin, files=files,
                                          agent=agent)

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
        return await self._steering.decide(
            run_id, tool_call_id, approve=approve, by=by, reason=reason,
            arguments_hash=arguments_hash, approvers=approvers)

    async def resume(self, run_id: str) -> Run:
        """Queue a failed, cancelled or timed-out run again, from its last checkpoint."""
        return await self._steering.resume(run_id)

    async def cancel(self, run_id: str, *, by: str = "", forward: bool = True) -> Run:
        """Cancel a run: its model stream and running tools are cut off, every unanswered
        call gets a ``cancelled`` result, and the run ends ``cancelled``.

        A run that another live process is driving is cancelled by that process, so
        its tools stop where they run; with ``forward=False`` (answering that process's
        own request) it is not asked, and ``RunError("driven_elsewhere")`` says so.
        Cancelling a cancelled run returns it as it is.
        """
        return await self._steering.cancel(run_id, by=by, forward=forward)

    async def stop(self, run_id: str, *, by: str, key: str) -> bool:
        """A person's stop of a run, made to outlive a crash: written (``stops``), then
        the run is cancelled in the background as by ``cancel``, so that the caller may
        acknowledge the request at once (a platform waits a few seconds at most; a
        cancellation waits up to ``cancel_grace_s`` for tools). ``key`` names the request:
        one written before (a platform's retry) does nothing more, and False is returned.
        A process killed before the cancellation leaves the stop written: the run ends
        ``cancelled`` when it is taken up again."""
        if not await record_stop(self._store, run_id, by=by, key=key, at=self._clock()):
            return False
        self.spawn(self._steering.cancel_stopped(run_id, by), name=f"maiden-stop:{run_id}")
        return True

    # -- erasure -----------------------------------------------------------------------------

    async def delete_thread(self, thread_id: str, *, by: str = "") -> Erased:
        """Erase a thread and everything of it (``stores.erasure`` says what; the result,
        what went): its runs that have not ended are cancelled first (``by`` whom), wherever
        they run; then the rest goes in one durable write, and this process keeps nothing
        of it. Idempotent: a thread never written, or erased already, is no error (nothing
        goes, and ``Erased.existed`` says so)."""
        return await self._steering.erase(thread_id, by=by)
