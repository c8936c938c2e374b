"""The shared HTTP transport: SSE decoding at every byte boundary, Retry-After, backoff."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from runtime.providers.http import (
    HttpTransport,
    Retry,
    ServerSentEvent,
    SSEDecoder,
    parse_retry_after,
)
from tests.fakes.server import load

STREAM = ("event: greeting\ndata: Grüße ☀️\n\n: keep-alive comment\n\n"
          "data: first line\r\ndata: second line\r\n\r\n"
          "event: ping\rdata: {}\r\r"
          "id: 7\nretry: 1000\ndata:no space\n\n"
          "data: cut off without its blank line").encode()
EXPECTED = [ServerSentEvent("greeting", "Grüße ☀️"),
            ServerSentEvent("message", "first line\nsecond line"),
            ServerSentEvent("ping", "{}"),
            ServerSentEvent("message", "no space")]


def transport_for(pieces: list[bytes]) -> tuple[HttpTransport, httpx.AsyncClient]:
    async def body() -> AsyncIterator[bytes]:
        for piece in pieces:
            yield piece

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"},
                              content=body())

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return HttpTransport("test", "http://fake/x", {}, client=client), client


async def events_of(pieces: list[bytes]) -> list[ServerSentEvent]:
    transport, client = transport_for(pieces)
    async with client, transport.post({}, stream=True) as response:
        return [e async for e in transport.events(response)]


async def test_sse_split_at_every_byte_boundary() -> None:
    for cut in range(1, len(STREAM)):
        assert await events_of([STREAM[:cut], STREAM[cut:]]) == EXPECTED, cut


async def test_sse_one_byte_at_a_time() -> None:
    assert await events_of([bytes([b]) for b in STREAM]) == EXPECTED


@pytest.mark.parametrize("name", ["anthropic/stream_parallel_tools.sse",
                                  "openai/stream_parallel_tool_calls.sse"])
async def test_recorded_streams_decode_the_same_however_split(name: str) -> None:
    data = load(name)
    whole = await events_of([data])
    assert len(whole) > 5
    for size in (1, 2, 3, 5, 8, 13):
        assert await events_of([data[i:i + size] for i in range(0, len(data), size)]) == whole


def test_decoder_ignores_blank_lines_between_events() -> None:
    decoder = SSEDecoder()
    assert decoder.feed("") is None and decoder.feed("") is None
    assert decoder.feed("data: x") is None
    assert decoder.feed("") == ServerSentEvent("message", "x")


@pytest.mark.parametrize(("headers", "expected"), [
    ({}, None),
    ({"retry-after": "2"}, 2.0),
    ({"Retry-After": "0.5"}, 0.5),
    ({"retry-after-ms": "1500", "retry-after": "9"}, 1.5),   # the precise one wins
    ({"retry-after-ms": "soon", "retry-after": "3"}, 3.0),
    ({"retry-after": "-4"}, 0.0),
    ({"retry-after": "Wed, 21 Oct 2015 07:28:30 GMT"}, 30.0),
    ({"retry-after": "Wed, 21 Oct 2015 07:27:00 GMT"}, 0.0),  # in the past
    ({"retry-after": "whenever"}, None),
])
def test_parse_retry_after(headers: dict[str, str], expected: float | None) -> None:
    now = 1445412480.0  # Wed, 21 Oct 2015 07:28:00 GMT
    assert parse_retry_after(headers, now=now) == expected


@pytest.mark.parametrize(("attempt", "random", "retry_after", "expected"), [
    (0, 0.0, None, 0.25),
    (0, 1.0, None, 0.5),
    (1, 0.5, None, 0.75),
    (3, 0.0, None, 2.0),
    (10, 1.0, None, 20.0),     # capped at max_delay_s
    (10, 1.0, 7.0, 7.0),       # the server's word wins
])
def test_backoff(attempt: int, random: float, retry_after: float | None,
                 expected: float) -> None:
    assert Retry(random=lambda: random).delay(attempt, retry_after) == expected
