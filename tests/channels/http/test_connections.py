"""The HTTP server under hostile connections: a request's headers must arrive within
``[http] header_timeout_s`` or the socket is closed (slowloris), and past
``max_connections`` a request is answered 503 rather than left hanging."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import httpx

from tests.http_helpers import echo_runtime, served

HALF = b"GET /healthz HTTP/1.1\r\nHost: x\r\n"
"""The issue's half-sent request: the headers never end."""


def port_of(client: httpx.AsyncClient) -> int:
    port = client.base_url.port
    assert port is not None
    return port


@asynccontextmanager
async def opened(port: int, sent: bytes) -> AsyncIterator[asyncio.StreamReader]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(sent)
    await writer.drain()
    try:
        yield reader
    finally:
        writer.close()


async def whole_answer(port: int) -> bytes:
    """GET /healthz on a connection of its own, read until the server closes it."""
    request = f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    async with opened(port, request.encode()) as reader:
        return await reader.read()


async def test_half_sent_requests_are_closed_after_the_header_timeout(tmp_path: Path) -> None:
    async with echo_runtime(tmp_path / "m.db") as rt, \
            served(rt, header_timeout_s=0.5) as (client, _):
        port = port_of(client)
        kept_alive = (f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
                      + HALF)  # a whole request, then half of the next one
        async with AsyncExitStack() as stack:
            half = [await stack.enter_async_context(opened(port, HALF)) for _ in range(5)]
            silent = await stack.enter_async_context(opened(port, b""))
            second = await stack.enter_async_context(opened(port, kept_alive))
            async with asyncio.timeout(20):  # the server closes them: EOF, no sleeping
                for reader in half:
                    answer = await reader.read()
                    assert answer.startswith(b"HTTP/1.1 408 Request Timeout\r\n"), answer
                assert await silent.read() == b""
                answer = await second.read()
            assert answer.startswith(b"HTTP/1.1 200 ") and b"HTTP/1.1 408 " in answer
            assert answer.count(b"HTTP/1.1 ") == 2
        assert (await client.get("/healthz")).status_code == 200


async def test_over_max_connections_a_request_gets_503_and_under_it_healthz_answers(
        tmp_path: Path) -> None:
    async with echo_runtime(tmp_path / "m.db") as rt, \
            served(rt, max_connections=3, header_timeout_s=60) as (client, _):
        port = port_of(client)
        async with AsyncExitStack() as stack:
            for _ in range(2):
                await stack.enter_async_context(opened(port, HALF))
            # Two idle sockets held, the third connection is within the cap.
            under = await asyncio.wait_for(whole_answer(port), 20)
            assert under.startswith(b"HTTP/1.1 200 "), under
            await stack.enter_async_context(opened(port, HALF))
            over = await asyncio.wait_for(whole_answer(port), 20)
            assert over.startswith(b"HTTP/1.1 503 "), over
            assert b"connection: close" in over.lower()
        # The idle ones gone, it answers again.
        async with asyncio.timeout(20):
            while (again := await whole_answer(port)).startswith(b"HTTP/1.1 503 "):  # noqa: ASYNC110
                await asyncio.sleep(0.05)  # the server sees the closes within a moment
        assert again.startswith(b"HTTP/1.1 200 ")
