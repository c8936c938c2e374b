"""A real local HTTP server (aiohttp on 127.0.0.1) that plays queued replies.

Each POST is recorded (headers and JSON body), checked by the API's own rules
(``validate``, which may answer with an error the real API would give), then
answered with the next queued ``Reply``: JSON, a raw body, or an event stream
written in small chunks, ended cleanly, cut off (connection aborted), or held
open until the client goes away (``disconnected`` is then set).
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Self

from aiohttp import web

from .site import loopback_runner, serve_on_loopback

DATA = Path(__file__).parent.parent / "data"


def load(name: str) -> bytes:
    """A recorded payload from tests/data."""
    return (DATA / name).read_bytes()


def load_json(name: str) -> Any:
    return json.loads(load(name))


End = Literal["eof", "abort", "hang"]


@dataclass
class Reply:
    status: int = 200
    json: Any = None
    body: bytes | None = None
    sse: bytes | None = None
    chunks: int | Sequence[int] = 0
    """How to split an event stream: a size, or sizes used in turn (0: one write)."""
    end: End = "eof"
    headers: dict[str, str] = field(default_factory=dict)
    wait: asyncio.Event | None = None
    """Hold the response (before any byte) until this is set."""


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    json: Any
    peer: Any = None
    """The client's address and port: the same for requests on one kept-alive connection."""


def split(data: bytes, sizes: int | Sequence[int]) -> Iterator[bytes]:
    if not sizes:
        yield data
        return
    cycle = [sizes] if isinstance(sizes, int) else list(sizes)
    i = k = 0
    while i < len(data):
        n = cycle[k % len(cycle)]
        yield data[i:i + n]
        i += n
        k += 1


class FakeServer:
    """``async with FakeServer("/v1/messages") as server: server.url ...``"""

    path = "/"

    def __init__(self) -> None:
        self.replies: deque[Reply] = deque()
        self.requests: list[Recorded] = []
        self.disconnected = asyncio.Event()
        self.streaming = asyncio.Event()
        """Set once a streamed reply has written its chunks."""
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def queue(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    def validate(self, headers: dict[str, str], body: Any) -> Reply | None:
        """An error reply the real API would give for this request, or None."""
        return None

    async def __aenter__(self) -> Self:
        app = web.Application(client_max_size=64 * 1024 * 1024)  # requests with images
        app.router.add_post(self.path, self._handle)
        self._runner = loopback_runner(app)
        await self._runner.setup()
        self.port = await serve_on_loopback(self._runner)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._runner is not None
        await self._runner.cleanup()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        headers = {k.lower(): v for k, v in request.headers.items()}
        peer = request.transport.get_extra_info("peername") if request.transport else None
        self.requests.append(Recorded(request.path, headers, body, peer))
        reply = self.validate(headers, body)
        if reply is None:
            if not self.replies:
                return web.json_response({"error": {"message": "the fake has no reply queued"}},
                                         status=418)
            reply = self.replies.popleft()
        if reply.wait is not None:
            try:
                await reply.wait.wait()
            except asyncio.CancelledError:
                self.disconnected.set()
                raise
        if reply.sse is None:
            data = reply.body if reply.body is not None else json.dumps(reply.json).encode()
            return web.Response(status=reply.status, body=data, headers={
                "content-type": "application/json", **reply.headers})
        response = web.StreamResponse(status=reply.status, headers={
            "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache",
            **reply.headers})
        await response.prepare(request)
        try:
            for piece in split(reply.sse, reply.chunks):
                await response.write(piece)
            self.streaming.set()
            if reply.end == "abort":
                assert request.transport is not None
                request.transport.abort()
                return response
            if reply.end == "hang":
                await asyncio.Event().wait()
        except (asyncio.CancelledError, ConnectionError):
            self.disconnected.set()
            raise
        await response.write_eof()
        return response


def sse(events: Sequence[tuple[str | None, Any]]) -> bytes:
    """An event stream: ``(event name or None, data)``; data is JSON-encoded unless a str."""
    out = []
    for name, data in events:
        text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False,
                                                             separators=(",", ":"))
        out.append((f"event: {name}\n" if name else "") + f"data: {text}\n\n")
    return "".join(out).encode()
