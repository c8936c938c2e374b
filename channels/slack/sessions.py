"""Slack's agent sessions: the status of maiden's work in a thread, with Slack's own stop
button (docs.slack.dev/ai/agent-sessions).

A run that answers a person in Slack sets its thread's session ``processing`` when it
starts (titled with the person's message, trimmed; Slack shows a stop button meanwhile),
``suspended`` while it waits for an approval, ``processing`` again once it goes on, and
when it stops ``active`` if it answered (the conversation goes on) or ``closed`` if it
ended without an answer (failed, cancelled, stopped, timed out). A streamed reply's
``chat.stopStream`` also takes the session out of ``processing`` on Slack's side, which
covers a run finished by a later process after a crash.

Where Slack will not keep a session (an app not declared as an agent: any error
``agents.sessions.setStatus`` answers), the channel falls back to the assistant thread's
status (``assistant.threads.setStatus``) and, failing that, a reaction on the person's
message; the first refusal is logged with Slack's reason and remembered.

The stop button sends ``agent_session_stopped`` (``stopped``): the thread's running run is
cancelled by ``Runtime.stop``, which writes the stop before the event is acknowledged, so
a process killed in between cancels the run at its next start instead of answering it.
Only once per click (a retried event finds its key written), and only for a person who
may stop it: ``operate`` at that place, or ``talk`` there for the person whose message
started the run.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping
from typing import Any, Literal

from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from runtime import MaidenError, Run, RunEnded, RunStarted, RunState, Runtime

from ..access import Access, Place
from .mapping import Inbound

__all__ = ["REACTION", "STATUS", "SessionStatus", "Sessions", "may_stop", "session_status"]

log = logging.getLogger("maiden.slack")

SessionStatus = Literal["processing", "active", "suspended", "closed"]
STATUS = "is working on it…"
"""The assistant thread's status where Slack keeps no sessions."""
REACTION = "hourglass_flowing_sand"
"""On the person's message where the app has no assistant status either."""
_TITLE_CHARS = 60
S = RunState


def session_status(state: RunState) -> SessionStatus:
    """The session's status for a run that stopped in ``state``."""
    if state is S.AWAITING_APPROVAL:
        return "suspended"
    if state is S.COMPLETED:
        return "active"
    if state in (S.FAILED, S.CANCELLED, S.TIMED_OUT):
        return "closed"
    return "processing"  # still going (driven elsewhere, or left at a shutdown)


def may_stop(access: Access, user: str, place: Place, run: Run) -> bool:
    """Whether ``user`` may stop ``run`` with the stop button at ``place``."""
    return access.allows(user, place, "operate") or (
        run.origin.user == user and access.allows(user, place, "talk"))


def title_of(text: str) -> str:
    line = " ".join(text.split()) or "maiden"
    return line if len(line) <= _TITLE_CHARS else line[:_TITLE_CHARS - 1] + "…"


