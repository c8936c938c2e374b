"""Discord as a channel of `maiden run`: discord.py's gateway client over the runtime's API.

Inbound: each message is stored as a queued run keyed by its id before anything else
(a duplicate MESSAGE_CREATE, or the replay after a RESUME, makes one run). Outbound
goes through the outbox and ``DiscordDeliverer``. Approval buttons carry the run, the
call and the arguments' hash in their ``custom_id`` and are answered from
``on_interaction``, so buttons posted before a restart work after it; a click counts
only on that run's own prompt (``clicks``). The response to
a click goes through the bot's own HTTP client (``UPDATE_MESSAGE``, or an ephemeral
refusal), so it follows ``api_url`` like every other call: discord.py's interaction
helpers (and ``DynamicItem``) answer through a webhook adapter whose base URL is one
per process. The 👍 / 👎 under an answer carry its run the same way (``feedback``).

Replicas: Discord wants one gateway connection per shard, so only the process holding the
store's lease ``discord:gateway:{bot}`` connects; the others stand by (still posting
replies over REST) and one takes over when the holder stops or dies. A holder that loses
the lease (the store out of reach for longer than its lifetime) closes its gateway
connection only, and stands by as the others do: it still posts its runs' replies, and
connects again once it holds the lease again. The channel stops (``closed``) only when it
is closed, or its gateway connection ends for a reason of its own (a refused token).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any, Self

import aiohttp
import discord
from discord.http import Route

from runtime import (
    ACTIVE_STATES,
    Deliverer,
    FileFetcher,
    FileSource,
    MaidenError,
    Origin,
    RunError,
    Runtime,
    ScheduleService,
    StoreError,
)

from ..access import Place, Right
from ..clicks import Click, bind
from ..commands import Commands, markdown_label
from ..downloads import Downloader
from ..feedback import record_vote
from ..intake import NOT_TAKEN, Intake
from ..origins import DISCORD_FILE_ORIGINS
from ..prompts import refusal_text
from ..retry import Backoff, ChannelRefused, Unreachable, keep_trying, reason_of
from ..work import Background, is_stop, stop_thread
from .client import GatewayClient, point_at
from .commands import GROUP, SlashCommands, make_tree, register, register_global
from .config import DEFAULT_API_URL, DiscordConfig
from .deliverer import DiscordDeliverer
from .mapping import Inbound, Seen, read_message
from .render import parse_custom_id, parse_vote_id
from .streamer import DiscordStreamer

__all__ = ["DiscordChannel", "point_at"]

log = logging.getLogger("maiden.discord")

EPHEMERAL = 64
UPDATE_MESSAGE = 7
CHANNEL_MESSAGE = 4


class DiscordChannel:
    """Serves the guilds and DMs the bot is in."""

    name = "discord"

    def __init__(self, runtime: Runtime, config: DiscordConfig, token: str, *,
                 connector: Any = None, guild_ready_timeout: float = 2.0,
                 schedules: ScheduleService | None = None) -> None:
        self.runtime = runtime
        self.config = config
        self.token = token
        intents = discord.Intents.default()
        intents.message_content = True
        self.client = GatewayClient(self, intents=intents, connector=connector,
                                    guild_ready_timeout=guild_ready_timeout)
        self._own_connector = connector is None
        point_at(self.client.http, config.api_url)
        deliverer = DiscordDeliverer(self.client.http)
        if config.stream != "off":
            deliverer.streamer = DiscordStreamer(deliverer, edit_every_s=config.edit_every_s)
        self.deliverer: Deliverer | None = deliverer
        self.downloads = Downloader(
            "Discord", (*DISCORD_FILE_ORIGINS, *config.file_hosts),
            no_access="Discord would not hand it over (the link may have expired)")
        self.fetcher: FileFetcher | None = self.downloads
        self.bot = ""
        self._connecting: asyncio.Task[None] | None = None
        """discord.py's ``connect``: the gateway connection while this replica holds it."""
        self._gateway: asyncio.Task[None] | None = None
        """The gateway over the channel's life (``_keep_gateway``); it ends when it stops."""
        self._lease_lost = asyncio.Event()
        self.holder: str | None = None
        """Who holds the gateway connection, while another replica does."""
        self._background = Background(log, "maiden-discord")
        self._intake = Intake(runtime, "discord")
        self.tree = make_tree(self.client)
        """``/maiden``'s definition, synced to the guilds once connected."""
        self.slash = SlashCommands(Commands(runtime, schedules, link=self._link,
                                                   label=markdown_label), config,
                                   self.client, self._background.spawn)
        self.registered: list[str] | None = None
        """The guilds ``/maiden`` was registered in (None: not tried yet)."""
        self.tried_registering = asyncio.Event()
        self._typing: set[str] = set()
        self.handled = 0
        """Messages from others this channel has finished handling (taken or ignored)."""
        self._handled = asyncio.Condition()
        self._closed = asyncio.Event()
        self._starting: asyncio.Task[None] | None = None
        """Logging in again and again while Discord cannot be reached at start."""
        self._problem: str | None = None
        """Why Discord is not connected yet (None: it is)."""
        if isinstance(self.deliverer, DiscordDeliverer):
            self.deliverer.offline = "not connected yet"

    # -- lifespan ------------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        """Log in and connect, or, if Discord cannot be reached, keep trying in the
        background while everything else serves (``ChannelRefused`` if it refuses the token
        or the message-content intent)."""
        if self.config.access.nobody:
            log.warning("discord: serving nobody (open = false and no allow_guilds, "
                        "allow_channels, allow_users or rules)")
        try:
            await self._log_in()
        except Unreachable as exc:
            self._down(str(exc))
            self._starting = asyncio.create_task(self._keep_logging_in(exc),
                                                 name="maiden-discord-login")
            return self
        await self._start()
        return self

    async def _log_in(self) -> None:
        """One attempt at ``GET /users/@me``: ``Unreachable`` if Discord did not answer,
        ``ChannelRefused`` if it refused the token."""
        try:
            await self.client.login(self.token)
        except discord.LoginFailure as exc:
            await self.client.close()
            raise ChannelRefused(f"Discord refused the bot token (${self.config.token_env}): "
                                 f"{exc}") from exc
        except discord.HTTPException as exc:
            if exc.status < 500 and exc.status != 429:
                await self.client.close()
                raise ChannelRefused(f"Discord refused the login (${self.config.token_env}): "
                                     f"{exc.status} {exc.text}") from exc
            raise Unreachable(f"{self.config.api_url} answered {exc.status}") from exc
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            await self._drop_session()
            raise Unreachable(f"cannot reach {self.config.api_url}: {reason_of(exc)}") from exc

    async def _drop_session(self) -> None:
        """Close the HTTP session a failed login opened (each login opens one; left open,
        aiohttp logs "Unclosed client session" when the next replaces it). Its connector
        closes with it, so discord.py makes a new one next time; a connector handed in
        cannot be remade, so its session is left as it is."""
        if self._own_connector:
            await self.client.http.close()
            self.client.http.connector = discord.utils.MISSING

    async def _keep_logging_in(self, first: Unreachable) -> None:
        backoff = Backoff(max_s=self.config.reconnect_max_s)
        try:
            await keep_trying(self._log_in, backoff, self._waiting, first=first)
            await self._start()
        except MaidenError as exc:  # refused, or the gateway did not connect
            log.error("discord: %s; the channel stops", exc)
            self._problem = str(exc)
            return  # closed() returns: `maiden run` stops
        log.info("discord: connected: %s", self.banner())
        with contextlib.suppress(MaidenError):
            await self.runtime.flush_deliveries()  # what waited in the outbox, now

    def _down(self, reason: str) -> None:
        self._problem = reason
        if isinstance(self.deliverer, DiscordDeliverer):
            self.deliverer.offline = f"not connected yet ({reason})"

    def _waiting(self, reason: str, delay: float) -> None:
        self._down(reason)
        log.warning("discord: %s; serving everything else, trying again in %.1f s", reason, delay)

    async def _start(self) -> None:
        """Logged in: who the bot is; then the gateway, or standing by for it."""
        assert self.client.user is not None
        self.bot = str(self.client.user.id)
        self._problem = None
        if isinstance(self.deliverer, DiscordDeliverer):
            self.deliverer.bot = self.bot
            self.deliverer.offline = None
        # One gateway connection per bot among every replica on the store: whoever holds
        # the lease connects; the others stand by (their REST client still posts replies).
        self.holder = await self.runtime.take_lease(self.lease, lost=self._lost)
        if self.holder is None:
            await self._connect()
        else:
            log.info("discord: standing by: %s holds the gateway connection", self.holder)
        self._gateway = asyncio.create_task(self._keep_gateway(), name="maiden-discord-lease")

    @property
    def lease(self) -> str:
        return f"discord:gateway:{self.bot}"

    async def _connect(self) -> None:
        """Open the gateway connection and wait until it is ready; raise if it ends first.
        The lease lost meanwhile, return: ``_keep_gateway`` closes it again."""
        self._connecting = asyncio.create_task(self.client.connect(reconnect=True),
                                               name="maiden-discord-gateway")
        ready = asyncio.create_task(self.client.ready.wait())
        lost = asyncio.create_task(self._lease_lost.wait())
        try:
            await asyncio.wait([ready, lost, self._connecting],
                               return_when=asyncio.FIRST_COMPLETED)
        finally:
            ready.cancel()
            lost.cancel()
        if self.client.ready.is_set():
            self._background.spawn(self._register())
            return
        if self._lease_lost.is_set() and not self._connecting.done():
            return
        await self.__aexit__()
        error = self._connecting.exception() if not self._connecting.cancelled() else None
        if isinstance(error, discord.PrivilegedIntentsRequired):
            raise ChannelRefused("Discord refused the message-content intent: enable it in "
                                 "the developer portal (Bot → Privileged Gateway Intents → "
                                 "Message Content Intent)") from error
        raise MaidenError(f"the Discord gateway did not connect: {error!r}") from error

    async def _register(self) -> None:
        """``/maiden`` in the allowed guilds (every guild the bot is in, without any)."""
        where = self.config.commands
        guilds = [] if where != "guilds" else \
            self.config.allow_guilds or [str(g.id) for g in self.client.guilds]
        try:
            if where == "global":
                self.registered = ["global"] if await register_global(self.tree) else []
            elif where == "guilds":
                self.registered = await register(self.tree, guilds)
        finally:
            self.tried_registering.set()

    async def _keep_gateway(self) -> None:
        """The gateway for as long as the channel serves: connected while this replica holds
        the lease; standing by while another does, or after losing it. Ends (raising what
        ended it) only when the connection ends on its own or cannot be made."""
        while True:
            if self.holder is not None:
                await self._stand_by()
            assert self._connecting is not None
            lost = asyncio.create_task(self._lease_lost.wait())
            try:
                await asyncio.wait([lost, self._connecting],
                                   return_when=asyncio.FIRST_COMPLETED)
            finally:
                lost.cancel()
            if not self._lease_lost.is_set():
                self._connecting.result()
                return
            await self._give_up_gateway()

    async def _give_up_gateway(self) -> None:
        """The lease lost: another replica may hold the gateway now. Close this one's
        connection, keep its REST session (replies of the runs it drives still go out),
        and stand by as a replica that never held it does."""
        self._lease_lost.clear()
        self.holder = "another replica"
        assert self._connecting is not None
        await self.client.disconnect(self._connecting)
        log.info("discord: gateway connection closed; standing by for the lease")

    async def _stand_by(self) -> None:
        """Until this replica holds the gateway lease (its holder stopped or died, or the
        store answers again after this one lost it); then connect."""
        while self.holder is not None:
            await asyncio.sleep(self.runtime.settings.poll_interval_s)
            try:
                self.holder = await self.runtime.take_lease(self.lease, lost=self._lost)
            except MaidenError as exc:
                log.warning("discord: cannot ask for the gateway lease: %s", exc)
        log.info("discord: taking over the gateway connection")
        await self._connect()

    def _lost(self) -> None:
        log.error("discord: lost the gateway lease (the store was out of reach too long); "
                  "closing this replica's gateway connection and standing by: another "
                  "replica takes over, or this one once it holds the lease again")
        self._lease_lost.set()

    async def __aexit__(self, *exc: object) -> None:
        if self._starting is not None and self._starting is not asyncio.current_task():
            self._starting.cancel()
            await asyncio.gather(self._starting, return_exceptions=True)
        if self._gateway is not None and self._gateway is not asyncio.current_task():
            self._gateway.cancel()
            await asyncio.gather(self._gateway, return_exceptions=True)
        await self._background.close()
        await self.client.close()
        if self._connecting is not None:
            await asyncio.gather(self._connecting, return_exceptions=True)
        with contextlib.suppress(MaidenError):
            await self.runtime.release_lease(self.lease)
        await self.downloads.aclose()
        self._closed.set()

    def banner(self) -> str:
        if self._problem is not None:
            return (f"connecting: {self._problem} (trying again, up to every "
                    f"{self.config.reconnect_max_s:g} s; replies wait in the outbox)")
        if self.holder is not None:
            return (f"as {self.client.user} ({self.bot}): standing by, {self.holder} holds "
                    "the gateway connection (this replica takes over if it stops)")
        user = self.client.user
        where = "" if self.config.api_url == DEFAULT_API_URL else f" via {self.config.api_url}"
        return (f"as {user} ({self.bot}) in {len(self.client.guilds)} guild(s){where}; "
                f"{self.config.access.summary()}")

    def status(self) -> str:
        if self._closed.is_set():
            return "stopped"
        if self._problem is not None:
            return f"connecting: {self._problem}"
        if self.client.is_closed():
            return "stopped"
        if self.holder is not None:
            return f"standing by: {self.holder} holds the gateway connection"
        if not self.client.is_ready():
            return "connecting to the gateway"
        latency = self.client.latency
        shown = f", {latency * 1000:.0f} ms heartbeat" if latency == latency else ""  # NaN
        return f"connected as {self.client.user} in {len(self.client.guilds)} guild(s){shown}"

    def stop_intake(self) -> None:
        """Nothing to refuse here: a message that comes while stopping finds the runtime
        closed, and is answered after the next start only if it was stored."""

    async def closed(self) -> None:
        """Returns when the channel stops: closed, refused, or its gateway connection ended
        on its own (raising what ended it). Losing the gateway lease is not stopping: the
        replica stands by."""
        if self._starting is not None:
            await asyncio.shield(self._starting)
            if self._gateway is None:
                return  # gave up connecting
        assert self._gateway is not None, "not started"
        await asyncio.wait([self._gateway])
        if not self._gateway.cancelled():  # cancelled: closed
            self._gateway.result()

    # -- inbound -------------------------------------------------------------------------------

    async def on_message(self, message: discord.Message) -> None:
        try:
            await self._on_message(message)
        finally:
            if str(message.author.id) != self.bot:
                async with self._handled:
                    self.handled += 1
                    self._handled.notify_all()

    async def wait_handled(self, count: int) -> None:
        """Until ``count`` messages from others have been handled (for drains and tests)."""
        async with self._handled:
            await self._handled.wait_for(lambda: self.handled >= count)

    async def _on_message(self, message: discord.Message) -> None:
        seen = self._seen(message)
        found = read_message(seen, bot=self.bot, reply_to_bots=self.config.reply_to_bots,
                             respond_in=self.config.respond_in)
        if not isinstance(found, Inbound):
            return
        if not found.addressed and not (found.in_thread and await self._joined(found)):
            return
        parent = getattr(message.channel, "parent_id", None)
        place = Place.of(found.channel, str(parent) if parent is not None else None,
                         found.guild, direct=found.direct)
        right: Right = "operate" if is_stop(found.text) else "talk"
        if not self.config.access.allows(found.user, place, right):
            log.info("discord: %s may not %s in %s", found.user, right, found.channel)
            return
        if right == "operate":
            self._background.spawn(stop_thread(self.runtime, found.thread_id, found.user, log))
            return
        if not found.text and not found.files:
            return
        try:
            run = await self._intake.submit(
                found.thread_id, found.text, idempotency_key=found.key, fetch=found.files,
                origin=Origin(channel=self.name, target=found.target, user=found.user,
                              place=place.ids, direct=place.direct))
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
        me = self.client.user
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
                    files=tuple(FileSource(via=self.name, url=a.url, name=a.filename,
                                           media_type=a.content_type or "application/octet-stream",
                                           size=a.size, id=str(a.id))
                                for a in message.attachments))

    async def _joined(self, found: Inbound) -> bool:
        return bool(await self.runtime.records.runs(thread_id=found.thread_id, limit=1))

    async def _show_typing(self, where: Any, run_id: str) -> None:
        """The typing indicator while the run works (discord.py renews it every few
        seconds), gone when it ends."""
        try:
            async with where.typing():
                async for _ in self.runtime.follow(run_id):
                    pass
        except discord.DiscordException as exc:
            log.info("discord: no typing indicator: %s", exc)
        finally:
            self._typing.discard(run_id)

    # -- approvals -----------------------------------------------------------------------------

    async def on_interaction(self, interaction: discord.Interaction) -> None:
        data: Any = interaction.data or {}
        if interaction.type in (discord.InteractionType.application_command,
                                discord.InteractionType.autocomplete):
            if data.get("name") == GROUP:
                await self.slash.handle(interaction, self._place(interaction))
            return
        if interaction.type is not discord.InteractionType.component:
            return
        custom_id = str(data.get("custom_id", ""))
        choice = parse_custom_id(custom_id)
        vote = parse_vote_id(custom_id)
        if choice is None and vote is None:
            return
        user = str(interaction.user.id)
        if interaction.message is None:
            return  # a button is always on a message
        click = Click(via=self.name, user=user, channel=str(interaction.channel_id or ""),
                      message=str(interaction.message.id), place=self._place(interaction))
        if vote is not None:
            text, _ = await record_vote(self.runtime, self.config.access, vote, click)
            await self._answer(interaction, CHANNEL_MESSAGE, {"content": text,
                                                              "flags": EPHEMERAL})
            return
        assert choice is not None
        # Only the run's own prompt decides, by the rules at the run's place; the runtime
        # then checks ``approvers`` (or [agent] approvers) again.
        bound = await bind(self.runtime, self.config.access, click, choice.run_id,
                           right="approve", call=choice.call_id or None)
        if isinstance(bound, str):
            await self._answer(interaction, CHANNEL_MESSAGE, {"content": bound,
                                                              "flags": EPHEMERAL})
            return
        run = bound.run
        try:
            pending = run.pending_approval
            if pending is None or not pending.arguments_hash.startswith(choice.hash_prefix) \
                    or (choice.call_id and choice.call_id != pending.tool_call_id):
                raise RunError("stale_approval", "this prompt is no longer current")
            await self.runtime.decide(run.id, pending.tool_call_id, approve=choice.approve,
                                      by=user, arguments_hash=pending.arguments_hash,
                                      approvers=self.config.approvers or None)
        except MaidenError as exc:
            reason = getattr(exc, "reason", "")
            text = refusal_text("decide approvals") if reason == "not_an_approver" \
                else f"That did not work: {exc}"
            await self._answer(interaction, CHANNEL_MESSAGE, {"content": text,
                                                              "flags": EPHEMERAL})
            return
        verb = "Approved" if choice.approve else "Denied"
        await self._answer(interaction, UPDATE_MESSAGE, {
            "content": f"{verb} by <@{user}>: `{pending.name}`", "components": []})

    def _link(self, channel: str, message: str) -> str | None:
        """A message's link: ``https://discord.com/channels/{guild or @me}/{channel}/{id}``."""
        found = self.client.get_channel(int(channel)) if channel.isdigit() else None
        guild = getattr(getattr(found, "guild", None), "id", None)
        return f"https://discord.com/channels/{guild or '@me'}/{channel}/{message}" \
            if channel and message else None

    def _place(self, interaction: discord.Interaction) -> Place:
        channel = str(interaction.channel_id or "")
        guild = str(interaction.guild_id) if interaction.guild_id else None
        parent = getattr(interaction.channel, "parent_id", None)
        return Place.of(channel, str(parent) if parent is not None else None, guild,
                        direct=guild is None)

    async def _answer(self, interaction: discord.Interaction, kind: int,
                      data: dict[str, Any]) -> None:
        route = Route("POST", "/interactions/{interaction_id}/{interaction_token}/callback",
                      interaction_id=interaction.id, interaction_token=interaction.token)
        with contextlib.suppress(discord.DiscordException):
            await self.client.http.request(route, json={"type": kind, "data": data})

