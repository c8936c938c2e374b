"""The Discord channel's life: logging in (again and again while Discord cannot be reached
at start), the gateway connection or standing by for it, and closing.

Discord wants one gateway connection per shard, so only the process holding the store's
lease ``discord:gateway:{bot}`` connects; the others stand by (still posting replies over
REST) and one takes over when the holder stops or dies. A holder that loses the lease
(the store out of reach for longer than its lifetime) closes its gateway connection only,
and stands by as the others do: it still posts its runs' replies, and connects again once
it holds the lease again. The channel stops (``closed``) only when it is closed, or its
gateway connection ends for a reason of its own (a refused token).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import aiohttp
import discord

from runtime import MaidenError, Runtime, StoreError, doubling

from ..base import Link
from ..downloads import Downloader
from ..retry import ChannelRefused, Reach, Unreachable, reason_of
from ..work import Background
from .client import GatewayClient
from .commands import Registry, register, register_global
from .config import DEFAULT_API_URL, DiscordConfig

__all__ = ["Gateway", "log"]

log = logging.getLogger("maiden.discord")


class Gateway:
    """The bot's login and gateway connection, for as long as the channel serves."""

    def __init__(self, runtime: Runtime, config: DiscordConfig, token: str,
                 client: GatewayClient, link: Link, *, tree: Registry,
                 background: Background, downloads: Downloader, own_connector: bool) -> None:
        self._runtime = runtime
        self._config = config
        self._token = token
        self._client = client
        self._link = link
        self._tree = tree
        self._background = background
        self._downloads = downloads
        self._own_connector = own_connector
        self.bot = ""
        self.holder: str | None = None
        """Who holds the gateway connection, while another replica does."""
        self.registered: list[str] | None = None
        """The guilds ``/maiden`` was registered in (None: not tried yet)."""
        self.tried_registering = asyncio.Event()
        self.reach = Reach("discord", runtime, link, max_s=config.reconnect_max_s,
                           log=log)
        self._connecting: asyncio.Task[None] | None = None
        """discord.py's ``connect``: the gateway connection while this replica holds it."""
        self._gateway: asyncio.Task[None] | None = None
        """The gateway over the channel's life (``_keep_gateway``); it ends when it stops."""
        self._lease_lost = asyncio.Event()
        self._closed = asyncio.Event()
        self._starting: asyncio.Task[None] | None = None
        """Logging in again and again while Discord cannot be reached at start."""

    @property
    def lease(self) -> str:
        return f"discord:gateway:{self.bot}"

    async def open(self) -> None:
        """Log in and connect, or, if Discord cannot be reached, keep trying in the
        background (``ChannelRefused`` if it refuses the token or the message-content
        intent)."""
        try:
            await self._log_in()
        except Unreachable as exc:
            self.reach.down(str(exc))
            self._starting = asyncio.create_task(self._keep_logging_in(exc),
                                                 name="maiden-discord-login")
            return
        await self._start()

    async def _log_in(self) -> None:
        """One attempt at ``GET /users/@me``: ``Unreachable`` if Discord did not answer,
        ``ChannelRefused`` if it refused the token."""
        try:
            await self._client.login(self._token)
        except discord.LoginFailure as exc:
            await self._client.close()
            raise ChannelRefused(f"Discord refused the bot token (${self._config.token_env}): "
                                 f"{exc}") from exc
        except discord.HTTPException as exc:
            if exc.status < 500 and exc.status != 429:
                await self._client.close()
                raise ChannelRefused(f"Discord refused the login (${self._config.token_env}): "
                                     f"{exc.status} {exc.text}") from exc
            raise Unreachable(f"{self._config.api_url} answered {exc.status}") from exc
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            await self._drop_session()
            raise Unreachable(f"cannot reach {self._config.api_url}: {reason_of(exc)}") from exc

    async def _drop_session(self) -> None:
        """Close the HTTP session a failed login opened (each login opens one; left open,
        aiohttp logs "Unclosed client session" when the next replaces it). Its connector
        closes with it, so discord.py makes a new one next time; a connector handed in
        cannot be remade, so its session is left as it is."""
        if self._own_connector:
            await self._client.http.close()
            self._client.http.connector = discord.utils.MISSING

    async def _keep_logging_in(self, first: Unreachable) -> None:
        # Refused, or the gateway did not connect (``_start`` raises no ``Unreachable``, so
        # it is not tried again): closed() returns, `maiden run` stops.
        refused = await self.reach.retry(self._log_in_and_start, first, banner=self.banner)
        if refused is not None:
            self.reach.problem = str(refused)

    async def _log_in_and_start(self) -> None:
        await self._log_in()
        await self._start()

    async def _start(self) -> None:
        """Logged in: who the bot is; then the gateway, or standing by for it."""
        assert self._client.user is not None
        self.bot = str(self._client.user.id)
        self.reach.up()
        self._link.signed_in_as(self.bot)
        # One gateway connection per bot among every replica on the store: whoever holds
        # the lease connects; the others stand by (their REST client still posts replies).
        try:
            self.holder = await self._runtime.operator.take_lease(self.lease, lost=self._lost)
        except StoreError as exc:  # out of reach a moment (its server restarting, say):
            # no reason to stop; stand by, asking again, as after losing the lease
            log.warning("discord: cannot ask for the gateway lease: %s; standing by", exc)
            self.holder = "nobody known yet (the store did not answer)"
        if self.holder is None:
            await self._connect()
        else:
            log.info("discord: standing by: %s holds the gateway connection", self.holder)
        self._gateway = asyncio.create_task(self._keep_gateway(), name="maiden-discord-lease")

    async def _connect(self, *, taking_over: bool = False) -> None:
        """Open the gateway connection and wait until it is ready; raise if it ends first.
        The lease lost meanwhile, return: ``_keep_gateway`` closes it again. Taking over
        from another replica, a connection that did not come up for any reason but a
        refusal closes the gateway only and says ``Unreachable`` (Discord may be down for
        a while: ``_stand_by`` tries again)."""
        self._connecting = asyncio.create_task(self._client.connect(reconnect=True),
                                               name="maiden-discord-gateway")
        ready = asyncio.create_task(self._client.ready.wait())
        lost = asyncio.create_task(self._lease_lost.wait())
        try:
            await asyncio.wait([ready, lost, self._connecting],
                               return_when=asyncio.FIRST_COMPLETED)
        finally:
            ready.cancel()
            lost.cancel()
        if self._client.ready.is_set():
            self._background.spawn(self._register())
            return
        if self._lease_lost.is_set() and not self._connecting.done():
            return
        error = self._connecting.exception() if not self._connecting.cancelled() else None
        if taking_over and not isinstance(error, discord.PrivilegedIntentsRequired):
            await self._client.disconnect(self._connecting)
            raise Unreachable(f"the Discord gateway did not connect: {error!r}")
        await self.close()
        if isinstance(error, discord.PrivilegedIntentsRequired):
            raise ChannelRefused("Discord refused the message-content intent: enable it in "
                                 "the developer portal (Bot → Privileged Gateway Intents → "
                                 "Message Content Intent)") from error
        raise MaidenError(f"the Discord gateway did not connect: {error!r}") from error

    async def _register(self) -> None:
        """``/maiden`` in the allowed guilds (every guild the bot is in, without any)."""
        where = self._config.commands
        guilds = [] if where != "guilds" else \
            self._config.allow_guilds or [str(g.id) for g in self._client.guilds]
        try:
            if where == "global":
                self.registered = ["global"] if await register_global(self._tree) else []
            elif where == "guilds":
                self.registered = await register(self._tree, guilds)
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
        await self._client.disconnect(self._connecting)
        log.info("discord: gateway connection closed; standing by for the lease")

    async def _stand_by(self) -> None:
        """Until this replica holds the gateway lease (its holder stopped or died, or the
        store answers again after this one lost it); then connect, again and again (backing
        off, the lease kept) while Discord does not answer."""
        failures = 0
        while True:
            while self.holder is not None:
                await asyncio.sleep(self._runtime.operator.settings.poll_interval_s)
                try:
                    self.holder = await self._runtime.operator.take_lease(
                        self.lease, lost=self._lost)
                except MaidenError as exc:
                    log.warning("discord: cannot ask for the gateway lease: %s", exc)
                except Exception:  # standing by, its one job is to ask again
                    # (chaos finding 26: a replica standing by stopped as PostgreSQL
                    # restarted, saying nothing of why; whatever it was is said here)
                    log.exception("discord: asking for the gateway lease failed; asking again")
            log.info("discord: taking over the gateway connection")
            try:
                await self._connect(taking_over=True)
                return
            except Unreachable as exc:
                pause = doubling(failures, 1.0, self._config.reconnect_max_s)
                log.warning("discord: %s; trying again in %.0f s", exc, pause)
                await asyncio.sleep(pause)
                failures += 1
            if self._lease_lost.is_set():  # meanwhile: another replica may hold it now
                self._lease_lost.clear()
                self.holder = "another replica"

    def _lost(self) -> None:
        log.error("discord: lost the gateway lease (the store was out of reach too long); "
                  "closing this replica's gateway connection and standing by: another "
                  "replica takes over, or this one once it holds the lease again")
        self._lease_lost.set()

    async def close(self) -> None:
        """Stop trying, close the gateway and the REST session, give the lease back."""
        if self._starting is not None and self._starting is not asyncio.current_task():
            self._starting.cancel()
            await asyncio.gather(self._starting, return_exceptions=True)
        if self._gateway is not None and self._gateway is not asyncio.current_task():
            self._gateway.cancel()
            await asyncio.gather(self._gateway, return_exceptions=True)
        await self._background.close()
        await self._client.close()
        if self._connecting is not None:
            await asyncio.gather(self._connecting, return_exceptions=True)
        with contextlib.suppress(MaidenError):
            await self._runtime.operator.release_lease(self.lease)
        await self._downloads.aclose()
        self._closed.set()

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

    def banner(self) -> str:
        if (connecting := self.reach.banner()) is not None:
            return connecting
        if self.holder is not None:
            return (f"as {self._client.user} ({self.bot}): standing by, {self.holder} holds "
                    "the gateway connection (this replica takes over if it stops)")
        user = self._client.user
        where = "" if self._config.api_url == DEFAULT_API_URL else f" via {self._config.api_url}"
        return (f"as {user} ({self.bot}) in {len(self._client.guilds)} guild(s){where}; "
                f"{self._config.access.summary()}")

    def status(self) -> str:
        if self._closed.is_set():
            return "stopped"
        if self.reach.problem is not None:
            return f"connecting: {self.reach.problem}"
        if self._client.is_closed():
            return "stopped"
        if self.holder is not None:
            return f"standing by: {self.holder} holds the gateway connection"
        if not self._client.is_ready():
            return "connecting to the gateway"
        latency = self._client.latency
        shown = f", {latency * 1000:.0f} ms heartbeat" if latency == latency else ""  # NaN
        return f"connected as {self._client.user} in {len(self._client.guilds)} guild(s){shown}"
