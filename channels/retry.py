"""Reaching a chat platform that may be down: capped exponential backoff with jitter.

A platform that cannot be reached at boot (DNS, a refused connection, a 5xx) is a
fault, not a mistake in the config: `maiden run` serves everything else while the
channel keeps trying, and says so (banner, ``/healthz``, the console). A platform that
answers and says no (a refused token, a missing scope or intent) is a configuration
problem that no retry fixes: ``ChannelRefused``, one line and exit 2.
"""

from __future__ import annotations

import asyncio
import random
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from runtime import MaidenError

__all__ = ["Backoff", "ChannelRefused", "Unreachable", "keep_trying", "reason_of"]

T = TypeVar("T")


class ChannelRefused(MaidenError):
    """The platform answered and refused the configuration: a token, a scope, an intent."""


class Unreachable(Exception):
    """The platform did not answer (or answered "try later"); the reason, in a few words."""


@dataclass(frozen=True, slots=True)
class Backoff:
    """How long to wait between attempts. ``sleep`` and ``random`` are injectable for tests."""

    base_s: float = 1.0
    max_s: float = 60.0
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    random: Callable[[], float] = random.random

    def delay(self, attempt: int) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (counting from 0)."""
        cap = min(self.max_s, self.base_s * 2.0 ** min(attempt, 60))
        # Half fixed, half random: replicas restarted together do not knock in step.
        return cap / 2 + self.random() * cap / 2


async def keep_trying(
    attempt: Callable[[], Awaitable[T]], backoff: Backoff,
    failed: Callable[[str, float], None], *, first: Unreachable | None = None,
) -> T:
    """``attempt()`` until it does not raise ``Unreachable``; ``failed(reason, delay)`` is
    told each time before the wait (``first``: an attempt made already failed so). Anything
    else ``attempt`` raises (``ChannelRefused``) ends the trying."""
    tries = 0
    error = first
    while True:
        if error is not None:
            delay = backoff.delay(tries)
            failed(str(error), delay)
            tries += 1
            await backoff.sleep(delay)
        try:
            return await attempt()
        except Unreachable as exc:
            error = exc


def reason_of(exc: BaseException) -> str:
    """A connection failure in a few words: the OS's reason, not aiohttp's text (which
    repeats the host and port the caller names already)."""
    inner = getattr(exc, "os_error", None) or exc.__cause__ or exc
    if isinstance(inner, ConnectionRefusedError):
        return "connection refused"
    if isinstance(inner, socket.gaierror):
        return f"name not resolved ({inner.strerror})"
    if isinstance(inner, TimeoutError):
        return "timed out"
    if isinstance(inner, OSError) and inner.strerror:
        return inner.strerror
    return f"{type(inner).__name__}: {inner}" if str(inner) else type(inner).__name__
