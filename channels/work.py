"""What chat channels do beside taking messages, written once: background steps that are
kept track of, and `stop` in a thread."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

from runtime import MaidenError, Runtime

__all__ = ["STOP_WORDS", "Background", "is_stop", "stop_thread"]

STOP_WORDS = frozenset({"stop", "cancel"})


def is_stop(text: str) -> bool:
    """``stop`` (or ``cancel``), however punctuated: the person wants the run to end."""
    return text.lower().strip(" .!") in STOP_WORDS


async def stop_thread(runtime: Runtime, thread_id: str, by: str, key: str) -> None:
    """Stop the thread's run that goes first, if any: the stop is written before this
    returns, so that a platform acknowledges it only then (``Runtime.stop``: a process
    killed right after still cancels the run at its next start, and ``key``, the message's
    identity, makes a platform's retry of it stop nothing more); the run is cancelled in
    the background (its tools stop where they run). What the store raises is raised."""
    active = await runtime.records.active_run(thread_id)
    if active is not None:
        await runtime.stop(active.id, by=by, key=key)


class Background:
    """Steps a channel starts and does not wait for (a status, a stop): each is kept until
    it ends, a failure is logged, and ``close`` cancels and awaits what is left."""

    def __init__(self, log: logging.Logger, name: str) -> None:
        self._log = log
        self._name = name
        self._tasks: set[asyncio.Task[None]] = set()

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        async def run() -> None:
            try:
                await coro
            except MaidenError as exc:  # said why (the store out of reach): one line
                self._log.warning("%s: a background step stopped: %s", self._name, exc)
            except Exception:
                self._log.exception("%s: a background step failed", self._name)

        task = asyncio.create_task(run(), name=self._name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        # Cancelled before it began (closing at once): the step is dropped, not left
        # "never awaited".
        task.add_done_callback(lambda done: coro.close() if done.cancelled() else None)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
