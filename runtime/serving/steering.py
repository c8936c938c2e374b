"""Decisions, resumption and cancellation of a run wherever it lives: carried out here, or
asked of the live process that serves the store (a decision, a resumption) or drives the
run (a cancellation, so that its tools stop where they run)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from ..engine.drivers import Drivers
from ..engine.tracing import Tracing
from ..errors import RunError, StaleWrite
from ..model.decisions import approve_call, requeue
from ..model.runs import Run, RunState, Transition
from ..outbox.delivery import Outbox
from ..stores.base import Checkpoint, Store
from .peers import Asked, Peers
from .workers import Workers

__all__ = ["Steering"]

S = RunState


class Steering:
    """What ``Runtime.decide``, ``resume`` and ``cancel`` do once the caller is allowed to.

    ``serving`` says whether this runtime serves the store now (else control goes to one
    that does, if any is alive); ``timeout_s`` is how long another process is waited for.
    """

    def __init__(self, store: Store, driver: Drivers, workers: Workers, peers: Peers,
                 outbox: Outbox, *, tracing: Tracing, instance_id: str,
                 clock: Callable[[], float], timeout_s: float,
                 serving: Callable[[], bool]) -> None:
        self._store = store
        self._driver = driver
        self._workers = workers
        self._peers = peers
        self._outbox = outbox
        self._tracing = tracing
        self._instance_id = instance_id
        self._clock = clock
        self._timeout_s = timeout_s
        self._serving = serving

    async def decide(self, run_id: str, tool_call_id: str, *, approve: bool, by: str,
                     reason: str, arguments_hash: str | None, allowed: list[str]) -> Run:
        """Answer a pending approval, by ``by`` (who is one of ``allowed``, if any are)."""
        if await self._forward():
            return await self._asked("decide", run_id, tool_call_id=tool_call_id,
                                     approve=approve, by=by, reason=reason,
                                     arguments_hash=arguments_hash, approvers=allowed)
        run = await self._store.get_run(run_id)
        moved, step = approve_call(run, tool_call_id, approve=approve, by=by, reason=reason,
                                   arguments_hash=arguments_hash, now=self._clock(),
                                   owner=self._instance_id)
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
        moved, step = requeue(run, now=self._clock())
        await self._write_run(moved, step)
        self._workers.kick(run.thread_id)
        return moved

    async def cancel(self, run_id: str, *, by: str, forward: bool) -> Run:
        """Cancel a run, here or (``forward``) in the process that drives it."""
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

    async def _forward(self) -> bool:
        """Whether control goes to another process: this runtime does not serve the store,
        and one that does is alive (it then carries the run on)."""
        return not self._serving() and bool(await self._peers.servers())

    async def _asked(self, kind: Asked, run_id: str, **payload: Any) -> Run:
        return await self._peers.ask(kind, run_id, payload, now=self._clock(),
                                     timeout_s=self._timeout_s)

    async def _write_run(self, run: Run, step: Transition) -> None:
        await self._store.commit(Checkpoint(thread_id=run.thread_id, position=None, run=run,
                                            transitions=[step]))
