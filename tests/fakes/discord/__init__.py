"""A fake Discord that the real discord.py client talks to.

``FakeDiscord`` (``fake.py``) serves the REST API and the gateway on 127.0.0.1 over an
in-memory world (``world.py``: the bot, guilds, channels, people) and its messages
(``store.py``); ``payloads.py`` builds what Discord sends — users, channels, messages,
MESSAGE_CREATE and INTERACTION_CREATE data, snowflakes. Every request is held to Discord's
documented contract first: ``contract.py`` is the table, a route each, built from the
shapes in ``shapes.py`` and ``appshapes.py`` (written in ``schema.py``'s small language).
``net.py`` is how discord.py is pointed here without touching its globals:
``discord.Client(connector=fake.connector())``.
"""

from .fake import FakeDiscord
from .gateway import Received
from .interactions import InteractionResponse
from .net import discord_py_pointed_at
from .payloads import (
    APP_ID,
    BOT_ID,
    DM_ID,
    GENERAL_ID,
    GUILD_ID,
    HUMAN_ID,
    THREAD_ID,
    TOKEN,
    category,
    component_interaction,
    dm_channel,
    guild,
    message,
    message_create,
    new_id,
    snowflake_at,
    snowflake_time,
    text_channel,
    thread,
    user,
)
from .routes import Call, Fault
from .store import DiscordError
from .world import World

__all__ = [
    "APP_ID",
    "BOT_ID",
    "DM_ID",
    "GENERAL_ID",
    "GUILD_ID",
    "HUMAN_ID",
    "THREAD_ID",
    "TOKEN",
    "Call",
    "DiscordError",
    "FakeDiscord",
    "Fault",
    "InteractionResponse",
    "Received",
    "World",
    "category",
    "component_interaction",
    "discord_py_pointed_at",
    "dm_channel",
    "guild",
    "message",
    "message_create",
    "new_id",
    "snowflake_at",
    "snowflake_time",
    "text_channel",
    "thread",
    "user",
]
