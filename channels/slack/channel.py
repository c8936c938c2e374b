"""Slack as a channel of `maiden run`: slack-bolt's ``AsyncApp`` over the runtime's API.

Inbound: a message is stored as a queued run (one SQLite commit) before Slack gets
its acknowledgement (``process_before_response``), keyed by the message, so Slack's
retries, a retry after a restart and the same message as ``app_mention`` and
``message.*`` make one run; the run happens after the ack. Outbound goes through
the runtime's outbox and ``SlackDeliverer``. Buttons on an approval prompt decide
the call (only ``approvers``, and only on that run's own prompt: ``approvals``); ``stop``
in a thread cancels its running run; the 👍 / 👎 under an answer record the person's
vote (``feedback``); ``zones`` tells a person's time zone (``users.info``).

This module wires the parts: ``lifecycle`` (connecting, closing), ``inbound`` (messages
and session events), ``approvals``, ``commands`` (``/maiden``), ``home`` (the App Home
tab), over ``outbound`` (``deliverer`` and ``streamer``: what goes out, made before the
runtime).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Self

from slack_bolt.async_app import AsyncApp
from slack_bolt.authorization import AuthorizeResult
from slack_sdk.web.async_client import AsyncWebClient

from runtime import Deliverer, FileFetcher, Runtime, ScheduleService

from ..commands import Commands
from ..work import Background
from .approvals import ApprovalButtons
from .assistant import AssistantThreads
from .commands import COMMAND, SlashCommand
from .failures import listener_failed
from .feedback import FeedbackButtons
from .home import AppHome
from .inbound import SlackInbound, ignored, link_of
from .lifecycle import SlackConnection, events_endpoint, log
from .outbound import SlackOutbound
from .render import FEEDBACK
from .zones import SlackZones

__all__ = ["SlackChannel", "SlackOutbound"]


class SlackChannel:
    """Serves a Slack workspace over Socket Mode or the Events API (``mode``)."""

    name = "slack"

    def __init__(self, runtime: Runtime, outbound: SlackOutbound, *,
                 schedules: ScheduleService | None = None) -> None:
        """Over ``runtime``, built with ``outbound``'s deliverer and fetcher."""
        self.runtime = runtime
        self.config = config = outbound.config
        self.secrets = secrets = outbound.secrets
        self.client = outbound.client
        self.sessions = outbound.sessions
        self.deliverer: Deliverer | None = outbound.deliverer
        self.downloads = outbound.fetcher
        self.fetcher: FileFetcher | None = self.downloads
        self.connection = SlackConnection(runtime, config, secrets, self.client,
                                          outbound.link)
        self._background = Background(log, "maiden-slack")
        self.assistant = AssistantThreads(self.client, config.suggested_prompts)
        self.zones = SlackZones(self.client)
        """A person's time zone and name by their Slack id (the app lends the zones to the
        schedules)."""
        self.inbound = SlackInbound(runtime, config, self.client, self.connection,
                                    self._background, via=self.name,
                                    assistant=self.assistant, sessions=self.sessions,
                                    names=self.zones.name)
        self.feedback = FeedbackButtons(runtime, config, self.client)
        self.slash = SlashCommand(Commands(runtime, schedules, link=link_of(self.connection)),
                                  config, self.client, self._background)
        self.home = AppHome(runtime, config, self.client, schedules, self._background)
        self.approvals = ApprovalButtons(runtime, config, self.client, self.home,
                                         via=self.name)
        self._app: AsyncApp | None = None
        self._unlisten: Callable[[], None] | None = None

    async def __aenter__(self) -> Self:
        """Connect, or, if Slack cannot be reached, keep trying in the background while
        everything else serves (``ChannelRefused`` if Slack refuses a token)."""
        self._app = self._make_app()
        self._unlisten = self.runtime.listen(self.inbound.on_run_event)
        if self.config.access.nobody:
            log.warning("slack: serving nobody (open = false and no allow_users, "
                        "allow_channels or rules)")
        await self.connection.open(self._app)
        return self

    def _make_app(self) -> AsyncApp:
        """Bolt's app, each event and action routed to the part that answers it."""
        async def authorize(enterprise_id: str | None, team_id: str | None
                            ) -> AuthorizeResult:  # bolt passes what its parameters name
            return self.connection.authorized(enterprise_id, team_id)

        app = AsyncApp(client=AsyncWebClient(base_url=self.config.api_url),
                       authorize=authorize, process_before_response=True,
                       signing_secret=self.secrets.signing_secret,
                       request_verification_enabled=self.config.mode == "http",
                       logger=log)
        app.event("app_mention")(self.inbound.on_message)
        app.event("message")(self.inbound.on_message)
        app.event("assistant_thread_started")(self.assistant.started)
        app.event("assistant_thread_context_changed")(ignored)
        app.event("agent_session_stopped")(self.inbound.on_session_stopped)
        app.action({"action_id": "maiden_approve"})(self.approvals.clicked)
        app.action({"action_id": "maiden_deny"})(self.approvals.clicked)
        app.action({"action_id": FEEDBACK})(self.feedback.clicked)
        app.command(COMMAND)(self.slash.handle)
        app.event("app_home_opened")(self.home.opened)
        app.error(listener_failed)
        return app

    async def __aexit__(self, *exc: object) -> None:
        if self._unlisten is not None:
            self._unlisten()
        await self.connection.close()
        await self._background.close()
        await self.zones.close()
        await self.inbound.close()
        await self.downloads.aclose()
        self.connection.stopped()

    def banner(self) -> str:
        return self.connection.banner()

    def status(self) -> str:
        return self.connection.status()

    def stop_intake(self) -> None:
        """Nothing to switch off here: once the runtime is closing, ``submit`` raises, so
        the event is not acknowledged and Slack sends it again, to the next process."""

    async def closed(self) -> None:
        """Returns when the channel stopped, or gave up connecting (Slack refused a token)."""
        await self.connection.closed()

    def http_endpoint(self) -> Callable[[Any], Awaitable[Any]]:
        """The Events API endpoint (``mode = "http"``), for the HTTP API to serve at
        ``POST /slack/events`` (``lifecycle.events_endpoint``)."""
        assert self._app is not None, "not started"
        return events_endpoint(self._app, self.secrets.signing_secret)
