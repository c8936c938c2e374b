"""``FakeDiscord``: Discord's REST API and gateway on 127.0.0.1, for the real discord.py.

One aiohttp app on two ports: TLS, reached through ``connector()`` under Discord's own host
names (``net.py``: the per-client way to point discord.py here), and plain HTTP (``api_url``,
``gateway_url``) for code that takes base URLs. The REST API lives under ``/api/v10``
(``routes.py`` matches, holds each request to Discord's documented contract
(``contract.py``), records and plays faults; ``rest.py`` and ``interactions.py`` carry
requests out); the gateway (``gateway.py``) at ``/``, ``/gateway`` and ``/resume``.

Faults are queued per route and consumed in order: a status (429 with Discord's body and
headers, which discord.py sleeps on and retries; 500/502/504, which it retries after 1s, 3s..;
others it raises), or ``drop``: the request is carried out and the connection closed before
the answer. Every request is recorded (``calls``). Each wait has a deadline (the fake's
``wait``) whose error names what it waited for. ``misbehave`` makes Discord slow, answer
5xx or 429, or go down, for a while.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractContextManager, asynccontextmanager
from typing import Self

import aiohttp
from aiohttp import web

from ..site import loopback_runner, serve_on_loopback
from . import payloads as p
from .cdn import Cdn
from .gateway import Gateway, Received
from .interactions import InteractionResponse
from .net import Certificates, discord_py_pointed_at
from .payloads import JSON, Id
from .rest import RestAPI
from .routes import PREFIX, REQUEST_LIMIT, Call, Fault, Outage, Router, Scope
from .store import Store
from .world import World


class FakeDiscord:
    """Discord on loopback.

    ``async with FakeDiscord() as fake:
    discord.Client(intents=..., connector=fake.connector()).start(fake.token)``
    """

    def __init__(self, world: World | None = None, *, wait: float = 5.0,
                 heartbeat_interval: int = 41_250, echo: bool = True,
                 nonce_window: float = 300.0, interaction_deadline: float = 3.0,
                 port: int = 0) -> None:
        self.world = world or World()
        self.wait = wait
        """Default deadline (seconds) of every wait."""
        self.echo = echo
        """Echo the bot's own new, edited and deleted messages on the gateway, as Discord does."""
        self.store = Store(nonce_window=nonce_window)
        self.rest = RestAPI(self.world, self.store, self._echo,
                            interaction_deadline=interaction_deadline)
        self._changed = asyncio.Condition()
        self.gateway = Gateway(self.world, self._changed, heartbeat_interval=heartbeat_interval)
        self.gateway.remember = self.rest.interactions.remember
        self.router = Router(self.rest, lambda: self.gateway_url)
        self._tls = Certificates()
        self._runner: web.AppRunner | None = None
        self.port = port
        """Where the plain-HTTP API and gateway serve (0: a free port, chosen at start)."""
        self.tls_port = 0
        self.cdn = Cdn()
        """People's attachments, served at signed URLs on the plain port."""

    # -- addresses and identity

    @property
    def token(self) -> str:
        return self.world.token

    @property
    def api_url(self) -> str:
        """The plain-HTTP REST base, as ``discord.http.Route.BASE`` would be."""
        return f"http://127.0.0.1:{self.port}{PREFIX}"

    @property
    def cdn_url(self) -> str:
        """The origin attachments are served from (for ``file_hosts``)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def gateway_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/gateway"

    def connector(self) -> aiohttp.TCPConnector:
        """For ``discord.Client(connector=...)``: Discord's hosts lead here, over trusted TLS.

        The client's session owns and closes it; make a new one per client."""
        return self._tls.connector(self.tls_port)

    def discord_py_globals(self) -> AbstractContextManager[None]:
        """``with fake.discord_py_globals():`` every discord.py client in the process uses the
        plain ports (``Route.BASE``, ``DEFAULT_GATEWAY``; restored after). The fallback for
        code that cannot be handed a connector."""
        return discord_py_pointed_at(self.api_url, self.gateway_url)

    # -- lifecycle

    async def __aenter__(self) -> Self:
        app = web.Application(client_max_size=REQUEST_LIMIT)
        app.router.add_route("*", PREFIX + "/{tail:.*}", self._handle)
        for path in ("/", "/gateway", "/resume"):
            app.router.add_get(path, self._gateway)
        app.router.add_get("/attachments/{channel}/{id}/{name}", self.cdn.serve)
        self._runner = loopback_runner(app)
        await self._runner.setup()
        self.port = await serve_on_loopback(self._runner, port=self.port)
        self.tls_port = await serve_on_loopback(self._runner,
                                                ssl_context=self._tls.server_context())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._runner is not None
        await self.gateway.shutdown()
        await self._runner.cleanup()

    # -- faults and records

    def fail(self, route: str, *, status: int | None = None, retry_after: float = 0.1,
             drop: bool = False, scope: Scope = "user") -> None:
        """Queue a fault for ``route`` (``"POST /channels/{id}/messages"``; a ``{...}`` segment
        matches any id): each matching request takes the next one queued."""
        if (status is None) == (not drop):
            raise ValueError("a fault is one of status= or drop=True")
        self.router.fail(route, Fault(status, retry_after, drop, scope))

    def pending_faults(self, route: str) -> int:
        return self.router.pending_faults(route)

    def unfail(self, route: str) -> int:
        """Drop the faults still queued for ``route`` (``fail``'s); how many there were."""
        return self.router.unfail(route)

    async def misbehave(self, mode: str, seconds: float, *, status: int = 500,
                        retry_after: float = 1.0, delay_s: float = 2.0) -> None:
        """For ``seconds``: every REST request answered ``status`` (``mode="status"``; a 429
        as ``fail`` answers it), or ``delay_s`` late (``"slow"``), or Discord down
        (``"down"``: requests cut unanswered, the gateway's live connections closed with
        4000, which a client resumes, and new ones refused until it is over)."""
        self.router.outage = Outage(mode, time.monotonic() + seconds, status, retry_after,
                                    delay_s)
        if mode == "down":
            for session in list(self.gateway.sessions.values()):
                link, session.link = session.link, None
                if link is not None and not link.ws.closed:
                    await link.ws.close(code=4000, message=b"Unknown error.")

    async def _gateway(self, request: web.Request) -> web.StreamResponse:
        outage = self.router.current_outage()
        if outage is not None and outage.mode == "down":
            return web.Response(status=503, text="discord is down")
        return await self.gateway.handle(request)

    def calls(self, route: str | None = None) -> list[Call]:
        """Every REST request (to ``route``, matched like ``fail``'s), in order."""
        return self.router.calls(route)

    @property
    def served(self) -> set[tuple[str, str]]:
        """Every (method, route template) answered, as discord.py's ``Route`` names it."""
        return set(self.router.served)

    @property
    def uncovered(self) -> set[tuple[str, str]]:
        """Requests that found no contract entry (answered 404): what the fake cannot vouch
        for. Empty after a flow: everything it sent was held to Discord's documented rules."""
        return set(self.router.uncovered)

    def messages(self, channel_id: Id) -> list[JSON]:
        """Every (non-ephemeral) message of the channel, oldest first, as the API shows it."""
        return self.store.all(channel_id)

    def ephemerals(self, channel_id: Id) -> list[JSON]:
        return self.store.ephemerals(channel_id)

    def typing(self, channel_id: Id) -> list[float]:
        """When (``time.monotonic``) the bot triggered typing in the channel."""
        return list(self.rest.typing.get(str(channel_id), []))

    def interaction_responses(self) -> list[InteractionResponse]:
        return list(self.rest.interactions.responses)

    def shown(self, interaction: JSON) -> list[JSON]:
        """What the person was shown in answer to ``interaction`` (as ``click`` or
        ``command`` returned it): its response's message once it says something (edited out
        of "thinking"; for a deferred update, the clicked message once edited), then its
        follow-ups, as stored now."""
        return self.rest.interactions.shown(str(interaction["id"]))

    @property
    def received(self) -> list[Received]:
        """Every gateway payload the client sent, on any connection."""
        return list(self.gateway.received)

    @property
    def intents(self) -> int | None:
        """The intents of the latest IDENTIFY."""
        return self.gateway.identifies[-1]["intents"] if self.gateway.identifies else None

    # -- what people do

    def post_as_user(self, channel_id: Id, author_id: Id, content: str, *,
                     mentions: Sequence[Id] = (), reply_to: JSON | None = None,
                     files: Sequence[tuple[str, bytes, str]] = ()) -> JSON:
        """Store a message a person wrote (with ``files``: ``(name, bytes, content type)``,
        served by the CDN); return its MESSAGE_CREATE ``d``."""
        channel = self.rest.channel(str(channel_id))
        author = self.world.user(author_id)
        attachments = [self.cdn.add(self.cdn_url, channel["id"], *f)
                       for f in files]
        msg = p.message(p.new_id(), channel["id"], author, content,
                        mentions=[self.world.user(m) for m in mentions], referenced=reply_to,
                        nonce=str(p.new_id()), attachments=attachments)
        self.store.create(msg)
        channel["last_message_id"] = msg["id"]
        return self.rest.for_gateway(msg)

    async def user_message(self, channel_id: Id, author_id: Id, content: str, *,
                           mentions: Sequence[Id] = (), reply_to: JSON | None = None,
                           files: Sequence[tuple[str, bytes, str]] = ()) -> JSON:
        """``post_as_user`` and dispatch its MESSAGE_CREATE; returns the ``d`` sent."""
        d = self.post_as_user(channel_id, author_id, content, mentions=mentions,
                              reply_to=reply_to, files=files)
        await self.dispatch("MESSAGE_CREATE", d)
        return d

    async def command(self, name: str, options: Sequence[JSON] = (), *,
                      user_id: Id = p.HUMAN_ID, channel_id: Id = p.GENERAL_ID,
                      autocomplete: bool = False, data: JSON | None = None) -> JSON:
        """Dispatch an application command (as registered: ``/name`` with ``options``), or
        its autocomplete; ``data``: dispatch that interaction again (a replay)."""
        if data is None:
            guild_id = self.world.guild_of(channel_id)
            registered = next((c for c in self.rest.commands.get(str(guild_id), [])
                               if c["name"] == name), None)
            data = p.command_interaction(name, options, user_id, channel_id, guild_id,
                                         application_id=self.world.app_id,
                                         command_id=registered["id"] if registered else "0",
                                         autocomplete=autocomplete)
        await self.dispatch("INTERACTION_CREATE", data)
        return data

    async def click(self, message: JSON, custom_id: str, user_id: Id = p.HUMAN_ID) -> JSON:
        """Dispatch a button click on ``message`` (as stored); returns the interaction."""
        channel_id = message["channel_id"]
        guild_id = self.world.guild_of(channel_id)
        shown = {k: v for k, v in message.items() if k not in ("guild_id", "member")}
        channel = dict(self.rest.channel(channel_id))
        if guild_id is not None:
            channel["permissions"] = p.MEMBER_PERMISSIONS
        data = p.component_interaction(custom_id, user_id, channel_id, shown, guild_id,
                                       application_id=self.world.app_id,
                                       username=self.world.user(user_id)["username"],
                                       channel=channel)
        await self.dispatch("INTERACTION_CREATE", data)
        return data

    # -- the gateway

    async def dispatch(self, event: str, data: JSON, *,
                       timeout: float | None = None) -> int | None:  # noqa: ASYNC109
        """Send a dispatch (op 0) to the current session, waiting for one to exist; returns its
        ``s``, or None if the session's intents exclude it. Held while no connection holds
        the session, and replayed on RESUME."""
        await self.until(lambda: self.gateway.current is not None,
                         what="an identified gateway session", timeout=timeout)
        assert self.gateway.current is not None
        return await self.gateway.emit(self.gateway.current, event, data)

    async def _echo(self, event: str, data: JSON) -> None:
        if self.echo and self.gateway.current is not None:
            await self.gateway.emit(self.gateway.current, event, data)

    async def reconnect(self, *, replay_from: int | None = None) -> None:
        """Send RECONNECT (op 7). On the client's RESUME, dispatches after its ``seq`` are
        replayed — or after ``replay_from``, to make Discord deliver some events twice."""
        await self.until(lambda: self.gateway.live() is not None,
                         what="a live gateway connection")
        await self.gateway.reconnect(replay_from)

    async def invalidate(self, *, resumable: bool = False) -> None:
        """Send INVALID_SESSION (op 9); not resumable: the session is gone."""
        await self.until(lambda: self.gateway.live() is not None,
                         what="a live gateway connection")
        await self.gateway.invalidate(resumable)

    async def close_gateway(self, code: int = 4000) -> None:
        """Close the live connection from Discord's side with ``code``."""
        await self.until(lambda: self.gateway.live() is not None,
                         what="a live gateway connection")
        await self.gateway.drop(code)

    # -- waits (each with a deadline: ``timeout`` or the fake's ``wait``)

    @asynccontextmanager
    async def _deadline(self, seconds: float | None, what: str) -> AsyncIterator[None]:
        seconds = self.wait if seconds is None else seconds
        try:
            async with asyncio.timeout(seconds):
                yield
        except TimeoutError:
            why = f" (the gateway: {'; '.join(self.gateway.refused)})" \
                if self.gateway.refused else ""
            raise TimeoutError(f"FakeDiscord waited {seconds}s for {what}{why}") from None

    async def until(self, predicate: Callable[[], bool], *, what: str = "a condition",
                    timeout: float | None = None) -> None:  # noqa: ASYNC109
        """Wait until ``predicate()`` holds; checked after every request and gateway payload."""
        async with self._deadline(timeout, what), self._changed:
            await self._changed.wait_for(predicate)

    async def identified(self, count: int = 1, *,
                         timeout: float | None = None) -> JSON:  # noqa: ASYNC109
        """Wait for the ``count``-th IDENTIFY to be answered with READY; return its ``d``."""
        await self.until(lambda: len(self.gateway.identifies) >= count,
                         what=f"IDENTIFY #{count}", timeout=timeout)
        return self.gateway.identifies[count - 1]

    async def resumed(self, count: int = 1, *,
                      timeout: float | None = None) -> JSON:  # noqa: ASYNC109
        """Wait for the ``count``-th RESUME to be answered with RESUMED; return its ``d``."""
        await self.until(lambda: len(self.gateway.resumes) >= count,
                         what=f"RESUME #{count}", timeout=timeout)
        return self.gateway.resumes[count - 1]

    async def wait_messages(self, channel_id: Id, count: int, *,
                            timeout: float | None = None) -> list[JSON]:  # noqa: ASYNC109
        await self.until(lambda: len(self.store.all(channel_id)) >= count,
                         what=f"{count} messages in channel {channel_id}", timeout=timeout)
        return self.messages(channel_id)

    # -- REST

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        try:
            return await self.router.answer(request)
        finally:
            async with self._changed:  # wake ``until`` waiters: a call was recorded
                self._changed.notify_all()
