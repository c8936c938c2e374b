"""Every request must name this server, and a page of another origin may not change state.

DNS rebinding: a page the operator visits at ``http://evil.example:8765`` re-points
``evil.example`` at 127.0.0.1 and then talks to the API as if it were its own origin. The
browser still sends ``Host: evil.example:8765`` and ``Origin: http://evil.example:8765``,
so refusing any ``Host`` that is not one of this server's names stops it, before a handler
runs; refusing a foreign ``Origin`` on every state-changing request stops a cross-site form
or ``fetch`` as well (CORS is off unless ``[http] cors_origins`` lists origins).

Starlette's ``TrustedHostMiddleware`` checks the host name only (not the port) and answers
in plain text, so this middleware does both checks over Starlette's own ``URL`` parsing
and answers ``application/problem+json`` like the rest of the API.
"""

from __future__ import annotations

import logging
from urllib.parse import urlsplit

from starlette.datastructures import URL, Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from .errors import early_refusal
from .hosts import HOST_CHARS, Hosts

__all__ = ["HostGuard"]

log = logging.getLogger("maiden.http")

_DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}
_SAFE = frozenset({"GET", "HEAD", "OPTIONS"})


class HostGuard:
    """Refuse (400) a request whose ``Host`` is missing or not one of ``hosts``, and (403) a
    state-changing request whose ``Origin`` is neither this server's nor a listed one."""

    def __init__(self, app: ASGIApp, hosts: Hosts) -> None:
        self.app = app
        self.hosts = hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        refusal = self.refusal(scope)
        if refusal is None:
            await self.app(scope, receive, send)
            return
        status, detail, code = refusal
        log.warning("refused %s %s: %s", scope.get("method", ""), scope.get("path", ""), detail)
        await early_refusal(scope.get("path", ""), status, detail, code)(scope, receive, send)

    def refusal(self, scope: Scope) -> tuple[int, str, str] | None:
        hosts = self.hosts
        headers = Headers(scope=scope)
        given = headers.get("host")
        if not given or not HOST_CHARS.fullmatch(given):
            return (400, "the request has no valid Host header", "invalid_host")
        url = URL(scope=scope)  # the Host header, parsed by Starlette (urlsplit)
        try:
            host, port = url.hostname or "", url.port or _DEFAULT_PORTS.get(url.scheme)
        except ValueError:
            return (400, f"the Host header {given!r} is not valid", "invalid_host")
        server = scope.get("server")
        bound = int(server[1]) if server and server[1] is not None else None
        if not hosts.names_this_server(host, port, bound):
            return (400, f"the Host {given!r} does not name this server; behind a proxy, "
                         "list the name in [http] allowed_hosts", "invalid_host")
        origin = headers.get("origin")
        if origin is None or scope.get("method", "GET") in _SAFE:
            return None
        if not _same_origin(origin, host, url.port) and origin.rstrip("/").lower() \
                not in hosts.origins:
            return (403, f"requests from the origin {origin!r} may not change anything here "
                         "(list it in [http] cors_origins to allow it)", "foreign_origin")
        return None


def _same_origin(origin: str, host: str, port: int | None) -> bool:
    """Whether ``origin`` is the one the request's own Host names. The browser wrote both
    with the scheme it used, so a port left out means that scheme's default on both sides;
    our own scheme is not compared (a TLS-terminating proxy serves https to the browser and
    forwards http to us)."""
    try:
        parts = urlsplit(origin)
        default = _DEFAULT_PORTS.get(parts.scheme)
        return (parts.scheme in ("http", "https") and parts.hostname is not None
                and parts.hostname == host.lower()
                and (parts.port or default) == (port or default)
                and not parts.path and parts.username is None)
    except ValueError:
        return False
