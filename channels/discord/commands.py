"""Discord's ``/maiden``: one command group (``status``, ``stop``, ``schedules``,
``schedule-run``, ``schedule-pause``, ``schedule-resume``, ``usage``, ``memory``,
``forget``, ``help``; one
top-level command, far from Discord's cap of 100), registered with discord.py's
``app_commands.CommandTree`` and answered by the channel with the answers of
``channels.commands``, ephemeral, inside Discord's 3 seconds (deferred, then edited, when
an answer takes longer).

The tree defines and syncs the commands; it does not dispatch them (``interaction_check``
says no): discord.py's dispatcher answers through a webhook adapter whose base URL is one
per process, where the channel answers through its own REST client, which follows
``api_url`` like every other call (the approval buttons are answered the same way)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Callable
from typing import Any

import aiohttp
import discord
from discord import app_commands
from discord.http import Route

from runtime import Failed, retrying, split_message, within

from ..access import Place
from ..commands import COMMANDS, Answer, Asked, Commands
from .config import DiscordConfig

__all__ = ["GROUP", "Registry", "SlashCommands", "make_tree", "register", "register_global",
           "words_of"]

log = logging.getLogger("maiden.discord")

GROUP = "maiden"
ANSWER_WITHIN_S = 2.0
EPHEMERAL = 64
CHANNEL_MESSAGE, DEFERRED, AUTOCOMPLETE_RESULT = 4, 5, 8
MESSAGE_LIMIT = 2_000
"""Discord refuses content past 2,000 characters (resources/message#create-message), in an
interaction's response too, and the person then hears nothing."""


def _fit(text: str) -> str:
    """``text``, or its first part within Discord's limit (cut where ``split_message``
    cuts) and a line saying there was more."""
    if len(text) <= MESSAGE_LIMIT:
        return text
    return split_message(text, MESSAGE_LIMIT - 2)[0] + "\n…"


class Registry(app_commands.CommandTree):
    """The commands as Discord is told of them; answered by the channel, not here."""

    async def interaction_check(self, interaction: discord.Interaction, /) -> bool:
        return False


def make_tree(client: discord.Client) -> Registry:
    """The ``/maiden`` group, its subcommands and their options."""
    tree = Registry(client)
    group = app_commands.Group(name=GROUP, description="What maiden is doing here")

    async def schedule_names(interaction: discord.Interaction, current: str
                             ) -> list[app_commands.Choice[str]]:
        return []  # the channel answers autocomplete itself (see the module's docstring)

    def plain(name: str, what: str) -> None:
        async def callback(interaction: discord.Interaction) -> None:
            """Answered by the channel."""

        group.add_command(app_commands.Command(name=name, description=what[:100],
                                               callback=callback))

    def named(name: str, what: str) -> None:
        @app_commands.describe(name="the schedule")
        @app_commands.autocomplete(name=schedule_names)
        async def callback(interaction: discord.Interaction, name: str) -> None:
            """Answered by the channel."""

        group.add_command(app_commands.Command(name=name, description=what[:100],
                                               callback=callback))

    plain("status", COMMANDS["status"])
    plain("stop", COMMANDS["stop"])
    plain("schedules", COMMANDS["schedules"])
    named("schedule-run", COMMANDS["schedules run NAME"])
    named("schedule-pause", "pause a schedule")
    named("schedule-resume", "resume a schedule")

    @app_commands.describe(period="24h, 7d, 30d… (default 7d)")
    async def usage(interaction: discord.Interaction, period: str = "7d") -> None:
        """Answered by the channel."""

    group.add_command(app_commands.Command(name="usage", description=COMMANDS["usage [7d]"],
                                           callback=usage))
    plain("memory", COMMANDS["memory"])

    @app_commands.describe(id="the memory's id, as /maiden memory shows it")
    async def forget(interaction: discord.Interaction, id: str) -> None:
        """Answered by the channel."""

    group.add_command(app_commands.Command(name="forget", description=COMMANDS["forget ID"],
                                           callback=forget))
    plain("help", COMMANDS["help"])
    tree.add_command(group)
    return tree


def words_of(data: dict[str, Any]) -> tuple[str, ...]:
    """A ``/maiden`` interaction's subcommand and options as the words of ``Asked``."""
    options = data.get("options") or []
    if not options:
        return ("help",)
    sub = options[0]
    values = {o.get("name"): str(o.get("value") or "") for o in sub.get("options") or []}
    name = str(sub.get("name") or "help")
    if name.startswith("schedule-"):
        return ("schedules", name.removeprefix("schedule-"), values.get("name", ""))
    if name == "usage":
        return ("usage", values.get("period") or "7d")
    if name == "forget":
        return ("forget", values.get("id", ""))
    return (name,)


class SlashCommands:
    """Answers ``/maiden`` interactions (and its autocomplete) for the Discord channel."""

    def __init__(self, commands: Commands, config: DiscordConfig,
                 client: discord.Client, spawn: Callable[[Any], None]) -> None:
        self.commands = commands
        self.config = config
        self.client = client
        self.spawn = spawn

    async def handle(self, interaction: discord.Interaction, place: Place) -> None:
        data: Any = interaction.data or {}
        user = str(interaction.user.id)
        if interaction.type is discord.InteractionType.autocomplete:
            await self._complete(interaction, data)
            return
        channel = str(interaction.channel_id or "")
        asked = Asked(words=words_of(data), user=user, channel="discord", place=channel,
                      request=f"discord:{interaction.id}", where=place,
                      thread_id=f"discord:dm:{channel}" if interaction.guild_id is None
                      else f"discord:{interaction.guild_id}:{channel}")
        may = functools.partial(self.config.access.allows, user, place)
        answer, answering = await self.commands.answer_within(asked, may, ANSWER_WITHIN_S)
        if answer is not None:
            await self._respond(interaction, CHANNEL_MESSAGE,
                                {"content": _fit(answer.text), "flags": EPHEMERAL})
            await self._announce(asked.place, answer)
            return
        await self._respond(interaction, DEFERRED, {"flags": EPHEMERAL})
        self.spawn(self._later(interaction, answering, asked.place))

    async def _later(self, interaction: discord.Interaction, answering: asyncio.Future[Answer],
                     place: str) -> None:
        """The answer of a deferred interaction, edited into its "thinking" message: tried
        again while Discord fails, as long as the interaction's token lasts (else the
        person is left looking at an empty answer: chaos, seed 8080)."""
        answer = await answering
        route = Route("PATCH", "/webhooks/{application_id}/{token}/messages/@original",
                      application_id=interaction.application_id, token=interaction.token)
        try:
            await retrying(functools.partial(self.client.http.request, route,
                                             json={"content": _fit(answer.text)}),
                           on=Exception, pause=within(EDIT_WAIT_S, 1.0, 30.0, worth=_passing),
                           told=functools.partial(_told_edit, interaction.id))
        except (discord.DiscordException, *PASSING) as exc:
            log.warning("discord: the answer to interaction %s was not shown: %s",
                        interaction.id, exc)
        await self._announce(place, answer)

    async def _complete(self, interaction: discord.Interaction, data: dict[str, Any]) -> None:
        typed = next((str(o.get("value") or "") for sub in data.get("options") or []
                      for o in sub.get("options") or [] if o.get("focused")), "")
        schedules = self.commands.schedules
        names = [str(s.get("name")) for s in await schedules.listing()] if schedules else []
        choices = [{"name": n, "value": n} for n in names if typed.lower() in n.lower()][:25]
        await self._respond(interaction, AUTOCOMPLETE_RESULT, {"choices": choices})

    async def _respond(self, interaction: discord.Interaction, kind: int,
                       data: dict[str, Any]) -> None:
        route = Route("POST", "/interactions/{interaction_id}/{interaction_token}/callback",
                      interaction_id=interaction.id, interaction_token=interaction.token)
        with contextlib.suppress(discord.DiscordException):  # answered already (a replay)
            await self.client.http.request(route, json={"type": kind, "data": data})

    async def _announce(self, channel: str, answer: Answer) -> None:
        if answer.announce is None:
            return
        route = Route("POST", "/channels/{channel_id}/messages", channel_id=channel)
        try:
            await self.client.http.request(route, json={
                "content": _fit(answer.announce), "allowed_mentions": {"parse": []}})
        except discord.DiscordException as exc:
            log.warning("discord: could not post in %s: %s", channel, exc)


REGISTER_WAIT_S = 600.0
"""How long a start goes on trying to register ``/maiden`` while Discord fails (a 5xx, the
network): registered a few minutes late, not left out until the next start."""


PASSING = (discord.DiscordServerError, aiohttp.ClientError, OSError, TimeoutError)
"""Failures that trying again may get past: Discord's 5xx, the network."""


def _passing(error: Exception) -> bool:
    return isinstance(error, PASSING)


async def register(tree: Registry, guilds: list[str], *,
                   wait_s: float = REGISTER_WAIT_S) -> list[str]:
    """Sync the commands to each guild (again, backing off, while Discord fails for a
    while: ``wait_s``); the guilds it worked for."""
    done = []
    for guild in guilds:
        try:
            where = discord.Object(id=int(guild))
            tree.copy_global_to(guild=where)  # the group is defined once, for every guild
            await retrying(functools.partial(tree.sync, guild=where), on=Exception,
                           pause=within(wait_s, 1.0, 30.0, worth=_passing),
                           told=functools.partial(_told, guild))
        except (discord.DiscordException, ValueError, *PASSING) as exc:
            log.warning("discord: the /maiden commands were not registered in guild %s: %s",
                        guild, exc)
            continue
        done.append(guild)
    return done


EDIT_WAIT_S = 14 * 60.0
"""How long a deferred answer is tried again while Discord fails: an interaction's token
lasts 15 minutes."""


def _told_edit(interaction: int, failed: Failed[Exception], pause: float) -> None:
    log.warning("discord: showing the answer to interaction %s failed (%s); trying again in "
                "%.0f s", interaction, failed.error, pause)


def _told(guild: str, failed: Failed[Exception], pause: float) -> None:
    log.warning("discord: registering the /maiden commands in guild %s failed (%s); trying "
                "again in %.0f s", guild, failed.error, pause)


async def register_global(tree: Registry) -> bool:
    """Sync the commands globally (every guild and DM; Discord may show them late)."""
    try:
        await tree.sync()
    except discord.DiscordException as exc:
        log.warning("discord: the /maiden commands were not registered globally: %s", exc)
        return False
    return True
