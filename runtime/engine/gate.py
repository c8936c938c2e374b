"""Whether a tool call may run: one pure decision, table-tested (no I/O here).

The loop gathers the facts (which call of the turn it is, the tool, whether its
arguments are valid, whether it repeats, the person's decision, whether a crash
cut it off after its claim) and acts on the verdict: refuse with an error result,
pause for a person, ask the tool's reconcile hook, or run it (claiming a
non_idempotent call in the store first).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from ..model.entries import AssistantTurn, Entry, ToolCall, ToolResult
from ..tools.base import ErrorType, Tool

__all__ = ["CallFacts", "Pause", "Reconcile", "Refuse", "Run", "Verdict", "gate_call",
           "replay_mismatch", "unique_call_ids"]


@dataclass(frozen=True, slots=True)
class CallFacts:
    """What the loop knows about one call before deciding."""

    name: str
    index: int
    """Its place in the turn (0-based)."""
    calls_before: int
    """Calls the run made before this one (earlier turns and this turn's earlier calls)."""
    tool: Tool | None
    """The tool, if it exists and tools are offered on this turn."""
    offered: bool
    """False on the final turn, when no tools are offered."""
    invalid: str | None = None
    """Why the arguments do not fit the tool's schema, if they do not."""
    repeat: bool = False
    """The repeated-call guard's finding."""
    decision: bool | None = None
    """A person's standing decision on this call: approve, deny, or none."""
    decided_by: str = ""
    decision_reason: str = ""
    started: bool = False
    """A non_idempotent call claimed before a crash, with no result recorded."""


@dataclass(frozen=True, slots=True)
class Refuse:
    """Not run: this error result is recorded instead."""

    kind: ErrorType
    message: str


@dataclass(frozen=True, slots=True)
class Pause:
    """Wait for a person."""

    reason: Literal["requires_approval", "uncertain_side_effect"]


@dataclass(frozen=True, slots=True)
class Reconcile:
    """Ask the tool's reconcile hook whether the effect happened; run it if it did not."""


@dataclass(frozen=True, slots=True)
class Run:
    """Run the call; ``claim``: record it as started first (non_idempotent)."""

    claim: bool


Verdict = Refuse | Pause | Reconcile | Run


def gate_call(
    facts: CallFacts,
    *,
    per_turn: int,
    per_run: int | None,
    repeat_limit: int,
    tool_names: tuple[str, ...] = (),
) -> Verdict:
    """The verdict on one call, checked in order: limits, the tool and its arguments, the
    repeat guard, a person's denial, a crash-uncertain effect, approval, then run."""
    f = facts
    if f.index >= per_turn:
        return Refuse("too_many_calls",
                      f"at most {per_turn} tool calls are run per turn; this one was not")
    if per_run is not None and f.calls_before >= per_run:
        return Refuse("too_many_calls",
                      f"the run's budget allows {per_run} tool calls; this one was not run")
    tool = f.tool
    if tool is None:
        why = "no tools are offered on the final turn" if not f.offered else \
            f"available tools: {', '.join(sorted(tool_names)) or 'none'}"
        return Refuse("unknown_tool", f"there is no tool {f.name!r} ({why})")
    if f.invalid is not None:
        return Refuse("invalid_arguments", f.invalid)
    if f.repeat:
        return Refuse("loop_detected",
                      f"{f.name} was called with the same arguments {repeat_limit} times in a "
                      "row; it was not run again. Try another approach or answer with what "
                      "you have.")
    if f.decision is False:
        by = f" by {f.decided_by}" if f.decided_by else ""
        reason = f": {f.decision_reason}" if f.decision_reason else ""
        return Refuse("denied", f"a person denied this call{by}{reason}")
    non_idempotent = tool.effect == "non_idempotent"
    if f.decision is None and non_idempotent and f.started:
        # The process died while this call ran: its effect may or may not have happened.
        return Reconcile() if tool.reconciler is not None else Pause("uncertain_side_effect")
    if f.decision is None and tool.requires_approval:
        return Pause("requires_approval")
    return Run(claim=non_idempotent)


def unique_call_ids(calls: tuple[ToolCall, ...], own: Sequence[Entry]) -> tuple[ToolCall, ...]:
    """Results are keyed by (run, call id): a model that repeats an id gets it renamed."""
    seen = {c.id for e in own if isinstance(e, AssistantTurn) for c in e.tool_calls}
    fixed = []
    for i, c in enumerate(calls):
        if c.id in seen or not c.id:
            c = c.model_copy(update={"id": f"{c.id or 'call'}~{len(seen)}.{i}"})
        seen.add(c.id)
        fixed.append(c)
    return tuple(fixed)


def replay_mismatch(turn: AssistantTurn, done: dict[str, ToolResult]) -> str | None:
    """Why the results recorded for a turn cannot be its calls' (a result under a call's
    id from another tool), or None."""
    names = {c.id: c.name for c in turn.tool_calls}
    for call_id, result in done.items():
        if names.get(call_id, result.name) != result.name:
            return (f"the recorded result for call {call_id} is from {result.name!r} but the "
                    f"recorded call is to {names[call_id]!r}; refusing to guess")
    return None
