"""When a file a platform announced can be fetched: the decisions, without I/O.

A run's announced files are downloaded by their channel's fetcher, which the runtime is
built with (`maiden run`'s has its channels'; a command that opens no channels has none).
A queued run whose files come from a channel this process is configured for, but whose
fetcher it has not, therefore waits for a runtime that has it (``fetcher_awaited``)
instead of having its files refused. A download that finds the platform out of reach (no
connection, a 5xx) is tried again with backoff (``Patience``) instead of being refused,
for a while.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Collection
from dataclasses import dataclass

from ..model.runs import Run, RunState
from ..retry import Sleep, doubling, jittered

__all__ = ["Patience", "fetcher_awaited"]


def fetcher_awaited(run: Run, fetching: Collection[str], expected: Collection[str]
                    ) -> str | None:
    """The channel whose fetcher ``run`` waits for before it may start: one its announced
    files come from that has no fetcher here (``fetching``) and will bring one
    (``expected``: the channels configured here). None if the run may go: it is past
    taking its files in, each of them can be fetched, or one comes from a channel that is
    not configured here (refused, saying so)."""
    if run.state is not RunState.QUEUED or run.started_at is not None:
        return None
    for source in run.fetch:
        if source.via not in fetching and source.via in expected:
            return source.via
    return None


@dataclass(frozen=True, slots=True)
class Patience:
    """How a download is tried again while its platform cannot be reached: capped
    exponential backoff with jitter (or the wait the platform asked for), until
    ``give_up_s`` seconds of waiting are spent. ``sleep`` and ``random`` are injectable
    for tests."""

    base_s: float = 1.0
    max_s: float = 60.0
    give_up_s: float = 3600.0
    sleep: Sleep = asyncio.sleep
    random: Callable[[], float] = random.random

    def delay(self, attempt: int, waited_s: float, asked_s: float | None = None
              ) -> float | None:
        """Seconds to wait after failed attempt number ``attempt`` (from 0), ``waited_s``
        having been waited already (``asked_s``: the platform's Retry-After); None: give
        up."""
        if waited_s >= self.give_up_s:
            return None
        wait = jittered(doubling(attempt, self.base_s, self.max_s), self.random)
        if asked_s is not None:
            wait = max(wait, min(asked_s, self.max_s))
        return min(wait, self.give_up_s - waited_s)
