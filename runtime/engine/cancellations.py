"""Why a run's task is being cancelled: said by whoever cancels it, read by whoever ends
the run.

A task's cancellation carries no reason of ours: ``Workers.cut_off`` notes it here before
it cancels the task, and the run's driver (or the worker, when the task was cut off before
its driver began) takes it to end the run ``cancelled``. A cancellation with no reason
noted is a shutdown: the run stays for the next start.
"""

from __future__ import annotations

__all__ = ["Cancellations"]


class Cancellations:
    """The runs whose task is being cancelled on purpose, and why (one per runtime, shared
    by its agents' drivers)."""

    def __init__(self) -> None:
        self._reasons: dict[str, str] = {}

    def note(self, run_id: str, reason: str) -> None:
        """The run's task is about to be cancelled, for ``reason``."""
        self._reasons[run_id] = reason

    def pop(self, run_id: str) -> str | None:
        """Why the run's task was cancelled (forgotten now); None if not on purpose."""
        return self._reasons.pop(run_id, None)
