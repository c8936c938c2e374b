"""discord.py's client as maiden uses it: REST calls sent to ``api_url``, events handed to
a ``Handler`` (the channel, made after the client), and a gateway connection that can be
closed and opened again while the REST session stays open (a replica that loses the
gateway lease still posts its replies)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol

import discord
from discord.http import HTTPClient, Route

__all__ = ["GatewayClient", "Handler", "point_at"]


class Handler(Protocol):
    """What the gateway's events are handed to."""

    async def on_message(self, message: discord.Message) -> None: ...

    async def on_interaction(self, interaction: discord.Interaction) -> None: ...

    def on_session(self) -> None:
        """A new gateway session (READY; a resume is not one): it was sent nothing before."""

    def on_ready(self) -> None:
        """The new session's guilds are known."""


def point_at(http: HTTPClient, api_url: str) -> None:
    """Send this client's REST calls to ``api_url`` instead of Discord's (this client only).

    Wrapping this one client's ``request`` cannot be avoided: discord.py 2 has no option
    for its REST base URL (every ``Route`` starts from the class-wide ``Route.BASE``, which
    would move every client in the process; ``proxy``, ``connector`` and ``http_trace``
    cannot change a request's URL), and no discord.py issue asking for one was found
    (Pycord added a class-wide ``Route.API_BASE_URL``: Pycord-Development/pycord#2714)."""
    base = api_url.rstrip("/")
    default = Route.BASE
    if base == default:
        return
    original = http.request

    async def request(route: Route, **options: Any) -> Any:
        if route.url.startswith(default):
            route.url = base + route.url[len(default):]
        return await original(route, **options)

    http.request = request  # type: ignore[method-assign]


class _NoVoice(logging.Filter):
    """Drops discord.py's warning at start that voice's optional packages (PyNaCl, davey)
    are missing: maiden uses no voice, so it says nothing an operator needs to act on."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().endswith("voice will NOT be supported")


logging.getLogger("discord.client").addFilter(_NoVoice())


class GatewayClient(discord.AutoShardedClient):
    """Finds its gateway with ``GET /gateway/bot`` on its REST base (AutoShardedClient does;
    the plain Client would connect to Discord's default gateway)."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._handler: Handler | None = None
        self.ready = asyncio.Event()

    def hand_to(self, handler: Handler) -> None:
        """Hand the gateway's events to ``handler`` (the channel, once made over the
        runtime: this client is made before it, for the deliverer's REST calls). Events
        come only once the gateway is connected, which the channel does after this."""
        self._handler = handler

    async def connect(self, *, reconnect: bool = True) -> None:
        # Each connection asks ``GET /gateway/bot`` (on api_url) for its gateway and shard
        # count: with a shard count already set, discord.py connects to Discord's default
        # gateway instead.
        self.shard_count = None  # type: ignore[assignment]  # (typed int once launched)
        await super().connect(reconnect=reconnect)

    async def disconnect(self, connecting: asyncio.Task[None]) -> None:
        """Close the gateway connection and keep the REST session (discord.py's ``close``
        closes both): ``connecting``, the task running ``connect``, ends; each shard's
        websocket is closed and its reader stopped. ``connect`` opens the gateway again."""
        self.ready.clear()
        while not connecting.done():
            # A shard re-identifying swallows one cancellation (discord.py's
            # ``Shard.reidentify``); the next one ends connect's loop where it waits.
            connecting.cancel()
            await asyncio.wait([connecting], timeout=0.1)
        for shard in self.shards.values():
            await shard.disconnect()
        # The asyncio objects login made, anew: an empty event queue (what the old shards
        # queued never reaches the next connection) and not ready.
        await self._async_setup_hook()

    async def on_connect(self) -> None:
        # discord.py dispatches ``connect`` on READY only, before the messages after it.
        if self._handler is not None:
            self._handler.on_session()

    async def on_ready(self) -> None:
        self.ready.set()
        if self._handler is not None:
            self._handler.on_ready()

    async def on_message(self, message: discord.Message) -> None:
        if self._handler is not None:
            await self._handler.on_message(message)

    async def on_interaction(self, interaction: discord.Interaction) -> None:
        if self._handler is not None:
            await self._handler.on_interaction(interaction)
