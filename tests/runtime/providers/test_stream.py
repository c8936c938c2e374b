"""The streaming loop both HTTP providers share (``providers/stream.exchange``), on its own:
an assembler that speaks a toy grammar stands in for a vendor's, so what is checked is the
loop (text passed on in order, nothing fed after the end marker, a short stream named)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from runtime.errors import ProviderError
from runtime.providers.base import ModelResponse
from runtime.providers.http import HttpTransport, ServerSentEvent
from runtime.providers.stream import exchange


class Toy:
    """``data: text`` adds text; ``data: END`` ends the answer."""

    end = "END"

    def __init__(self) -> None:
        self.done = False
        self.fed: list[str] = []

    def feed(self, sse: ServerSentEvent) -> str:
        self.fed.append(sse.data)
        if sse.data == "END":
            self.done = True
            return ""
        return sse.data

    def response(self) -> ModelResponse:
        return ModelResponse(text="".join(d for d in self.fed if d != "END"))


def transport_for(body: bytes) -> tuple[HttpTransport, httpx.AsyncClient]:
    async def chunks() -> AsyncIterator[bytes]:
        yield body

    def handler(request: httpx.Request) -> httpx.Response:
        streamed = request.headers.get("accept") == "text/event-stream"
        return httpx.Response(200, content=chunks() if streamed else b"whole")

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return HttpTransport("toy", "http://fake/x", {}, client=client), client


def whole(content: bytes) -> ModelResponse:
    return ModelResponse(text=content.decode())


async def test_text_is_passed_on_in_order_and_nothing_is_fed_after_the_end() -> None:
    transport, client = transport_for(b"data: Hel\n\ndata: lo\n\ndata: END\n\ndata: late\n\n")
    seen: list[str] = []

    async def on_text(delta: str) -> None:
        seen.append(delta)

    toy = Toy()
    async with client:
        response = await exchange(transport, {}, on_text, whole=whole, assembler=toy)
    assert (response.text, seen, toy.fed) == ("Hello", ["Hel", "lo"], ["Hel", "lo", "END"])


async def test_without_an_assembler_the_body_is_read_whole() -> None:
    transport, client = transport_for(b"")
    async with client:
        response = await exchange(transport, {}, None, whole=whole, assembler=None)
    assert response.text == "whole"


async def test_a_stream_that_stops_before_its_end_marker_says_so() -> None:
    transport, client = transport_for(b"data: Hel\n\n")
    async with client:
        with pytest.raises(ProviderError, match=r"^toy: the stream ended before END: the "
                           r"answer was cut off \(connection closed early\)$"):
            await exchange(transport, {}, None, whole=whole, assembler=Toy())
