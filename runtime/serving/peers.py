"""The other runtimes serving the same store, as one runtime sees them."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal, get_args

from ..engine.loop import DRIVABLE
from ..errors import RunError, RunErrorReason
from ..model.runs import Run, RunState
from ..stores.base import Store
from .control import ControlRequest, Instance, ask, live_instances
from .leases import holder_instance, thread_lease

Asked = Literal["decide", "cancel", "resume"]

_REFUSED: dict[str, RunErrorReason] = {
    "decide": "decide_refused", "cancel": "cancel_refused", "resume": "resume_refused"}

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
        return await self._live(run.owner)

    async def driving_elsewhere(self, run: Run) -> str | None:
        """As ``held_elsewhere``, and for a queued run the live process whose worker holds
        its thread: it may be driving the run before its start is written (the cursor
        holds a start until the next checkpoint)."""
        found = await self.held_elsewhere(run)
        if found is not None or run.state is not RunState.QUEUED:
            return found
        name = thread_lease(run.thread_id)
        holder = next((lease.holder for lease in await self._store.leases()
                       if lease.name == name), None)
        if holder is None or holder_instance(holder) == self._me:
            return None
        return await self._live(holder_instance(holder))

    async def _live(self, instance_id: str) -> str | None:
        """``process 12 on host-a`` if ``instance_id`` serves the store now, else None."""
        for instance in await self.servers():
            if instance.id == instance_id:
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

    def elsewhere(self) -> Callable[[str], Awaitable[bool]]:
        """For one pass over the outbox: whether a run's owner is another live process (its
        records are left to it); the live processes are looked up once, when first asked."""
        live: set[str] | None = None

        async def owned(run_id: str) -> bool:
            nonlocal live
            found, live = await self.owned_elsewhere(run_id, live)
            return found

        return owned

    async def ask(self, kind: Asked, run_id: str, payload: dict[str, Any], *, now: float,
                  timeout_s: float) -> Run:
        """Have the serving process(es) decide, cancel or resume a run; the run after, or
        ``RunError`` with the reason they gave."""
        request = ControlRequest(kind=kind, run_id=run_id, payload=payload, created_at=now)
        answer = await ask(self._store, request, timeout_s=timeout_s)
        if not answer.ok:
            reason = next((r for r in get_args(RunErrorReason) if r == answer.error),
                          _REFUSED[kind])
            raise RunError(reason, answer.result or "refused")
        return await self._store.get_run(run_id)
