"""Slack as a channel of `maiden run`: slack-bolt's ``AsyncApp`` over the runtime's API.

Inbound: a message is stored as a queued run (one SQLite commit) before Slack gets
its acknowledgement (``process_before_response``), keyed by the message, so Slack's
retries, a retry after a restart and the same message as ``app_mention`` and
``message.*`` make one run; the run happens after the ack. Outbound goes through
the runtime's outbox and ``SlackDeliverer``. Buttons on an approval prompt decide
the call (only ``approvers``, and only on that run's own prompt: ``clicks``); ``stop``
in a thread cancels its running run; the 👍 / 👎 under an answer record the person's
vote (``feedback``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Self

import aiohttp
from slack_bolt.async_app import AsyncApp
from slack_bolt.authorization import AuthorizeResult
from slack_bolt.logger.messages import warning_client_prioritized_and_token_skipped
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient

from runtime import (
    ACTIVE_STATES,
    Deliverer,
    FileFetcher,
    MaidenError,
    Origin,
    Run,
    RunError,
    RunEvent,
    RunStarted,
    RunState,
    Runtime,
    ScheduleService,
)

from ..access import Place
from ..clicks import FOREIGN, Bound, bind, run_place
from ..commands import Commands
from ..downloads import Downloader
from ..origins import SLACK_FILE_ORIGINS
from ..prompts import refusal_text
from ..retry import Backoff, ChannelRefused, Unreachable, keep_trying, reason_of
from ..work import Background, is_stop, stop_thread
from .assistant import AssistantThreads
from .commands import COMMAND, SlashCommand
from .config import SlackConfig, SlackSecrets
from .deliverer import SlackDeliverer
from .feedback import FeedbackButtons
from .home import AppHome
from .mapping import Inbound, read_click, read_event
from .render import FEEDBACK, decided_blocks, parse_choice
from .sessions import Sessions, title_of
from .streamer import SlackStreamer

__all__ = ["SlackChannel"]

log = logging.getLogger("maiden.slack")


class _TokenNote(logging.Filter):
    """Drops slack-bolt's warning that the token it read from ``$SLACK_BOT_TOKEN`` itself
    is unused: maiden always hands it a client of its own (and the bot token through
    ``_authorized``), so the note says nothing an operator could act on, at every start."""

    note = warning_client_prioritized_and_token_skipped()

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != self.note


log.addFilter(_TokenNote())

_TRY_LATER = frozenset({"ratelimited", "fatal_error", "internal_error", "service_unavailable",
                        "request_timeout"})
"""Errors Slack answers with when it is the problem, not the token."""

_FRESH = 1_000
"""How many runs taken here and not started yet are remembered (``_fresh``)."""

NO_ACCESS = ("Slack sent its sign-in page instead of the file: the bot token may not read "
             "it (the app needs the files:read scope; add it and reinstall the app)")


class SlackChannel:
    """Serves a Slack workspace over Socket Mode or the Events API (``mode``)."""

    name = "slack"

    def __init__(
        self,
        runtime: Runtime,
        config: SlackConfig,
        secrets: SlackSecrets,
        *,
        pace_s: float = 1.0,
        schedules: ScheduleService | None = None,
    ) -> None:
        self.runtime = runtime
        self.config = config
        self.secrets = secrets
        self.client = AsyncWebClient(
            token=secrets.bot_token, base_url=config.api_url,
            # Rate limits only: a connection error may hide a stored post (see deliverer.py).
            retry_handlers=[AsyncRateLimitErrorRetryHandler(max_retry_count=3)])
        deliverer = SlackDeliverer(self.client, pace_s=pace_s)
        if config.stream != "off":
            deliverer.streamer = SlackStreamer(deliverer, mode=config.stream,
                                               append_every_s=config.stream_every_s,
                                               edit_every_s=config.edit_every_s)
        self.deliverer: Deliverer | None = deliverer
        self.downloads = Downloader(
            "Slack", (*SLACK_FILE_ORIGINS, *config.file_hosts),
            headers={"Authorization": f"Bearer {secrets.bot_token}"}, no_access=NO_ACCESS)
        self.fetcher: FileFetcher | None = self.downloads
        self.team = ""
        self.team_name = ""
        self.bot_user = ""
        self.bot_id: str | None = None
        self._app: AsyncApp | None = None
        self._socket: Any = None
        self._closed = asyncio.Event()
        self._connecting: asyncio.Task[None] | None = None
        self._problem: str | None = None
        """Why Slack is not connected yet (None: it is)."""
        if isinstance(self.deliverer, SlackDeliverer):
            self.deliverer.offline = "not connected yet"
        self._background = Background(log, "maiden-slack")
        self._told: set[str] = set()
        self._watching: set[str] = set()
        self.assistant = AssistantThreads(self.client, config.suggested_prompts)
        self.sessions = Sessions(self.client, runtime)
        """Slack's agent sessions of the threads answered here, and its stop button."""
        deliverer.sessions = self.sessions  # a run's end or pause is said with its reply
        self._fresh: dict[str, None] = {}
        """Runs taken here whose session was just set ``processing`` and that have not
        started here yet (their first start need not say it again); the last ones only."""
        self._unlisten: Callable[[], None] | None = None
        self.feedback = FeedbackButtons(runtime, config, self.client)
        self.workspace_url = ""
        """``https://{domain}.slack.com/`` (from ``auth.test``): where message links go."""
        self.slash = SlashCommand(Commands(runtime, schedules, link=self._link), config,
                                  self.client, self._background)
        self.home = AppHome(runtime, config, self.client, schedules, self._background)

    # -- lifespan ------------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        """Connect, or, if Slack cannot be reached, keep trying in the background while
        everything else serves (``ChannelRefused`` if Slack refuses a token)."""
        # Bolt's own authorization of a single workspace asks auth.test at every request
        # until one answers, so an event that came while the Web API could not be reached
        # failed before any handler saw it. Who the bot is comes from this channel's own
        # auth.test instead (or, before it, from the event: ``_on_message``); bolt's client
        # holds no token (the request's gets the bot token from ``_authorized``).
        async def authorize(enterprise_id: str | None, team_id: str | None
                            ) -> AuthorizeResult:  # bolt passes what its parameters name
            return self._authorized(enterprise_id, team_id)

        app = AsyncApp(client=AsyncWebClient(base_url=self.config.api_url),
                       authorize=authorize, process_before_response=True,
                       signing_secret=self.secrets.signing_secret,
                       request_verification_enabled=self.config.mode == "http",
                       logger=log)
        app.event("app_mention")(self._on_message)
        app.event("message")(self._on_message)
        app.event("assistant_thread_started")(self.assistant.started)
        app.event("assistant_thread_context_changed")(_ignored)
        app.event("agent_session_stopped")(self._on_session_stopped)
        app.action({"action_id": "maiden_approve"})(self._on_button)
        app.action({"action_id": "maiden_deny"})(self._on_button)
        app.action({"action_id": FEEDBACK})(self.feedback.clicked)
        app.command(COMMAND)(self.slash.handle)
        app.event("app_home_opened")(self.home.opened)
        self._app = app
        self._unlisten = self.runtime.listen(self._on_run_event)
        if self.config.access.nobody:
            log.warning("slack: serving nobody (open = false and no allow_users, "
                        "allow_channels or rules)")
        try:
            await self._connect()
        except Unreachable as exc:
            self._down(str(exc))
            self._connecting = asyncio.create_task(self._keep_connecting(exc),
                                                   name="maiden-slack-connect")
        return self

    def _authorized(self, enterprise_id: str | None, team_id: str | None) -> AuthorizeResult:
        """Bolt's authorization of a request: the bot token, and who the bot is once the
        Web API has said (``_connect``)."""
        return AuthorizeResult(enterprise_id=enterprise_id, team_id=team_id or self.team,
                               bot_token=self.secrets.bot_token, bot_user_id=self.bot_user or None,
                               bot_id=self.bot_id)

    async def _connect(self) -> None:
        """One attempt: who the bot is, then (Socket Mode) the socket. ``Unreachable`` if
        Slack did not answer, ``ChannelRefused`` if it said no."""
        auth = await self._ask("auth.test", self.client.auth_test(),
                               f"${self.config.bot_token_env}")
        self.team, self.team_name = str(auth["team_id"]), str(auth.get("team") or "")
        self.workspace_url = str(auth.get("url") or "")
        self.bot_user, self.bot_id = str(auth["user_id"]), auth.get("bot_id")
        if isinstance(self.deliverer, SlackDeliverer):
            self.deliverer.bot_user = self.bot_user
        if self.config.mode == "socket":
            from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler

            # Asked here, not inside connect_async (which retries every error, a refused
            # app token included, forever): so a refusal is one line and a fault backs off.
            opened = await self._ask("apps.connections.open", self.client.apps_connections_open(
                app_token=self.secrets.app_token or ""), f"${self.config.app_token_env}")
            assert self._app is not None
            socket: Any = AsyncSocketModeHandler(self._app, self.secrets.app_token,
                                                 web_client=self.client, logger=log)
            socket.client.wss_uri = str(opened["url"])
            await socket.connect_async()
            self._socket = socket
        self._problem = None
        if isinstance(self.deliverer, SlackDeliverer):
            self.deliverer.offline = None

    async def _ask(self, method: str, call: Awaitable[Any], token: str) -> Any:
        """One Web API call at start, its failure sorted into refused or unreachable."""
        try:
            return await call
        except SlackApiError as exc:
            status = exc.response.status_code if exc.response is not None else 0
            error = str(exc.response.get("error") if exc.response is not None else exc)
            if status >= 500 or status == 429 or error in _TRY_LATER:
                raise Unreachable(f"{method} answered {status} {error}") from exc
            raise ChannelRefused(f"Slack refused {token} ({method} at {self.config.api_url}): "
                                 f"{error}") from exc
        except (SlackClientError, aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise Unreachable(f"cannot reach {self.config.api_url}: "
                              f"{reason_of(exc)}") from exc

    async def _keep_connecting(self, first: Unreachable) -> None:
        backoff = Backoff(max_s=self.config.reconnect_max_s)
        try:
            await keep_trying(self._connect, backoff, self._waiting, first=first)
        except ChannelRefused as exc:
            log.error("slack: %s; the channel stops", exc)
            self._closed.set()  # `maiden run` stops: a refused token is no fault to wait out
            return
        log.info("slack: connected: %s", self.banner())
        with contextlib.suppress(MaidenError):
            await self.runtime.flush_deliveries()  # what waited in the outbox, now

    def _down(self, reason: str) -> None:
        self._problem = reason
        if isinstance(self.deliverer, SlackDeliverer):
            self.deliverer.offline = f"not connected yet ({reason})"

    def _waiting(self, reason: str, delay: float) -> None:
        self._down(reason)
        log.warning("slack: %s; serving everything else, trying again in %.1f s", reason, delay)

    async def __aexit__(self, *exc: object) -> None:
        if self._unlisten is not None:
            self._unlisten()
        if self._connecting is not None:
            self._connecting.cancel()
            await asyncio.gather(self._connecting, return_exceptions=True)
        if self._socket is not None:
            with contextlib.suppress(Exception):
                await self._socket.close_async()
        await self._background.close()
        await self.downloads.aclose()
        self._closed.set()

    def banner(self) -> str:
        if self._problem is not None:
            return f"connecting: {self._problem} (trying again, up to every " \
                   f"{self.config.reconnect_max_s:g} s; replies wait in the outbox)"
        how = "Socket Mode" if self.config.mode == "socket" else "Events API at POST /slack/events"
        who = self.config.access.summary()
        return f"{how}, workspace {self.team_name or self.team} ({self.team}) as " \
               f"<@{self.bot_user}>; {who}"

    def status(self) -> str:
        if self._closed.is_set():
            return "stopped"
        if self._problem is not None:
            return f"connecting: {self._problem}"
        if self.config.mode == "http":
            return "taking events at POST /slack/events"
        client = getattr(self._socket, "client", None)
        session = getattr(client, "current_session", None)
        if client is None or client.closed:
            return "not connected"
        if session is None or session.closed or client.stale:
            return "reconnecting to Socket Mode"
        return f"connected (Socket Mode, workspace {self.team_name or self.team})"

    def stop_intake(self) -> None:
        """Nothing to switch off here: once the runtime is closing, ``submit`` raises, so
        the event is not acknowledged and Slack sends it again, to the next process."""

    async def closed(self) -> None:
        """Returns when the channel stopped, or gave up connecting (Slack refused a token)."""
        await self._closed.wait()

    def http_endpoint(self) -> Callable[[Any], Awaitable[Any]]:
        """The Events API endpoint (``mode = "http"``), for the HTTP API to serve at
        ``POST /slack/events``: bolt checks the signature (401 and nothing stored if it
        is missing, wrong or older than five minutes).

        Bolt parses the body before it checks anything, and a body it cannot parse was a
        500 with a traceback; such a body is answered here: 401 unless it is signed, else
        400 with one log line."""
        from slack_bolt.adapter.starlette.async_handler import AsyncSlackRequestHandler
        from slack_bolt.request.internals import parse_body
        from slack_sdk.signature import SignatureVerifier
        from starlette.responses import PlainTextResponse

        assert self._app is not None, "not started"
        handler = AsyncSlackRequestHandler(self._app)
        verifier = SignatureVerifier(self.secrets.signing_secret or "")

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

    # -- inbound -------------------------------------------------------------------------------

    async def _on_message(self, event: dict[str, Any], body: dict[str, Any]) -> None:
        # Events API while the Web API is not reached yet: who the bot is comes with the
        # event (its ``authorizations``), so the message is taken and its answer waits in
        # the outbox. Without that, the bot's own messages would look like people's:
        # failing, Slack sends it again.
        bot_user = self.bot_user or _authorized_bot(body)
        if not bot_user:
            raise MaidenError("Slack event before the Web API was reached; not taken yet")
        seen = read_event(event, team=str(body.get("team_id") or self.team),
                          bot_user=bot_user, bot_id=self.bot_id,
                          reply_to_bots=self.config.reply_to_bots)
        if not isinstance(seen, Inbound):
            return
        if not seen.mentioned and not seen.direct and not await self._joined(seen):
            return  # a channel message not for the bot
        place, access = Place.of(seen.channel, direct=seen.direct), self.config.access
        stop = is_stop(seen.text)
        if stop and access.allows(seen.user, place, "operate"):
            self._background.spawn(stop_thread(self.runtime, seen.thread_id, seen.user, log))
            return
        if not access.allows(seen.user, place, "talk"):
            await self._tell_once(seen.channel, seen.user, "talk to this agent")
            return
        if stop:  # may talk here, not stop runs
            with contextlib.suppress(SlackApiError):
                await self.client.chat_postEphemeral(channel=seen.channel, user=seen.user,
                                                     text=refusal_text("stop runs"))
            return
        if not seen.text and not seen.files:
            return
        await self.assistant.first_message(seen)
        # Stored before the ack. Shutting down, this raises: no ack, so Slack sends the
        # event again, to the next process.
        run = await self.runtime.submit(
            seen.thread_id, seen.text, idempotency_key=seen.key, fetch=seen.files,
            origin=Origin(channel=self.name, target=seen.target, user=seen.user,
                          place=place.ids, direct=place.direct))
        if run.id not in self._watching and run.state in ACTIVE_STATES \
                and self._problem is None:  # a status is shown only where Slack is reached
            self._watching.add(run.id)
            if run.state is RunState.QUEUED:
                self._fresh[run.id] = None
                while len(self._fresh) > _FRESH:
                    del self._fresh[next(iter(self._fresh))]
            self._background.spawn(self._show_status(run, seen))

    def _link(self, channel: str, ts: str) -> str | None:
        """A message's permalink (the form Slack's own links take)."""
        if not self.workspace_url or not channel or not ts:
            return None
        return f"{self.workspace_url.rstrip('/')}/archives/{channel}/p{ts.replace('.', '')}"

    async def _joined(self, seen: Inbound) -> bool:
        """Whether the bot is part of this Slack thread (it has a maiden thread)."""
        return seen.in_thread and bool(await self.runtime.records.runs(thread_id=seen.thread_id,
                                                               limit=1))

    async def _show_status(self, run: Run, seen: Inbound) -> None:
        try:
            await self.sessions.show(run, seen)
        finally:
            self._watching.discard(run.id)

    def _on_run_event(self, event: RunEvent) -> None:
        """A run of a Slack thread starts being driven in this process (its first start, a
        recovery, a restart, after a store error or a decision): its session is set
        ``processing`` here, whichever process took its message."""
        if type(event) is not RunStarted or not event.thread_id.startswith(f"{self.name}:"):
            return
        if event.run_id in self._fresh:
            del self._fresh[event.run_id]
            if not event.recovered:
                return  # ``_show_status`` says it
        if self._problem is None and self.sessions.refused is None:
            self._background.spawn(self._going_on(event.run_id))

    async def _going_on(self, run_id: str) -> None:
        try:
            run = await self.runtime.records.get_run(run_id)
        except MaidenError as exc:
            log.warning("slack: the session of run %s not set: %s", run_id, exc)
            return
        if run.origin.channel == self.name:
            await self.sessions.settle(run.thread_id, run.origin.target,
                                       title=title_of(run.text))

    async def _on_session_stopped(self, event: dict[str, Any], body: dict[str, Any]) -> None:
        """Slack's stop button (``sessions``): the stop is written before the ack."""
        team = str(body.get("team_id") or self.team)
        key = f"slack:{team}:stopped:{body.get('event_id') or event.get('event_ts')}"
        await self.sessions.stopped(event, team=team, key=key, access=self.config.access)

    async def _tell_once(self, channel: str, user: str, what: str) -> None:
        """One notice per person, across every replica on the store: the store keeps who was
        told, and the first replica to record it is the one that tells."""
        if user in self._told:
            return
        self._told.add(user)
        scope = f"slack:{self.team}:told"
        try:
            recorded = await self.runtime.notes.remember(scope, user, what, call=f"{scope}:{user}")
        except MaidenError as exc:
            log.warning("slack: cannot record who was told (%s); telling %s anyway", exc, user)
        else:
            if recorded is None:
                return  # another replica told them
        with contextlib.suppress(SlackApiError):
            await self.client.chat_postEphemeral(channel=channel, user=user,
                                                 text=refusal_text(what))

    # -- approvals -----------------------------------------------------------------------------

    async def _on_button(self, ack: Callable[[], Awaitable[None]], body: dict[str, Any],
                         action: dict[str, Any]) -> None:
        await ack()
        choice = parse_choice(action)
        user = str((body.get("user") or {}).get("id") or "")
        if choice is None or not user:
            return
        approve, ids = choice
        click = read_click(body)
        home = (body.get("container") or {}).get("type") == "view"
        if home:  # the App Home tab: buttons of approvals the person may decide
            bound = await self._from_home(user, ids["run"])
        elif click is None:
            return
        else:  # on a message: only that run's own prompt for that call decides it
            bound = await bind(self.runtime, self.config.access, click, ids["run"],
                               right="approve", call=ids["call"])
        channel = click.channel if click else \
            bound.run.origin.target.get("channel", "") if isinstance(bound, Bound) else ""
        if isinstance(bound, str):
            await self._tell(channel, user, bound)
            return
        # The rules at the run's place decided first; the runtime then checks
        # ``approvers`` (or [agent] approvers) again.
        approvers = self.config.approvers or None
        try:
            await self.runtime.decide(bound.run.id, ids["call"], approve=approve, by=user,
                                      arguments_hash=ids["hash"], approvers=approvers)
        except RunError as exc:
            what = "decide approvals" if exc.reason == "not_an_approver" else None
            await self._tell(channel, user,
                             refusal_text(what) if what else f"That did not work: {exc}")
            return
        if home:
            await self.home.publish(user)
        elif click is not None:
            with contextlib.suppress(SlackApiError):
                await self.client.chat_update(
                    channel=click.channel, ts=click.message,
                    text=f"{'Approved' if approve else 'Denied'}: {ids.get('name', '')}",
                    blocks=decided_blocks(ids.get("name", "the call"), approve, user))

    async def _from_home(self, user: str, run_id: str) -> Bound | str:
        """A decision from the App Home tab (no message to bind it to): the tab lists only
        what the person may decide, and the rights are judged again at the run's place."""
        try:
            run = await self.runtime.records.get_run(run_id)
        except MaidenError:
            return FOREIGN
        channel = run.origin.target.get("channel", "")
        place = run_place(run, Place.of(channel, direct=channel.startswith("D")))
        if run.origin.channel != self.name or \
                not self.config.access.allows(user, place, "approve"):
            return refusal_text("decide approvals")
        return Bound(run, place)

    async def _tell(self, channel: str, user: str, text: str) -> None:
        """An ephemeral line in ``channel`` (none for a refused click on the App Home tab)."""
        if channel:
            with contextlib.suppress(SlackApiError):
                await self.client.chat_postEphemeral(channel=channel, user=user, text=text)


async def _ignored(event: dict[str, Any]) -> None:
    """An event the manifest subscribes to that needs no answer (acked by bolt)."""


def _authorized_bot(body: dict[str, Any]) -> str:
    """The bot's user id, as an Events API request names the installation it is for; ''
    if it does not."""
    for grant in body.get("authorizations") or ():
        if isinstance(grant, dict) and grant.get("is_bot") and grant.get("user_id"):
            return str(grant["user_id"])
    return ""
