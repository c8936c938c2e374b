"""The agent loop: drive one run from its last checkpoint to an end or a pause.

Each step reads top to bottom: look at where the run stands -> check budgets ->
call the model -> checkpoint the turn (intent, before any tool runs) -> run each
pending call -> checkpoint its result. Everything the loop decides is derived
from the stored entries, so a run picked up after a crash continues where it
stopped: recorded results are reused, never re-run.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, Unpack

from .budget import BudgetConfig, Prices, Spend, Verdict, check_budget
from .config import AgentConfig
from .context import prompt_tokens
from .cursor import RunCursor, unanswered
from .entries import AssistantTurn, Entry, Notice, ToolCall, ToolResult, UserMessage
from .errors import (
    ContextTooLong,
    CorruptStore,
    FailReason,
    ProviderError,
    StaleWrite,
    StoreError,
    ToolFailure,
)
from .events import (
    ApprovalRequested,
    EventBus,
    RunEnded,
    RunStarted,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
)
from .gate import (
    CallFacts,
    Pause,
    Reconcile,
    Refuse,
    gate_call,
    replay_mismatch,
    unique_call_ids,
)
from .guards import call_key, is_repeat, turn_budget
from .prompting import Prompts
from .providers.base import ModelRequest, Provider
from .runs import (
    ApprovalDelivery,
    Delivery,
    PendingApproval,
    ReplyDelivery,
    Run,
    RunChanges,
    RunState,
    idempotency_key,
)
from .stores.base import Store
from .tail import Tail, first_loaded
from .tools import NOT_DONE, ToolContext, ToolOutput, ToolRegistry, error_result

__all__ = ["DRIVABLE", "FINAL_TURN_NOTICE", "RunDriver"]

log = logging.getLogger("maiden.loop")

S = RunState
DRIVABLE = (S.QUEUED, S.RUNNING, S.AWAITING_TOOL)

FINAL_TURN_NOTICE = (
    "This is your last turn for this request: no tools are available now. "
    "Answer the user with what you have."
)

_PLAIN = {
    "provider_error": "the model service failed",
    "max_turns_exceeded": "it took more steps than I am allowed",
    "budget_exceeded": "it would go over the budget",
    "poison_run": "it kept crashing",
    "internal_error": "an internal error",
    "replay_mismatch": "my records of it disagree",
}


class _Paused:
    """A call that cannot run until a person decides."""


class RunDriver:
    """Drives runs through the loop. Holds no run state between calls: the store does."""

    def __init__(
        self,
        store: Store,
        provider: Provider,
        tools: ToolRegistry,
        agent: AgentConfig,
        bus: EventBus,
        *,
        instance_id: str,
        budget: BudgetConfig | None = None,
        prices: Prices | None = None,
        cancel_grace_s: float = 5.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.provider = provider
        self.tools = tools
        self.agent = agent
        self.bus = bus
        self.instance_id = instance_id
        self.budget = budget or BudgetConfig()
        self.prices = prices or Prices()
        self.cancel_grace_s = cancel_grace_s
        self.clock = clock
        self.stopping = False
        """Set at shutdown: runs stop at their next checkpoint and are released."""
        self.cancel_reasons: dict[str, str] = {}
        """Runs whose task is being cancelled on purpose, and why."""
        self.prompts = Prompts(agent.system_prompt)

    def _cursor(self, run: Run, entries: list[Entry] | Tail) -> RunCursor:
        return RunCursor(self.store, self.bus, run, entries, self.clock)

    # -- one run, top to bottom ----------------------------------------------------------

    async def drive(self, run_id: str) -> Run:
        """Take the run from wherever it stands to completion, failure or a pause."""
        run = await self.store.get_run(run_id)
        if run.state not in DRIVABLE:
            return run
        try:
            entries = await self._load(run)
        except CorruptStore as exc:
            return await self._unreadable(run, exc)
        cur = self._cursor(run, entries)
        try:
            if not await self._begin(cur):
                return cur.run
            while cur.run.state in (S.RUNNING, S.AWAITING_TOOL):
                if self.stopping:
                    return await self._release(cur)
                await self._step(cur)
        except asyncio.CancelledError:
            reason = self.cancel_reasons.pop(run_id, None)
            if reason is None:
                # Shutdown, not a cancellation: the run stays for the next start. Cut off
                # past the grace period, it is still released, so that start does not
                # count a clean stop as a crash.
                if self.stopping:
                    await self._release_fresh(run_id)
                raise
            return await self.cancel(run_id, reason)
        except ProviderError as exc:
            await self._fail(cur, "provider_error", str(exc))
        except (StaleWrite, StoreError):
            raise
        except Exception as exc:
            log.exception("run %s failed on an internal error", run_id)
            await self._fail(cur, "internal_error", f"{type(exc).__name__}: {exc}")
        self._publish_end(cur.run)
        return cur.run

    async def _load(self, run: Run) -> list[Entry] | Tail:
        """What the run needs of its thread: with a context window, only the tail the window
        holds (from where it is held, and from the run's own message on); else all of it."""
        limit = self._limit()
        fresh = run.state is S.QUEUED and run.started_at is None
        if limit is None or (not fresh and run.first_entry is None):
            return await self.store.load_entries(run.thread_id)
        starts = [self.prompts.held_start(run.thread_id),
                  None if fresh else run.first_entry]
        start = min((s for s in starts if s is not None), default=None)
        tail = await self.store.load_tail(run.thread_id, limit, start=start)
        if self.agent.compaction == "summary" and tail.base:
            # What falls out of the window is summarised from where the newest summary
            # stops: load from there (``covers`` counts entries without the summaries, so
            # as a position it is at or before that point).
            covers = (tail.summary_before.covers or 0) if tail.summary_before else 0
            if covers < tail.base - tail.summaries_before:
                tail = await self.store.load_tail(run.thread_id, limit, start=covers)
        return tail

    async def _begin(self, cur: RunCursor) -> bool:
        run = cur.run
        started_at, me = run.started_at or self.clock(), self.instance_id
        started = [RunStarted(run_id=run.id, thread_id=run.thread_id)]
        if run.state is S.QUEUED:
            if cur.start is None:
                user = UserMessage(run_id=run.id, text=run.text, user=run.origin.user,
                                   at=self.clock())
                # Not a durable point: the message is safe in the queued run, and a start
                # lost to a power cut is started again. The next checkpoint's fsync covers it.
                await cur.commit([user], to=S.RUNNING, reason="started", started_at=started_at,
                                 owner=me, announce=started, durable=False,
                                 first_entry=len(cur.entries))
            else:  # an explicitly resumed run: its message is already in the thread
                await cur.commit(to=S.RUNNING, reason="resumed", stalled_recoveries=0,
                                 started_at=started_at, owner=me, announce=started)
        elif run.owner is None:
            # Released at a clean shutdown: carrying on is not a crash recovery.
            await cur.commit(to=S.RUNNING, reason="continued after restart",
                             started_at=started_at, owner=me, announce=started)
        elif run.owner != self.instance_id:
            # Only crashes in a row with no progress in between make a run poison: a long
            # run interrupted by unrelated restarts keeps going.
            moved_on = run.recovered_at is not None and len(cur.entries) > run.recovered_at
            stalled = 1 if moved_on else run.stalled_recoveries + 1
            if stalled > self.agent.max_recovery_attempts:
                await self._fail(cur, "poison_run",
                                 f"the process died {run.stalled_recoveries} times in a row "
                                 "while running this run; giving up instead of crash-looping")
                self._publish_end(cur.run)
                return False
            attempt = run.recovery_attempts + 1
            log.warning("recovering run %s (attempt %d) from %s", run.id, attempt, run.state)
            await cur.commit(to=S.RUNNING, reason=f"recovered after crash (attempt {attempt})",
                             recovery_attempts=attempt, stalled_recoveries=stalled,
                             recovered_at=len(cur.entries), started_at=started_at, owner=me,
                             announce=[RunStarted(run_id=run.id, thread_id=run.thread_id,
                                                  recovered=True)])
        else:  # this process takes it up again (a decision was made here)
            self.bus.publish(started[0])
        return True

    async def _step(self, cur: RunCursor) -> None:
        own = cur.own
        last = own[-1] if own else None
        if isinstance(last, AssistantTurn | ToolResult):
            turn = next((e for e in reversed(own) if isinstance(e, AssistantTurn)), None)
            if turn is not None and turn.tool_calls:
                done = {e.tool_call_id: e for e in own if isinstance(e, ToolResult)}
                mismatch = replay_mismatch(turn, done)
                if mismatch:
                    await self._fail(cur, "replay_mismatch", mismatch)
                    return
                if any(c.id not in done for c in turn.tool_calls):
                    await self._run_calls(cur, turn, done)
                    return
            elif turn is not None:
                # A final answer stored without its completion: finish, don't re-ask.
                await self._complete(cur, turn.text)
                return
        await self._model_turn(cur)

    async def _model_turn(self, cur: RunCursor) -> None:
        run = cur.run
        verdict = await self._budget_verdict(run)
        if verdict.action == "exceeded":
            await self._fail(cur, "budget_exceeded", f"budget {verdict.detail}")
            return
        turns = turn_budget(run.turns, self.agent.max_turns)
        if turns == "exceeded":
            await self._fail(cur, "max_turns_exceeded",
                             f"the run took {run.turns} model turns (max_turns = "
                             f"{self.agent.max_turns})")
            return
        final = turns == "final" or verdict.action == "final"
        last = cur.entries[-1] if cur.entries else None
        if final and not (isinstance(last, Notice) and last.code == "final_turn"):
            await cur.commit([Notice(run_id=run.id, code="final_turn", text=FINAL_TURN_NOTICE,
                                     at=self.clock())])

        async def on_text(delta: str) -> None:
            self.bus.publish(TextDelta(run_id=run.id, thread_id=run.thread_id, text=delta))

        if self.agent.compaction == "summary":
            await self._compact(cur, final)
        request = self._request(cur, final)
        try:
            response = await self.provider.complete(request, on_text)
        except ContextTooLong as exc:
            # Our estimate was off for this model: trim to well under what was sent and
            # try once more (a second refusal fails the run, resumable, as any provider
            # error does).
            sent = prompt_tokens(request.system, request.tools, request.entries)
            log.warning("run %s: the model refused %d estimated tokens as too long (%s); "
                        "trimming to %d and trying again", run.id, sent, exc, sent // 2)
            self.prompts.move_window(run.thread_id)
            request = self._request(cur, final, limit=sent // 2)
            response = await self.provider.complete(request, on_text)
        calls = unique_call_ids(response.tool_calls, cur.own)
        turn = AssistantTurn(run_id=run.id, text=response.text, tool_calls=calls,
                             usage=response.usage, model=response.model, at=self.clock())
        taken, usage = run.turns + 1, run.usage + response.usage
        cost = run.cost_usd + self.prices.cost(response.usage)
        if response.tool_calls:
            # The write-ahead intent is a durable point only for calls with an effect: a
            # power cut that loses read-only calls at worst asks the model again.
            await cur.commit([turn], to=S.AWAITING_TOOL, reason="tool calls requested",
                             tool_calls=run.tool_calls + len(response.tool_calls),
                             turns=taken, usage=usage, cost_usd=cost,
                             durable=any(self._has_effect(c.name) for c in calls))
        else:
            await self._complete(cur, response.text, [turn], turns=taken, usage=usage,
                                 cost_usd=cost)

    def _request(self, cur: RunCursor, final: bool, *, limit: int | None = None) -> ModelRequest:
        """What the model is sent: the thread as the model sees it, cut to the context
        window (``limit``, else ``max_context_tokens``, else what the provider says its
        model holds), the system prompt, and the tools unless it is the final turn."""
        tools = () if final else tuple(self.tools.specs())
        return self.prompts.request(cur.run, cur.entries, tools, final=final,
                                    limit=limit or self._limit(), now=self.clock())

    def _limit(self) -> int | None:
        limit: int | None = self.agent.max_context_tokens or getattr(
            self.provider, "context_window", None)
        return limit

    async def _compact(self, cur: RunCursor, final: bool) -> None:
        """``compaction = "summary"``: when the window's cut has moved past what the
        thread's summary covers, have the model summarise what falls out and store that as
        a ``summary`` notice: durable like any entry, so a crash mid-compaction at worst
        asks again. A failure leaves the history dropped."""
        run = cur.run
        tools = () if final else tuple(self.tools.specs())
        asked = self.prompts.compaction(run, cur.entries, tools, self._limit())
        if asked is None:
            return
        request, covers = asked
        try:
            response = await self.provider.complete(request, None)
        except ProviderError as exc:
            log.warning("run %s: the summary of older entries failed (%s); they are left "
                        "out unsummarised", run.id, exc)
            return
        summary = Notice(run_id=run.id, code="summary", text=response.text.strip(),
                         covers=covers, at=self.clock())
        await cur.commit([summary], usage=run.usage + response.usage,
                         cost_usd=run.cost_usd + self.prices.cost(response.usage))

    async def _budget_verdict(self, run: Run) -> Verdict:
        usage = run.usage
        thread_day = 0.0
        if self.budget.needs_thread_day:
            day = datetime.fromtimestamp(self.clock(), UTC).replace(hour=0, minute=0, second=0,
                                                                    microsecond=0).timestamp()
            others = await self.store.list_runs(thread_id=run.thread_id)
            thread_day = run.cost_usd + sum(r.cost_usd for r in others
                                            if r.created_at >= day and r.id != run.id)
        spend = Spend(
            input_tokens=usage.input_tokens + usage.cache_read_tokens
            + usage.cache_creation_tokens,
            output_tokens=usage.output_tokens, total_tokens=usage.total_tokens,
            cost_usd=run.cost_usd, tool_calls=run.tool_calls,
            wall_s=self.clock() - (run.started_at or self.clock()),
            thread_day_cost_usd=thread_day)
        return check_budget(self.budget, spend)

    async def _run_calls(
        self, cur: RunCursor, turn: AssistantTurn, done: dict[str, ToolResult]
    ) -> None:
        keys = [call_key(c.name, c.arguments)
                for e in cur.own if isinstance(e, AssistantTurn) and e is not turn
                for c in e.tool_calls]
        pending = [c for c in turn.tool_calls if c.id not in done]
        before = _before(cur.entries, turn)
        final = isinstance(before, Notice) and before.code == "final_turn"
        for index, call in enumerate(turn.tool_calls):
            previous = list(keys)
            keys.append(key := call_key(call.name, call.arguments))
            if call.id in done:
                continue
            run = cur.run
            self.bus.publish(ToolCallStarted(run_id=run.id, thread_id=run.thread_id, call=call))
            output = await self._call(cur, call, index, previous, key, offered=not final)
            if isinstance(output, _Paused):
                return
            result = ToolResult(run_id=run.id, tool_call_id=call.id, name=call.name,
                                content=output.content, is_error=output.is_error,
                                at=self.clock())
            started = tuple(c for c in cur.run.started_calls if c != call.id)
            finished = [ToolCallFinished(
                run_id=run.id, thread_id=run.thread_id, tool_call_id=call.id, name=call.name,
                content=output.content, is_error=output.is_error)]
            # A read-only call's result is not a durable point either: lost to a power
            # cut, the call is run again, as recovery does with any read-only call.
            durable = self._has_effect(call.name)
            if call is pending[-1]:
                await cur.commit([result], to=S.RUNNING, reason="tool results recorded",
                                 started_calls=started, announce=finished, durable=durable)
            else:
                await cur.commit([result], started_calls=started, announce=finished,
                                 durable=durable)
            if self.stopping:
                return

    def _has_effect(self, name: str) -> bool:
        """Whether a call of ``name`` may change anything outside the thread: not for a
        read-only tool, nor for a name no tool has (such a call only gets an error)."""
        tool = self.tools.get(name)
        return tool is not None and tool.effect != "read_only"

    async def _call(
        self, cur: RunCursor, call: ToolCall, index: int, previous: list[str], key: str, *,
        offered: bool,
    ) -> ToolOutput | _Paused:
        """Decide whether and how a call runs (``gate_call``); return its output, or pause."""
        run = cur.run
        tool = self.tools.get(call.name) if offered else None
        arguments: Any = None
        invalid = None
        if tool is not None:
            try:
                arguments = tool.validate(call.arguments)
            except ValueError as exc:
                invalid = str(exc)
        decision = run.decision_for(call.id)
        facts = CallFacts(
            name=call.name, index=index, calls_before=len(previous), tool=tool,
            offered=offered, invalid=invalid,
            repeat=is_repeat(previous, key, self.agent.repeat_limit),
            decision=None if decision is None else decision.approve,
            decided_by=decision.by if decision else "",
            decision_reason=decision.reason if decision else "",
            started=call.id in run.started_calls)
        verdict = gate_call(facts, per_turn=self.agent.max_tool_calls_per_turn,
                            per_run=self.budget.max_tool_calls,
                            repeat_limit=self.agent.repeat_limit,
                            tool_names=tuple(t.name for t in self.tools))
        if isinstance(verdict, Refuse):
            return error_result(verdict.kind, verdict.message)
        if isinstance(verdict, Pause):
            await self._pause(cur, call, verdict.reason)
            return _Paused()
        assert tool is not None
        ctx = ToolContext(run_id=run.id, thread_id=run.thread_id, tool_call_id=call.id,
                          idempotency_key=idempotency_key(run.id, call.id), origin=run.origin,
                          cancel_grace_s=self.cancel_grace_s)
        if isinstance(verdict, Reconcile):
            found = await tool.run_reconcile(ctx)
            if found is not NOT_DONE:
                return ToolOutput(found)
        if tool.effect == "non_idempotent":
            # Claim the call before its effect (a second writer fails here, not after),
            # and use up the approval it runs on.
            started = cur.run.started_calls
            await cur.commit(
                started_calls=started if call.id in started else (*started, call.id),
                decisions=tuple(d.model_copy(update={"consumed": True}) if d is decision else d
                                for d in cur.run.decisions))
        try:
            async with asyncio.timeout(tool.timeout_s):
                return ToolOutput(await tool.invoke(ctx, arguments))
        except TimeoutError:
            return error_result("timeout", f"{call.name} did not finish within "
                                f"{tool.timeout_s:g} s")
        except ToolFailure as exc:
            return error_result("exception", str(exc))
        except Exception as exc:
            return error_result("exception", f"{type(exc).__name__}: {exc}")

    async def _pause(self, cur: RunCursor, call: ToolCall, reason: str) -> None:
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
        await cur.commit(to=S.AWAITING_APPROVAL, reason=reason, pending_approval=pending,
                         deliveries=prompts)
        self.bus.publish(ApprovalRequested(
            run_id=run.id, thread_id=run.thread_id, tool_call_id=call.id, name=call.name,
            arguments=call.arguments, arguments_hash=pending.arguments_hash, reason=reason,
            channel=run.origin.channel, target=run.origin.target))

    # -- endings: completed, failed, cancelled, timed out, released -------------------------

    async def _complete(
        self, cur: RunCursor, text: str, entries: Sequence[Entry] = (),
        **changes: Unpack[RunChanges],
    ) -> None:
        changes["reply"] = text
        await cur.commit(entries, to=S.COMPLETED, reason="answered",
                         deliveries=self._reply(cur, len(entries), text), **changes)

    def _reply(self, cur: RunCursor, adding: int, text: str) -> list[Delivery]:
        """The outbox record for a message that came from a channel (none for cli/http).

        Keyed by the run and the thread position it answers at: a run resumed and ended
        again says so again, but the same end is never posted twice.
        """
        run = cur.run
        if not run.origin.target:
            return []
        at = len(cur.entries) + adding
        return [ReplyDelivery(key=idempotency_key(run.id, f"reply@{at}"), run_id=run.id,
                         thread_id=run.thread_id, channel=run.origin.channel,
                         target=run.origin.target, text=text, created_at=self.clock())]

    async def _fail(self, cur: RunCursor, reason: FailReason, message: str) -> None:
        """End the run failed, answering any unanswered call so the history stays valid."""
        log.warning("run %s failed: %s: %s", cur.run.id, reason, message)
        closing = self._closing_results(cur, "cancelled", f"not run: the run failed ({reason})")
        notice = f"Sorry, I could not finish this ({_PLAIN.get(reason, reason)})."
        await cur.commit(closing, to=S.FAILED, reason=reason, error=message, started_calls=(),
                         deliveries=self._reply(cur, len(closing), notice))

    async def _unreadable(self, run: Run, exc: CorruptStore) -> Run:
        """The thread cannot be read back: fail the run (resumable once it is repaired)
        without touching the entries, and say so."""
        log.warning("run %s failed: %s", run.id, exc)
        cur = self._cursor(run, [])
        notice = "Sorry, I could not finish this (my records of this conversation are " \
            "damaged)."
        deliveries = [] if not run.origin.target else [ReplyDelivery(
            key=idempotency_key(run.id, f"reply@corrupt:{run.version}"), run_id=run.id,
            thread_id=run.thread_id, channel=run.origin.channel, target=run.origin.target,
            text=notice, created_at=self.clock())]
        await cur.commit(to=S.FAILED, reason="corrupt_store", error=str(exc),
                         deliveries=deliveries, checked=False)
        self._publish_end(cur.run)
        return cur.run

    def _closing_results(self, cur: RunCursor, kind: Any, message: str) -> list[Entry]:
        return [ToolResult(run_id=cur.run.id, tool_call_id=c.id, name=c.name, is_error=True,
                           content=error_result(kind, message).content, at=self.clock())
                for c in unanswered(cur.own)]

    async def cancel(self, run_id: str, reason: str, *, attempts: int = 3) -> Run:
        """End a run as cancelled from what the store holds now (not from a stale cursor)."""
        for _ in range(attempts):
            run = await self.store.get_run(run_id)
            if run.terminal:
                return run
            cur = self._cursor(run, await self.store.load_entries(run.thread_id))
            closing = self._closing_results(cur, "cancelled", f"cancelled: {reason}")
            try:
                await cur.commit(closing, to=S.CANCELLED, reason=reason, started_calls=(),
                                 pending_approval=None,
                                 deliveries=self._reply(cur, len(closing), f"Stopped ({reason})."))
            except StaleWrite:
                continue  # a checkpoint landed meanwhile: read again
            self._publish_end(cur.run)
            return cur.run
        raise StaleWrite(f"run {run_id} kept changing while being cancelled")

    async def expire(self, run_id: str) -> Run:
        """Move a run whose approval waited longer than ``approval_timeout_s`` to timed_out."""
        run = await self.store.get_run(run_id)
        timeout = self.agent.approval_timeout_s
        pending = run.pending_approval
        if (run.state is not S.AWAITING_APPROVAL or pending is None or timeout is None
                or self.clock() < pending.requested_at + timeout):
            return run
        cur = self._cursor(run, await self.store.load_entries(run.thread_id))
        await cur.commit(to=S.TIMED_OUT, reason="approval_timeout",
                         error=f"no decision on {pending.name} within {timeout:g} s",
                         deliveries=self._reply(cur, 0, f"Nobody approved {pending.name} in "
                                                f"time, so I stopped here."))
        self._publish_end(cur.run)
        return cur.run

    async def _release(self, cur: RunCursor) -> Run:
        """Shutdown: leave the run at its checkpoint, marked as nobody's."""
        await cur.commit(owner=None)
        self.bus.publish(RunEnded.of(cur.run, "shutting down"))
        return cur.run

    async def _release_fresh(self, run_id: str) -> None:
        with contextlib.suppress(StaleWrite, StoreError):
            run = await self.store.get_run(run_id)
            if run.state in DRIVABLE and run.owner == self.instance_id:
                cur = self._cursor(run, await self.store.load_entries(run.thread_id))
                await self._release(cur)

    def _publish_end(self, run: Run) -> None:
        self.bus.publish(RunEnded.of(run))


def _before(entries: Sequence[Entry], entry: Entry) -> Entry | None:
    for i in range(len(entries) - 1, first_loaded(entries), -1):
        if entries[i] is entry:
            return entries[i - 1]
    return None
