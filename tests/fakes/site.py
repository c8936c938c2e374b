"""Serving a fake's aiohttp app on loopback, on a port the system picks (or one reserved
earlier with ``free_port``: a platform that is down, then comes up where it was expected)."""

from __future__ import annotations

import socket
import ssl

from aiohttp import web

__all__ = ["free_port", "loopback_runner", "serve_on_loopback"]


def loopback_runner(app: web.Application) -> web.AppRunner:
    """A runner that cancels handlers on shutdown and closes fast (tests do not wait)."""
    return web.AppRunner(app, handler_cancellation=True, access_log=None, shutdown_timeout=0.1)


def free_port() -> int:
    """A loopback port nothing listens on (connecting to it is refused), to serve on later."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


async def serve_on_loopback(runner: web.AppRunner, *, port: int = 0,
                            ssl_context: ssl.SSLContext | None = None) -> int:
    """Start ``runner`` (set up already) on 127.0.0.1 at ``port`` (0: a free one); return the
    port. The runner is cleaned up if it cannot start."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        port = sock.getsockname()[1]
        await web.SockSite(runner, sock, ssl_context=ssl_context).start()
    except BaseException:
        sock.close()
        await runner.cleanup()
        raise
    return port
