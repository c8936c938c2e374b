"""A Discord message in: read, judged by the rights at its place (``channels.talk``), then
a stop, or a run stored before anything else, keyed by the message's id (a duplicate
MESSAGE_CREATE, or the replay after a RESUME, makes one run); the typing indicator while
the run works. A refusal is logged, not said: Discord has no line only its reader sees
outside an interaction."""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from typing import Any

import discord

from runtime import ACTIVE_STATES, FileSource, RunError, Runtime, StoreError, doubling

from ..access import Place
from ..intake import NOT_TAKEN, Intake
from ..retry import Unreachable
from ..talk import Talk
from ..work import Background, is_stop
from .acks import PASSING
from .catchup import read_back
from .client import GatewayClient
from .config import DiscordConfig
from .lifecycle import Gateway, log
from .mapping import Inbound, Seen, message_key, read_message
from .privacy import is_private

__all__ = ["HOLD_S", "DiscordInbound"]

HOLD_S = 30.0
"""The longest a message handed in waits for the messages read back before it."""
CATCH_UP_TRIES = 5
"""How often reading back is tried at one session while the store or Discord fails."""
_REMEMBERED = 10_000
"""How many handled message ids are kept, so that reading back skips them."""


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
        self._seen_ids: OrderedDict[int, None] = OrderedDict()
        self.caught_up = asyncio.Event()
        """Set while no reading back is under way (cleared at a new gateway session)."""
        self.caught_up.set()
        self.read_back = 0
        """Messages taken only when read back."""

    async def on_message(self, message: discord.Message) -> None:
        self._remember(message.id)
        if not self.caught_up.is_set():  # (a wait_for per message costs a task)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.caught_up.wait(), HOLD_S)
        try:
            await self._on_message(message)
        finally:
            if str(message.author.id) != self._gateway.bot:
                async with self._handled:
                    self.handled += 1
                    self._handled.notify_all()

    def on_session(self) -> None:
        """A new gateway session (READY, not a resume): hold the messages it hands in until
        what it was not sent is read back (``on_ready``)."""
        if self._config.catch_up_s > 0:
            self.caught_up.clear()

    def on_ready(self) -> None:
        if self._config.catch_up_s > 0:
            self._background.spawn(self._catch_up())

    async def _catch_up(self) -> None:
        """Hand in the messages of the last ``catch_up_s`` seconds not handled here; tried
        again while the store or Discord fails (the messages handed in meanwhile wait only
        for the first try). A stop is left out: read back late, it would stop whatever runs
        now."""
        for attempt in range(CATCH_UP_TRIES):
            try:
                async with asyncio.timeout(HOLD_S):
                    taken = await self._read_back()
            except (TimeoutError, StoreError, Unreachable) as exc:
                if attempt + 1 == CATCH_UP_TRIES:
                    log.error("discord: reading back missed messages failed: %s", exc)
                    return
                log.warning("discord: reading back missed messages stopped: %s; trying "
                            "again", exc)
                await asyncio.sleep(doubling(attempt, 1.0, HOLD_S))
                continue
            finally:
                self.caught_up.set()
            if taken:
                log.info("discord: read back %d message(s) this process had not handled",
                         taken)
            return

    async def _read_back(self) -> int:
        """Hand in what was not handled here; ``Unreachable`` if a place was not read."""
        taken = 0
        found = await read_back(self._client, self._runtime, window_s=self._config.catch_up_s)
        for message in found.messages:
            if message.id in self._seen_ids:
                continue
            # Taken already (by an earlier process, or another replica): one read, where
            # handing it in again would try to write it.
            if str(message.author.id) == self._gateway.bot or await \
                    self._runtime.records.run_for_key(message_key(message.id)) is not None:
                self._remember(message.id)
                continue
            if await self._on_message(message, late=True):
                taken += 1
                self.read_back += 1
            self._remember(message.id)
        if found.unread:
            raise Unreachable(f"Discord did not answer for channel(s) "
                              f"{', '.join(found.unread)}")
        return taken

    def _remember(self, message_id: int) -> None:
        self._seen_ids[message_id] = None
        while len(self._seen_ids) > _REMEMBERED:
            self._seen_ids.popitem(last=False)

    async def wait_handled(self, count: int) -> None:
        """Until ``count`` messages from others have been handled (for drains and tests)."""
        async with self._handled:
            await self._handled.wait_for(lambda: self.handled >= count)

    async def _on_message(self, message: discord.Message, *, late: bool = False) -> bool:
        """Take ``message`` if it is for the bot; whether it was taken (``late``: read
        back, a stop is not)."""
        found = read_message(self._seen(message), bot=self._gateway.bot,
                             reply_to_bots=self._config.reply_to_bots,
                             respond_in=self._config.respond_in)
        if not isinstance(found, Inbound) or (late and is_stop(found.text)):
            return False
        if not found.addressed and not (found.in_thread and await self._joined(found)):
            return False
        parent = getattr(message.channel, "parent_id", None)
        place = Place.of(found.channel, str(parent) if parent is not None else None,
                         found.guild, direct=found.direct,
                         private=found.direct or is_private(message.channel))
        verdict = await self._talk.hear(found, place)
        if verdict in ("may not talk", "may not stop"):
            log.info("discord: %s may not %s in %s", found.user,
                     "operate" if is_stop(found.text) else "talk", found.channel)
        if verdict != "take":
            return False
        try:
            run = await self._talk.submit(found, place, submit=self.intake.submit,
                                          user_name=message.author.display_name)
        except RunError as exc:
            log.warning("discord: message %s not taken: %s", found.message, exc)
            return False
        except StoreError as exc:
            if late:  # read back again at the next try
                raise
            # Discord delivers a message once: say so to the person, who sends it again.
            log.error("discord: message %s not taken, the store failed: %s", found.message,
                      exc)
            with contextlib.suppress(discord.HTTPException):
                await message.reply(NOT_TAKEN, mention_author=False)
            return False
        if run.state in ACTIVE_STATES and run.id not in self._typing:
            self._typing.add(run.id)
            self._background.spawn(self._show_typing(message.channel, run.id))
        return True

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
        except (discord.DiscordException, *PASSING) as exc:  # Discord down: the run goes on
            log.info("discord: no typing indicator: %s", exc or type(exc).__name__)
        finally:
            self._typing.discard(run_id)
