"""What every channel is to `maiden run`: a part that starts and stops on one lifespan."""

from __future__ import annotations

from typing import Protocol, Self

from runtime import Deliverer

__all__ = ["Channel"]


class Channel(Protocol):
    """A way people reach the agent (the HTTP API, Slack, Discord).

    `maiden run` enters every configured channel on one ``AsyncExitStack`` after
    recovery, prints each one's ``banner`` line, registers its ``deliverer`` (if it
    posts replies) under ``name``, and on SIGTERM calls ``stop_intake`` on all of
    them before the runtime lets runs reach a checkpoint; leaving the context then
    closes the channel. A channel uses only the runtime's public API.
    """

    name: str
    """The origin channel of the runs it submits, and its deliverer's key."""

    deliverer: Deliverer | None
    """How the runtime posts this channel's replies and approval prompts; None if the
    channel answers its callers directly (HTTP)."""

    async def __aenter__(self) -> Self:
        """Connect and start taking messages."""
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
