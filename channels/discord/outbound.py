"""What reaches Discord from maiden, made before the runtime: discord.py's client (its REST
session posts; its gateway is connected by the channel), where the channel stands with
Discord (``link``), the deliverer that posts and the downloader that fetches. The runtime is
built with the deliverer and the fetcher (``Runtime(deliverers=..., fetchers=...)``), then
the channel with the runtime and this (``DiscordChannel``): nothing is added to either
afterwards."""

from __future__ import annotations

import functools
from typing import Any

import discord

from ..base import Link
from ..downloads import Downloader
from ..origins import DISCORD_FILE_ORIGINS
from .client import GatewayClient, point_at
from .config import DiscordConfig
from .deliverer import DiscordDeliverer
from .streamer import DiscordStreamer

__all__ = ["DiscordOutbound"]


class DiscordOutbound:
    """Discord's deliverer and fetcher with what they share. ``connector``: the aiohttp
    connector discord.py's client uses (None: its own, made anew as needed)."""

    name = "discord"

    def __init__(self, config: DiscordConfig, token: str, *, connector: Any = None,
                 guild_ready_timeout: float = 2.0) -> None:
        self.config = config
        self.token = token
        self.own_connector = connector is None
        intents = discord.Intents.default()
        intents.message_content = True
        self.client = GatewayClient(intents=intents, connector=connector,
                                    guild_ready_timeout=guild_ready_timeout)
        point_at(self.client.http, config.api_url)
        self.link = Link()
        """Not connected until the channel says so (``Gateway``)."""
        self.deliverer = DiscordDeliverer(
            self.client.http, link=self.link,
            streaming=None if config.stream == "off" else functools.partial(
                DiscordStreamer, edit_every_s=config.edit_every_s))
        self.fetcher = Downloader(
            "Discord", (*DISCORD_FILE_ORIGINS, *config.file_hosts),
            no_access="Discord would not hand it over (the link may have expired)")
