"""The one streaming loop both HTTP providers share: vendor events in, one turn out.

A vendor's stream differs only in what its events mean, so each provider hands an
``Assembler`` (its own event grammar) to ``exchange``, which does the rest the same
way for both: POST, read the whole body or the server-sent events, pass each text
delta on as it arrives, drain the stream once the answer is complete (so the
connection goes back to the pool), and fail readably when the stream stops short.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from ..errors import ProviderError
from .base import ModelResponse, TextSink
from .http import HttpTransport, ServerSentEvent

__all__ = ["Assembler", "exchange"]


class Assembler(Protocol):
    """Builds one answer from a vendor's stream events."""

    end: str
    """The vendor's end marker, named when a stream stops before it."""
    done: bool
    """Set once the end marker has been read."""

    def feed(self, sse: ServerSentEvent) -> str:
        """Take in one event; return the text it adds (for ``on_text``)."""
        ...

    def response(self) -> ModelResponse:
        """The answer, once ``done``."""
        ...


async def exchange(
    transport: HttpTransport, body: dict[str, Any], on_text: TextSink | None, *,
    whole: Callable[[bytes], ModelResponse], assembler: Assembler | None,
) -> ModelResponse:
    """Send ``body`` (built to stream exactly when there is an ``assembler``); read the
    answer whole with ``whole``, or streamed through ``assembler``."""
    async with transport.post(body, stream=assembler is not None) as response:
        if assembler is None:
            return whole(response.content)
        events = transport.events(response)
        async for sse in events:
            delta = assembler.feed(sse)
            if delta and on_text is not None:
                await on_text(delta)
            if assembler.done:
                await transport.drain(events)
                return assembler.response()
        raise ProviderError(f"{transport.name}: the stream ended before {assembler.end}: "
                            "the answer was cut off (connection closed early)")
