"""Routes: which agent answers a new thread, from where its first message came.

    [[routes]]
    place = "C0SUPPORT"     # a Slack channel, a Discord channel or guild, "dm" or "*"
    agent = "support"

A route names the agent and what it matches; everything it names must match, and the
first route that matches wins. A route that names nothing matches everything (a
catch-all). No route matching: the default agent. Only a thread's first run is routed:
the thread keeps that agent for its life (``Run.agent`` on each of its runs).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import Field, field_validator

from .config import AGENT_NAME, Section
from .runs import Origin

__all__ = ["LOCAL_PERSON", "RouteConfig", "Where", "person_key", "place_key", "route"]

ANYWHERE = "*"
DM = "dm"


@dataclass(frozen=True, slots=True)
class Where:
    """What a route looks at: the channel a message came in on, the ids of its place
    (a Slack channel; a Discord channel, its parent and its guild), whether it is a
    direct message, its thread id, and the schedule that sent it (if one did)."""

    channel: str
    thread_id: str
    place: tuple[str, ...] = ()
    direct: bool = False
    schedule: str | None = None

    @classmethod
    def of(cls, thread_id: str, origin: Origin, schedule: str | None = None) -> Where:
        channel = "schedule" if schedule is not None else origin.channel
        return cls(channel, thread_id, origin.place, origin.direct, schedule)


class RouteConfig(Section):
    """One ``[[routes]]`` table."""

    agent: str = Field(pattern=AGENT_NAME, description="the agent that answers there")
    channel: Literal["slack", "discord", "http", "cli", "console", "schedule"] | None = Field(
        default=None, description="the channel the message came in on")
    place: str | None = Field(default=None, min_length=1, description=(
        "a Slack channel id, a Discord channel or guild id, 'dm' for direct messages, or "
        "'*' for every channel (not DMs)"))
    thread_prefix: str | None = Field(default=None, min_length=1, description=(
        "thread ids that start with this (the HTTP API's and the CLI's own names)"))
    schedule: str | None = Field(default=None, min_length=1,
                                 description="a [[schedules]] name: its runs")

    @field_validator("place")
    @classmethod
    def _stripped(cls, place: str | None) -> str | None:
        return place.strip() if place is not None else None

    def matches(self, where: Where) -> bool:
        if self.channel is not None and self.channel != where.channel:
            return False
        if self.schedule is not None and self.schedule != where.schedule:
            return False
        if self.thread_prefix is not None and not where.thread_id.startswith(self.thread_prefix):
            return False
        if self.place is None:
            return True
        if self.place == DM:
            return where.direct
        if self.place == ANYWHERE:
            return bool(where.place) and not where.direct
        return self.place in where.place

    def describe(self) -> str:
        """``slack place C0123 -> support``: for `maiden check`."""
        parts = [f"{key} {value}" for key, value in (
            ("channel", self.channel), ("place", self.place), ("schedule", self.schedule),
            ("thread_prefix", self.thread_prefix)) if value is not None]
        return f"{', '.join(parts) or 'everything else'} -> {self.agent}"


def route(routes: Sequence[RouteConfig], where: Where, default: str) -> str:
    """The agent of the first route that matches ``where``; ``default`` if none does."""
    return next((r.agent for r in routes if r.matches(where)), default)


def place_key(origin: Origin) -> str:
    """One name for the place a run came from, as spend caps group by it:
    ``slack:C0123``, ``discord:4567`` (a Discord thread: its parent channel), ``slack:dm``
    for the DMs of one channel kind, and the bare channel where there are no ids
    (``http``, ``cli``, ``schedule``)."""
    if not origin.place:
        return origin.channel
    ids = origin.place
    # A Discord thread's ids are (thread, parent, guild): the parent is the place.
    return f"{origin.channel}:{ids[1] if len(ids) == 3 else ids[0]}"


LOCAL_PERSON = "local"
"""Who a message typed on this machine (the CLI; the HTTP API without tokens) is from."""


def person_key(origin: Origin) -> str:
    """One name for the person a run came from, as usage and spend group by it: the
    platform's or token's user, ``local`` for the CLI and the HTTP API without tokens
    (the owner a thread they make gets), ``(nobody)`` for a schedule's slot."""
    if origin.user:
        return origin.user
    return LOCAL_PERSON if origin.channel in ("cli", "http", "console") else "(nobody)"
