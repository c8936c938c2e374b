"""Serving a fake's aiohttp app on loopback, on a port the system picks."""

from __future__ import annotations

import socket
import ssl

from aiohttp import web

__all__ = ["loopback_runner", "serve_on_loopback"]


def loopback_runner(app: web.Application) -> web.AppRunner:
    """A runner that cancels handlers on shutdown and closes fast (tests do not wait)."""
    return web.AppRunner(app, handler_cancellation=True, access_log=None, shutdown_timeout=0.1)


async def serve_on_loopback(runner: web.AppRunner, *,
                            ssl_context: ssl.SSLContext | None = None) -> int:
    """Start ``runner`` (set up already) on 127.0.0.1 at a free port; return the port. The
    runner is cleaned up if it cannot start."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        await web.SockSite(runner, sock, ssl_context=ssl_context).start()
    except BaseException:
        sock.close()
        await runner.cleanup()
        raise
    return port
