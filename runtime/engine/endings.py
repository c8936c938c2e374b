"""The ways a run stops: answered, failed, paused for a person, cancelled, timed out,
released at shutdown.

Each end is one checkpoint that also answers what is left open, so the thread stays
valid for the next turn and the person is told: unanswered calls get error results, and
a run that came from a channel gets its closing words through the outbox (keyed by where
in the thread they answer, so an end is never posted twice). The driver decides *when*
a run ends; this module is *how*.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Sequence
from typing import Any, Unpack

from ..errors import CorruptStore, FailReason, StaleWrite, StoreError
from ..model.attachments.refs import FileRef
from ..model.budget import Prices
from ..model.config import AgentConfig
from ..model.durability import Write
from ..model.entries import RUN_FAILED, Entry, Notice, ToolCall, ToolResult, Usage
from ..model.events import ApprovalRequested, EventBus, RunEnded
from ..model.guards import call_key
from ..model.runs import (
    DRIVABLE,
    ApprovalDelivery,
    Delivery,
    FileDelivery,
    PendingApproval,
    ReplyDelivery,
    Run,
    RunChanges,
    RunState,
    idempotency_key,
)
from ..stores.base import Store
from ..stores.tail import Tail
from ..tools.base import error_result
from .cursor import RunCursor, unanswered
from .tracing import NO_TRACING, Tracing

__all__ = ["DRIVABLE", "Endings"]

log = logging.getLogger("maiden.loop")

S = RunState

_PLAIN = {
    "provider_error": "the model service failed",
    "max_turns_exceeded": "it took more steps than I am allowed",
    "budget_exceeded": "it would go over the budget",
    "poison_run": "it kept crashing",
    "internal_error": "an internal error",
    "replay_mismatch": "my records of it disagree",
    "empty_answer": "the model gave an empty answer twice",
}


class Endings:
    """Ends runs for one driver (what it needs of the driver, given at construction)."""

    def __init__(self, store: Store, bus: EventBus, agent: AgentConfig, prices: Prices, *,
                 instance_id: str, clock: Callable[[], float]) -> None:
        self.store = store
        self.bus = bus
        self.agent = agent
        self.prices = prices
        self.instance_id = instance_id
        self.clock = clock

    def cursor(self, run: Run, entries: list[Entry] | Tail, *,
               tracing: Tracing = NO_TRACING) -> RunCursor:
        return RunCursor(self.store, self.bus, run, entries, self.clock, tracing=tracing)

    async def complete(
        self, cur: RunCursor, text: str, entries: Sequence[Entry] = (), *,
        quiet: bool = False, **changes: Unpack[RunChanges],
    ) -> None:
        """Answered: ``text`` is the reply (``entries``, the final turn, go with it);
        ``quiet``: kept as the run's reply but not posted (a job that found nothing new)."""
        if not text.strip():
            # Never an empty post (a turn stored by an older version, say): say why instead.
            await self.fail(cur, "empty_answer", "the final answer has no text")
            return
        changes["reply"] = text
        made = _made_files(cur.own)
        if made:
            changes["reply_files"] = made
        posted = [] if quiet else self._reply(cur, len(entries), text, feedback=True)
        await cur.commit(entries, write=Write.ANSWER, to=S.COMPLETED, reason="answered",
                         deliveries=[*posted, *self._files(cur, made)], **changes)

    async def fail(self, cur: RunCursor, reason: FailReason, message: str, *,
                   notice: str | None = None, spent: Usage | None = None) -> None:
        """End the run failed, answering any unanswered call so the history stays valid;
        ``notice`` is what the person is told (else a plain sentence for ``reason``);
        ``spent``: what model calls not recorded in any turn used, added to the run's."""
        log.warning("run %s failed: %s: %s", cur.run.id, reason, message)
        closing = self._closing_results(cur, "cancelled", f"not run: the run failed ({reason})")
        notice = notice or f"Sorry, I could not finish this ({_PLAIN.get(reason, reason)})."
        if cur.start is not None:
            # Its message stays in the thread, closed, as a failed run's message.
            closing.append(Notice(run_id=cur.run.id, code=RUN_FAILED, at=self.clock(),
                                  text=f"This request failed ({reason}); the person was "
                                       f"told: {notice}"))
        await cur.commit(closing, write=Write.END, to=S.FAILED, reason=reason, error=message,
                         started_calls=(),
                         deliveries=self._reply(cur, len(closing), notice),
                         usage=cur.run.usage + (spent or Usage()),
                         cost_usd=cur.run.cost_usd + (self.prices.cost(spent) if spent else 0.0))

    async def unreadable(self, run: Run, exc: CorruptStore) -> Run:
        """The thread cannot be read back: fail the run (resumable once it is repaired)
        without touching the entries, and say so."""
        log.warning("run %s failed: %s", run.id, exc)
        cur = self.cursor(run, [])
        notice = "Sorry, I could not finish this (my records of this conversation are " \
            "damaged)."
        deliveries = [] if not run.origin.target else [ReplyDelivery(
            key=idempotency_key(run.id, f"reply@corrupt:{run.version}"), run_id=run.id,
            thread_id=run.thread_id, channel=run.origin.channel, target=run.origin.target,
            text=notice, created_at=self.clock())]
        await cur.commit(write=Write.END, to=S.FAILED, reason="corrupt_store", error=str(exc),
                         deliveries=deliveries, checked=False)
        self.published(cur.run)
        return cur.run

    async def pause(self, cur: RunCursor, call: ToolCall, reason: str) -> None:
        """Wait for a person; the prompt for the run's channel goes in the same checkpoint."""
        run = cur.run
        pending = PendingApproval(
            tool_call_id=call.id, name=call.name, arguments=call.arguments,
            arguments_hash=call_key(call.name, call.arguments), reason=reason,
            requested_at=self.clock(), asked_by=run.origin.user, channel=run.origin.channel,
            target=run.origin.target)
        prompts = []
        if run.origin.target:
            # Keyed by the call and how many decisions the run had: a call asked about again
            # (approved, then cut off by a crash) gets a new prompt, a retried pause does not.
            at = f"approval:{call.id}:{len(run.decisions)}"
            prompts.append(ApprovalDelivery(
                key=idempotency_key(run.id, at), run_id=run.id, thread_id=run.thread_id,
                channel=run.origin.channel, target=run.origin.target, tool_call_id=call.id,
                name=call.name, arguments=call.arguments, arguments_hash=pending.arguments_hash,
                reason=reason, asked_by=run.origin.user, created_at=self.clock()))
        await cur.commit(write=Write.PAUSE, to=S.AWAITING_APPROVAL, reason=reason,
                         pending_approval=pending,
                         deliveries=prompts)
        self.bus.publish(ApprovalRequested(
            run_id=run.id, thread_id=run.thread_id, tool_call_id=call.id, name=call.name,
            arguments=call.arguments, arguments_hash=pending.arguments_hash, reason=reason,
            channel=run.origin.channel, target=run.origin.target))

    async def cancel(self, run_id: str, reason: str, *, attempts: int = 3) -> Run:
        """End a run as cancelled from what the store holds now (not from a stale cursor)."""
        for _ in range(attempts):
            run = await self.store.get_run(run_id)
            if run.terminal:
                return run
            cur = self.cursor(run, await self.store.load_entries(run.thread_id))
            closing = self._closing_results(cur, "cancelled", f"cancelled: {reason}")
            try:
                await cur.commit(closing, write=Write.END, to=S.CANCELLED, reason=reason,
                                 started_calls=(),
                                 pending_approval=None,
                                 deliveries=self._reply(cur, len(closing), f"Stopped ({reason})."))
            except StaleWrite:
                continue  # a checkpoint landed meanwhile: read again
            self.published(cur.run)
            return cur.run
        raise StaleWrite(f"run {run_id} kept changing while being cancelled")

    async def expire(self, run_id: str, *, attempts: int = 3) -> Run:
        """Move a run whose approval waited longer than ``approval_timeout_s`` to timed_out
        (unless another process decided it, or moved it on, meanwhile: then as it is)."""
        for _ in range(attempts):
            run = await self.store.get_run(run_id)
            timeout = self.agent.approval_timeout_s
            pending = run.pending_approval
            if (run.state is not S.AWAITING_APPROVAL or pending is None or timeout is None
                    or self.clock() < pending.requested_at + timeout):
                return run
            cur = self.cursor(run, await self.store.load_entries(run.thread_id))
            try:
                await cur.commit(write=Write.END, to=S.TIMED_OUT, reason="approval_timeout",
                                 error=f"no decision on {pending.name} within {timeout:g} s",
                                 deliveries=self._reply(cur, 0, f"Nobody approved "
                                                        f"{pending.name} in time, so I "
                                                        "stopped here."))
            except StaleWrite:
                continue  # decided meanwhile, by another process: read again
            self.published(cur.run)
            return cur.run
        raise StaleWrite(f"run {run_id} kept changing while its approval timed out")

    async def release(self, cur: RunCursor) -> Run:
        """Shutdown: leave the run at its checkpoint, marked as nobody's."""
        await cur.commit(write=Write.RELEASE, owner=None)
        self.bus.publish(RunEnded.of(cur.run, "shutting down"))
        return cur.run

    async def release_fresh(self, run_id: str) -> None:
        """``release`` from what the store holds now (the driving task was cut off)."""
        with contextlib.suppress(StaleWrite, StoreError):
            run = await self.store.get_run(run_id)
            if run.state in DRIVABLE and run.owner == self.instance_id:
                cur = self.cursor(run, await self.store.load_entries(run.thread_id))
                await self.release(cur)

    def published(self, run: Run) -> None:
        """Tell subscribers the run ended (after its checkpoint)."""
        self.bus.publish(RunEnded.of(run))

    def notice(self, cur: RunCursor, what: str, text: str) -> list[Delivery]:
        """A message to the person that is not the run's answer (files it could not
        read), keyed by ``what``: posted once however often the run starts."""
        run = cur.run
        if not run.origin.target:
            return []
        return [ReplyDelivery(key=idempotency_key(run.id, what), run_id=run.id,
                              thread_id=run.thread_id, channel=run.origin.channel,
                              target=run.origin.target, text=text, answer=False,
                              created_at=self.clock())]

    def _files(self, cur: RunCursor, files: Sequence[FileRef]) -> list[Delivery]:
        """The outbox records of the files sent with the answer, after it: each keyed by
        its place and content, so a run answering again sends none twice."""
        run = cur.run
        if not run.origin.target:
            return []
        return [FileDelivery(key=idempotency_key(run.id, f"file:{n}:{f.digest}"),
                             run_id=run.id, thread_id=run.thread_id, channel=run.origin.channel,
                             target=run.origin.target, file=f, created_at=self.clock())
                for n, f in enumerate(files)]

    def _reply(self, cur: RunCursor, adding: int, text: str, *,
               feedback: bool = False) -> list[Delivery]:
        """The outbox record for a message that came from a channel (none for cli/http).

        Keyed by the run, the thread position it answers at and the run's version: a run
        resumed and ended again says so again (even where nothing was added to its thread
        meanwhile: a failed run resumed and cancelled before it started, chaos seed 6161),
        but the same end, written again after a crash, is never posted twice.
        """
        run = cur.run
        if not run.origin.target:
            return []
        at = len(cur.entries) + adding
        return [ReplyDelivery(key=idempotency_key(run.id, f"reply@{at}:v{run.version}"),
                              run_id=run.id, thread_id=run.thread_id,
                              channel=run.origin.channel, target=run.origin.target, text=text,
                              feedback=feedback, created_at=self.clock())]

    def _closing_results(self, cur: RunCursor, kind: Any, message: str) -> list[Entry]:
        return [ToolResult(run_id=cur.run.id, tool_call_id=c.id, name=c.name, is_error=True,
                           content=error_result(kind, message).content, at=self.clock())
                for c in unanswered(cur.own)]


def _made_files(entries: Sequence[Entry]) -> tuple[FileRef, ...]:
    """The files the run's tools handed back, each (by name and content) once."""
    seen: dict[tuple[str, str], FileRef] = {}
    for entry in entries:
        if isinstance(entry, ToolResult):
            for ref in entry.files:
                seen.setdefault((ref.name, ref.digest), ref)
    return tuple(seen.values())