class Sessions:
    """Sets the sessions of the threads this channel answers in (while Slack keeps them)."""

    def __init__(self, client: AsyncWebClient, runtime: Runtime) -> None:
        self.client = client
        self.runtime = runtime
        self.refused: str | None = None
        """Why Slack would not keep a session here (its first refusal), or None."""

    async def set(self, channel: str, thread_ts: str, status: SessionStatus, *,
                  title: str | None = None, user: str | None = None) -> bool:
        """``agents.sessions.setStatus``; False if Slack keeps no sessions for this app (or
        the call failed: the session is cosmetic, the run goes on either way)."""
        if self.refused is not None:
            return False
        try:
            await self.client.agents_sessions_setStatus(
                channel_id=channel, thread_ts=thread_ts, status=status, title=title,
                initiator_user_id=user)
        except SlackApiError as exc:
            error = str(exc.response.get("error")) if exc.response is not None else str(exc)
            if exc.response is not None and exc.response.status_code in (429, 500, 502, 503):
                log.warning("slack: agents.sessions.setStatus %s failed (%s)", status, error)
                return True  # Slack keeps sessions; this one update was lost
            self.refused = error
            log.warning("slack: agents.sessions.setStatus answered %s; showing the thread's "
                        "status instead of a session (declare the app as an agent to get "
                        "Slack's stop button)", error)
            return False
        except (SlackClientError, OSError, TimeoutError) as exc:
            log.warning("slack: agents.sessions.setStatus %s failed (%s)", status, exc)
        return True

    async def stopped(self, event: Mapping[str, Any], *, team: str, key: str,
                      access: Access) -> None:
        """``agent_session_stopped``: stop the thread's running run (``key``: the event's
        identity), if the person who clicked may; the session leaves ``processing``."""
        where = stopped_where(event)
        if where is None:
            return
        channel, thread_ts, user = where
        place = Place.of(channel, direct=channel.startswith("D"))
        run = await self.runtime.records.active_run(f"slack:{team}:{channel}:{thread_ts}")
        if run is None and place.direct:  # a DM's top level is one thread
            run = await self.runtime.records.active_run(f"slack:{team}:{channel}")
        if run is None or run.state not in (S.QUEUED, S.RUNNING, S.AWAITING_TOOL,
                                             S.AWAITING_APPROVAL):
            await self.set(channel, thread_ts, "closed")  # nothing runs: no spinner left
            return
        if not may_stop(access, user, place, run):
            log.info("slack: %s may not stop run %s here; the stop button did nothing",
                     user, run.id)
            await self.set(channel, thread_ts, session_status(run.state))
            return
        # Written before this returns (and Slack gets its ack); cancelled right after.
        await self.runtime.stop(run.id, by=user, key=key)

    async def show(self, run: Run, seen: Inbound) -> None:
        """While ``run`` works: its thread's session where Slack keeps them, else the
        assistant thread's status, else a reaction on the person's message; gone at the
        end."""
        thread_ts = seen.reply_in or seen.ts
        # A session is a thread's: a DM's top level (answered there) has none.
        if seen.reply_in is not None and await self.set(
                seen.channel, thread_ts, "processing", title=title_of(seen.text),
                user=seen.user):
            await self.follow(run, seen.channel, thread_ts)
            return
        try:
            await self.client.assistant_threads_setStatus(
                channel_id=seen.channel, thread_ts=thread_ts, status=STATUS)
            status = True
        except SlackApiError:
            status = False
            with contextlib.suppress(SlackApiError):
                await self.client.reactions_add(channel=seen.channel, timestamp=seen.ts,
                                                name=REACTION)
        try:
            async for _ in self.runtime.follow(run.id):
                pass
        finally:
            with contextlib.suppress(SlackApiError):
                if status:
                    await self.client.assistant_threads_setStatus(
                        channel_id=seen.channel, thread_ts=thread_ts, status="")
                else:
                    await self.client.reactions_remove(channel=seen.channel,
                                                       timestamp=seen.ts, name=REACTION)

    async def follow(self, run: Run, channel: str, thread_ts: str) -> None:
        """Keep the thread's session in step with ``run`` until it stops for good (its
        session was set ``processing`` as it was taken)."""
        while True:
            ended: RunEnded | None = None
            async for event in self.runtime.follow(run.id):
                if isinstance(event, RunEnded):
                    ended = event
            if ended is None:
                return
            status = session_status(ended.state)
            if status == "processing":
                return  # this process stopped driving it: where it goes on, it is said
            await self.set(channel, thread_ts, status)
            if status != "suspended":
                return
            now = await self._went_on(run.id)
            if now is None:
                return
            # Taken up again (processing), or ended while nobody here watched it.
            await self.set(channel, thread_ts, session_status(now))
            if now in (S.COMPLETED, S.FAILED, S.CANCELLED, S.TIMED_OUT):
                return

    async def _went_on(self, run_id: str) -> RunState | None:
        """Wait until a run paused for a person is taken up again or ends: its state then
        (running, or how it ended); None if it cannot be read."""
        async with self.runtime.subscribe(run_id) as events:
            try:
                now = await self.runtime.records.get_run(run_id)
            except MaidenError:
                return None
            if now.state is not S.AWAITING_APPROVAL:
                return now.state
            async for event in events:
                if isinstance(event, RunStarted):
                    return S.RUNNING
                if isinstance(event, RunEnded) and event.state is not S.AWAITING_APPROVAL:
                    return event.state
        return None


def stopped_where(event: Mapping[str, Any]) -> tuple[str, str, str] | None:
    """``agent_session_stopped``'s channel, thread and the person who clicked; None for an
    event that names none."""
    channel, thread_ts, user = (str(event.get(k) or "") for k in ("channel", "thread_ts",
                                                                   "user"))
    return (channel, thread_ts, user) if channel and thread_ts and user else None
