"""A message taken in (``Runtime.submit`` and ``send``): refused when it cannot be a run,
given to its thread's agent, and stored as a queued run before the caller hears back."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from ..engine.agents import Agents
from ..engine.intake import new_run
from ..engine.tracing import traceparent_of
from ..errors import RunError
from ..model.attachments import FileRef, FileSource
from ..model.events import EventBus
from ..model.jobs import Job
from ..model.routing import Where
from ..model.runs import Origin, Run, Said
from ..stores.base import Store
from .waiting import Waiting
from .workers import Workers

__all__ = ["Admission"]


class Admission:
    """What ``submit`` and ``send`` do: each message a queued run of its thread's agent, its
    worker started. ``stop`` set, the runtime is shutting down: nothing more is taken."""

    def __init__(self, store: Store, agents: Agents, workers: Workers, bus: EventBus,
                 waiting: Waiting, *, clock: Callable[[], float], stop: asyncio.Event) -> None:
        self._store = store
        self._agents = agents
        self._workers = workers
        self._bus = bus
        self._waiting = waiting
        self._clock = clock
        self._stop = stop

    async def submit(self, thread_id: str, text: str, *, origin: Origin | None,
                     idempotency_key: str | None, files: Sequence[FileRef],
                     fetch: Sequence[FileSource], context: Sequence[Said], agent: str | None,
                     schedule: str | None, trace: str, job: Job | None = None) -> Run:
        """The message's queued run (``Runtime.submit`` says which agent, and what is
        refused)."""
        chosen = await self.agent_for(thread_id, origin or Origin(), agent, schedule)
        run = self._new_run(thread_id, text, origin, idempotency_key, files, fetch, context,
                            chosen, job)
        if traced := traceparent_of(trace):
            run = run.model_copy(update={"trace": traced})
        return await self._accept(run)

    async def send(self, thread_id: str, text: str, *, origin: Origin | None,
                   files: Sequence[FileRef], agent: str | None) -> Run:
        """Submit a message and wait for its run to end or pause."""
        chosen = await self.agent_for(thread_id, origin or Origin(), agent)
        run = self._new_run(thread_id, text, origin, None, files, agent=chosen)
        async with self._bus.subscribe(run.id, ends_only=True) as events:  # before it starts
            await self._accept(run)
            return await self._waiting.until_ended(run, events)

    async def agent_for(self, thread_id: str, origin: Origin, agent: str | None = None,
                        schedule: str | None = None) -> str:
        """The agent a message to ``thread_id`` goes to (``Runtime.agent_for``)."""
        agents = self._agents
        if agent is not None and agent not in agents.by_name:
            raise RunError("unknown_agent", f"no agent is called {agent!r}; the agents are "
                           f"{', '.join(sorted(agents.by_name))}")
        if len(agents) == 1:
            return ""
        newest = await self._store.list_runs(thread_id=thread_id, limit=1)
        if newest:
            return newest[0].agent or agents.default.name
        return agent or agents.route(Where.of(thread_id, origin, schedule))

    def _new_run(
        self, thread_id: str, text: str, origin: Origin | None, idempotency_key: str | None,
        files: Sequence[FileRef] = (), fetch: Sequence[FileSource] = (),
        context: Sequence[Said] = (), agent: str = "", job: Job | None = None,
    ) -> Run:
        if self._stop.is_set():
            raise RunError("shutting_down", "the runtime is shutting down")
        return new_run(thread_id, text, origin, idempotency_key,
                       max_chars=self._agents.default.config.max_message_chars,
                       now=self._clock(), files=tuple(files), fetch=tuple(fetch),
                       context=tuple(context), agent=agent, job=job)

    async def _accept(self, run: Run) -> Run:
        accepted = await self._store.accept_run(run)
        self._workers.kick(run.thread_id, accepted.listed)
        if accepted.on_disk is not None:
            # Committed: its worker starts while the disk works (nothing it does before its
            # own first durable write leaves the process but the model's request); the
            # message is acknowledged once on disk.
            await accepted.on_disk
        return accepted.run
