"""Discord as a channel of `maiden run`: discord.py's gateway client over the runtime's API.

Inbound: each message is stored as a queued run keyed by its id before anything else
(``inbound``). Outbound goes through the outbox and ``DiscordDeliverer`` (``streamer``
for live replies). Buttons and ``/maiden`` are answered from ``on_interaction``
(``interactions``, ``commands``). Only the replica holding the store's gateway lease
connects; the others stand by (``lifecycle``).

This module wires the parts, over ``outbound`` (the client, the deliverer and the
downloader, made before the runtime); the channel is the ``Handler`` the gateway client
hands its events to.
"""

from __future__ import annotations

import asyncio
from typing import Self

import discord

from runtime import Deliverer, FileFetcher, Runtime, ScheduleService

from ..commands import Commands, markdown_label
from ..intake import Intake
from ..work import Background
from .client import point_at
from .commands import SlashCommands, make_tree
from .inbound import DiscordInbound
from .interactions import Interactions, link_of
from .lifecycle import Gateway, log
from .outbound import DiscordOutbound

__all__ = ["DiscordChannel", "DiscordOutbound", "point_at"]


class DiscordChannel:
    """Serves the guilds and DMs the bot is in."""

    name = "discord"

    def __init__(self, runtime: Runtime, outbound: DiscordOutbound, *,
                 schedules: ScheduleService | None = None) -> None:
        """Over ``runtime``, built with ``outbound``'s deliverer and fetcher."""
        self.runtime = runtime
        self.config = config = outbound.config
        self.client = outbound.client
        self.client.hand_to(self)
        self.deliverer: Deliverer | None = outbound.deliverer
        self.downloads = outbound.fetcher
        self.fetcher: FileFetcher | None = self.downloads
        background = Background(log, "maiden-discord")
        self.tree = make_tree(self.client)
        """``/maiden``'s definition, synced to the guilds once connected."""
        self.gateway = Gateway(runtime, config, outbound.token, self.client, outbound.link,
                               tree=self.tree, background=background,
                               downloads=self.downloads, own_connector=outbound.own_connector)
        self.inbound = DiscordInbound(runtime, config, self.client, self.gateway, background,
                                      via=self.name)
        slash = SlashCommands(Commands(runtime, schedules, link=link_of(self.client),
                                       label=markdown_label), config,
                              self.client, background.spawn)
        self.interactions = Interactions(runtime, config, self.client, slash, via=self.name)

    # -- the gateway client's handler ----------------------------------------------------------

    async def on_message(self, message: discord.Message) -> None:
        await self.inbound.on_message(message)

    async def on_interaction(self, interaction: discord.Interaction) -> None:
        await self.interactions.on_interaction(interaction)

    def on_session(self) -> None:
        self.inbound.on_session()

    def on_ready(self) -> None:
        self.inbound.on_ready()

    # -- lifespan ------------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        """Log in and connect, or, if Discord cannot be reached, keep trying in the
        background while everything else serves (``ChannelRefused`` if it refuses the token
        or the message-content intent)."""
        if self.config.access.nobody:
            log.warning("discord: serving nobody (open = false and no allow_guilds, "
                        "allow_channels, allow_users or rules)")
        await self.gateway.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.gateway.close()

    def banner(self) -> str:
        return self.gateway.banner()

    def status(self) -> str:
        return self.gateway.status()

    def stop_intake(self) -> None:
        """Nothing to refuse here: a message that comes while stopping finds the runtime
        closed, and is answered after the next start only if it was stored."""

    async def closed(self) -> None:
        """Returns when the channel stops (``Gateway.closed``)."""
        await self.gateway.closed()

    # -- what drains and tests watch -----------------------------------------------------------

    @property
    def holder(self) -> str | None:
        """Who holds the gateway connection, while another replica does."""
        return self.gateway.holder

    @property
    def lease(self) -> str:
        return self.gateway.lease

    @property
    def registered(self) -> list[str] | None:
        """The guilds ``/maiden`` was registered in (None: not tried yet)."""
        return self.gateway.registered

    @property
    def tried_registering(self) -> asyncio.Event:
        return self.gateway.tried_registering

    @property
    def handled(self) -> int:
        """Messages from others this channel has finished handling (taken or ignored)."""
        return self.inbound.handled

    async def wait_handled(self, count: int) -> None:
        """Until ``count`` messages from others have been handled (for drains and tests)."""
        await self.inbound.wait_handled(count)

    @property
    def _intake(self) -> Intake:
        return self.inbound.intake

    @_intake.setter
    def _intake(self, intake: Intake) -> None:  # a test shortens how long it waits
        self.inbound.intake = intake
