"""The agent loop: drive one run from its last checkpoint to an end or a pause.

Each step reads top to bottom: look at where the run stands -> call the model
-> checkpoint the turn (intent, before any tool runs) -> run each pending call
-> checkpoint its result. Everything the loop decides is derived from the
stored entries, so a run picked up after a crash continues where it stopped:
recorded results are reused, never re-run.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .config import AgentConfig
from .entries import AssistantTurn, Entry, Notice, ToolCall, ToolResult, UserMessage
from .errors import ProviderError, StaleWrite, StoreError
from .events import (
    ApprovalRequested,
    EventBus,
    RunEnded,
    RunStarted,
    StateChanged,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
)
from .guards import call_key, is_repeat, turn_budget
from .providers.base import ModelRequest, Provider
from .runs import Delivery, PendingApproval, Run, RunState, idempotency_key, transition
from .stores.base import Checkpoint, Store
from .tools import NOT_DONE, ToolContext, ToolOutput, ToolRegistry, error_result

__all__ = ["FINAL_TURN_NOTICE", "RunDriver"]

log = logging.getLogger("maiden.loop")
S = RunState

FINAL_TURN_NOTICE = (
    "This is your last turn for this request: no tools are available now. "
    "Answer the user with what you have."
)

_ENDED_KIND = {
    S.COMPLETED: "run.completed",
    S.FAILED: "run.failed",
    S.CANCELLED: "run.cancelled",
    S.TIMED_OUT: "run.timed_out",
    S.AWAITING_APPROVAL: "run.paused",
}


class _Cursor:
    """A run and its thread as loaded, kept in step with every checkpoint written."""

    def __init__(self, store: Store, bus: EventBus, run: Run, entries: list[Entry]) -> None:
        self.store = store
        self.bus = bus
        self.run = run
        self.entries = entries
        self.start = _run_start(entries, run.id)

    @property
    def own(self) -> list[Entry]:
        """This run's entries (normally the thread's tail)."""
        if self.start is None:
            return []
        return [e for e in self.entries[self.start:] if e.run_id == self.run.id]

    async def commit(
        self,
        entries: Sequence[Entry] = (),
        *,
        to: RunState | None = None,
        reason: str = "",
        deliveries: Sequence[Delivery] = (),
        **changes: Any,
    ) -> None:
        transitions = []
        if to is not None:
            run, moved = transition(self.run, to, reason, **changes)
            transitions.append(moved)
        else:
            run = self.run.model_copy(update=changes)
        run = run.model_copy(update={"version": run.version + 1})
        await self.store.commit(Checkpoint(
            thread_id=run.thread_id, position=len(self.entries), entries=entries, run=run,
            transitions=transitions, deliveries=deliveries))
        if self.start is None and any(isinstance(e, UserMessage) for e in entries):
            self.start = len(self.entries)
        self.entries.extend(entries)
        self.run = run
        if to is not None:
            self.bus.publish(StateChanged(run_id=run.id, thread_id=run.thread_id, state=to,
                                          reason=reason))


def _run_start(entries: Sequence[Entry], run_id: str) -> int | None:
    for i in range(len(entries) - 1, -1, -1):
        entry = entries[i]
        if isinstance(entry, UserMessage) and entry.run_id == run_id:
            return i
    return None


@dataclass(frozen=True, slots=True)
class _Paused:
    """A call that cannot run until a person decides."""


class RunDriver:
    """Drives runs through the loop. Stateless between runs: all state is in the store."""

    def __init__(
        self,
        store: Store,
        provider: Provider,
        tools: ToolRegistry,
        agent: AgentConfig,
        bus: EventBus,
        *,
        instance_id: str,
    ) -> None:
        self.store = store
        self.provider = provider
        self.tools = tools
        self.agent = agent
        self.bus = bus
        self.instance_id = instance_id

    async def drive(self, run_id: str) -> Run:
        """Take the run from wherever it stands to completion, failure or a pause."""
        run = await self.store.get_run(run_id)
        if run.terminal or run.state is S.AWAITING_APPROVAL:
            return run
        cur = _Cursor(self.store, self.bus, run, await self.store.load_entries(run.thread_id))
        try:
            if not await self._begin(cur):
                return cur.run
            while cur.run.state in (S.RUNNING, S.AWAITING_TOOL):
                await self._step(cur)
        except ProviderError as exc:
            await self._fail(cur, "provider_error", str(exc))
        except (StaleWrite, StoreError):
            raise
        except Exception as exc:
            log.exception("run %s failed on an internal error", run_id)
            await self._fail(cur, "internal_error", f"{type(exc).__name__}: {exc}")
        self._publish_end(cur.run)
        return cur.run

    async def _begin(self, cur: _Cursor) -> bool:
        run = cur.run
        if run.state is S.QUEUED:
            if cur.start is None:
                user = UserMessage(run_id=run.id, text=run.text, user=run.origin.user)
                await cur.commit([user], to=S.RUNNING, reason="started", owner=self.instance_id)
            else:  # an explicitly resumed run: its message is already in the thread
                await cur.commit(to=S.RUNNING, reason="resumed", owner=self.instance_id,
                                 recovery_attempts=0)
            self.bus.publish(RunStarted(run_id=run.id, thread_id=run.thread_id))
            return True
        if run.owner == self.instance_id:
            # Ours already (e.g. continuing after a decision): not a recovery.
            self.bus.publish(RunStarted(run_id=run.id, thread_id=run.thread_id))
            return True
        attempt = run.recovery_attempts + 1
        if attempt > self.agent.max_recovery_attempts:
            await self._fail(cur, "poison_run",
                             f"the process stopped {run.recovery_attempts} times while running "
                             "this run; giving up instead of crash-looping")
            self._publish_end(cur.run)
            return False
        log.warning("recovering run %s (attempt %d) from state %s", run.id, attempt, run.state)
        await cur.commit(to=S.RUNNING, reason=f"recovered after crash (attempt {attempt})",
                         owner=self.instance_id, recovery_attempts=attempt)
        self.bus.publish(RunStarted(run_id=run.id, thread_id=run.thread_id, recovered=True))
        return True

    async def _step(self, cur: _Cursor) -> None:
        own = cur.own
        last = own[-1] if own else None
        if isinstance(last, AssistantTurn | ToolResult):
            turn = next((e for e in reversed(own) if isinstance(e, AssistantTurn)), None)
            if turn is not None and turn.tool_calls:
                done = {e.tool_call_id: e for e in own if isinstance(e, ToolResult)}
                mismatch = _replay_mismatch(turn, done)
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

    async def _model_turn(self, cur: _Cursor) -> None:
        run = cur.run
        budget = turn_budget(run.turns, self.agent.max_turns)
        if budget == "exceeded":
            await self._fail(cur, "max_turns_exceeded",
                             f"the run took {run.turns} model turns (max_turns = "
                             f"{self.agent.max_turns})")
            return
        final = budget == "final"
        last = cur.entries[-1] if cur.entries else None
        if final and not (isinstance(last, Notice) and last.code == "final_turn"):
            await cur.commit([Notice(run_id=run.id, code="final_turn", text=FINAL_TURN_NOTICE)])

        async def on_text(delta: str) -> None:
            self.bus.publish(TextDelta(run_id=run.id, thread_id=run.thread_id, text=delta))

        request = ModelRequest(
            system=self.agent.system_prompt, entries=tuple(cur.entries),
            tools=() if final else self.tools.specs(), run_id=run.id,
            thread_id=run.thread_id, final_turn=final)
        response = await self.provider.complete(request, on_text)
        turn = AssistantTurn(run_id=run.id, text=response.text, tool_calls=response.tool_calls,
                             usage=response.usage, model=response.model)
        counters: dict[str, Any] = {"turns": run.turns + 1, "usage": run.usage + response.usage}
        if response.tool_calls:
            await cur.commit([turn], to=S.AWAITING_TOOL, reason="tool calls requested",
                             tool_calls=run.tool_calls + len(response.tool_calls), **counters)
        else:
            await self._complete(cur, response.text, [turn], **counters)

    async def _complete(
        self, cur: _Cursor, text: str, entries: Sequence[Entry] = (), **changes: Any
    ) -> None:
        run = cur.run
        deliveries = []
        if run.origin.target:
            deliveries.append(Delivery(
                key=idempotency_key(run.id, "delivery"), run_id=run.id, thread_id=run.thread_id,
                channel=run.origin.channel, target=run.origin.target, text=text))
        await cur.commit(entries, to=S.COMPLETED, reason="answered", reply=text,
                         deliveries=deliveries, **changes)

    async def _run_calls(
        self, cur: _Cursor, turn: AssistantTurn, done: dict[str, ToolResult]
    ) -> None:
        keys = [call_key(c.name, c.arguments)
                for e in cur.own if isinstance(e, AssistantTurn) and e is not turn
                for c in e.tool_calls]
        pending = [c for c in turn.tool_calls if c.id not in done]
        before = _before(cur.entries, turn)
        final = isinstance(before, Notice) and before.code == "final_turn"
        for index, call in enumerate(turn.tool_calls):
            previous = list(keys)
            keys.append(call_key(call.name, call.arguments))
            if call.id in done:
                continue
            run = cur.run
            self.bus.publish(ToolCallStarted(run_id=run.id, thread_id=run.thread_id, call=call))
            output = await self._call(cur, call, index, previous, offered=not final)
            if isinstance(output, _Paused):
                return
            result = ToolResult(run_id=run.id, tool_call_id=call.id, name=call.name,
                                content=output.content, is_error=output.is_error)
            started = tuple(c for c in cur.run.started_calls if c != call.id)
            if call is pending[-1]:
                await cur.commit([result], to=S.RUNNING, reason="tool results recorded",
                                 started_calls=started)
            else:
                await cur.commit([result], started_calls=started)
            self.bus.publish(ToolCallFinished(
                run_id=run.id, thread_id=run.thread_id, tool_call_id=call.id, name=call.name,
                content=output.content, is_error=output.is_error))

    async def _call(
        self, cur: _Cursor, call: ToolCall, index: int, previous: list[str], *, offered: bool
    ) -> ToolOutput | _Paused:
        """Decide whether and how a call runs; return its output, or pause the run."""
        run = cur.run
        limit = self.agent.max_tool_calls_per_turn
        if index >= limit:
            return error_result("too_many_calls",
                                f"at most {limit} tool calls are run per turn; this one was not")
        tool = self.tools.get(call.name) if offered else None
        if tool is None:
            why = "no tools are offered on the final turn" if not offered else \
                f"available tools: {', '.join(sorted(t.name for t in self.tools)) or 'none'}"
            return error_result("unknown_tool", f"there is no tool {call.name!r} ({why})")
        try:
            arguments = tool.validate(call.arguments)
        except ValueError as exc:
            return error_result("invalid_arguments", str(exc))
        if is_repeat(previous, call_key(call.name, call.arguments), self.agent.repeat_limit):
            return error_result(
                "loop_detected", f"{call.name} was called with the same arguments "
                f"{self.agent.repeat_limit} times in a row; it was not run again. Try another "
                "approach or answer with what you have.")
        ctx = ToolContext(run_id=run.id, thread_id=run.thread_id, tool_call_id=call.id,
                          idempotency_key=idempotency_key(run.id, call.id), origin=run.origin)
        decision = run.decision_for(call.id)
        if decision is not None and not decision.approve:
            by = f" by {decision.by}" if decision.by else ""
            reason = f": {decision.reason}" if decision.reason else ""
            return error_result("denied", f"a person denied this call{by}{reason}")
        if decision is None and tool.effect == "non_idempotent" and call.id in run.started_calls:
            # We crashed while this call ran: its effect may or may not have happened.
            if tool.reconciler is not None:
                found = await tool.run_reconcile(ctx)
                if found is not NOT_DONE:
                    return ToolOutput(found)
            else:
                await self._pause(cur, call, "uncertain_side_effect")
                return _Paused()
        elif decision is None and tool.requires_approval:
            await self._pause(cur, call, "requires_approval")
            return _Paused()
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
        except Exception as exc:
            return error_result("exception", f"{type(exc).__name__}: {exc}")

    async def _pause(self, cur: _Cursor, call: ToolCall, reason: str) -> None:
        run = cur.run
        pending = PendingApproval(
            tool_call_id=call.id, name=call.name, arguments=call.arguments,
            arguments_hash=call_key(call.name, call.arguments), reason=reason,
            requested_at=cur.run.updated_at)
        await cur.commit(to=S.AWAITING_APPROVAL, reason=reason, pending_approval=pending)
        self.bus.publish(ApprovalRequested(
            run_id=run.id, thread_id=run.thread_id, tool_call_id=call.id, name=call.name,
            arguments=call.arguments, reason=reason))

    async def _fail(self, cur: _Cursor, reason: str, message: str) -> None:
        """End the run failed, answering any unanswered call so the history stays valid."""
        log.warning("run %s failed: %s: %s", cur.run.id, reason, message)
        closing = [
            ToolResult(run_id=cur.run.id, tool_call_id=call.id, name=call.name, is_error=True,
                       content=error_result("cancelled", f"not run: the run failed ({reason})")
                       .content)
            for call in _unanswered(cur.own)]
        await cur.commit(closing, to=S.FAILED, reason=reason, error=message, started_calls=())

    def _publish_end(self, run: Run) -> None:
        kind = _ENDED_KIND.get(run.state)
        if kind is not None:
            self.bus.publish(RunEnded(
                kind=kind, run_id=run.id, thread_id=run.thread_id, state=run.state,
                reason=run.reason, reply=run.reply, error=run.error, usage=run.usage))


def _unanswered(own: Sequence[Entry]) -> list[ToolCall]:
    turn = next((e for e in reversed(own) if isinstance(e, AssistantTurn)), None)
    if turn is None:
        return []
    done = {e.tool_call_id for e in own if isinstance(e, ToolResult)}
    return [c for c in turn.tool_calls if c.id not in done]


def _before(entries: Sequence[Entry], entry: Entry) -> Entry | None:
    for i in range(len(entries) - 1, 0, -1):
        if entries[i] is entry:
            return entries[i - 1]
    return None


def _replay_mismatch(turn: AssistantTurn, done: dict[str, ToolResult]) -> str | None:
    names = {c.id: c.name for c in turn.tool_calls}
    for call_id, result in done.items():
        if names.get(call_id, result.name) != result.name:
            return (f"the recorded result for call {call_id} is from {result.name!r} but the "
                    f"recorded call is to {names[call_id]!r}; refusing to guess")
    return None
