"""How an unmodified discord.py reaches the fake: its real hosts, resolved to loopback, over TLS.

discord.py builds every REST URL from the class attribute ``discord.http.Route.BASE``
(``https://discord.com/api/v10``) and connects the gateway to the class attribute
``DiscordWebSocket.DEFAULT_GATEWAY`` (``wss://gateway.discord.gg/``), then to READY's
``resume_gateway_url``; it has no per-client option for either. What it does take per client is
the aiohttp connector (``discord.Client(connector=...)``), and a connector chooses where a host
name leads and which certificates are trusted. So ``FakeDiscord.connector()`` resolves
``discord.com`` and ``*.discord.gg`` to the fake's TLS port, trusts a throwaway CA (trustme)
that signed the fake's certificate for those names, and refuses every other host, so a test
can never reach the real Discord.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Iterator
from contextlib import contextmanager

import aiohttp
import trustme
import yarl
from aiohttp.abc import AbstractResolver, ResolveResult

HOSTS = ("discord.com", "gateway.discord.gg")
"""Exact names served, besides any ``*.discord.gg`` (the resume gateways)."""


def served(host: str) -> bool:
    return host in HOSTS or host.endswith(".discord.gg")


class LoopbackResolver(AbstractResolver):
    """Resolves Discord's hosts to ``127.0.0.1:port``; any other host fails to resolve."""

    def __init__(self, port: int) -> None:
        self.port = port

    async def resolve(self, host: str, port: int = 0,
                      family: socket.AddressFamily = socket.AF_INET) -> list[ResolveResult]:
        if not served(host):
            raise OSError(f"the fake Discord does not serve {host!r}")
        return [{"hostname": host, "host": "127.0.0.1", "port": self.port,
                 "family": socket.AF_INET, "proto": 0, "flags": socket.AI_NUMERICHOST}]

    async def close(self) -> None:
        return None


class Certificates:
    """A CA made for this fake and the certificate it issued for Discord's hosts."""

    def __init__(self) -> None:
        self._ca = trustme.CA(organization_name="maiden fake Discord CA")
        self._cert = self._ca.issue_cert("discord.com", "gateway.discord.gg", "*.discord.gg")

    def server_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self._cert.configure_cert(context)
        return context

    def client_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context()
        self._ca.configure_trust(context)
        return context

    def connector(self, port: int) -> aiohttp.TCPConnector:
        # limit=0 as discord.py's own default connector: no cap on concurrent connections
        return aiohttp.TCPConnector(limit=0, resolver=LoopbackResolver(port),
                                    ssl=self.client_context())


@contextmanager
def discord_py_pointed_at(api_url: str, gateway_url: str) -> Iterator[None]:
    """The fallback where no connector can be passed (e.g. maiden run as a subprocess does the
    same from its config): discord.py's two class attributes, set for every client in the
    process until the block ends. Prefer ``FakeDiscord.connector()``."""
    from discord.gateway import DiscordWebSocket
    from discord.http import Route

    saved = Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY
    Route.BASE = api_url
    DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(gateway_url)
    try:
        yield
    finally:
        Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY = saved
