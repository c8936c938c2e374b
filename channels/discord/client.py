"""discord.py's client as maiden uses it: REST calls sent to ``api_url``, events handed to
the channel, and a gateway connection that can be closed and opened again while the REST
session stays open (a replica that loses the gateway lease still posts its replies)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import discord
from discord.http import HTTPClient, Route

if TYPE_CHECKING:
    from .channel import DiscordChannel

__all__ = ["GatewayClient", "point_at"]


def point_at(http: HTTPClient, api_url: str) -> None:
    """Send this client's REST calls to ``api_url`` instead of Discord's (this client only)."""
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


# maiden uses no voice: discord.py's warning at every start that voice's optional packages
# (PyNaCl, davey) are missing says nothing an operator needs to act on.
discord.VoiceClient.warn_nacl = False
discord.VoiceClient.warn_dave = False


class GatewayClient(discord.AutoShardedClient):
    """Finds its gateway with ``GET /gateway/bot`` on its REST base (AutoShardedClient does;
    the plain Client would connect to Discord's default gateway)."""

    def __init__(self, channel: DiscordChannel, **options: Any) -> None:
        super().__init__(**options)
        self.maiden = channel
        self.ready = asyncio.Event()

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

    async def on_ready(self) -> None:
        self.ready.set()

    async def on_message(self, message: discord.Message) -> None:
        await self.maiden.on_message(message)

    async def on_interaction(self, interaction: discord.Interaction) -> None:
        await self.maiden.on_interaction(interaction)
