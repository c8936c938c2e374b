"""Workload 9's hand-offs, from what the users saw and what the store holds: for each message,
the time from its acceptance (its run's ``created_at``, stamped by the replica that took the
message) to its run's start (``started_at``, stamped by the replica that drove it), the
thread's previous message run by the same replica or by another (a hand-off); and the time
from the run's end (its last ``updated_at``) to the user having the reply.

Under ``concurrency = "global"`` a replica runs one run at a time: a message waits for the
runs of other threads before it on its replica (their model calls), which is not a
hand-off's cost. There the wait counts from when the replica that drove the run was free
(the end of its run before), if that came after the acceptance.

A pure function over rows, so that it is tested with a table; the replicas run on this
machine, so their clocks and the bench's are one.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

__all__ = ["Answered", "Handoffs", "RunTimes", "handoffs", "percentile"]


@dataclass(frozen=True)
class Answered:
    """A message as its user saw it: the ``index``-th of ``thread``, sent to ``replica``
    (its index), answered at ``at`` (the bench's ``time.time()``)."""

    thread: str
    index: int
    replica: int
    at: float


@dataclass(frozen=True)
class RunTimes:
    """A run as the store holds it."""

    thread: str
    created_at: float
    started_at: float | None
    ended_at: float
    owner: str | None
    """The runtime instance that drove it last."""


@dataclass
class Handoffs:
    handoff_ms: list[float] = field(default_factory=list)
    """Acceptance to start, for messages whose thread's previous message another replica
    ran."""
    same_ms: list[float] = field(default_factory=list)
    """Acceptance to start, for the others (a thread's first message, or the previous one
    run by the replica that took this one)."""
    reply_ms: list[float] = field(default_factory=list)
    """A run's end to its user having the reply."""
    elsewhere: int = 0
    """Runs that a replica other than the one that took their message drove."""
    unmatched: int = 0
    """Threads left out: their runs are not one a message (a failed message)."""


def handoffs(answered: Sequence[Answered], runs: Sequence[RunTimes],
             replica_of: Mapping[str, int], *, one_at_a_time: bool = False) -> Handoffs:
    """``answered``: every message of a phase; ``runs``: its threads' runs, oldest first
    (each thread's ``i``-th run is its ``i``-th message: each user waits for a reply);
    ``replica_of``: each instance id, the replica it is; ``one_at_a_time``: each replica
    runs one run at a time (``concurrency = "global"``)."""
    found = Handoffs()
    by_thread: dict[str, list[RunTimes]] = {}
    ends: dict[str | None, list[float]] = {}
    for run in runs:
        by_thread.setdefault(run.thread, []).append(run)
        ends.setdefault(run.owner, []).append(run.ended_at)
    for each in ends.values():
        each.sort()
    messages: dict[str, dict[int, Answered]] = {}
    for message in answered:
        messages.setdefault(message.thread, {})[message.index] = message
    for thread, sent in messages.items():
        ran = by_thread.get(thread, [])
        if sorted(sent) != list(range(len(ran))):
            found.unmatched += 1
            continue
        for i, run in enumerate(ran):
            message = sent[i]
            drove = replica_of.get(run.owner or "")
            if drove is not None and drove != message.replica:
                found.elsewhere += 1
            found.reply_ms.append((message.at - run.ended_at) * 1000)
            if run.started_at is None:
                continue
            ready = run.created_at
            if one_at_a_time:  # from when its replica was free, if later
                done = ends[run.owner]
                k = bisect.bisect_right(done, run.started_at)
                ready = max(ready, done[k - 1] if k else ready)
            waited = (run.started_at - ready) * 1000
            before = replica_of.get(ran[i - 1].owner or "") if i else None
            if before is not None and before != message.replica:
                found.handoff_ms.append(waited)
            else:
                found.same_ms.append(waited)
    return found


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank ``q`` percentile (0 < q <= 100); nan for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]
