"""What a person's decide or resume does to a run: pure rules, no I/O.

``Runtime.decide`` and ``Runtime.resume`` read the run, forward to the process that
serves the store, write the result and wake the thread's worker; whether the request
applies to the run as it stands, and the run it leaves, are decided here, so the rules
are plain functions tested with tables (as ``gate.py`` is for calls).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import RunError
from .entries import AssistantTurn, Entry, ToolCall, ToolResult
from .runs import Decision, Run, RunState, Transition, transition

__all__ = ["approve_call", "asked_again", "awaits_decision", "requeue"]

S = RunState


def awaits_decision(run: Run) -> bool:
    """Whether a person may still decide on the run's pending call: it waits for one, or
    timed out waiting (a late decision queues it again)."""
    return run.pending_approval is not None and (run.state is S.AWAITING_APPROVAL or (
        run.state is S.TIMED_OUT and run.reason == "approval_timeout"))


def approve_call(
    run: Run, tool_call_id: str, *, approve: bool, by: str, reason: str,
    arguments_hash: str | None, now: float, owner: str,
) -> tuple[Run, Transition]:
    """The run as a decision on its pending call leaves it (``owner`` carries it on).

    A run that timed out waiting can still be approved: it is queued again. ``RunError``
    when the run waits for no approval, for another call, or for a call whose arguments
    changed since ``arguments_hash`` was shown."""
    pending = run.pending_approval
    if not awaits_decision(run) or pending is None:
        raise RunError("not_awaiting_approval",
                       f"run {run.id} is {run.state}, not awaiting approval")
    if pending.tool_call_id != tool_call_id:
        raise RunError("stale_approval", f"run {run.id} is waiting for call "
                       f"{pending.tool_call_id} ({pending.name}), not {tool_call_id}")
    if arguments_hash is not None and arguments_hash != pending.arguments_hash:
        raise RunError("stale_approval", f"the arguments of {pending.name} changed since "
                       "the prompt was shown; decide on the current prompt")
    decision = Decision(tool_call_id=tool_call_id, approve=approve, by=by, reason=reason,
                        arguments_hash=pending.arguments_hash, at=now)
    verb = "approved" if approve else "denied"
    target = S.AWAITING_TOOL if run.state is S.AWAITING_APPROVAL else S.QUEUED
    return transition(
        run, target, f"{verb} by {by or 'someone'}: {pending.name}", now=now,
        decisions=(*run.decisions, decision), pending_approval=None, owner=owner,
        error=None, version=run.version + 1)


def asked_again(run: Run, own: Sequence[Entry], steps: Sequence[Transition], *,
                now: float) -> AssistantTurn | None:
    """What a resumed run adds before it goes on: for a run cancelled while it waited for a
    person's approval, the calls the cancellation answered ``cancelled`` (the one waiting,
    and those after it in its turn) made anew, with new ids, in a turn of their own, so
    that they go through the gate again and the person is asked again. ``None`` for any
    other resume: the run goes on from its last checkpoint (the model sees a cut-off
    call's ``cancelled`` result; a call whose approval timed out has no result, and is
    asked about again as it is).

    ``own``: the run's entries; ``steps``: its transitions, the newest last."""
    if len(steps) < 2:
        return None
    cancelled, resumed = steps[-2], steps[-1]
    if (cancelled.source, cancelled.target, resumed.target) != (
            S.AWAITING_APPROVAL, S.CANCELLED, S.QUEUED):
        return None
    turn = next((e for e in reversed(own) if isinstance(e, AssistantTurn) and e.tool_calls),
                None)
    if turn is None:
        return None
    cut = {e.tool_call_id for e in own if isinstance(e, ToolResult) and _cancelled(e)}
    calls = tuple(ToolCall(id=f"{c.id}-again{len(own)}", name=c.name, arguments=c.arguments)
                  for c in turn.tool_calls if c.id in cut)
    return AssistantTurn(run_id=run.id, tool_calls=calls, at=now) if calls else None


def _cancelled(result: ToolResult) -> bool:
    error = result.content.get("error") if isinstance(result.content, dict) else None
    return result.is_error and isinstance(error, dict) and error.get("type") == "cancelled"


def requeue(run: Run, *, now: float) -> tuple[Run, Transition]:
    """A failed, cancelled or timed-out run queued again from its last checkpoint;
    ``RunError("not_resumable")`` for a completed run or one that has not stopped."""
    if run.state is S.COMPLETED:
        raise RunError("not_resumable", f"run {run.id} completed; completed runs cannot "
                       "be resumed (send a new message instead)")
    if not run.terminal:
        raise RunError("not_resumable", f"run {run.id} is {run.state}: it has not stopped")
    return transition(run, S.QUEUED, "resumed by request", now=now, error=None,
                      version=run.version + 1)
