"""Running a turn's tool calls, each as the gate decides (``gate.py``): refused with an
error result, paused for a person, reconciled, or run (a call with an effect claimed
first); each result committed as it comes, before the next call."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..model.budget import BudgetConfig
from ..model.config import AgentConfig
from ..model.durability import Write
from ..model.entries import AssistantTurn, Entry, Notice, ToolCall, ToolResult
from ..model.events import EventBus, ToolCallFinished, ToolCallStarted
from ..model.guards import is_repeat
from ..model.runs import RunState, idempotency_key
from ..stores.tail import first_loaded
from ..tools.base import NOT_DONE, ToolContext, ToolOutput, error_result
from ..tools.registry import ToolRegistry
from .cursor import RunCursor
from .endings import Endings
from .files import Files
from .gate import CallFacts, Pause, Reconcile, Refuse, gate_call
from .tracing import Tracing

__all__ = ["ToolCalls"]

S = RunState


class _Paused:
    """A call that cannot run until a person decides."""



class ToolCalls:
    """The tool calls of ``RunDriver`` (which has these attributes)."""

    tools: ToolRegistry
    agent: AgentConfig
    budget: BudgetConfig
    bus: EventBus
    clock: Callable[[], float]
    files: Files
    end: Endings
    tracing: Tracing
    services: Mapping[str, Any]
    cancel_grace_s: float
    _stop: asyncio.Event

    async def _run_calls(
        self, cur: RunCursor, turn: AssistantTurn, done: dict[str, ToolResult]
    ) -> None:
        earlier = [c for e in cur.own if isinstance(e, AssistantTurn) and e is not turn
                   for c in e.tool_calls]
        pending = [c for c in turn.tool_calls if c.id not in done]
        before = _before(cur.entries, turn)
        final = isinstance(before, Notice) and before.code == "final_turn"
        for index, call in enumerate(turn.tool_calls):
            previous = [*earlier, *turn.tool_calls[:index]]
            if call.id in done:
                continue
            tool = self.tools.get(call.name)
            run = cur.run
            self.bus.publish(ToolCallStarted(run_id=run.id, thread_id=run.thread_id, call=call))
            with self.tracing.tool(call, tool.effect if tool is not None else None) as span:
                output = await self._call(cur, call, index, previous, offered=not final)
                span.returned(None if isinstance(output, _Paused) else output)
            if isinstance(output, _Paused):
                return
            # A file the tool made is stored before its result names it.
            made = await self.files.keep(output.files) if output.files else ()
            shown = await self.files.keep_images(call.name, output.images) \
                if output.images else ()
            result = ToolResult(run_id=run.id, tool_call_id=call.id, name=call.name,
                                content=output.content, is_error=output.is_error,
                                at=self.clock(), files=made, images=shown)
            started = tuple(c for c in cur.run.started_calls if c != call.id)
            finished = [ToolCallFinished(
                run_id=run.id, thread_id=run.thread_id, tool_call_id=call.id, name=call.name,
                content=output.content, is_error=output.is_error)]
            # Each result is committed as it comes, before the next call or request.
            effect = self._has_effect(call.name)
            if call is pending[-1]:
                await cur.commit([result], write=Write.RESULT, effect=effect, to=S.RUNNING,
                                 reason="tool results recorded", started_calls=started,
                                 announce=finished)
            else:
                await cur.commit([result], write=Write.RESULT, effect=effect,
                                 started_calls=started, announce=finished)
            if self._stop.is_set():
                return

    def _has_effect(self, name: str) -> bool:
        """Whether a call of ``name`` may change anything outside the thread: not for a
        read-only tool, nor for a name no tool has (such a call only gets an error)."""
        tool = self.tools.get(name)
        return tool is not None and tool.effect != "read_only"

    async def _call(
        self, cur: RunCursor, call: ToolCall, index: int, previous: list[ToolCall], *,
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
            repeat=is_repeat(previous, call, self.agent.repeat_limit),
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
            await self.end.pause(cur, call, verdict.reason)
            return _Paused()
        assert tool is not None
        ctx = ToolContext(run_id=run.id, thread_id=run.thread_id, tool_call_id=call.id,
                          idempotency_key=idempotency_key(run.id, call.id), origin=run.origin,
                          agent=self.agent.name, cancel_grace_s=self.cancel_grace_s,
                          services={n: self.services[n] for n in tool.needs
                                    if n in self.services})
        if isinstance(verdict, Reconcile):
            found = await tool.run_reconcile(ctx)
            if found is not NOT_DONE:
                return ToolOutput(found)
        if tool.effect == "non_idempotent":
            # Claim the call before its effect (a second writer fails here, not after),
            # and use up the approval it runs on.
            started = cur.run.started_calls
            await cur.commit(
                write=Write.CLAIM,
                started_calls=started if call.id in started else (*started, call.id),
                decisions=tuple(d.model_copy(update={"consumed": True}) if d is decision else d
                                for d in cur.run.decisions))
        return await tool.call(ctx, arguments)


def _before(entries: Sequence[Entry], entry: Entry) -> Entry | None:
    for i in range(len(entries) - 1, first_loaded(entries), -1):
        if entries[i] is entry:
            return entries[i - 1]
    return None
