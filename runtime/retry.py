"""Trying again after a failure: one backoff and one loop, for the providers, the channels,
the downloads of shared files, the MCP servers' restarts and `maiden run`'s start.

A pause doubles from a first one up to a longest (``doubling``); where many clients may
knock at once, half of it is random (``jittered``); where the other side said how long
to wait (``Retry-After``), that wins. ``retrying`` makes a call again after each failure
of the kind it is told, for as long as its ``pause`` gives a number of seconds, and tells
each pause before it sleeps it. What to try again, for how long, and what to say are the
caller's: each decides in its own ``pause`` and ``told`` (``within``: for some seconds at
most).

tenacity and stamina were weighed: both would need our arithmetic on top (the half-random
pause, a Retry-After read from the error, a deadline that shortens the last pause, a try
that failed before the loop began), so the loop is these few lines instead.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["Backoff", "Failed", "Sleep", "doubling", "jittered", "retrying", "within"]

T = TypeVar("T")
E = TypeVar("E", bound=Exception)

Sleep = Callable[[float], Awaitable[None]]


def doubling(failures: int, first_s: float, longest_s: float) -> float:
    """The pause after ``failures`` failed tries before this one (from 0): ``first_s``,
    doubled each time, up to ``longest_s`` (however many tries failed)."""
    return min(longest_s, first_s * 2.0 ** min(failures, 60))


def jittered(pause: float, random: Callable[[], float]) -> float:
    """Half of ``pause`` fixed, half random: clients restarted together do not knock in
    step, and none tries again at once."""
    return pause / 2 + random() * pause / 2


@dataclass(frozen=True, slots=True)
class Backoff:
    """How long to wait between attempts: doubling, jittered. ``sleep`` and ``random`` are
    injectable for tests."""

    base_s: float = 1.0
    max_s: float = 60.0
    sleep: Sleep = asyncio.sleep
    random: Callable[[], float] = random.random

    def delay(self, attempt: int) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (counting from 0)."""
        return jittered(doubling(attempt, self.base_s, self.max_s), self.random)


@dataclass(frozen=True, slots=True)
class Failed(Generic[E]):
    """A try that failed: its error, the tries failed so far (this one included, from 1),
    and the seconds paused before it."""

    error: E
    tries: int
    waited_s: float


def within(wait_s: float, first_s: float, longest_s: float,
           worth: Callable[[E], bool] | None = None) -> Callable[[Failed[E]], float | None]:
    """A ``pause`` for ``retrying``: after an error ``worth`` it, doubling from ``first_s``
    up to ``longest_s``, for ``wait_s`` seconds from now at most (the last pause cut to
    what is left)."""
    deadline = time.monotonic() + wait_s

    def pause(failed: Failed[E]) -> float | None:
        left = deadline - time.monotonic()
        if (worth is not None and not worth(failed.error)) or left <= 0:
            return None
        return min(doubling(failed.tries - 1, first_s, longest_s), left)

    return pause


def _untold(failed: Failed[E], pause: float) -> None:
    """No one told of a pause."""


async def retrying(
    call: Callable[[], Awaitable[T]], *, on: type[E],
    pause: Callable[[Failed[E]], float | None],
    told: Callable[[Failed[E], float], None] = _untold,
    sleep: Sleep = asyncio.sleep, first: E | None = None,
) -> T:
    """``call()``, made again after each failure with an ``on`` error, once ``pause`` of
    it has passed; ``pause`` returning None gives up: the error is raised (or ``pause``
    raises what the caller gives up with). ``told`` of each pause before it is slept.
    ``first``: a try made before the loop failed so. Any other error is raised at once."""
    tries, waited_s = 0, 0.0
    error = first
    while True:
        if error is not None:
            tries += 1
            failed = Failed(error, tries, waited_s)
            seconds = pause(failed)
            if seconds is None:
                raise error
            told(failed, seconds)
            await sleep(seconds)
            waited_s += seconds
        try:
            return await call()
        except on as exc:
            error = exc
