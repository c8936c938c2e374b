"""Which run waits behind which: the console says "queued behind run X" rather than a state
that reads as if the run were moving.

A run approved while another run holds the runtime's lock (``concurrency = "global"``: one
loop at a time in the process; or an older run on its own thread) is ``awaiting_tool`` until
it gets the lock: its state alone says its tool is running. What tells the two apart is
whether the runtime drives it now (``Runtime.holds``), which the runtime's public API says.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from runtime import Run, RunState

__all__ = ["WAITING", "queued_behind"]

WAITING = frozenset({RunState.QUEUED, RunState.AWAITING_TOOL})
"""States in which a run that no one drives is waiting for its turn."""


def queued_behind(active: Sequence[Run], driven: Callable[[str], bool], *,
                  one_at_a_time: bool) -> dict[str, Run]:
    """For each run of ``active`` (unfinished runs, oldest first) that waits its turn, the
    run it waits behind: the oldest unfinished run of its thread (a thread's runs go in
    order), else, with ``one_at_a_time``, the run the process drives now."""
    driving = [r for r in active if driven(r.id)]
    first: dict[str, Run] = {}
    for run in active:
        first.setdefault(run.thread_id, run)
    behind: dict[str, Run] = {}
    for run in active:
        if run.state not in WAITING or driven(run.id):
            continue
        ahead = first[run.thread_id]
        if ahead.id != run.id:
            behind[run.id] = ahead
        elif one_at_a_time and driving:
            behind[run.id] = driving[0]
    return behind
