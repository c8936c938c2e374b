"""Discord's ``/maiden``: one command group (``status``, ``stop``, ``schedules``,
``schedule-run``, ``schedule-pause``, ``schedule-resume``, ``usage``, ``memory``,
``forget``, ``help``; one
top-level command, far from Discord's cap of 100), registered with discord.py's
``app_commands.CommandTree`` and answered by the channel with the answers of
``channels.commands``, ephemeral: acknowledged first (a deferral, within Discord's 3
seconds), run only if Discord took the acknowledgement, then edited in (``acks``).

The tree defines and syncs the commands; it does not dispatch them (``interaction_check``
says no): discord.py's dispatcher answers through a webhook adapter whose base URL is one
per process, where the channel answers through its own REST client, which follows
``api_url`` like every other call (the approval buttons are answered the same way)."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

import discord
from discord import app_commands
from discord.http import Route

from runtime import Failed, retrying, within

from ..access import Place, Right
from ..commands import COMMANDS, Answer, Asked, Commands
from .acks import DEFERRED, EPHEMERAL, PASSING, edit_original, fit, passing, respond
from .config import DiscordConfig

__all__ = ["GROUP", "Registry", "SlashCommands", "make_tree", "register", "register_global",
           "words_of"]

log = logging.getLogger("maiden.discord")

GROUP = "maiden"
AUTOCOMPLETE_RESULT = 8


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
        # Acknowledged before it runs: a command Discord no longer takes (replayed after
        # its 3 s) must not stop runs while the person is shown that it failed.
        if await respond(self.client, interaction, DEFERRED, {"flags": EPHEMERAL}):
            self.spawn(self._later(interaction, asked, may))

    async def _later(self, interaction: discord.Interaction, asked: Asked,
                     may: Callable[[Right], bool]) -> None:
        """Run the acknowledged command; its answer edited into its "thinking" message."""
        answer = await self.commands.answer(asked, may)
        await edit_original(self.client, interaction, {"content": fit(answer.text)})
        await self._announce(asked.place, answer)

    async def _complete(self, interaction: discord.Interaction, data: dict[str, Any]) -> None:
        typed = next((str(o.get("value") or "") for sub in data.get("options") or []
                      for o in sub.get("options") or [] if o.get("focused")), "")
        schedules = self.commands.schedules
        names = [str(s.get("name")) for s in await schedules.listing()] if schedules else []
        choices = [{"name": n, "value": n} for n in names if typed.lower() in n.lower()][:25]
        await respond(self.client, interaction, AUTOCOMPLETE_RESULT, {"choices": choices})

    async def _announce(self, channel: str, answer: Answer) -> None:
        if answer.announce is None:
            return
        route = Route("POST", "/channels/{channel_id}/messages", channel_id=channel)
        try:
            await self.client.http.request(route, json={
                "content": fit(answer.announce), "allowed_mentions": {"parse": []}})
        except discord.DiscordException as exc:
            log.warning("discord: could not post in %s: %s", channel, exc)


REGISTER_WAIT_S = 600.0
"""How long a start goes on trying to register ``/maiden`` while Discord fails (a 5xx, the
network): registered a few minutes late, not left out until the next start."""


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
                           pause=within(wait_s, 1.0, 30.0, worth=passing),
                           told=functools.partial(_told, guild))
        except (discord.DiscordException, ValueError, *PASSING) as exc:
            log.warning("discord: the /maiden commands were not registered in guild %s: %s",
                        guild, exc)
            continue
        done.append(guild)
    return done


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
