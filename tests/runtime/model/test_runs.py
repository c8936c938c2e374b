"""A run's transitions, by table: which moves are allowed, and completed is final."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from runtime import IllegalTransition, Run, RunState
from runtime.model.runs import changed, transition

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


def test_a_moved_run_is_what_pydantic_would_copy() -> None:
    """``transition`` and ``changed`` copy a run directly, not through ``model_copy``: the
    same run, fields set and all (a row keeps only the fields set), frozen as before, and
    the original untouched."""
    run = Run(id="r" * 32, thread_id="t", text="hi", turns=2, created_at=1.0, updated_at=1.0)
    moved, _ = transition(run, S.RUNNING, "started", now=5.0, turns=3, reply=None)
    copied = run.model_copy(update={"state": S.RUNNING, "reason": "started", "turns": 3,
                                    "reply": None, "updated_at": 5.0})
    assert moved == copied and type(moved) is Run
    assert moved.model_fields_set == copied.model_fields_set
    assert moved.model_dump_json(exclude_unset=True) == copied.model_dump_json(exclude_unset=True)
    assert moved.__pydantic_extra__ is None and moved.__pydantic_private__ is None
    assert (run.state, run.turns, run.updated_at) == (S.QUEUED, 2, 1.0)
    assert changed(moved, 6.0, tool_calls=1) == moved.model_copy(
        update={"tool_calls": 1, "updated_at": 6.0})
    with pytest.raises(ValidationError):
        moved.turns = 4  # type: ignore[misc]
    with pytest.raises(TypeError, match="not a field a checkpoint may change: state"):
        changed(moved, 6.0, **{"state": S.FAILED})  # type: ignore[arg-type]
