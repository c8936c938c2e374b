"""Discord messages -> maiden threads: which messages start work, on which thread (pure).

A guild channel is ``discord:{guild}:{channel}``; a Discord thread is a channel of
its own, ``discord:{guild}:{thread}``; a DM is ``discord:dm:{channel}``. The inbound
key is the message id (``discord:{id}``): a duplicate MESSAGE_CREATE, or the replay
after a RESUME, makes one run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from runtime import FileSource

__all__ = ["Ignored", "Inbound", "Seen", "message_key", "read_message", "strip_mentions"]


@dataclass(frozen=True, slots=True)
class Seen:
    """What the adapter reads off a discord.py ``Message``, as plain values."""

    id: str
    channel: str
    guild: str | None
    author: str
    author_is_bot: bool
    content: str
    mentions_bot: bool
    replies_to_bot: bool
    in_thread: bool
    files: tuple[FileSource, ...] = ()
    """The message's attachments (CDN URLs, fetched without the bot token)."""


@dataclass(frozen=True, slots=True)
class Inbound:
    message: str
    channel: str
    guild: str | None
    user: str
    text: str
    thread_id: str
    direct: bool
    addressed: bool
    """Mentioned, replied to, or in a DM: it starts work whatever ``respond_in`` says."""
    in_thread: bool
    files: tuple[FileSource, ...] = ()

    @property
    def key(self) -> str:
        return message_key(self.message)

    @property
    def target(self) -> dict[str, str]:
        target = {"channel": self.channel, "message": self.message}
        if self.guild is not None:
            target["guild"] = self.guild
        return target


@dataclass(frozen=True, slots=True)
class Ignored:
    why: str


def message_key(message_id: object) -> str:
    """The run's idempotency key for a Discord message: ``discord:{id}``."""
    return f"discord:{message_id}"


def strip_mentions(text: str, bot: str) -> str:
    return re.sub(rf"<@!?{re.escape(bot)}>", "", text).strip()


def read_message(
    seen: Seen, *, bot: str, reply_to_bots: bool = False,
    respond_in: Literal["mentions", "all"] = "mentions",
) -> Inbound | Ignored:
    if seen.author == bot:
        return Ignored("the bot's own message")
    if seen.author_is_bot and not reply_to_bots:
        return Ignored("another bot (reply_to_bots = false)")
    direct = seen.guild is None
    thread_id = f"discord:dm:{seen.channel}" if direct else \
        f"discord:{seen.guild}:{seen.channel}"
    addressed = direct or seen.mentions_bot or seen.replies_to_bot
    if respond_in == "all":
        addressed = True
    return Inbound(message=seen.id, channel=seen.channel, guild=seen.guild, user=seen.author,
                   text=strip_mentions(seen.content, bot), thread_id=thread_id, direct=direct,
                   addressed=addressed, in_thread=seen.in_thread, files=seen.files)
