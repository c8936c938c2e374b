"""A server on loopback that is not the platform (another port on the same host): it
answers every request with a secret and records it, so a test can assert that a file
URL pointing here was never fetched, and no token was sent here."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from aiohttp import web

from .site import loopback_runner, serve_on_loopback

__all__ = ["Bystander", "bystander"]

SECRET = b"the bystander's private data"


@dataclass
class Bystander:
    """``hits``: every request, ``(path, Authorization header or None)``."""

    port: int = 0
    hits: list[tuple[str, str | None]] = field(default_factory=list)

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def serve(self, request: web.Request) -> web.Response:
        self.hits.append((request.path, request.headers.get("Authorization")))
        return web.Response(body=SECRET, content_type="text/plain")


@asynccontextmanager
async def bystander() -> AsyncIterator[Bystander]:
    """A ``Bystander`` serving on a free loopback port until the block ends."""
    found = Bystander()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", found.serve)
    runner = loopback_runner(app)
    await runner.setup()
    found.port = await serve_on_loopback(runner)
    try:
        yield found
    finally:
        await runner.cleanup()
