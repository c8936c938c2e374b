"""What the provider tests share: a sleep that only records, a text sink, a tool spec,
a request and an untidy history (the httpx ``client`` fixture is in conftest)."""

from __future__ import annotations

import asyncio
from typing import Any

from runtime import AssistantTurn, Entry, ModelRequest, Notice, ToolResult, UserMessage
from runtime.model.entries import ToolCall
from runtime.model.toolspec import ToolSpec

WEATHER = ToolSpec("get_weather", "The weather in a city.", {
    "type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string"}},
    "required": ["city"]})


def ask(text: str = "Salut", **kw: Any) -> ModelRequest:
    """A one-message request."""
    return ModelRequest(system="Be brief.", entries=[UserMessage(run_id="r1", text=text)], **kw)


def untidy_history() -> list[Entry]:
    """A history no vendor accepts as is: it starts with the assistant, has an orphan tool
    result, an empty message, an empty turn, invalid argument JSON, a notice between a call
    and its result, and a call left without one."""
    return [
        AssistantTurn(run_id="r0", text="(older answer)"),
        ToolResult(run_id="r0", tool_call_id="gone", name="clock", content="12:00"),
        UserMessage(run_id="r1", text=""),
        AssistantTurn(run_id="r1"),
        AssistantTurn(run_id="r1", tool_calls=(
            ToolCall(id="c1", name="get_weather", arguments='{"city": Paris'),
            ToolCall(id="c2", name="get_weather", arguments={"city": "Lyon"}))),
        Notice(run_id="r1", code="x", text="between a call and its result"),
        ToolResult(run_id="r1", tool_call_id="c1", name="get_weather", is_error=True,
                   content={"error": {"type": "invalid_arguments", "message": "bad JSON"}}),
    ]


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
