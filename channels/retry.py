"""Reaching a chat platform that may be down: capped exponential backoff with jitter
(the runtime's ``Backoff`` and ``retrying``).

A platform that cannot be reached at boot (DNS, a refused connection, a 5xx) is a
fault, not a mistake in the config: `maiden run` serves everything else while the
channel keeps trying, and says so (banner, ``/healthz``, the console). A platform that
answers and says no (a refused token, a missing scope or intent) is a configuration
problem that no retry fixes: ``ChannelRefused``, one line and exit 2.
"""

from __future__ import annotations

import contextlib
import logging
import socket
from collections.abc import Awaitable, Callable
from typing import TypeVar

from runtime import Backoff, MaidenError, Runtime, retrying

from .base import Link

__all__ = ["Backoff", "ChannelRefused", "Reach", "Unreachable", "keep_trying", "reason_of"]

T = TypeVar("T")


class ChannelRefused(MaidenError):
    """The platform answered and refused the configuration: a token, a scope, an intent."""


class Unreachable(MaidenError):
    """The platform did not answer (or answered "try later"); the reason, in a few words."""


async def keep_trying(
    attempt: Callable[[], Awaitable[T]], backoff: Backoff,
    failed: Callable[[str, float], None], *, first: Unreachable | None = None,
) -> T:
    """``attempt()`` until it does not raise ``Unreachable``; ``failed(reason, delay)`` is
    told each time before the wait (``first``: an attempt made already failed so). Anything
    else ``attempt`` raises (``ChannelRefused``) ends the trying."""
    return await retrying(attempt, on=Unreachable,
                          pause=lambda tried: backoff.delay(tried.tries - 1),
                          told=lambda tried, delay: failed(str(tried.error), delay),
                          sleep=backoff.sleep, first=first)


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


class Reach:
    """Where a chat channel stands with its platform: ``problem``, the reason it is not
    connected (None: it is), said in its banner and status, and on its ``link`` (made not
    connected yet), so that its deliverer refuses fast meanwhile (the outbox keeps the
    replies); ``retry`` keeps trying in the background."""

    def __init__(self, name: str, runtime: Runtime, link: Link, *, max_s: float,
                 log: logging.Logger) -> None:
        self._name = name
        self._runtime = runtime
        self._link = link
        self._max_s = max_s
        self._log = log
        self.problem: str | None = None

    def down(self, reason: str) -> None:
        self.problem = reason
        self._link.down(f"not connected yet ({reason})")

    def up(self) -> None:
        self.problem = None
        self._link.up()

    def banner(self) -> str | None:
        """The banner's line while not connected."""
        if self.problem is None:
            return None
        return (f"connecting: {self.problem} (trying again, up to every {self._max_s:g} s; "
                "replies wait in the outbox)")

    async def retry(self, attempt: Callable[[], Awaitable[None]], first: Unreachable, *,
                    banner: Callable[[], str]) -> MaidenError | None:
        """``attempt`` again and again, backing off, after ``first`` failed: None once it
        connects (what waited in the outbox goes out then); what refused it otherwise
        (logged: the channel stops)."""
        try:
            await keep_trying(attempt, Backoff(max_s=self._max_s), self._waiting, first=first)
        except MaidenError as exc:
            self._log.error("%s: %s; the channel stops", self._name, exc)
            return exc
        self._log.info("%s: connected: %s", self._name, banner())
        with contextlib.suppress(MaidenError):
            await self._runtime.operator.flush_deliveries()  # what waited in the outbox, now
        return None

    def _waiting(self, reason: str, delay: float) -> None:
        self.down(reason)
        self._log.warning("%s: %s; serving everything else, trying again in %.1f s",
                          self._name, reason, delay)
