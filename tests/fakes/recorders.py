"""Stand-ins the provider tests hand in: a sleep that only records, a text sink."""

from __future__ import annotations

import asyncio


class Sleeps(list[float]):
    """An injected ``sleep``: records how long it was asked to wait, returns at once."""

    async def __call__(self, seconds: float) -> None:
        self.append(seconds)


class Deltas(list[str]):
    """An ``on_text`` sink: keeps every delta; ``first`` is set by the first one."""

    def __init__(self) -> None:
        super().__init__()
        self.first = asyncio.Event()

    async def __call__(self, text: str) -> None:
        self.append(text)
        self.first.set()
