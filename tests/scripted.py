"""What the runtime's tests share: a scripted model's tool-call turn (``ScriptedProvider``),
a counting lookup tool, an error result's type, and a run's events up to one of a kind."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from runtime import RunEvent, Subscription, ToolResult, tool

__all__ = ["call", "error_type", "events_until", "make_counter"]


def call(tool_name: str, /, **arguments: Any) -> dict[str, Any]:
    """A scripted turn that calls ``tool_name`` with ``arguments`` (which may hold a
    ``name``: the tool's own argument)."""
    return {"tool_calls": [{"name": tool_name, "arguments": arguments}]}


def error_type(result: ToolResult) -> str:
    """The ``type`` of an error result (it fails the test if the result is no error)."""
    assert result.is_error, result
    return str(result.content["error"]["type"])


def make_counter() -> tuple[list[dict[str, Any]], Any]:
    """A read-only ``lookup`` tool, and the list of every call it took."""
    seen: list[dict[str, Any]] = []

    @tool(effect="read_only")
    def lookup(q: str) -> dict[str, str]:
        """Look something up."""
        seen.append({"q": q})
        return {"answer": q.upper()}

    return seen, lookup


async def events_until(events: Subscription, kind: type) -> AsyncIterator[RunEvent]:
    """A subscription's events, up to and with the first of ``kind`` (5 s for each)."""
    while True:
        event = await asyncio.wait_for(events.next(), 5)
        yield event
        if isinstance(event, kind):
            return
