"""What every channel is to `maiden run`: a part that starts and stops on one lifespan."""

from __future__ import annotations

from typing import Protocol, Self

from runtime import Deliverer, FileFetcher

__all__ = ["Channel", "Link"]


class Channel(Protocol):
    """A way people reach the agent (the HTTP API, Slack, Discord).

    A channel is made over a runtime built with its ``deliverer`` (if it posts replies)
    and ``fetcher`` (if its platform's files are downloaded) under ``name``, both made
    before the runtime, with no runtime (``bot.wiring``). `maiden run` enters each channel
    on one ``AsyncExitStack`` after recovery, and what waited in the outbox for it goes out
    once it is up (its deliverer says whether it is: its ``offline``); it
    prints each one's ``banner`` line, and on SIGTERM calls ``stop_intake`` on all of
    them before the runtime lets runs reach a checkpoint; leaving the context then
    closes the channel. A channel uses only the runtime's public API.

    A platform that cannot be reached at start is no reason to fail ``__aenter__``:
    the channel keeps trying in the background (``channels.retry``), says
    ``connecting: <reason>`` in ``banner`` and ``status``, and its deliverer refuses
    fast meanwhile (the outbox keeps the replies). A platform that refuses the
    configuration (a token, an intent) raises ``ChannelRefused``.
    """

    name: str
    """The origin channel of the runs it submits, and its deliverer's key."""

    deliverer: Deliverer | None
    """How the runtime posts this channel's replies and approval prompts; None if the
    channel answers its callers directly (HTTP)."""

    fetcher: FileFetcher | None
    """How files its platform announces with a message are downloaded (given to the
    runtime with the deliverer); None if its messages carry their files' bytes (HTTP)."""

    async def __aenter__(self) -> Self:
        """Connect (or start trying to) and start taking messages."""
        ...

    async def __aexit__(self, *exc: object) -> None:
        """Stop: close connections, answer whoever still waits with where things stand."""
        ...

    def banner(self) -> str:
        """Its line in `maiden run`'s banner: what it serves, and where."""
        ...

    def status(self) -> str:
        """How it is now, in a few words: connected, or why not (the operator console's
        Now page shows it)."""
        ...

    def stop_intake(self) -> None:
        """Refuse new messages from now on (shutdown has begun)."""
        ...

    async def closed(self) -> None:
        """Return if the channel stops by itself (a fault), so `maiden run` can stop too."""
        ...


class Link:
    """Where a chat channel stands with its platform, made with its deliverer before the
    runtime and shared by the two: the channel says how it stands as it connects and loses
    the connection (``up``, ``down``: ``channels.retry.Reach``), and its deliverer asks it.
    While ``offline`` says why it cannot post now, the deliverer's sends fail fast and the
    outbox keeps the deliveries for later; a link is made not connected yet. ``bot`` is
    who the bot is on the platform once signed in (its own messages are told apart from
    people's by it), or None until then."""

    def __init__(self, offline: str | None = "not connected yet", bot: str | None = None
                 ) -> None:
        self.offline = offline
        self.bot = bot

    def signed_in_as(self, bot: str) -> None:
        """The bot's user id, learnt as the channel connects."""
        self.bot = bot

    def down(self, why: str) -> None:
        self.offline = why

    def up(self) -> None:
        self.offline = None
