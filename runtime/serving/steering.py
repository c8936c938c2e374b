"""Decisions, resumption and cancellation of a run wherever it lives: carried out here, or
asked of the live process that serves the store (a decision, a resumption) or drives the
run (a cancellation, so that its tools stop where they run)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any

from ..engine.agents import Agents
from ..engine.drivers import Drivers
from ..engine.stops import clear_stop
from ..engine.tracing import Tracing
from ..errors import MaidenError, RunError, StaleWrite
from ..model.decisions import approve_call, requeue
from ..model.runs import Run, RunState, Transition
from ..outbox.delivery import Outbox
from ..stores.base import Checkpoint, Store
from ..stores.erasure import Erased
from .erase import erase_thread
from .peers import Asked, Peers
from .workers import Workers

__all__ = ["Steering"]

log = logging.getLogger("maiden.runtime")
S = RunState


class Steering:
    """What ``Runtime.decide``, ``resume``, ``cancel``, ``stop`` and ``delete_thread`` do.

    ``serving`` says whether this runtime serves the store now (else control goes to one
    that does, if any is alive); ``timeout_s`` is how long another process is waited for.
    """

    def __init__(self, store: Store, agents: Agents, driver: Drivers, workers: Workers,
                 peers: Peers, outbox: Outbox, *, tracing: Tracing, instance_id: str,
                 clock: Callable[[], float], timeout_s: float,
                 serving: Callable[[], bool]) -> None:
        self._store = store
        self._agents = agents
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
                     reason: str, arguments_hash: str | None,
                     approvers: Sequence[str] | None) -> Run:
        """Answer a pending approval, by ``by``, who must be one of ``approvers``, else of
        the run's agent's approvers, if any are (``RunError("not_an_approver")``)."""
        allowed = await self._approvers(run_id, approvers)
        if allowed and by not in allowed:
            raise RunError("not_an_approver", f"{by or 'an anonymous caller'} may not decide "
                           "approvals here")
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

    async def _approvers(self, run_id: str, approvers: Sequence[str] | None) -> list[str]:
        if approvers is not None:
            return list(approvers)
        if len(self._agents) == 1:
            return self._agents.default.config.approvers
        run = await self._store.get_run(run_id)
        return self._agents.answering(run.agent).config.approvers

    async def resume(self, run_id: str) -> Run:
        """Queue a failed, cancelled or timed-out run again, from its last checkpoint."""
        if await self._forward():
            return await self._asked("resume", run_id)
        run = await self._store.get_run(run_id)
        moved, step = requeue(run, now=self._clock())
        # A stop written before is the earlier wish: cleared first (a crash in between
        # leaves the run as it was, its stop gone, to be resumed again).
        await clear_stop(self._store, run_id)
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

    async def erase(self, thread_id: str, *, by: str) -> Erased:
        """``Runtime.delete_thread``: the thread's runs cancelled wherever they run, then
        the thread erased (``erase_thread``); this process keeps nothing of it."""
        erased = await erase_thread(self._store, thread_id,
                                    lambda run_id: self.cancel(run_id, by=by, forward=True))
        self._driver.forget(thread_id)
        await self._workers.forget(thread_id)
        if erased.existed:
            log.info("thread erased%s: %d entries, %d runs", f" by {by}" if by else "",
                     erased.entries, erased.runs, extra={"thread_id": thread_id})
        return erased

    async def cancel_stopped(self, run_id: str, by: str) -> None:
        """A person's stop carried out (``Runtime.stop``, in the background): a failure is
        logged, the stop stays written."""
        try:
            await self.cancel(run_id, by=by, forward=True)
        except MaidenError as exc:
            log.warning("stop of run %s from %s: %s", run_id, by or "someone", exc)

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
