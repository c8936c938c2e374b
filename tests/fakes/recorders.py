"""What the provider tests share: a sleep that only records, a text sink, a tool spec and
a request (the httpx ``client`` fixture is in conftest)."""

from __future__ import annotations

import asyncio
from typing import Any

from runtime import ModelRequest, ToolSpec, UserMessage

WEATHER = ToolSpec("get_weather", "The weather in a city.", {
    "type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string"}},
    "required": ["city"]})


def ask(text: str = "Salut", **kw: Any) -> ModelRequest:
    """A one-message request."""
    return ModelRequest(system="Be brief.", entries=[UserMessage(run_id="r1", text=text)], **kw)


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
