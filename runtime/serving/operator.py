"""The operator's levers on a runtime (``Runtime.operator``): what it runs, the leases it
takes among processes, its health and the store's writability, and the outbox's sweep.
What a channel does with a message (submit, follow, decide, ...) is ``Runtime``'s; what it
reads, ``Runtime.records``."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..engine.agents import Agents
from ..engine.tracing import Tracing
from ..model.config import RuntimeConfig
from ..model.runs import Run
from ..stores.base import Store
from .leases import Leases, describe_holder
from .upkeep import RuntimeUpkeep

__all__ = ["Operator"]


class Operator:
    """Built by ``Runtime`` with its parts; ``recovered``: the runs its ``start`` recovers,
    filled in as it does."""

    def __init__(self, *, agents: Agents, settings: RuntimeConfig, instance_id: str,
                 store: Store, leases: Leases, upkeep: RuntimeUpkeep,
                 tracing: Tracing, recovered: Sequence[Run]) -> None:
        self.agents = agents
        """The agents, their routes and the default one (``agents.default``: its config,
        provider and tools)."""
        self.settings = settings
        """``[runtime]``: concurrency, leases, polling, grace periods."""
        self.instance_id = instance_id
        """This runtime's id among the processes on its store."""
        self._store = store
        self._leases = leases
        self._upkeep = upkeep
        self._tracing = tracing
        self._recovered = recovered

    @property
    def recovered(self) -> list[Run]:
        """The runs ``Runtime.start`` found unfinished, as they ended up."""
        return list(self._recovered)

    # -- roles shared among processes

    async def take_lease(self, name: str, *, lost: Callable[[], None] | None = None
                         ) -> str | None:
        """Take a named lease among every process on the store (one Discord gateway
        connection among replicas): None when this runtime holds it now — renewed until
        ``release_lease`` or the runtime's close — else who holds it (``process 12 on
        host-a``). ``lost`` is called if it could not be renewed in time (the store was out
        of reach for longer than ``[runtime] lease_ttl_s``): another process may have it."""
        other = await self._leases.take(name, lost=lost)
        return None if other is None else describe_holder(other)

    async def release_lease(self, name: str) -> None:
        """Give up a lease ``take_lease`` took (nothing if this runtime does not hold it)."""
        await self._leases.release(name)

    # -- health

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
        server) and is removed at once."""
        await self._upkeep.check_writable()

    def trace_link(self, run: Run) -> str | None:
        """Where the run's trace is shown (``[otel] trace_url``), if anywhere."""
        return self._tracing.link(run.trace) if run.trace else None

    # -- delivery

    async def flush_deliveries(self, channel: str | None = None) -> None:
        """Send every recorded delivery that has no message id yet, reconciling first, in
        order: those a crash or a failed send left behind, or written while their channel
        was not up (``channel``: that channel's only, as one that has just connected
        asks). Serving runtimes call this now and then.

        A delivery of a run that another live process holds is left to that process."""
        await self._upkeep.flush_deliveries(channel)
