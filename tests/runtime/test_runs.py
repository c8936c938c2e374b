"""A run's transitions, by table: which moves are allowed, and completed is final."""

from __future__ import annotations

import pytest

from runtime import IllegalTransition, Run, RunState
from runtime.runs import transition

S = RunState
ALLOWED = {
    (S.QUEUED, S.RUNNING), (S.QUEUED, S.FAILED), (S.QUEUED, S.CANCELLED),
    (S.RUNNING, S.RUNNING), (S.RUNNING, S.AWAITING_TOOL), (S.RUNNING, S.AWAITING_APPROVAL),
    (S.RUNNING, S.COMPLETED), (S.RUNNING, S.FAILED), (S.RUNNING, S.CANCELLED),
    (S.RUNNING, S.TIMED_OUT),
    (S.AWAITING_TOOL, S.RUNNING), (S.AWAITING_TOOL, S.AWAITING_APPROVAL),
    (S.AWAITING_TOOL, S.FAILED), (S.AWAITING_TOOL, S.CANCELLED), (S.AWAITING_TOOL, S.TIMED_OUT),
    (S.AWAITING_APPROVAL, S.RUNNING), (S.AWAITING_APPROVAL, S.AWAITING_TOOL),
    (S.AWAITING_APPROVAL, S.FAILED), (S.AWAITING_APPROVAL, S.CANCELLED),
    (S.AWAITING_APPROVAL, S.TIMED_OUT),
    (S.FAILED, S.QUEUED), (S.CANCELLED, S.QUEUED), (S.TIMED_OUT, S.QUEUED),
}


@pytest.mark.parametrize("source", list(S))
@pytest.mark.parametrize("target", list(S))
def test_transition_table(source: RunState, target: RunState) -> None:
    run = Run(id="r" * 32, thread_id="t", text="hi", state=source)
    if (source, target) in ALLOWED:
        moved, step = transition(run, target, "because", now=5.0)
        assert moved.state is target and moved.reason == "because"
        assert (step.source, step.target, step.reason, step.at) == (source, target, "because", 5.0)
    else:
        with pytest.raises(IllegalTransition):
            transition(run, target, "because")


def test_completed_is_final() -> None:
    run = Run(id="r" * 32, thread_id="t", text="hi", state=S.COMPLETED)
    assert run.terminal
    for target in S:
        with pytest.raises(IllegalTransition):
            transition(run, target, "x")
