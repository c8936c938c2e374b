"""The runtime's parts, built whole from its arguments, and what they do together when it
starts and stops: ``Runtime`` is the face channels use, ``Parts`` what stands behind it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from typing import Any

from .engine.agents import Agent, Agents
from .engine.cancellations import Cancellations
from .engine.caps import CapConfig, Caps
from .engine.drivers import Drivers
from .engine.files import FileFetcher, Files
from .engine.loop import DRIVABLE, RunDriver
from .engine.tracing import Tracing
from .errors import StoreError
from .model.budget import BudgetConfig
from .model.config import AgentConfig, FilesConfig, Prices, RuntimeConfig
from .model.events import EventBus
from .model.runs import Run
from .outbox.deliverer import Deliverer
from .outbox.delivery import Outbox, Sender
from .providers.base import Provider
from .serving.admission import Admission
from .serving.control import serve_requests
from .serving.feedback import Feedback
from .serving.leases import Leases, is_gone_here
from .serving.memories import Memories
from .serving.notes import Notes
from .serving.peers import Peers
from .serving.records import Records
from .serving.steering import Steering
from .serving.upkeep import RuntimeUpkeep
from .serving.waiting import Waiting
from .serving.workers import Workers
from .stores.base import Store
from .tools.registry import ToolRegistry

__all__ = ["Parts", "agents_of"]


def agents_of(agents: Agents | None, provider: Provider | None, tools: ToolRegistry | None,
              agent: AgentConfig | None, budget: BudgetConfig | None,
              prices: Prices | None) -> Agents:
    """The agents a runtime is given, or the one agent made of a provider, tools and config."""
    if agents is None:
        if provider is None:
            raise ValueError("a runtime needs a provider, or agents")
        agents = Agents([Agent(agent or AgentConfig(), provider,
                               tools if tools is not None else ToolRegistry(),
                               budget or BudgetConfig(), prices or Prices())])
    elif provider is not None or tools is not None or agent is not None:
        raise ValueError("give either agents, or one agent's provider, tools and config")
    return agents


class Parts:
    """What a ``Runtime`` is made of: its store's readers and writers, the event bus, the
    drivers of its agents, the workers, the outbox, and the upkeep that serves the store.

    ``stop`` is set as it closes.
    """

    def __init__(
        self,
        store: Store,
        agents: Agents,
        settings: RuntimeConfig,
        *,
        instance_id: str,
        clock: Callable[[], float],
        channels: Iterable[str] | None,
        deliverers: Mapping[str, Deliverer],
        fetchers: Mapping[str, FileFetcher],
        services: Mapping[str, object] | None,
        files: FilesConfig | None,
        caps: Sequence[CapConfig],
        tracing: Tracing,
        stop: asyncio.Event,
    ) -> None:
        chat = None if channels is None else frozenset(channels)
        self._stop = stop
        self._settings = settings
        self._serving: asyncio.Task[None] | None = None

        def serving() -> bool:
            return self._serving is not None

        self.records = Records(store)
        self.notes = Notes(store, clock)
        self.memories = Memories(store, clock, runs=store)
        self.feedback = Feedback(store, store, clock)
        self.files = Files(store, files, clock=clock, fetchers=fetchers, expected=chat or ())
        self.caps = Caps(caps, store, default_agent=agents.default.name,
                         timezone=agents.default.config.timezone, clock=clock)
        self.store = store
        self.peers = Peers(store, instance_id)
        self.leases = Leases(store, instance_id, settings.lease_ttl_s)
        self.outbox = Outbox(store, born=clock(), clock=clock, deliverers=deliverers,
                             tracing=tracing,
                             elsewhere=self.peers.elsewhere,
                             claim=lambda thread_id: self.leases.sending(
                                 thread_id, self.workers.busy),
                             sender=self.leases.holder, gone=is_gone_here)
        # The outbox hears every run event from the start (what a run left unsent as it
        # starts, its stream): given to the bus as it is made, not subscribed after.
        self.bus = EventBus(listeners=(self.outbox.on_event,))
        self.drivers = self._drivers(agents, settings, services, chat, instance_id=instance_id,
                                     clock=clock, tracing=tracing, stop=stop)
        self.workers = Workers(store, self.drivers, self.bus, settings, self.leases,
                               peers=self.peers, outbox=self.outbox, files=self.files,
                               stop=stop)
        self.waiting = Waiting(store, self.bus, self.workers, self.peers,
                               poll_interval_s=settings.poll_interval_s, serving=serving)
        self.upkeep = RuntimeUpkeep(store, self.drivers, self.outbox, self.workers,
                                    self.peers, self.leases, waiting=self.waiting,
                                    instance_id=instance_id, clock=clock)
        self.steering = Steering(store, agents, self.drivers, self.workers, self.peers,
                                 self.outbox, tracing=tracing, instance_id=instance_id,
                                 clock=clock, timeout_s=max(10.0, 10 * settings.poll_interval_s),
                                 serving=serving)
        self.admission = Admission(store, agents, self.workers, self.bus, self.waiting,
                                   clock=clock, stop=stop)

    def _drivers(self, agents: Agents, settings: RuntimeConfig,
                 services: Mapping[str, object] | None, chat: frozenset[str] | None, *,
                 instance_id: str, clock: Callable[[], float], tracing: Tracing,
                 stop: asyncio.Event) -> Drivers:
        """A driver for each agent, with the services its tools may ask for (each agent's
        tools checked against them), and the runs being cancelled on purpose shared."""
        provided: dict[str, object] = {"notes": self.notes, "memories": self.memories,
                                       "send": Sender(self.outbox, chat), **(services or {})}
        cancellations = Cancellations()
        drivers = {}
        for one in agents:
            one.tools.check_needs(provided)
            drivers[one.name] = RunDriver(
                self.store, one, self.bus, instance_id=instance_id,
                cancel_grace_s=settings.cancel_grace_s, clock=clock, services=provided,
                files=self.files, caps=self.caps, cancellations=cancellations,
                tracing=tracing, stop=stop)
        return Drivers(self.store, agents, drivers)

    def serve(self, spawn: Callable[[Coroutine[Any, Any, None], str], asyncio.Task[None]]
              ) -> None:
        """Serve the store in the background (once): beat, answer other processes'
        requests (decide, cancel, resume: ``steering``), expire approvals, resend the
        outbox, take up orphaned runs; until ``stop``."""
        if self._serving is None:
            self._serving = spawn(
                serve_requests(self.steering, self.upkeep, self.store,
                               self._settings.poll_interval_s, self._stop,
                               adopt_every_s=self._settings.lease_ttl_s / 2),
                "maiden-control")

    async def recover(self) -> list[Run]:
        """Drive every unfinished run this process can take up, send what is left in the
        outbox and time out stale approvals; the runs it took up, as they ended up."""
        unfinished = await self.store.list_runs(states=DRIVABLE)
        threads = dict.fromkeys(r.thread_id for r in unfinished)
        with self.workers.recording() as driven:
            for thread_id in threads:
                self.workers.kick(thread_id)
            # Their threads only: with the channels open meanwhile (a long recovery at
            # `maiden run`'s start), other threads' work is not waited for.
            await self.workers.idle(threads)
        await self.upkeep.flush_deliveries(None)
        await self.upkeep.expire_approvals()
        # Only what this process took up: with replicas, the others' runs are theirs.
        return [await self.store.get_run(r.id) for r in unfinished if r.id in driven]

    async def close(self, tasks: Iterable[asyncio.Task[None]], grace: float) -> None:
        """Stop taking work (``stop`` set); let each running run and each of ``tasks`` reach
        its next checkpoint for at most ``grace`` seconds, then stop it."""
        self._stop.set()  # the workers take no more work
        self.workers.stop_lingering()
        self.workers.stop_fetching()  # a download under way is made again at the next start
        workers = self.workers.tasks() + list(tasks)
        if workers:
            _, late = await asyncio.wait(workers, timeout=grace) if grace > 0 \
                else (set(), set(workers))
            for task in late:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
        await self.outbox.close()  # a stream left open is finished by its reply
        with contextlib.suppress(StoreError):
            await self.leases.close()
        # Whoever still waits on a run that did not get to end here is told so.
        for run_id in self.bus.watched():
            with contextlib.suppress(StoreError):
                run = await self.store.get_run(run_id)
                if run.state in DRIVABLE:
                    self.workers.publish_waiting(run, "shutting down")
        # No timer of this runtime is left on the loop (nor keeps it alive).
        self.waiting.close()
