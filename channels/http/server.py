"""Serve an ASGI app with uvicorn inside the caller's event loop.

The caller owns the process: it binds the socket (so a busy port is a clear error,
and port 0 works), handles SIGTERM/SIGINT itself, and stops the server when it
chooses. uvicorn only accepts connections and speaks HTTP, within two bounds against
hostile connections: a deadline on each request's headers (``protocol``) and a cap on
connections, over which a request is answered 503.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Iterator
from typing import Any

import uvicorn

from runtime import MaidenError

from .protocol import DeadlineConfig

__all__ = ["HttpServer"]

log = logging.getLogger("maiden.http")


class _Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = asyncio.Event()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        # The application handles SIGTERM/SIGINT: it stops intake first, then the server.
        yield

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        self.ready.set()


class HttpServer:
    """``await start()`` binds and serves; ``await stop()`` closes and drains connections."""

    def __init__(self, app: Any, host: str, port: int, *, grace_s: int = 5,
                 header_timeout_s: float = 10.0, max_connections: int = 1000) -> None:
        self.app = app
        self.host = host
        self.port = port
        self.grace_s = grace_s
        self.header_timeout_s = header_timeout_s
        self.max_connections = max_connections
        self._server: _Server | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def task(self) -> asyncio.Task[None]:
        """The serving task: done when the server stopped (on purpose or not)."""
        assert self._task is not None, "start() first"
        return self._task

    async def start(self) -> str:
        """Bind, start serving, and return the URL once connections are accepted."""
        sock = _bind(self.host, self.port)
        self.port = sock.getsockname()[1]
        # Idle connections are kept longer than a load balancer's usual idle timeout (60 s),
        # so the balancer closes them first: a server that closes a kept-alive connection
        # just as the balancer reuses it makes the intermittent 502s of such setups.
        # uvicorn answers 503 when the open connections, this one included, reach
        # limit_concurrency: one more than max_connections lets exactly that many work.
        config = DeadlineConfig(self.app, log_config=None, lifespan="on",
                                timeout_graceful_shutdown=self.grace_s, server_header=False,
                                timeout_keep_alive=75, header_timeout_s=self.header_timeout_s,
                                limit_concurrency=self.max_connections + 1)
        self._server = server = _Server(config)
        self._task = asyncio.create_task(server.serve(sockets=[sock]), name="maiden-http")
        ready = asyncio.create_task(server.ready.wait())
        await asyncio.wait([ready, self._task], return_when=asyncio.FIRST_COMPLETED)
        if not ready.done():
            ready.cancel()
            sock.close()
            exc = self._task.exception() if not self._task.cancelled() else None
            raise MaidenError(f"the HTTP server on {self.url} did not start: {exc!r}")
        log.debug("HTTP API listening on %s", self.url)  # the banner says where
        return self.url

    async def stop(self) -> None:
        """Stop accepting connections, let open requests finish (at most ``grace_s``)."""
        if self._server is None or self._task is None:
            return
        self._server.should_exit = True
        with contextlib.suppress(Exception, SystemExit):
            await self._task


def _bind(host: str, port: int) -> socket.socket:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise MaidenError(f"cannot listen on {host}:{port}: {exc.strerror}") from exc
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        raise MaidenError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    return sock
