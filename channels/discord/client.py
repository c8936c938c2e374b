"""discord.py's client as maiden uses it: REST calls sent to ``api_url``, events handed to
the channel."""

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

    async def on_ready(self) -> None:
        self.ready.set()

    async def on_message(self, message: discord.Message) -> None:
        await self.maiden.on_message(message)

    async def on_interaction(self, interaction: discord.Interaction) -> None:
        await self.maiden.on_interaction(interaction)
