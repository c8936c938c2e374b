"""The agent loop: drive one run from its last checkpoint to an end or a pause.

Each step reads top to bottom: look at where the run stands -> check budgets ->
call the model -> checkpoint the turn (intent, before any tool runs) -> run each
pending call -> checkpoint its result. Everything the loop decides is derived
from the stored entries, so a run picked up after a crash continues where it
stopped: recorded results are reused, never re-run.

What the loop decides it hands on: how a run ends (answered, failed, paused, cancelled,
timed out, released) is ``endings.py``; what the model is sent, the thread's tail it is
cut from and the summary of what falls out of it are ``prompting.py``. Its steps that
begin a run, ask the model and run the tools are written beside it (``beginning.py``,
``asking.py``, ``calls.py``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from ..errors import CorruptStore, ProviderError, StaleWrite, StoreError
from ..model.budget import OK, Spend, Verdict, check_budget
from ..model.durability import Write
from ..model.entries import AssistantTurn, Notice, ToolResult
from ..model.events import (
    EventBus,
    TextDelta,
)
from ..model.guards import turn_budget
from ..model.runs import Run, RunState
from ..providers.base import ModelResponse
from ..stores.base import Store
from ..stores.tail import ThreadCache
from .agents import Agent
from .asking import Asking
from .beginning import Beginning
from .calls import ToolCalls
from .cancellations import Cancellations
from .caps import Caps
from .cursor import RunCursor
from .endings import DRIVABLE, Endings
from .files import Files
from .flush import flushing
from .gate import replay_mismatch, unique_call_ids
from .jobs import JOB_MODEL, UNCHANGED, JobStep, job_step
from .prompting import Prompts, compact, load
from .tracing import NO_TRACING, Span, Tracing

__all__ = ["DRIVABLE", "FINAL_TURN_NOTICE", "RunDriver"]

log = logging.getLogger("maiden.loop")

S = RunState

FINAL_TURN_NOTICE = (
    "This is your last turn for this request: no tools are available now. "
    "Answer the user with what you have."
)


class RunDriver(Beginning, Asking, ToolCalls):
    """Drives runs through the loop. Holds no run state between calls, the store does;
    only what it keeps of threads the store holds too (``_threads``)."""

    def __init__(
        self,
        store: Store,
        agent: Agent,
        bus: EventBus,
        *,
        instance_id: str,
        cancel_grace_s: float = 5.0,
        clock: Callable[[], float] = time.time,
        services: Mapping[str, Any] | None = None,
        files: Files | None = None,
        caps: Caps | None = None,
        cancellations: Cancellations | None = None,
        tracing: Tracing = NO_TRACING,
        stop: asyncio.Event | None = None,
    ) -> None:
        self.store = store
        self.provider = agent.provider
        self.tools = agent.tools
        self.agent = agent.config
        self.bus = bus
        self.instance_id = instance_id
        self.budget = agent.budget
        self.prices = agent.prices
        self.cancel_grace_s = cancel_grace_s
        self.clock = clock
        self.files = files or Files(store, clock=clock)
        """Takes a run's files in as its first step, and loads them for the model."""
        self.caps = caps
        """Spend caps per person, place and agent (``[[budgets]]``), shared by the agents."""
        self._threads = ThreadCache(KEPT_ENTRIES)
        """Per thread, the entries the last run here left in memory, each in the store at
        its place (``RunCursor.written``): the next run reads only the entries since."""
        self._file_scan: dict[str, tuple[int, bool]] = {}
        """Per thread: how many of its entries were looked at for files, and whether one
        names any (most recently asked last)."""
        self._capped_at_start: set[str] = set()
        """Runs whose caps were read as they started: their first turn need not again."""
        self.services: Mapping[str, Any] = services or {}
        """What tools may ask for in their context (``Tool.needs``), by name."""
        self._flushing = flushing(agent.tools, self.services, agent.config.name)
        """The memory flush before a summary (``flush``): None when no tool keeps any."""
        self._stop = stop or asyncio.Event()
        """Set at shutdown (the runtime's): runs stop at their next checkpoint and are
        released."""
        self.cancellations = cancellations or Cancellations()
        """Runs whose task is being cancelled on purpose, and why (shared by the agents)."""
        self.tracing = tracing
        """Spans of runs, model calls and tool calls (``[otel]``; a no-op when off)."""
        self.prompts = Prompts(agent.config.system_prompt)
        self._born = clock()
        """When this driver was made: a queued run older than that may have a stop."""
        self.end = Endings(store, bus, agent.config, self.prices, instance_id=instance_id,
                           clock=clock)

    def forget(self, thread_id: str) -> None:
        """The thread was erased: nothing held of it is used again (if it is begun anew)."""
        self._threads.pop(thread_id)
        self._file_scan.pop(thread_id, None)
        self.prompts.forget(thread_id)

    # -- one run, top to bottom ----------------------------------------------------------

    async def drive(self, run_id: str, run: Run | None = None) -> Run:
        """Take the run from wherever it stands to completion, failure or a pause (``run``:
        as just read from the store, if it was)."""
        try:
            return await self._drive(run_id, run)
        finally:
            self._capped_at_start.discard(run_id)

    async def _drive(self, run_id: str, run: Run | None) -> Run:
        run = run or await self.store.get_run(run_id)
        if run.state not in DRIVABLE:
            return run
        with self.tracing.run(run_id, self.agent.name, run.trace) as span:
            ended = await self._drive_run(run_id, run, span)
            span.ended(ended)
            return ended

    async def _drive_run(self, run_id: str, run: Run, span: Span) -> Run:
        try:
            entries = await load(self.store, self.prompts, run, limit=self._limit(),
                                 summary=self.agent.compaction == "summary", kept=self._threads)
        except CorruptStore as exc:
            return await self.end.unreadable(run, exc)
        if (by := await self._stopped(run)) is not None:
            return await self.end.cancel(run_id, f"cancelled by {by}" if by else "cancelled")
        cur = self.end.cursor(run, entries, tracing=self.tracing)
        try:
            if not await self._begin(cur, span):
                return cur.run
            while cur.run.state in (S.RUNNING, S.AWAITING_TOOL):
                if self._stop.is_set():
                    return await self.end.release(cur)
                await self._step(cur)
        except asyncio.CancelledError:
            # A stop, not a crash: what follows reads the store anew.
            reason = self.cancellations.pop(run_id)
            if reason is None:
                # Shutdown, not a cancellation: the run stays for the next start. Cut off
                # past the grace period, it is still released, so that start does not
                # count a clean stop as a crash.
                if self._stop.is_set():
                    await self.end.release_fresh(run_id)
                raise
            return await self.end.cancel(run_id, reason)
        except ProviderError as exc:
            await self.end.fail(cur, "provider_error", str(exc))
        except (StaleWrite, StoreError):
            raise
        except Exception as exc:
            log.exception("run %s failed on an internal error", run_id)
            await self.end.fail(cur, "internal_error", f"{type(exc).__name__}: {exc}")
        finally:
            if isinstance(cur.entries, list) and cur.written():
                self._threads.put(run.thread_id, 0, cur.entries)
        self.end.published(cur.run)
        return cur.run

    async def _step(self, cur: RunCursor) -> None:
        own = cur.own
        last = own[-1] if own else None
        if isinstance(last, AssistantTurn | ToolResult):
            turn = next((e for e in reversed(own) if isinstance(e, AssistantTurn)), None)
            if turn is not None and turn.tool_calls:
                done = {e.tool_call_id: e for e in own if isinstance(e, ToolResult)}
                mismatch = replay_mismatch(turn, done)
                if mismatch:
                    await self.end.fail(cur, "replay_mismatch", mismatch)
                    return
                if any(c.id not in done for c in turn.tool_calls):
                    await self._run_calls(cur, turn, done)
                    return
            elif turn is not None:
                # A final answer stored without its completion: finish, don't re-ask.
                await self.end.complete(cur, turn.text, quiet=turn.model == JOB_MODEL
                                        and turn.text == UNCHANGED)
                return
        await self._model_turn(cur)

    async def _model_turn(self, cur: RunCursor) -> None:
        run = cur.run
        if run.job is not None and cur.start is not None:
            step = job_step(run.job, run.id, cur.own, cur.entries[:cur.start])
            if step is not None:
                await self._job_turn(cur, step)
                return
        verdict = await self._budget_verdict(cur)
        if verdict.action == "exceeded":
            await self.end.fail(cur, "budget_exceeded", verdict.detail
                                if verdict.budget == "spend_cap" else f"budget {verdict.detail}")
            return
        turns = turn_budget(run.turns, self.agent.max_turns)
        if turns == "exceeded":
            await self.end.fail(cur, "max_turns_exceeded",
                                f"the run took {run.turns} model turns (max_turns = "
                                f"{self.agent.max_turns})")
            return
        final = turns == "final" or verdict.action == "final"
        last = cur.entries[-1] if cur.entries else None
        if final and not (isinstance(last, Notice) and last.code == "final_turn"):
            await cur.commit([Notice(run_id=run.id, code="final_turn", text=FINAL_TURN_NOTICE,
                                     at=self.clock())], write=Write.NOTICE)

        async def on_text(delta: str) -> None:
            self.bus.publish(TextDelta(run_id=run.id, thread_id=run.thread_id, text=delta))

        if self.agent.compaction == "summary":
            await compact(cur, self.provider, self.prompts, self._tool_specs(final),
                          limit=self._limit(), prices=self.prices, keep=self._flushing)
        request = await self._with_files(cur, self._request(cur, final))
        response = await self._ask(cur, final, request, on_text)
        spent = response.usage
        if _empty(response):
            # No text and no tool call: nothing to record or post. Asked again once, as
            # for a provider error; a second empty answer fails the run (resumable).
            log.warning("run %s: the model answered with no text and no tool call; asking "
                        "again", run.id)
            response = await self._ask(cur, final, request, on_text)
            spent = spent + response.usage
            if _empty(response):
                await self.end.fail(cur, "empty_answer", "the model answered with no text and "
                                    "no tool call, twice in a row", spent=spent)
                return
        calls = unique_call_ids(response.tool_calls, cur.own)
        turn = AssistantTurn(run_id=run.id, text=response.text, tool_calls=calls,
                             usage=spent, model=response.model, at=self.clock())
        taken, usage = run.turns + 1, run.usage + spent
        cost = run.cost_usd + self.prices.cost(spent)
        if response.tool_calls:
            # The write-ahead intent, before any call runs; flushed for calls with an
            # effect only (``durability``).
            await cur.commit([turn], write=Write.INTENT, to=S.AWAITING_TOOL,
                             reason="tool calls requested",
                             effect=any(self._has_effect(c.name) for c in calls),
                             tool_calls=run.tool_calls + len(response.tool_calls),
                             turns=taken, usage=usage, cost_usd=cost)
        else:
            await self.end.complete(cur, response.text, [turn], turns=taken, usage=usage,
                                    cost_usd=cost)

    async def _job_turn(self, cur: RunCursor, step: JobStep) -> None:
        """A job's step, played as a model's turn that spent nothing: its tool call written
        ahead like any other, or its final words (``quiet``: kept, not posted)."""
        run = cur.run
        calls = (step.call,) if step.call is not None else ()
        turn = AssistantTurn(run_id=run.id, text=step.text, tool_calls=calls, model=JOB_MODEL,
                             at=self.clock())
        if step.call is not None:
            await cur.commit([turn], write=Write.INTENT, to=S.AWAITING_TOOL,
                             reason="tool calls requested",
                             effect=self._has_effect(step.call.name),
                             tool_calls=run.tool_calls + 1)
        else:
            await self.end.complete(cur, step.text, [turn], quiet=step.quiet)

    async def _budget_verdict(self, cur: RunCursor) -> Verdict:
        run = cur.run
        if self.caps and run.id not in self._capped_at_start:
            hit = await self.caps.reached(run)
            if hit is not None:
                return Verdict("exceeded", "spend_cap", hit.detail)
        self._capped_at_start.discard(run.id)
        if not self.budget.limits:
            return OK
        now, thread_day = self.clock(), 0.0
        if self.budget.needs_thread_day:
            day = datetime.fromtimestamp(now, UTC).replace(hour=0, minute=0, second=0,
                                                           microsecond=0).timestamp()
            others = await self.store.list_runs(thread_id=run.thread_id)
            thread_day = run.cost_usd + sum(r.cost_usd for r in others
                                            if r.created_at >= day and r.id != run.id)
        return check_budget(self.budget, Spend.of(run, now, thread_day))

    # -- begun in beginning.py, asked in asking.py, tools run in calls.py, ends in
    # endings.py (``self.end``)


KEPT_ENTRIES = 100_000
"""Entries the driver keeps of the threads its runs left (``RunDriver._threads``); they
are mostly the store's cached ones, so what this costs is mostly a pointer each."""


def _empty(response: ModelResponse) -> bool:
    """An answer with nothing in it: no text (or only whitespace) and no tool call."""
    return not response.text.strip() and not response.tool_calls


