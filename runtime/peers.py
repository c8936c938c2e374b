"""The other runtimes serving the same store, as one runtime sees them."""

from __future__ import annotations

from .control import Instance, live_instances
from .loop import DRIVABLE
from .runs import Run, RunState
from .stores.base import Store

__all__ = ["Peers"]


class Peers:
    """Which live processes serve the store, and which of them drives a run."""

    def __init__(self, store: Store, instance_id: str) -> None:
        self._store = store
        self._me = instance_id

    async def servers(self) -> list[Instance]:
        """Runtimes that serve this store now (their heartbeat is fresh)."""
        return await live_instances(self._store)

    async def held_elsewhere(self, run: Run) -> str | None:
        """The live process (other than this one) that is driving ``run``, if any."""
        if run.state not in DRIVABLE or run.state is RunState.QUEUED \
                or run.owner in (None, self._me):
            return None
        for instance in await self.servers():
            if instance.id == run.owner:
                return f"process {instance.pid} on {instance.host}"
        return None

    async def owned_elsewhere(self, run_id: str, live: set[str] | None
                              ) -> tuple[bool, set[str] | None]:
        """Whether the run's owner is another live process (``live``: the ids found so far,
        or None to look them up when needed); with the ids, for the next question."""
        run = await self._store.get_run(run_id)
        if run.owner in (None, self._me):
            return False, live
        if live is None:
            live = {i.id for i in await self.servers()}
        return run.owner in live, live
