"""The rules of decide and resume (``runtime/model/decisions.py``) as tables: which requests apply
to a run as it stands, and the run each leaves."""

from __future__ import annotations

import pytest

from runtime.errors import RunError
from runtime.model.decisions import approve_call, asked_again, requeue
from runtime.model.entries import AssistantTurn, Entry, ToolCall, ToolResult, UserMessage
from runtime.model.runs import PendingApproval, Run, RunState, Transition

S = RunState
PENDING = PendingApproval(tool_call_id="c1", name="deploy", arguments_hash="h1",
                          reason="requires_approval", requested_at=1.0)


def run(state: RunState, *, reason: str = "", pending: PendingApproval | None = PENDING) -> Run:
    return Run(id="r1", thread_id="t1", text="go", state=state, reason=reason,
               pending_approval=pending, version=4, error="before")


@pytest.mark.parametrize(("before", "approve", "target", "says"), [
    (run(S.AWAITING_APPROVAL), True, S.AWAITING_TOOL, "approved by U2: deploy"),
    (run(S.AWAITING_APPROVAL), False, S.AWAITING_TOOL, "denied by U2: deploy"),
    (run(S.TIMED_OUT, reason="approval_timeout"), True, S.QUEUED, "approved by U2: deploy"),
])
def test_a_decision_on_the_pending_call(before: Run, approve: bool, target: RunState,
                                        says: str) -> None:
    moved, step = approve_call(before, "c1", approve=approve, by="U2", reason="ok",
                               arguments_hash="h1", now=9.0, owner="me")
    assert (moved.state, moved.reason, step.source, step.target, step.at) == (
        target, says, before.state, target, 9.0)
    assert (moved.pending_approval, moved.owner, moved.error, moved.version) == (
        None, "me", None, 5)
    [decision] = moved.decisions
    assert (decision.tool_call_id, decision.approve, decision.by, decision.reason,
            decision.arguments_hash, decision.at) == ("c1", approve, "U2", "ok", "h1", 9.0)


@pytest.mark.parametrize(("before", "call", "shown", "error", "words"), [
    (run(S.RUNNING, pending=None), "c1", None, "not_awaiting_approval",
     "run r1 is running, not awaiting approval"),
    (run(S.AWAITING_APPROVAL, pending=None), "c1", None, "not_awaiting_approval",
     "not awaiting approval"),
    (run(S.TIMED_OUT, reason="max_wall"), "c1", None, "not_awaiting_approval",
     "run r1 is timed_out"),
    (run(S.AWAITING_APPROVAL), "c2", None, "stale_approval",
     r"waiting for call c1 \(deploy\), not c2"),
    (run(S.AWAITING_APPROVAL), "c1", "h0", "stale_approval",
     "the arguments of deploy changed since the prompt was shown"),
])
def test_a_decision_that_does_not_apply(before: Run, call: str, shown: str | None,
                                        error: str, words: str) -> None:
    with pytest.raises(RunError, match=words) as caught:
        approve_call(before, call, approve=True, by="U2", reason="", arguments_hash=shown,
                     now=9.0, owner="me")
    assert caught.value.reason == error


@pytest.mark.parametrize("state", [S.FAILED, S.CANCELLED, S.TIMED_OUT])
def test_a_stopped_run_is_queued_again(state: RunState) -> None:
    moved, step = requeue(run(state, pending=None), now=9.0)
    assert (moved.state, moved.reason, moved.error, moved.version, step.source) == (
        S.QUEUED, "resumed by request", None, 5, state)


@pytest.mark.parametrize(("state", "words"), [
    (S.COMPLETED, "completed runs cannot be resumed"),
    (S.QUEUED, "is queued: it has not stopped"),
    (S.RUNNING, "is running: it has not stopped"),
    (S.AWAITING_TOOL, "is awaiting_tool: it has not stopped"),
    (S.AWAITING_APPROVAL, "is awaiting_approval: it has not stopped"),
])
def test_a_run_that_cannot_be_resumed(state: RunState, words: str) -> None:
    with pytest.raises(RunError, match=words) as caught:
        requeue(run(state), now=9.0)
    assert caught.value.reason == "not_resumable"


def step(source: RunState, target: RunState) -> Transition:
    return Transition(run_id="r1", source=source, target=target, reason="", at=1.0)


def result(call: str, kind: str | None) -> ToolResult:
    content = {"error": {"type": kind, "message": kind}} if kind else "done"
    return ToolResult(run_id="r1", tool_call_id=call, name="deploy", content=content,
                      is_error=kind is not None)


CALLS = (ToolCall(id="c0", name="lookup", arguments={"q": "x"}),
         ToolCall(id="c1", name="deploy", arguments={"service": "api"}),
         ToolCall(id="c2", name="deploy", arguments={"service": "db"}))
# c0 ran; c1 waited for its approval when the run was cancelled; c2 was to come after it.
OWN: list[Entry] = [UserMessage(run_id="r1", text="go"),
                    AssistantTurn(run_id="r1", tool_calls=CALLS),
                    result("c0", None), result("c1", "cancelled"), result("c2", "cancelled")]
CANCELLED_WAITING = [step(S.QUEUED, S.RUNNING), step(S.RUNNING, S.AWAITING_TOOL),
                     step(S.AWAITING_TOOL, S.AWAITING_APPROVAL),
                     step(S.AWAITING_APPROVAL, S.CANCELLED), step(S.CANCELLED, S.QUEUED)]


def test_a_run_cancelled_while_it_waited_for_approval_asks_again_once_resumed() -> None:
    again = asked_again(run(S.QUEUED, pending=None), OWN, CANCELLED_WAITING, now=7.0)
    assert again is not None and (again.run_id, again.text, again.at) == ("r1", "", 7.0)
    assert [(c.id, c.name, c.arguments) for c in again.tool_calls] == [
        ("c1-again5", "deploy", {"service": "api"}), ("c2-again5", "deploy", {"service": "db"})]


@pytest.mark.parametrize(("steps", "own"), [
    # cancelled while a tool ran: the model sees the cut-off call's result
    ([step(S.AWAITING_TOOL, S.CANCELLED), step(S.CANCELLED, S.QUEUED)], OWN),
    # failed, or timed out waiting (its call has no result: the gate asks again as it is)
    ([step(S.RUNNING, S.FAILED), step(S.FAILED, S.QUEUED)], OWN),
    ([step(S.AWAITING_APPROVAL, S.TIMED_OUT), step(S.TIMED_OUT, S.QUEUED)], OWN[:3]),
    # not resumed (yet)
    (CANCELLED_WAITING[:-1], OWN),
    # no call was cut off
    (CANCELLED_WAITING, OWN[:1]),
    (CANCELLED_WAITING, [*OWN[:3], result("c1", "denied"), result("c2", None)]),
])
def test_any_other_resume_goes_on_from_its_checkpoint(steps: list[Transition],
                                                      own: list[Entry]) -> None:
    assert asked_again(run(S.QUEUED, pending=None), own, steps, now=7.0) is None
