"""A coroutine run to its end within a time limit, its first step taken at once.

A tool call that returns without waiting (a lookup in memory, a read of the store made
on the loop's thread) cannot be timed out, since a timeout only acts where the call
waits: it needs no timer. Only a call that waits is awaited under ``asyncio.timeout_at``,
with the deadline its call began with.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Generator
from typing import Any, Generic, TypeVar, cast

__all__ = ["within"]

T = TypeVar("T")


async def within(coro: Coroutine[Any, Any, T], timeout_s: float) -> T:
    """``await coro``, raising ``TimeoutError`` (and cancelling it) after ``timeout_s``."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    try:
        waits_on = coro.send(None)
    except StopIteration as done:
        return cast(T, done.value)
    async with asyncio.timeout_at(deadline):
        return await _Resumed(coro, waits_on)


class _Resumed(Generic[T]):
    """A coroutine that has taken its first step, awaited from there on: what ``await``
    does with a fresh one (each future it waits on goes to the task, and what the task
    sends or throws in, a result or a cancellation, goes to it)."""

    __slots__ = ("_coro", "_waits_on")

    def __init__(self, coro: Coroutine[Any, Any, T], waits_on: Any) -> None:
        self._coro = coro
        self._waits_on = waits_on

    def __await__(self) -> Generator[Any, Any, T]:
        coro, waits_on = self._coro, self._waits_on
        try:
            while True:
                try:
                    sent = yield waits_on
                except GeneratorExit:
                    coro.close()
                    raise
                except BaseException as exc:  # a cancellation, above all: it is the call's
                    waits_on = coro.throw(exc)
                else:
                    waits_on = coro.send(sent)
        except StopIteration as done:
            return cast(T, done.value)
