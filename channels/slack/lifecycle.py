"""The Slack channel's connection: who the bot is (``auth.test``), Socket Mode or the
Events API endpoint, trying again in the background while Slack cannot be reached, and
closing.

Bolt's own authorization of a single workspace asks ``auth.test`` at every request until
one answers, so an event that came while the Web API could not be reached failed before
any handler saw it. Who the bot is comes from this connection's own ``auth.test``
instead (or, before it, from the event: ``inbound``); bolt's client holds no token (the
request's gets the bot token from ``authorized``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from slack_bolt.async_app import AsyncApp
from slack_bolt.authorization import AuthorizeResult
from slack_bolt.logger.messages import warning_client_prioritized_and_token_skipped
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from runtime import Runtime

from ..base import Link
from ..retry import ChannelRefused, Reach, Unreachable, reason_of
from .config import SlackConfig, SlackSecrets
from .failures import passing

__all__ = ["SlackConnection", "events_endpoint", "log"]

log = logging.getLogger("maiden.slack")


class _TokenNote(logging.Filter):
    """Drops slack-bolt's warning that the token it read from ``$SLACK_BOT_TOKEN`` itself
    is unused: maiden always hands it a client of its own (and the bot token through
    ``authorized``), so the note says nothing an operator could act on, at every start."""

    note = warning_client_prioritized_and_token_skipped()

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != self.note


log.addFilter(_TokenNote())

class SlackConnection:
    """The workspace as this channel reaches it, and who the bot is there."""

    def __init__(self, runtime: Runtime, config: SlackConfig, secrets: SlackSecrets,
                 client: AsyncWebClient, link: Link) -> None:
        self._runtime = runtime
        self._config = config
        self._secrets = secrets
        self._client = client
        self._link = link
        self.team = ""
        self.team_name = ""
        self.bot_user = ""
        self.bot_id: str | None = None
        self.workspace_url = ""
        """``https://{domain}.slack.com/`` (from ``auth.test``): where message links go."""
        self.reach = Reach("slack", runtime, link, max_s=config.reconnect_max_s, log=log)
        self._app: AsyncApp | None = None
        self._socket: Any = None
        self._connecting: asyncio.Task[None] | None = None
        self._closed = asyncio.Event()

    @property
    def problem(self) -> str | None:
        """Why Slack is not connected yet (None: it is)."""
        return self.reach.problem

    def authorized(self, enterprise_id: str | None, team_id: str | None) -> AuthorizeResult:
        """Bolt's authorization of a request: the bot token, and who the bot is once the
        Web API has said (``_connect``)."""
        return AuthorizeResult(enterprise_id=enterprise_id, team_id=team_id or self.team,
                               bot_token=self._secrets.bot_token,
                               bot_user_id=self.bot_user or None, bot_id=self.bot_id)

    async def open(self, app: AsyncApp) -> None:
        """Connect ``app``, or, if Slack cannot be reached, keep trying in the background
        (``ChannelRefused`` if Slack refuses a token)."""
        self._app = app
        try:
            await self._connect()
        except Unreachable as exc:
            self.reach.down(str(exc))
            self._connecting = asyncio.create_task(self._keep_connecting(exc),
                                                   name="maiden-slack-connect")

    async def _connect(self) -> None:
        """One attempt: who the bot is, then (Socket Mode) the socket. ``Unreachable`` if
        Slack did not answer, ``ChannelRefused`` if it said no."""
        auth = await self._ask("auth.test", self._client.auth_test(),
                               f"${self._config.bot_token_env}")
        self.team, self.team_name = str(auth["team_id"]), str(auth.get("team") or "")
        self.workspace_url = str(auth.get("url") or "")
        self.bot_user, self.bot_id = str(auth["user_id"]), auth.get("bot_id")
        self._link.signed_in_as(self.bot_user)
        if self._config.mode == "socket":
            from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler

            # Asked here, not inside connect_async (which retries every error, a refused
            # app token included, forever): so a refusal is one line and a fault backs off.
            opened = await self._ask("apps.connections.open", self._client.apps_connections_open(
                app_token=self._secrets.app_token or ""), f"${self._config.app_token_env}")
            assert self._app is not None
            socket: Any = AsyncSocketModeHandler(self._app, self._secrets.app_token,
                                                 web_client=self._client, logger=log)
            socket.client.wss_uri = str(opened["url"])
            await socket.connect_async()
            self._socket = socket
        self.reach.up()

    async def _ask(self, method: str, call: Awaitable[Any], token: str) -> Any:
        """One Web API call at start, its failure sorted into refused or unreachable."""
        try:
            return await call
        except SlackApiError as exc:
            status = exc.response.status_code if exc.response is not None else 0
            error = str(exc.response.get("error") if exc.response is not None else exc)
            if passing(exc):
                raise Unreachable(f"{method} answered {status} {error}") from exc
            raise ChannelRefused(f"Slack refused {token} ({method} at {self._config.api_url}): "
                                 f"{error}") from exc
        except (SlackClientError, aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise Unreachable(f"cannot reach {self._config.api_url}: "
                              f"{reason_of(exc)}") from exc

    async def _keep_connecting(self, first: Unreachable) -> None:
        if await self.reach.retry(self._connect, first, banner=self.banner) is not None:
            self._closed.set()  # `maiden run` stops: a refused token is no fault to wait out

    async def close(self) -> None:
        """Stop trying to connect, and close the socket."""
        if self._connecting is not None:
            self._connecting.cancel()
            await asyncio.gather(self._connecting, return_exceptions=True)
        if self._socket is not None:
            with contextlib.suppress(Exception):
                await self._socket.close_async()

    def stopped(self) -> None:
        """The channel is closed: ``closed`` returns."""
        self._closed.set()

    async def closed(self) -> None:
        """Returns when the channel stopped, or gave up connecting (Slack refused a token)."""
        await self._closed.wait()

    def banner(self) -> str:
        if (connecting := self.reach.banner()) is not None:
            return connecting
        how = "Socket Mode" if self._config.mode == "socket" \
            else "Events API at POST /slack/events"
        who = self._config.access.summary()
        return f"{how}, workspace {self.team_name or self.team} ({self.team}) as " \
               f"<@{self.bot_user}>; {who}"

    def status(self) -> str:
        if self._closed.is_set():
            return "stopped"
        if self.problem is not None:
            return f"connecting: {self.problem}"
        if self._config.mode == "http":
            return "taking events at POST /slack/events"
        client = getattr(self._socket, "client", None)
        session = getattr(client, "current_session", None)
        if client is None or client.closed:
            return "not connected"
        if session is None or session.closed or client.stale:
            return "reconnecting to Socket Mode"
        return f"connected (Socket Mode, workspace {self.team_name or self.team})"


def events_endpoint(app: AsyncApp, signing_secret: str | None
                    ) -> Callable[[Any], Awaitable[Any]]:
    """The Events API endpoint (``mode = "http"``) over ``app``: bolt checks the signature
    (401 and nothing stored if it is missing, wrong or older than five minutes).

    Bolt parses the body before it checks anything, and a body it cannot parse was a
    500 with a traceback; such a body is answered here: 401 unless it is signed, else
    400 with one log line."""
    from slack_bolt.adapter.starlette.async_handler import AsyncSlackRequestHandler
    from slack_bolt.request.internals import parse_body
    from slack_sdk.signature import SignatureVerifier
    from starlette.responses import PlainTextResponse

    handler = AsyncSlackRequestHandler(app)
    verifier = SignatureVerifier(signing_secret or "")

    async def slack_events(request: Any) -> Any:
        raw = await request.body()  # kept by the request: bolt reads it again
        kind = request.headers.get("content-type")
        try:
            readable = isinstance(parse_body(raw.decode(), kind), dict)
        except ValueError:  # not UTF-8, or not JSON (JSONDecodeError is a ValueError)
            readable = False
        if readable:
            return await handler.handle(request)
        if not verifier.is_valid_request(raw, dict(request.headers)):
            return PlainTextResponse("invalid request signature", status_code=401)
        log.warning("slack: a signed request to POST /slack/events is not JSON "
                    "(%s, %d bytes); answered 400", kind or "no content type", len(raw))
        return PlainTextResponse("the body is not JSON", status_code=400)

    return slack_events
