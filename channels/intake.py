"""Taking in a message from a platform that delivers it once (Discord: no acknowledgement,
no redelivery): while the store is out of reach (a database cut, a server restarting), the
message is submitted again until it is taken, for a while, instead of being dropped.

Trying again is safe: the message's idempotency key makes a submit that did reach the
store before its answer was lost come back with the same run. A thread's messages are
taken one at a time, in the order they came (a FIFO lock per thread), so a message tried
again is not overtaken by the next one of its thread. Nothing is kept to be written later:
a message not taken within ``wait_s`` is not taken, and the channel says so to the
person, who sends it again. A store that is gone (``StoreGone``) is not waited for.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from runtime import Failed, Run, Runtime, StoreError, StoreGone, retrying, within

__all__ = ["NOT_TAKEN", "WAIT_S", "Intake"]

log = logging.getLogger("maiden.channels")

WAIT_S = 60.0
"""How long a message is tried again while the store is out of reach."""

NOT_TAKEN = ("I could not take this message: my storage is out of reach right now. "
             "Please send it again in a minute.")
"""What the person is told of a message not taken."""


class Intake:
    """``submit`` for one channel, trying again while the store is out of reach."""

    def __init__(self, runtime: Runtime, name: str, *, wait_s: float = WAIT_S,
                 first_pause_s: float = 0.25, longest_pause_s: float = 5.0,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self._runtime = runtime
        self._name = name
        self._wait_s = wait_s
        self._pauses = first_pause_s, longest_pause_s
        self._sleep = sleep
        self._threads: dict[str, tuple[asyncio.Lock, int]] = {}
        """Per thread: the lock its messages are taken under, and how many want it."""

    async def submit(self, thread_id: str, text: str, **fields: Any) -> Run:
        """``Runtime.submit``, after the thread's earlier messages; a ``StoreError`` other
        than ``StoreGone`` is tried again for ``wait_s``, then raised."""
        lock, waiting = self._threads.get(thread_id, (asyncio.Lock(), 0))
        self._threads[thread_id] = lock, waiting + 1
        try:
            async with lock:
                return await self._submit(thread_id, text, fields)
        finally:
            lock, waiting = self._threads[thread_id]
            if waiting == 1:
                del self._threads[thread_id]
            else:
                self._threads[thread_id] = lock, waiting - 1

    async def _submit(self, thread_id: str, text: str, fields: dict[str, Any]) -> Run:
        def told(failed: Failed[StoreError], seconds: float) -> None:
            log.warning("%s: a message to thread %r not taken yet (%s); trying again in "
                        "%.1f s", self._name, thread_id, failed.error, seconds)

        pause = within(self._wait_s, *self._pauses,
                       worth=lambda error: not isinstance(error, StoreGone))
        return await retrying(lambda: self._runtime.submit(thread_id, text, **fields),
                              on=StoreError, pause=pause, told=told, sleep=self._sleep)
