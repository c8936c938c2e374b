"""What a person's message to a chat channel comes to, written once for every chat channel.

Their right at the place is checked first: ``stop`` (or ``cancel``) from someone who may
``operate`` there stops the thread's run (written before the platform hears back, as its
stop button is); from anyone else the message needs ``talk``.
A message that passes is submitted as a run (the platform's message id its idempotency
key); one that does not is refused, and the person is told once (``Told``), not at
every message. How a refusal is said (an ephemeral line, a log line) is the channel's.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from typing import Any, Literal, Protocol

from runtime import FileSource, MaidenError, Origin, Run, Runtime

from .access import Access, Place
from .work import is_stop, stop_thread

__all__ = ["Message", "Submit", "Talk", "Told", "Verdict", "weigh"]

Verdict = Literal["take", "stop", "empty", "may not talk", "may not stop"]
"""``take``: submit it; ``stop``: stop the thread's run; ``empty``: nothing to do (no
text, no file); ``may not talk`` / ``may not stop``: refused."""


class Message(Protocol):
    """A person's message as a chat channel read it (each channel's ``Inbound``)."""

    @property
    def user(self) -> str: ...
    @property
    def text(self) -> str: ...
    @property
    def thread_id(self) -> str: ...
    @property
    def key(self) -> str: ...
    @property
    def target(self) -> dict[str, str]: ...
    @property
    def files(self) -> tuple[FileSource, ...]: ...


class Submit(Protocol):
    """``Runtime.submit``, or a channel's ``Intake.submit`` that tries it again."""

    def __call__(self, thread_id: str, text: str, **fields: Any) -> Awaitable[Run]: ...


def weigh(access: Access, user: str, place: Place, text: str, *, files: bool) -> Verdict:
    """What a message from ``user`` at ``place`` comes to, by the rights alone."""
    stop = is_stop(text)
    if stop and access.allows(user, place, "operate"):
        return "stop"
    if not access.allows(user, place, "talk"):
        return "may not talk"
    if stop:  # may talk here, not stop runs
        return "may not stop"
    if not text and not files:
        return "empty"
    return "take"


class Talk:
    """One chat channel's way from a person's message to the runtime."""

    def __init__(self, runtime: Runtime, via: str, access: Access) -> None:
        self._runtime = runtime
        self._via = via
        self._access = access

    async def hear(self, message: Message, place: Place) -> Verdict:
        """What ``message`` from ``place`` comes to (``weigh``); a stop is written before
        this returns (``work.stop_thread``), and carried out in the background."""
        verdict = weigh(self._access, message.user, place, message.text,
                        files=bool(message.files))
        if verdict == "stop":
            await stop_thread(self._runtime, message.thread_id, message.user, message.key)
        return verdict

    async def submit(self, message: Message, place: Place, *,
                     submit: Submit | None = None, user_name: str | None = None) -> Run:
        """The run ``message`` makes, through ``submit`` (by default the runtime's); what
        it raises is raised. ``user_name``: the sender's name as the platform shows it,
        for the source of what the run remembers."""
        return await (submit or self._runtime.submit)(
            message.thread_id, message.text, idempotency_key=message.key,
            fetch=message.files,
            origin=Origin(channel=self._via, target=message.target, user=message.user,
                          user_name=user_name or None, place=place.ids, direct=place.direct,
                          private=place.direct or place.private,
                          rights=place.rights(self._access, message.user)))


class Told:
    """Whom a refusal was said to, so each person is told once, across every replica on
    the store: the store keeps who was told, and the first replica to record it tells."""

    def __init__(self, runtime: Runtime, via: str, log: logging.Logger) -> None:
        self._runtime = runtime
        self._via = via
        self._log = log
        self._told: set[str] = set()

    async def first_time(self, scope: str, user: str, what: str) -> bool:
        """Whether ``user`` is to be told ``what`` now (not yet, here or by another
        replica); a store that cannot record it is no reason to keep quiet."""
        if user in self._told:
            return False
        self._told.add(user)
        try:
            recorded = await self._runtime.kept.notes.remember(scope, user, what,
                                                          call=f"{scope}:{user}")
        except MaidenError as exc:
            self._log.warning("%s: cannot record who was told (%s); telling %s anyway",
                              self._via, exc, user)
            return True
        return recorded is not None  # None: another replica told them
