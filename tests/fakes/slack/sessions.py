"""Slack's agent sessions, faked: ``agents.sessions.setStatus`` and ``agents.sessions.rename``
(docs.slack.dev/ai/agent-sessions), and the stop button (``agent_session_stopped``).

A session is scoped to one thread (channel, thread root ``ts``): ``setStatus`` creates it
the first time, with the ``title`` and ``initiator_user_id`` it was given (both ignored
afterwards), and keeps every status it is set to; ``rename`` changes its title
(``session_not_found`` if there is none). The stop button (``stop``) stops the app's streams
still running in the thread — Slack "stopped" them: appending answers ``stopped_by_user``,
stopping is still allowed — and leaves the status alone ("The session status does not update
automatically when the user clicks stop", /reference/events/agent_session_stopped).
``chat.stopStream`` sets the status of the session of the stream's thread, if there is
one, to its ``session_status`` (``active`` by default, as the method's page says); that
status joins the session's history too. The arguments are checked against the contract
before these run (``rules.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from .store import JSON, SlackError, Store
from .streams import Streams

__all__ = ["Session", "Sessions"]


@dataclass
class Session:
    """One thread's session: its status and title, each with its history."""

    channel: str
    thread_ts: str
    initiator_user_id: str | None = None
    statuses: list[str] = field(default_factory=list)
    titles: list[str] = field(default_factory=list)

    @property
    def status(self) -> str:
        return self.statuses[-1]

    @property
    def title(self) -> str | None:
        return self.titles[-1] if self.titles else None

    def view(self) -> JSON:
        return {"channel": self.channel, "thread_ts": self.thread_ts, "status": self.status,
                "statuses": list(self.statuses), "title": self.title,
                "titles": list(self.titles), "initiator_user_id": self.initiator_user_id}


class Sessions:
    """The sessions of a workspace, by (channel, thread_ts)."""

    def __init__(self, store: Store, streams: Streams) -> None:
        self.store = store
        self.streams = streams
        self.by_thread: dict[tuple[str, str], Session] = {}
        streams.session_status = self.stream_stopped

    def table(self) -> dict[str, Callable[[JSON], JSON]]:
        return {"agents.sessions.setStatus": self.set_status,
                "agents.sessions.rename": self.rename}

    def _thread(self, params: JSON) -> tuple[str, str]:
        channel, thread_ts = str(params["channel_id"]), str(params["thread_ts"])
        message = self.store.channel(channel).get(thread_ts)
        if message is None or message.get("thread_ts") not in (None, thread_ts):
            raise SlackError("invalid_arguments", response_metadata={
                "messages": ["[ERROR] thread_ts must be a thread's root message"]})
        return channel, thread_ts

    def set_status(self, params: JSON) -> JSON:
        where = self._thread(params)
        session = self.by_thread.get(where)
        if session is None:
            session = self.by_thread[where] = Session(
                *where, initiator_user_id=params.get("initiator_user_id"),
                titles=[str(params["title"])] if params.get("title") else [])
        session.statuses.append(str(params["status"]))
        return {"status": session.status, "agent_status": session.status,
                "title": session.title}

    def rename(self, params: JSON) -> JSON:
        session = self.by_thread.get(self._thread(params))
        if session is None:
            raise SlackError("session_not_found")
        session.titles.append(str(params["title"]))
        return {}

    def stream_stopped(self, channel: str, thread_ts: str, status: str) -> None:
        """``chat.stopStream`` in the thread: its session, if it has one, takes ``status``."""
        session = self.by_thread.get((channel, thread_ts))
        if session is not None:
            session.statuses.append(status)

    def stop(self, channel: str, thread_ts: str) -> list[str]:
        """A person clicked stop in the thread: the app's streams there stop; their ``ts``."""
        stopped = []
        for where in sorted(self.streams.streaming):
            message = self.store.channel(where[0]).get(where[1]) or {}
            if where[0] == channel and message.get("thread_ts") == thread_ts:
                self.streams.stopped_by_user(where)
                stopped.append(where[1])
        return stopped
