"""Slack's agent sessions: the status of maiden's work in a thread, with Slack's own stop
button (docs.slack.dev/ai/agent-sessions).

A Slack thread's session shows what the store says of the thread's runs now: ``processing``
while one of them is queued or works (Slack shows a stop button meanwhile), ``suspended``
while one waits for a person's approval, and once none is left ``active`` if the last
answered (the conversation goes on) or ``closed`` if it ended without an answer (failed,
cancelled, stopped, timed out). It is set (``settle``) from that state, never from what one
process saw, wherever the run is:

- ``processing`` by the process that took the message, right after the run is stored
  (titled with the person's message, trimmed), and by any process that starts driving a
  run of the thread: its first start, a run taken up after a crash, a restart or a store
  error, or going on after a decision;
- its end or pause with the run's reply or approval prompt, through the outbox: whoever
  posts it (or finds it posted, after a crash), or finishes the stream that shows it, sets
  the session first, before the record counts as sent (a failure to reach the store or
  Slack leaves the record in the outbox, to be tried again, with nothing posted twice). A
  stream's ``chat.stopStream`` carries the status too (``session_status``, which Slack
  otherwise sets to ``active``), each stream a long reply goes on from as well
  (``processing`` while the run works).

Setting a status twice is harmless; each is read from the store anew, after the last one
this process set in that thread (one at a time per thread, ``chat.stopStream`` included),
and a ``processing`` or ``suspended`` is read once more after it is set, so a run that
ended meanwhile in another process is not left shown working.

Where Slack will not keep a session (an app not declared as an agent: any error
``agents.sessions.setStatus`` answers), the channel falls back to the assistant thread's
status (``assistant.threads.setStatus``) and, failing that, a reaction on the person's
message, shown and taken away by the process that took the message; the first refusal is
logged with Slack's reason and remembered.

The stop button sends ``agent_session_stopped`` (``stopped``): the thread's running run is
cancelled by ``Runtime.stop``, which writes the stop before the event is acknowledged, so
a process killed in between cancels the run at its next start instead of answering it.
Only once per click (a retried event finds its key written), and only for a person who
may stop it: ``operate`` at that place, or ``talk`` there for the person whose message
started the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, Literal

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from runtime import ACTIVE_STATES, Delivery, MaidenError, Records, Run, RunState, Runtime

from ..access import Access, Place
from .deliverer import SlackCallError
from .failures import NETWORK
from .mapping import Inbound

__all__ = ["REACTION", "STATUS", "SessionStatus", "Sessions", "may_stop", "session_of",
           "session_status", "thread_status", "title_of"]

log = logging.getLogger("maiden.slack")

SessionStatus = Literal["processing", "active", "suspended", "closed"]
STATUS = "is working on it…"
"""The assistant thread's status where Slack keeps no sessions."""
REACTION = "hourglass_flowing_sand"
"""On the person's message where the app has no assistant status either."""
_TITLE_CHARS = 60
_REMEMBERED = 1_000
"""How many threads' last status ``Sessions`` remembers."""
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


def thread_status(active: Sequence[Run], last: Run | None) -> SessionStatus | None:
    """A thread's session status from its runs that have not ended (``active``) and, when
    there are none, its newest run (``last``); None for a thread with no run."""
    states = {r.state for r in active}
    if states & {S.RUNNING, S.AWAITING_TOOL}:
        return "processing"
    if S.AWAITING_APPROVAL in states:
        return "suspended"  # (one queued behind it waits for it too)
    if states:
        return "processing"  # queued: its turn comes
    return None if last is None else session_status(last.state)


def session_of(target: Mapping[str, str]) -> tuple[str, str] | None:
    """The (channel, thread_ts) of the session a run's replies go to: a person's message
    answered in a Slack thread; None for a DM's top level or a schedule's post."""
    channel, thread_ts = target.get("channel"), target.get("thread_ts")
    return (channel, thread_ts) if channel and thread_ts and target.get("user") else None


def may_stop(access: Access, user: str, place: Place, run: Run) -> bool:
    """Whether ``user`` may stop ``run`` with the stop button at ``place``."""
    return access.allows(user, place, "operate") or (
        run.origin.user == user and access.allows(user, place, "talk"))


