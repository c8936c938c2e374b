"""A Slack message in: read, judged by the rights at its place (``channels.talk``), then
a stop, a refusal told once, or a run stored before Slack gets its acknowledgement; and
the agent session each run of a Slack thread shows while it works (``sessions``)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from runtime import ACTIVE_STATES, MaidenError, Run, RunEvent, RunStarted, RunState, Runtime

from ..access import Place
from ..prompts import refusal_text
from ..talk import Talk, Told
from ..work import Background
from .assistant import AssistantThreads
from .config import SlackConfig
from .lifecycle import SlackConnection, log
from .lookups import SlackPrivacy
from .mapping import Inbound, read_event
from .sessions import Sessions, title_of

__all__ = ["SlackInbound", "ignored", "link_of"]

_FRESH = 1_000
"""How many runs taken here and not started yet are remembered (``_fresh``)."""


class SlackInbound:
    """Messages and session events of one workspace, for one channel named ``via``."""

    def __init__(self, runtime: Runtime, config: SlackConfig, client: AsyncWebClient,
                 connection: SlackConnection, background: Background, *, via: str,
                 assistant: AssistantThreads, sessions: Sessions,
                 names: Callable[[str], Awaitable[str | None]]) -> None:
        self._runtime = runtime
        self._config = config
        self._client = client
        self._connection = connection
        self._background = background
        self._via = via
        self._assistant = assistant
        self._sessions = sessions
        self._privacy = SlackPrivacy(client)
        """Whether an ``app_mention``'s channel is private (``conversations.info``)."""
        self._names = names
        """The name a sender shows (``users.info``, with their time zone: ``zones``), for
        what they teach the agent."""
        self._talk = Talk(runtime, via, config.access)
        self._told = Told(runtime, via, log)
        self._watching: set[str] = set()
        self._fresh: dict[str, None] = {}
        """Runs taken here whose session was just set ``processing`` and that have not
        started here yet (their first start need not say it again); the last ones only."""

    async def on_message(self, event: dict[str, Any], body: dict[str, Any]) -> None:
        # Events API while the Web API is not reached yet: who the bot is comes with the
        # event (its ``authorizations``), so the message is taken and its answer waits in
        # the outbox. Without that, the bot's own messages would look like people's:
        # failing, Slack sends it again.
        me = self._connection
        bot_user = me.bot_user or _authorized_bot(body)
        if not bot_user:
            raise MaidenError("Slack event before the Web API was reached; not taken yet")
        seen = read_event(event, team=str(body.get("team_id") or me.team),
                          bot_user=bot_user, bot_id=me.bot_id,
                          reply_to_bots=self._config.reply_to_bots)
        if not isinstance(seen, Inbound):
            return
        if not seen.mentioned and not seen.direct and not await self._joined(seen):
            return  # a channel message not for the bot
        # Rights go by the channel's id alone; whether it is private is asked of Slack
        # only for a message taken (``_known``).
        place = Place.of(seen.channel, direct=seen.direct, private=seen.private is not False)
        verdict = await self._talk.hear(seen, place)  # a stop is written before the ack
        if verdict == "may not talk":
            await self._tell_once(seen.channel, seen.user, "talk to this agent")
        elif verdict == "may not stop":
            with contextlib.suppress(SlackApiError):
                await self._client.chat_postEphemeral(channel=seen.channel, user=seen.user,
                                                      text=refusal_text("stop runs"))
        elif verdict == "take":
            await self._assistant.first_message(seen)
            place, name = await self._known(seen)
            # Stored before the ack. Shutting down, this raises: no ack, so Slack sends
            # the event again, to the next process.
            self._watch(await self._talk.submit(seen, place, user_name=name), seen)

    async def _known(self, seen: Inbound) -> tuple[Place, str | None]:
        """The message's place, private as Slack says (an ``app_mention``'s channel asked
        of ``conversations.info``, private without an answer), and the sender's name: both
        asked at once, so the ack waits at most one ``lookups.WAIT_S``."""
        async def private() -> bool:
            if seen.private is not None:
                return seen.private
            return await self._privacy.private(seen.channel)

        async def name() -> str | None:
            # A person's id starts with U or W; a bot's message (reply_to_bots) has none.
            return await self._names(seen.user) if seen.user[:1] in ("U", "W") else None

        is_private, named = await asyncio.gather(private(), name())
        return Place.of(seen.channel, direct=seen.direct, private=is_private), named

    def _watch(self, run: Run, seen: Inbound) -> None:
        """The run's agent session shown, where Slack is reached."""
        if run.id in self._watching or run.state not in ACTIVE_STATES \
                or self._connection.problem is not None:
            return
        self._watching.add(run.id)
        if run.state is RunState.QUEUED:
            self._fresh[run.id] = None
            while len(self._fresh) > _FRESH:
                del self._fresh[next(iter(self._fresh))]
        self._background.spawn(self._show_status(run, seen))

    async def _joined(self, seen: Inbound) -> bool:
        """Whether the bot is part of this Slack thread (it has a maiden thread)."""
        return seen.in_thread and bool(await self._runtime.records.runs(
            thread_id=seen.thread_id, limit=1))

    async def _show_status(self, run: Run, seen: Inbound) -> None:
        try:
            await self._sessions.show(self._runtime, run, seen)
        finally:
            self._watching.discard(run.id)

    def on_run_event(self, event: RunEvent) -> None:
        """A run of a Slack thread starts being driven in this process (its first start, a
        recovery, a restart, after a store error or a decision): its session is set
        ``processing`` here, whichever process took its message."""
        if type(event) is not RunStarted or not event.thread_id.startswith(f"{self._via}:"):
            return
        if event.run_id in self._fresh:
            del self._fresh[event.run_id]
            if not event.recovered:
                return  # ``_show_status`` says it
        if self._connection.problem is None and self._sessions.refused is None:
            self._background.spawn(self._going_on(event.run_id))

    async def _going_on(self, run_id: str) -> None:
        try:
            run = await self._runtime.records.get_run(run_id)
        except MaidenError as exc:
            log.warning("slack: the session of run %s not set: %s", run_id, exc)
            return
        if run.origin.channel == self._via:
            await self._sessions.settle(run.thread_id, run.origin.target,
                                        title=title_of(run.text))

    async def close(self) -> None:
        """Cancel the asks of Slack under way (the channel is closing)."""
        await self._privacy.close()

    async def on_session_stopped(self, event: dict[str, Any], body: dict[str, Any]) -> None:
        """Slack's stop button (``sessions``): the stop is written before the ack."""
        team = str(body.get("team_id") or self._connection.team)
        key = f"slack:{team}:stopped:{body.get('event_id') or event.get('event_ts')}"
        await self._sessions.stopped(self._runtime, event, team=team, key=key,
                                     access=self._config.access)

    async def _tell_once(self, channel: str, user: str, what: str) -> None:
        if await self._told.first_time(f"slack:{self._connection.team}:told", user, what):
            with contextlib.suppress(SlackApiError):
                await self._client.chat_postEphemeral(channel=channel, user=user,
                                                      text=refusal_text(what))


def link_of(connection: SlackConnection) -> Callable[[str, str], str | None]:
    """A message's permalink (the form Slack's own links take), once the workspace is known."""
    def link(channel: str, ts: str) -> str | None:
        url = connection.workspace_url
        if not url or not channel or not ts:
            return None
        return f"{url.rstrip('/')}/archives/{channel}/p{ts.replace('.', '')}"
    return link


async def ignored(event: dict[str, Any]) -> None:
    """An event the manifest subscribes to that needs no answer (acked by bolt)."""


def _authorized_bot(body: dict[str, Any]) -> str:
    """The bot's user id, as an Events API request names the installation it is for; ''
    if it does not."""
    for grant in body.get("authorizations") or ():
        if isinstance(grant, dict) and grant.get("is_bot") and grant.get("user_id"):
            return str(grant["user_id"])
    return ""
