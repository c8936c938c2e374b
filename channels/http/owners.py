"""Who may see which thread over HTTP (DESIGN §6): every thread has an owner scope,
recorded when it is made; a caller reads or writes a thread, its runs and responses only
if it owns it or holds a right that covers it. A thread the caller may not see is a 404,
so its existence does not leak.

The owner is what made the thread: a Slack or Discord place (its id says so, and so does
its first run's origin), a schedule, or the HTTP identity (token name; ``local`` without
tokens) that sent its first message — read from the thread's first run, which never
changes. ``operate`` covers every thread; a token's ``threads`` patterns (``support/*``)
cover the threads made over HTTP whose ids match; nothing else does. A Slack, Discord or
schedule thread is never covered but by ``operate``: writing into a platform's thread over
HTTP is an operator's act, even before it exists.

``may_see`` is the whole decision, a pure function with a table test; ``Owners`` reads
each thread's owner once (it never changes) for the routes.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Literal

from runtime import Entry, NotFound, Origin, Runtime

from .auth import Credential

__all__ = ["PLATFORM_PREFIXES", "Owner", "Owners", "may_see", "owner_of"]

PLATFORM_PREFIXES = ("slack:", "discord:", "schedule:")
"""Thread ids the adapters and the scheduler make: never an HTTP caller's own."""

Kind = Literal["place", "schedule", "caller"]


@dataclass(frozen=True, slots=True)
class Owner:
    """A thread's owner scope: a chat ``place`` (Slack, Discord), a ``schedule``, or an
    HTTP ``caller`` (by name)."""

    kind: Kind
    name: str


def owner_of(thread_id: str, first: Origin | None) -> Owner | None:
    """The owner of ``thread_id`` whose first run came from ``first`` (None: no run yet,
    so no owner but what its id claims)."""
    if thread_id.startswith("schedule:"):
        return Owner("schedule", thread_id)
    if thread_id.startswith(("slack:", "discord:")):
        return Owner("place", thread_id)
    if first is None:
        return None
    if first.channel in ("slack", "discord"):
        return Owner("place", first.channel)
    if first.channel == "schedule":
        return Owner("schedule", thread_id)
    # The HTTP API, the OpenAI wire, and the CLI on this machine (its identity is local).
    return Owner("caller", first.user or "local")


def may_see(who: Credential, thread_id: str, owner: Owner | None, *,
            write: bool = False) -> bool:
    """Whether ``who`` may read (or, ``write``, send a message into) ``thread_id`` owned by
    ``owner`` (None: the thread does not exist; writing makes it the caller's own)."""
    if who.may("operate"):
        return True
    if owner is None:
        return write and not thread_id.startswith(PLATFORM_PREFIXES)
    if owner.kind != "caller":
        return False
    return owner.name == who.name or any(fnmatchcase(thread_id, p) for p in who.threads)


class Owners:
    """Each thread's owner, read from its first run once and kept (it never changes while
    the thread lives; an erased thread begun anew may be someone else's)."""

    KEPT = 10_000

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self._known: OrderedDict[str, tuple[Owner, str]] = OrderedDict()
        """Per thread, its owner and its first run's id."""

    async def of(self, thread_id: str) -> Owner | None:
        known = self._known.pop(thread_id, None)
        if known is not None and await self._still(known[1]):
            self._known[thread_id] = known
            return known[0]
        runs = await self.runtime.records.runs(thread_id=thread_id)
        owner = owner_of(thread_id, runs[0].origin if runs else None)
        if owner is not None and runs:
            self._known[thread_id] = (owner, runs[0].id)
            if len(self._known) > self.KEPT:
                self._known.popitem(last=False)
        return owner

    async def _still(self, first_run: str) -> bool:
        """Whether the thread's first run is still there: not if the thread was erased (by
        any process), and maybe begun anew by another caller. One read by key."""
        try:
            await self.runtime.records.get_run(first_run)
        except NotFound:
            return False
        return True

    async def may_see(self, who: Credential, thread_id: str, *, write: bool = False) -> bool:
        if who.may("operate"):
            return True  # no read
        return may_see(who, thread_id, await self.of(thread_id), write=write)

    async def may_fetch(self, who: Credential, digest: str) -> bool:
        """Whether a thread ``who`` may see names the file ``digest`` (``operate``: any).
        Without ``operate`` the caller's threads are read through until one names it."""
        if who.may("operate"):
            return True
        records = self.runtime.records
        for thread in await records.threads():
            if await self.may_see(who, thread.id) and any(
                    digest in _digests(e) for e in await records.entries(thread.id)):
                return True
        return False


def _digests(entry: Entry) -> set[str]:
    """The files an entry names (a message's; a tool's made and shown files)."""
    refs = [*getattr(entry, "files", ()), *getattr(entry, "images", ())]
    return {ref.digest for ref in refs}
