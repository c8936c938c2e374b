"""Keys each due at a time, on one timer for them all (``Deadlines``).

A timer per key, set at every message and cancelled by the next, costs a timer handle,
its place in the loop's heap and the heap's clean-up of cancelled ones; a dict of due
times and one timer, due when the first is, cost a dict entry.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable, Iterator
from typing import Generic, TypeVar

__all__ = ["Deadlines"]

K = TypeVar("K", bound=Hashable)


class Deadlines(Generic[K]):
    """``due(key)`` is called once each key's time is up, unless it is popped first."""

    def __init__(self, due: Callable[[K], None]) -> None:
        self._due = due
        self._at: dict[K, float] = {}
        """Each key's time, on the loop's clock."""
        self._timer: asyncio.TimerHandle | None = None

    def set(self, key: K, after_s: float) -> None:
        """``key`` is due ``after_s`` from now (set again, it moves on)."""
        loop = asyncio.get_running_loop()
        at = self._at[key] = loop.time() + after_s
        if self._timer is None or at < self._timer.when():  # (never, where all wait alike)
            if self._timer is not None:
                self._timer.cancel()
            self._timer = loop.call_at(at, self._sweep)

    def pop(self, key: K) -> bool:
        """Forget ``key``; whether it was set."""
        return self._at.pop(key, None) is not None

    def clear(self) -> None:
        """Forget every key, and the timer."""
        self._at.clear()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def __contains__(self, key: object) -> bool:
        return key in self._at

    def __iter__(self) -> Iterator[K]:
        """The keys set now (a copy: ``pop`` may be called meanwhile)."""
        return iter(list(self._at))

    def _sweep(self) -> None:
        self._timer = None
        loop = asyncio.get_running_loop()
        now = loop.time() + 0.001  # (the loop may run a timer a hair early)
        for key, at in list(self._at.items()):
            if at <= now:
                del self._at[key]
                self._due(key)
        if self._timer is not None:  # (set again by a ``due`` called above)
            self._timer.cancel()
            self._timer = None
        if self._at:
            self._timer = loop.call_at(min(self._at.values()), self._sweep)
