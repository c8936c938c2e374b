"""What every channel is to `maiden run`: a part that starts and stops on one lifespan."""

from __future__ import annotations

from typing import Protocol, Self

from runtime import Deliverer, FileFetcher

__all__ = ["Channel", "Reachable"]


class Channel(Protocol):
    """A way people reach the agent (the HTTP API, Slack, Discord).

    `maiden run` registers each configured channel's ``deliverer`` (if it posts
    replies) and ``fetcher`` (if its platform's files are downloaded) under ``name``
    and then enters the channel, on one ``AsyncExitStack``
    after recovery, so a reply due while channels still open goes out at once; it
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
    """How files its platform announces with a message are downloaded (registered with
    the deliverer); None if its messages carry their files' bytes (HTTP)."""

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


class Reachable:
    """A deliverer's reach of its platform, said by its channel as it connects and loses
    the connection (``channels.retry.Reach``): while ``offline`` says why it cannot post
    now, its sends fail fast and the outbox keeps the deliveries for later."""

    offline: str | None = None

    def unreachable(self, why: str) -> None:
        self.offline = why

    def reachable(self) -> None:
        self.offline = None
