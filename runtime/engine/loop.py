"""The agent loop: drive one run from its last checkpoint to an end or a pause.

Each step reads top to bottom: look at where the run stands -> check budgets ->
call the model -> checkpoint the turn (intent, before any tool runs) -> run each
pending call -> checkpoint its result. Everything the loop decides is derived
from the stored entries, so a run picked up after a crash continues where it
stopped: recorded results are reused, never re-run.

What the loop decides it hands on: how a run ends (answered, failed, paused, cancelled,
timed out, released) is ``endings.py``; what the model is sent, the thread's tail it is
cut from and the summary of what falls out of it are ``prompting.py``. Its steps that ask
the model and run the tools are written beside it (``asking.py``, ``calls.py``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from ..errors import CorruptStore, ProviderError, StaleWrite, StoreError
from ..model.budget import OK, Spend, Verdict, check_budget
from ..model.decisions import asked_again
from ..model.durability import Write
from ..model.entries import AssistantTurn, Entry, Notice, ToolResult, UserMessage
from ..model.events import (
    EventBus,
    RunStarted,
    TextDelta,
)
from ..model.guards import too_long, turn_budget
from ..model.runs import Delivery, Run, RunState
from ..providers.base import ModelResponse
from ..stores.base import Store
from ..stores.tail import ThreadCache
from .agents import Agent
from .asking import Asking
from .calls import ToolCalls
from .caps import Caps
from .cursor import RunCursor, unanswered
from .endings import DRIVABLE, Endings
from .files import Files, Taken
from .gate import replay_mismatch, unique_call_ids
from .history import resumed_notice
from .prompting import Prompts, compact, load
from .stops import stop_requested
from .tracing import NO_TRACING, Span, Tracing

__all__ = ["DRIVABLE", "FINAL_TURN_NOTICE", "RunDriver"]

log = logging.getLogger("maiden.loop")

S = RunState

FINAL_TURN_NOTICE = (
    "This is your last turn for this request: no tools are available now. "
    "Answer the user with what you have."
)


class RunDriver(Asking, ToolCalls):
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
        cancel_reasons: dict[str, str] | None = None,
        tracing: Tracing = NO_TRACING,
        send_pending: Callable[[Run], Awaitable[None]] = lambda run: _nothing(),
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
        self.stopping = False
        """Set at shutdown: runs stop at their next checkpoint and are released."""
        self.cancel_reasons: dict[str, str] = {} if cancel_reasons is None else cancel_reasons
        """Runs whose task is being cancelled on purpose, and why (shared by the agents)."""
        self.send_pending = send_pending
        """Sends what a run put in the outbox and is not sent yet (the outbox's): a notice
        written as the run starts goes out then, before its answer begins."""
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
                if self.stopping:
                    return await self.end.release(cur)
                await self._step(cur)
        except asyncio.CancelledError:
            # A stop, not a crash: what follows reads the store anew.
            reason = self.cancel_reasons.pop(run_id, None)
            if reason is None:
                # Shutdown, not a cancellation: the run stays for the next start. Cut off
                # past the grace period, it is still released, so that start does not
                # count a clean stop as a crash.
                if self.stopping:
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

    async def _stopped(self, run: Run) -> str | None:
        """Who asked to stop a run that an earlier process had (recovered, continued, or
        queued before this one started) and may not have cancelled before it died
        (``stops``); None for the rest, which are not looked up."""
        earlier = run.owner != self.instance_id if run.state is not S.QUEUED \
            else run.created_at < self._born
        return await stop_requested(self.store, run.id) if earlier else None

    async def _begin(self, cur: RunCursor, span: Span) -> bool:
        """The run's first step here: started, resumed, continued or recovered (or refused:
        then False, and it has ended)."""
        run = cur.run
        started_at, me = run.started_at or self.clock(), self.instance_id
        trace = run.trace or span.traceparent()  # the run's trace, else this stretch's
        started = [RunStarted(run_id=run.id, thread_id=run.thread_id)]
        if run.state is S.QUEUED:
            return await self._start(cur, started_at, trace, started)
        elif run.owner is None:
            # Released at a clean shutdown: carrying on is not a crash recovery.
            await cur.commit(write=Write.RESUME, to=S.RUNNING,
                             reason="continued after restart",
                             started_at=started_at, owner=me, announce=started,
                             trace=trace)
            await self.send_pending(cur.run)  # what it left unsent goes before its answer
        elif run.owner != self.instance_id:
            return await self._recover(cur, span, started_at, trace)
        else:  # this process takes it up again (a decision was made here)
            self.bus.publish(started[0])
        return True

    async def _start(self, cur: RunCursor, started_at: float, trace: str,
                     started: list[RunStarted]) -> bool:
        """A queued run's first step: refused (False), or its message put in the thread (or,
        resumed, taken up where it stood)."""
        run, me = cur.run, self.instance_id
        refused = too_long(len(run.text), self.agent.max_message_chars)
        if cur.start is None and refused is not None:
            # Not put in the thread: the model never sees it, and the person is told
            # why (a run resumed after the limit was raised goes on as usual).
            await self.end.fail(cur, "message_too_long", f"the message has "
                                f"{len(run.text):,} characters; [agent] max_message_chars "
                                f"is {self.agent.max_message_chars:,}", notice=refused)
            self.end.published(cur.run)
            return False
        if self.caps and cur.start is None:
            hit = await self.caps.reached(run)
            if hit is not None:
                # Refused before it enters the thread, with one reply (the outbox's).
                await self.end.fail(cur, "spend_cap", hit.detail, notice=hit.notice())
                self.end.published(cur.run)
                return False
            self._capped_at_start.add(run.id)
        if cur.start is None:
            # The files first: fetched and stored before the message enters the thread
            # (a crash before that fetches again; storing a blob twice writes it once).
            taken = await self.files.take(run, self._limit()) \
                if run.files or run.fetch else Taken()
            user = UserMessage(run_id=run.id, text=run.text, user=run.origin.user,
                               at=self.clock(), files=taken.refs)
            entries: list[Entry] = [*self._context(run), user]
            deliveries: list[Delivery] = []
            if taken.refused:
                entries.append(Notice(run_id=run.id, code="files_refused",
                                      text=taken.notice, at=self.clock()))
                deliveries = self.end.notice(cur, "files_refused", taken.notice)
            # Committed before the model is asked (a run that kills every process
            # then ends as a poison run, its message in the thread); flushed only
            # with a notice to send (``durability``).
            await cur.commit(entries, write=Write.START, to=S.RUNNING, reason="started",
                             started_at=started_at, owner=me, announce=started,
                             first_entry=len(cur.entries), deliveries=deliveries,
                             trace=trace)
            if deliveries:
                await self.send_pending(cur.run)
        else:  # an explicitly resumed run: its message is already in the thread
            again = asked_again(run, cur.own, await self.store.transitions(run.id),
                                now=self.clock())
            # The thread may have gone on meanwhile: its history would end with another
            # run's answer, and the model would answer that run's message again. (A call
            # it waits on, decided late, is answered first: its result says so, ``history``.)
            went_on = None if unanswered(cur.own) else resumed_notice(
                run.id, run.text, bool(run.files), cur.entries, at=self.clock())
            await cur.commit([e for e in (went_on, again) if e is not None],
                             write=Write.RESUME, to=S.RUNNING,
                             reason="resumed",
                             stalled_recoveries=0, started_at=started_at, owner=me,
                             announce=started,
                             trace=trace)
        return True

    async def _recover(self, cur: RunCursor, span: Span, started_at: float, trace: str) -> bool:
        """A run that a process died driving taken up again; or failed, poison (False)."""
        run, me = cur.run, self.instance_id
        # Only crashes in a row with no progress in between make a run poison: a long
        # run interrupted by unrelated restarts keeps going.
        moved_on = run.recovered_at is not None and len(cur.entries) > run.recovered_at
        stalled = 1 if moved_on else run.stalled_recoveries + 1
        if stalled > self.agent.max_recovery_attempts:
            await self.end.fail(cur, "poison_run",
                                f"the process died {run.stalled_recoveries} times in a row "
                                "while running this run; giving up instead of crash-looping")
            self.end.published(cur.run)
            return False
        attempt = run.recovery_attempts + 1
        log.warning("recovering run %s (attempt %d) from %s", run.id, attempt, run.state)
        span.recovered(attempt)
        await cur.commit(write=Write.RESUME, to=S.RUNNING,
                         reason=f"recovered after crash (attempt {attempt})",
                         recovery_attempts=attempt, stalled_recoveries=stalled,
                         recovered_at=len(cur.entries), started_at=started_at, owner=me,
                         trace=trace,
                         announce=[RunStarted(run_id=run.id, thread_id=run.thread_id,
                                              recovered=True)])
        await self.send_pending(cur.run)  # what it left unsent goes before its answer
        return True

    def _context(self, run: Run) -> list[Entry]:
        """The earlier messages the run brought (``Run.context``), as the thread keeps them."""
        at = self.clock()
        return [UserMessage(run_id=run.id, text=said.text, user=run.origin.user, at=at)
                if said.role == "user" else AssistantTurn(run_id=run.id, text=said.text, at=at)
                for said in run.context]

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
                await self.end.complete(cur, turn.text)
                return
        await self._model_turn(cur)

    async def _model_turn(self, cur: RunCursor) -> None:
        run = cur.run
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
                          limit=self._limit(), prices=self.prices)
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

    # -- asked in asking.py, tools run in calls.py, ends in endings.py (``self.end``) -----


async def _nothing() -> None:
    """No outbox: nothing to send."""


KEPT_ENTRIES = 100_000
"""Entries the driver keeps of the threads its runs left (``RunDriver._threads``); they
are mostly the store's cached ones, so what this costs is mostly a pointer each."""


def _empty(response: ModelResponse) -> bool:
    """An answer with nothing in it: no text (or only whitespace) and no tool call."""
    return not response.text.strip() and not response.tool_calls


