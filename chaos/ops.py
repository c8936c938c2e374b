"""A plan's messages (``Op``) and what the draws of its other streams read and write of a
plan (``Drawing``): here, below the plan and its draws, so that none of them imports the
plan's module."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

__all__ = ["Decide", "Drawing", "Op", "Route"]

Route = Literal["http", "http_stream", "openai", "openai_stream", "slack", "discord",
                "responses", "responses_stream"]


@dataclass
class Decide:
    """A person's decision on an approval, ``after_s`` once the run waits for it."""

    approve: bool
    after_s: float
    twice: bool = False  # the button clicked again (the same decision, or its opposite)


@dataclass
class Op:
    """One message: at ``at`` s, ``person`` sends ``text`` to ``thread`` via ``route``
    (a Slack thread of the plan, ``slack/{seed}/{channel}/sNN``, is a maiden thread
    once its first message is posted)."""

    at: float
    tag: str
    thread: str
    person: str
    route: Route
    replica: int
    steps: list[list[str]]
    wait: bool = True
    cancel_after_s: float | None = None
    decide: Decide | None = None
    files: list[str] = field(default_factory=list)  # names of chaos.files.FILES it carries
    # how its file goes (chaos/files.py): over HTTP "multipart", "json" or "cli" (``maiden
    # send --file``); in Slack "signin" (its download answers Slack's sign-in page) or
    # "hold" (its first download held half-way, and the replica downloading it killed),
    # in Discord "hold" (from the CDN)
    via: str = ""

    @property
    def text(self) -> str:
        asks = " then ".join("+".join(turn) for turn in self.steps) or "nothing"
        return f"[{self.tag}] {self.person} asks for {asks}"


class Drawing(Protocol):
    """What the draws of a plan's later streams (``slack_plan``, ``discord_plan``,
    ``files``) read and fill in: ``plan.Plan``."""

    seed: int
    seconds: float
    store: str
    replicas: int
    people: list[str]
    ops: list[Op]
    slack_http: list[int]
    stops: list[Any]
    votes: list[Any]
    commands: list[Any]
    discord_acts: Any
