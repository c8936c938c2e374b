"""A Discord message in: read, judged by the rights at its place (``channels.talk``), then
a stop, or a run stored before anything else, keyed by the message's id (a duplicate
MESSAGE_CREATE, or the replay after a RESUME, makes one run); the typing indicator while
the run works. A refusal is logged, not said: Discord has no line only its reader sees
outside an interaction."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import discord

from runtime import ACTIVE_STATES, FileSource, RunError, Runtime, StoreError

from ..access import Place
from ..intake import NOT_TAKEN, Intake
from ..talk import Talk
from ..work import Background, is_stop
from .client import GatewayClient
from .config import DiscordConfig
from .lifecycle import Gateway, log
from .mapping import Inbound, Seen, read_message

__all__ = ["DiscordInbound"]


class DiscordInbound:
    """Messages the gateway hands in, for one channel named ``via``."""

    def __init__(self, runtime: Runtime, config: DiscordConfig, client: GatewayClient,
                 gateway: Gateway, background: Background, *, via: str) -> None:
        self._runtime = runtime
        self._config = config
        self._client = client
        self._gateway = gateway
        self._background = background
        self._via = via
        self._talk = Talk(runtime, via, config.access)
        self.intake = Intake(runtime, via)
        """How a message is submitted: tried again while the store is out of reach."""
        self._typing: set[str] = set()
        self.handled = 0
        """Messages from others this channel has finished handling (taken or ignored)."""
        self._handled = asyncio.Condition()

    async def on_message(self, message: discord.Message) -> None:
        try:
            await self._on_message(message)
        finally:
            if str(message.author.id) != self._gateway.bot:
                async with self._handled:
                    self.handled += 1
                    self._handled.notify_all()

    async def wait_handled(self, count: int) -> None:
        """Until ``count`` messages from others have been handled (for drains and tests)."""
        async with self._handled:
            await self._handled.wait_for(lambda: self.handled >= count)

    async def _on_message(self, message: discord.Message) -> None:
        found = read_message(self._seen(message), bot=self._gateway.bot,
                             reply_to_bots=self._config.reply_to_bots,
                             respond_in=self._config.respond_in)
        if not isinstance(found, Inbound):
            return
        if not found.addressed and not (found.in_thread and await self._joined(found)):
            return
        parent = getattr(message.channel, "parent_id", None)
        place = Place.of(found.channel, str(parent) if parent is not None else None,
                         found.guild, direct=found.direct)
        verdict = await self._talk.hear(found, place)
        if verdict in ("may not talk", "may not stop"):
            log.info("discord: %s may not %s in %s", found.user,
                     "operate" if is_stop(found.text) else "talk", found.channel)
        if verdict != "take":
            return
        try:
            run = await self._talk.submit(found, place, submit=self.intake.submit)
        except RunError as exc:
            log.warning("discord: message %s not taken: %s", found.message, exc)
            return
        except StoreError as exc:
            # Discord delivers a message once: say so to the person, who sends it again.
            log.error("discord: message %s not taken, the store failed: %s", found.message,
                      exc)
            with contextlib.suppress(discord.HTTPException):
                await message.reply(NOT_TAKEN, mention_author=False)
            return
        if run.state in ACTIVE_STATES and run.id not in self._typing:
            self._typing.add(run.id)
            self._background.spawn(self._show_typing(message.channel, run.id))

    def _seen(self, message: discord.Message) -> Seen:
        me = self._client.user
        reference = message.reference
        resolved = reference.resolved if reference is not None else None
        replies_to_bot = isinstance(resolved, discord.Message) and me is not None \
            and resolved.author.id == me.id
        return Seen(id=str(message.id), channel=str(message.channel.id),
                    guild=str(message.guild.id) if message.guild is not None else None,
                    author=str(message.author.id), author_is_bot=message.author.bot,
                    content=message.content,
                    mentions_bot=me is not None and any(u.id == me.id
                                                        for u in message.mentions),
                    replies_to_bot=replies_to_bot,
                    in_thread=isinstance(message.channel, discord.Thread),
                    files=tuple(FileSource(via=self._via, url=a.url, name=a.filename,
                                           media_type=a.content_type or "application/octet-stream",
                                           size=a.size, id=str(a.id))
                                for a in message.attachments))

    async def _joined(self, found: Inbound) -> bool:
        return bool(await self._runtime.records.runs(thread_id=found.thread_id, limit=1))

    async def _show_typing(self, where: Any, run_id: str) -> None:
        """The typing indicator while the run works (discord.py renews it every few
        seconds), gone when it ends."""
        try:
            async with where.typing():
                async for _ in self._runtime.follow(run_id):
                    pass
        except discord.DiscordException as exc:
            log.info("discord: no typing indicator: %s", exc)
        finally:
            self._typing.discard(run_id)
