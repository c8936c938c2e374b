"""Reading back what the gateway did not hand in.

Discord dispatches a message once, to the sessions connected at that moment; a session
that identifies anew (a restart, a replica taking the gateway over, a connection Discord
would not resume) is not sent what came before it, and a process killed while it still
held a message in memory (the store out of reach) took it with it. So at each READY the
channel reads back the last ``catch_up_s`` seconds of the places it serves and hands in
what it has not handled: the intake's key, the message's id, makes a message handled
twice one run (chaos/README.md, finding 37).

The places: the guild channels and threads the gateway announced with a message in the
window (their ``last_message_id``), and the DMs among the threads the store updated in it
(a first DM sent while no session was connected is not found: nothing names its channel).
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import aiohttp
import discord

from runtime import Runtime

__all__ = ["PER_PLACE", "ReadBack", "read_back"]

log = logging.getLogger("maiden.discord")

PER_PLACE = 500
"""The most messages read back from one place, the newest (five pages of
``GET /channels/{id}/messages``)."""
_THREAD_PAGE = 100
_DM = "discord:dm:"


@dataclass(frozen=True, slots=True)
class ReadBack:
    messages: list[discord.Message]
    """Oldest first."""
    unread: list[str]
    """The places Discord did not answer for (down, or a 5xx or 429): read again later.
    A place it refused (403, 404) is left out and logged."""


async def read_back(client: discord.Client, runtime: Runtime, *, window_s: float) -> ReadBack:
    """The messages of the last ``window_s`` seconds in the places served."""
    since = discord.utils.utcnow() - datetime.timedelta(seconds=window_s)
    after = discord.Object(id=discord.utils.time_snowflake(since))
    dms = await _recent_dms(runtime, since.timestamp())
    places = [*_guild_places(client, after.id),
              *[client.get_partial_messageable(int(c), type=discord.ChannelType.private)
                for c in dms]]
    found: list[discord.Message] = []
    unread: list[str] = []
    for place in places:
        try:
            async for message in place.history(limit=PER_PLACE, after=after,
                                               oldest_first=False):
                found.append(message)
        except (discord.Forbidden, discord.NotFound) as exc:
            log.info("discord: cannot read back channel %s: %s", place.id, exc)
        except (discord.HTTPException, aiohttp.ClientError, OSError, TimeoutError) as exc:
            log.info("discord: channel %s not read back yet: %r", place.id, exc)
            unread.append(str(place.id))
    return ReadBack(sorted(found, key=lambda m: m.id), unread)


def _guild_places(client: discord.Client, after: int) -> Iterable[Any]:
    """Guild channels and threads with a message after ``after`` that the bot may read."""
    for guild in client.guilds:
        me = guild.me
        places: list[discord.TextChannel | discord.Thread] = [*guild.text_channels,
                                                              *guild.threads]
        for place in places:
            last = place.last_message_id
            if last is None or last <= after:
                continue
            if me is not None and not place.permissions_for(me).read_message_history:
                continue
            yield place


async def _recent_dms(runtime: Runtime, since: float) -> list[str]:
    """The DM channels of the threads updated since ``since`` (newest first, paged)."""
    channels: list[str] = []
    offset = 0
    while True:
        page = await runtime.records.threads(offset=offset, limit=_THREAD_PAGE)
        channels += [t.id[len(_DM):] for t in page
                     if t.id.startswith(_DM) and t.updated_at >= since]
        if len(page) < _THREAD_PAGE or page[-1].updated_at < since:
            return channels
        offset += _THREAD_PAGE
