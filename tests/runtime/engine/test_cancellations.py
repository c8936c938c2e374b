"""Cancellations (runtime/engine/cancellations.py): the reason a run's task is cancelled,
noted by whoever cancels it and taken once by whoever ends the run."""

from __future__ import annotations

from runtime.engine.cancellations import Cancellations


def test_a_noted_reason_is_taken_once() -> None:
    cancellations = Cancellations()
    cancellations.note("r1", "stopped by ann")
    assert cancellations.pop("r1") == "stopped by ann"
    assert cancellations.pop("r1") is None  # forgotten once taken


def test_a_cancellation_with_no_reason_noted_is_a_shutdown() -> None:
    cancellations = Cancellations()
    cancellations.note("r1", "timeout")
    assert cancellations.pop("r2") is None
    assert cancellations.pop("r1") == "timeout"  # another run's pop left it


def test_the_last_reason_noted_for_a_run_is_the_one_taken() -> None:
    cancellations = Cancellations()
    cancellations.note("r1", "timeout")
    cancellations.note("r1", "cancelled by ann")
    assert cancellations.pop("r1") == "cancelled by ann"
    assert cancellations.pop("r1") is None