def title_of(text: str) -> str:
    line = " ".join(text.split()) or "maiden"
    return line if len(line) <= _TITLE_CHARS else line[:_TITLE_CHARS - 1] + "…"


class Sessions:
    """Sets the sessions of the threads this channel answers in (while Slack keeps them)."""

    def __init__(self, client: AsyncWebClient, records: Records) -> None:
        self.client = client
        self.records = records
        """What the store says of a thread's runs (the runtime's ``records``, made before
        it: the deliverer sets a session as it posts)."""
        self.refused: str | None = None
        """Why Slack would not keep a session here (its first refusal), or None."""
        self.kept = False
        """Slack set a session's status for this app (so ``chat.stopStream`` may carry
        one: ``stopping``)."""
        self._busy: dict[tuple[str, str], tuple[asyncio.Lock, int]] = {}
        """Each thread's lock while someone sets its session, with how many want it."""
        self._last: dict[tuple[str, str], SessionStatus] = {}
        """The status set last here in each thread (the latest ones only): what a
        ``chat.stopStream`` says when the store cannot be read (``stopping``)."""

    async def set(self, channel: str, thread_ts: str, status: SessionStatus, *,
                  title: str | None = None, user: str | None = None,
                  strict: bool = False) -> bool:
        """``agents.sessions.setStatus``; False if Slack keeps no sessions for this app (or
        the call failed: the session is cosmetic, the run goes on either way). ``strict``:
        a failure that is not a refusal raises ``SlackCallError`` instead (the outbox then
        tries the reply that carries the status again)."""
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
                if strict:
                    raise SlackCallError(f"Slack agents.sessions.setStatus failed: {error}",
                                         error) from exc
                return True  # Slack keeps sessions; this one update was lost
            self.refused = error
            log.warning("slack: agents.sessions.setStatus answered %s; showing the thread's "
                        "status instead of a session (declare the app as an agent to get "
                        "Slack's stop button)", error)
            return False
        except NETWORK as exc:
            log.warning("slack: agents.sessions.setStatus %s failed (%s)", status, exc)
            if strict:
                raise SlackCallError(f"Slack agents.sessions.setStatus failed: "
                                     f"{type(exc).__name__}: {exc}") from exc
            return True
        self.kept = True
        self._last.pop((channel, thread_ts), None)
        self._last[(channel, thread_ts)] = status
        while len(self._last) > _REMEMBERED:
            del self._last[next(iter(self._last))]
        return True

    async def settle(self, thread_id: str, target: Mapping[str, str], *,
                     title: str | None = None, strict: bool = False) -> bool:
        """Set the session of ``target``'s Slack thread to what the store says of the
        maiden thread ``thread_id`` now (``thread_status``; ``title``: the session's, if
        this creates it). A ``processing`` or ``suspended`` is read again once set, and set
        anew if the thread moved on meanwhile.

        False if Slack keeps no sessions for this app, or the thread has none (a DM's top
        level, a schedule's post). ``strict`` (from the outbox): the store or Slack not
        answering raises ``SlackCallError``, so the reply is tried again."""
        where = session_of(target)
        if where is None or self.refused is not None:
            return False
        channel, thread_ts = where
        user = target.get("user")
        said: SessionStatus | None = None
        async with self._one_at_a_time(where):
            for _ in range(3):
                try:
                    status, run = await self._now(thread_id)
                except MaidenError as exc:
                    if strict:
                        raise SlackCallError(f"the agent session's status not set: the "
                                             f"store did not answer ({exc})") from exc
                    log.warning("slack: the session of %s not set: %s", thread_id, exc)
                    return True
                if status is None or status == said:
                    return True
                title = title or (title_of(run.text) if run is not None else None)
                if not await self.set(channel, thread_ts, status, title=title, user=user,
                                      strict=strict):
                    return False
                if status in ("active", "closed"):
                    return True
                said = status  # read once more: the thread may have moved on meanwhile
        return True

    async def _now(self, thread_id: str) -> tuple[SessionStatus | None, Run | None]:
        """The thread's session status as the store has it, and the run it comes from."""
        records = self.records
        active = await records.runs(thread_id=thread_id, states=ACTIVE_STATES)
        last = active[0] if active else next(iter(await records.runs(thread_id=thread_id,
                                                                     limit=1)), None)
        return thread_status(active, last), last

    @contextlib.asynccontextmanager
    async def _one_at_a_time(self, where: tuple[str, str]) -> AsyncIterator[None]:
        lock, wanted = self._busy.get(where, (asyncio.Lock(), 0))
        self._busy[where] = (lock, wanted + 1)
        try:
            async with lock:
                yield
        finally:
            lock, wanted = self._busy[where]
            if wanted == 1:
                del self._busy[where]
            else:
                self._busy[where] = (lock, wanted - 1)

    async def shown(self, delivery: Delivery) -> None:
        """A run's reply or approval prompt goes to Slack now, or is there (found posted
        after a crash; its stream finishing): the thread's session says where the thread
        stands. Raises ``SlackCallError`` when that could not be said (see ``settle``)."""
        await self.settle(delivery.thread_id, delivery.target, strict=True)

    @contextlib.asynccontextmanager
    async def stopping(self, delivery: Delivery) -> AsyncIterator[SessionStatus | None]:
        """Around a ``chat.stopStream`` in ``delivery``'s thread: what it sets the thread's
        session to (``session_status``; Slack's default is ``active``), the thread's status
        now (a stream a long reply goes on from: ``processing`` while its run works; the
        one set last here if the store cannot say), with no other status set in that
        thread here meanwhile; None (not sent) where no session is known to be kept, or
        the thread has none."""
        where = session_of(delivery.target)
        if not self.kept or self.refused is not None or where is None:
            yield None
            return
        async with self._one_at_a_time(where):
            try:
                status = (await self._now(delivery.thread_id))[0]
            except MaidenError:
                status = self._last.get(where)  # (a finishing stream's was just set)
            yield status

    async def stopped(self, runtime: Runtime, event: Mapping[str, Any], *, team: str,
                      key: str, access: Access) -> None:
        """``agent_session_stopped``: stop the thread's running run on ``runtime`` (``key``:
        the event's identity), if the person who clicked may; the session leaves
        ``processing``."""
        where = stopped_where(event)
        if where is None:
            return
        channel, thread_ts, user = where
        place = Place.of(channel, direct=channel.startswith("D"))
        run = await self.records.active_run(f"slack:{team}:{channel}:{thread_ts}")
        if run is None and place.direct:  # a DM's top level is one thread
            run = await self.records.active_run(f"slack:{team}:{channel}")
        if run is None or run.state not in (S.QUEUED, S.RUNNING, S.AWAITING_TOOL,
                                             S.AWAITING_APPROVAL):
            await self.set(channel, thread_ts, "closed")  # nothing runs: no spinner left
            return
        if not may_stop(access, user, place, run):
            log.info("slack: %s may not stop run %s here; the stop button did nothing",
                     user, run.id)
            await self.set(channel, thread_ts, session_status(run.state))
            return
        # Written before this returns (and Slack gets its ack); cancelled right after. The
        # session is closed with the notice saying so (``shown``).
        await runtime.stop(run.id, by=user, key=key)

    async def show(self, runtime: Runtime, run: Run, seen: Inbound) -> None:
        """While ``run`` works (followed on ``runtime``): its thread's session where Slack
        keeps them (``processing`` now; its end is said with its reply, wherever it ends),
        else the assistant thread's status, else a reaction on the person's message, gone at
        the end."""
        thread_ts = seen.reply_in or seen.ts
        # A session is a thread's: a DM's top level (answered there) has none.
        if seen.reply_in is not None and await self.settle(run.thread_id, seen.target,
                                                           title=title_of(seen.text)):
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
            async for _ in runtime.follow(run.id):
                pass
        finally:
            with contextlib.suppress(SlackApiError):
                if status:
                    await self.client.assistant_threads_setStatus(
                        channel_id=seen.channel, thread_ts=thread_ts, status="")
                else:
                    await self.client.reactions_remove(channel=seen.channel,
                                                       timestamp=seen.ts, name=REACTION)


def stopped_where(event: Mapping[str, Any]) -> tuple[str, str, str] | None:
    """``agent_session_stopped``'s channel, thread and the person who clicked; None for an
    event that names none."""
    channel, thread_ts, user = (str(event.get(k) or "") for k in ("channel", "thread_ts",
                                                                   "user"))
    return (channel, thread_ts, user) if channel and thread_ts and user else None
