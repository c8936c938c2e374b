"""The drivers of a runtime's agents: each run is driven by its agent's ``RunDriver``."""

from __future__ import annotations

import logging
from collections.abc import Iterator

from ..model.runs import DRIVABLE, Run
from ..stores.base import Store
from .agents import Agents
from .endings import Endings
from .loop import RunDriver

__all__ = ["Drivers"]

log = logging.getLogger("maiden.loop")


class Drivers:
    """One ``RunDriver`` per agent, over one store, bus and set of cancellations."""

    def __init__(self, store: Store, agents: Agents, drivers: dict[str, RunDriver]) -> None:
        self.store = store
        self.agents = agents
        self.by_agent = drivers
        self.default = drivers[agents.default.name]
        self.cancellations = self.default.cancellations
        """Runs whose task is being cancelled on purpose, and why (every driver's)."""

    def __iter__(self) -> Iterator[RunDriver]:
        return iter(self.by_agent.values())

    def forget(self, thread_id: str) -> None:
        """The thread was erased: no driver uses what it held of it."""
        for driver in self:
            driver.forget(thread_id)

    def of(self, run: Run) -> RunDriver | None:
        """The driver of the run's agent; None when no agent has that name any more."""
        return self.by_agent.get(run.agent) if run.agent else self.default

    def end(self, run: Run) -> Endings:
        """How the run's agent ends runs (its approval timeout, its prices)."""
        return (self.of(run) or self.default).end

    @property
    def approval_timeouts(self) -> bool:
        """Whether any agent times out approvals."""
        return any(d.agent.approval_timeout_s is not None for d in self)

    async def drive(self, run_id: str, run: Run | None = None) -> Run:
        """Drive the run with its agent's driver (``run``: as just read from the store, if
        it was). A run of an agent that is no longer configured fails, resumable once the
        agent is back (``unknown_agent``)."""
        run = run or await self.store.get_run(run_id)
        driver = self.of(run)
        if driver is not None:
            return await driver.drive(run_id, run)
        if run.state not in DRIVABLE:
            return run
        end = self.default.end
        cur = end.cursor(run, await self.store.load_entries(run.thread_id))
        await end.fail(cur, "unknown_agent", f"the agent {run.agent!r} of this thread is not "
                       "in the config any more (add it to [[agents]] and resume the run)",
                       notice=f"Sorry, the agent {run.agent!r} that this conversation is "
                       "with is not configured any more.")
        end.published(cur.run)
        return cur.run
