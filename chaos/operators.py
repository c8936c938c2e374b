"""The operators: people with ``operate`` who run schedules now (chaos/runnow.py) and resume
failed runs (chaos/resumes.py) through the HTTP API while the messages and faults go on;
one object for the pass to start, settle, read and check."""

from __future__ import annotations

import asyncio

from .client import Client
from .hooks import Hooks
from .invariants import Stored, Violation
from .plan import Plan
from .resumes import Resumer
from .runnow import RunsNow
from .schedules import Kept
from .system import History, Replica
from .workload import Workload

__all__ = ["Operators"]


class Operators:
    def __init__(self, plan: Plan, replicas: list[Replica], client: Client,
                 history: History, workload: Workload) -> None:
        self.runs_now = RunsNow(plan, replicas, client, history)
        self.hooks = Hooks(plan.hooks, plan.seed, replicas, client.http, history)
        self.resumer = Resumer(workload, client, history)
        self.workload = workload
        self._watch: asyncio.Task[None] | None = None

    async def run(self) -> None:
        """The runs now at their times, the failed runs watched meanwhile (returns once the
        last run now is sent; the watch goes on until ``settle``)."""
        self._watch = asyncio.create_task(self.resumer.watch())
        await asyncio.gather(self.runs_now.run(), self.hooks.run())

    async def settle(self, timeout_s: float) -> None:
        """No more resumes, and every request in flight answered (each bounded)."""
        if self._watch is not None:
            self._watch.cancel()
            await asyncio.gather(self._watch, return_exceptions=True)
        await self.runs_now.drain(timeout_s)
        await self.hooks.drain(timeout_s)
        await self.resumer.drain(timeout_s)

    async def read(self, stored: Stored) -> None:
        """The resumed runs with their state changes, into ``stored``'s details (what the
        checks of the platforms read a resumed run's place in its thread's order from)."""
        replica = self.workload.pick(0)
        assert replica is not None, "no replica up to read the resumed runs through"
        await self.resumer.read(replica.url)
        stored.details.update(self.resumer.details)

    def check(self, stored: Stored, kept: Kept) -> list[Violation]:
        return self.runs_now.check(stored, kept) + self.hooks.check(stored, kept) \
            + self.resumer.check()

    def lines(self, kept: Kept) -> list[str]:
        return [self.runs_now.summary(kept), self.hooks.summary(kept), self.resumer.summary()]
