"""The leases one runtime holds in its store: the threads it drives, its own liveness as a
serving process, and named roles (one Discord gateway connection across replicas).

A lease's expiry is the store's to judge (the database server's clock, for PostgreSQL), so
replicas on several machines never compare their own clocks. A holder is named
``{instance}/{pid}@{host}``: a process that finds a lease held by a process of its own
machine that no longer exists (a kill -9) takes it at once instead of waiting for it to
expire. Held leases are renewed in the background every third of their lifetime; one that
could not be renewed in time is reported lost (another process may take it, and the store's
position and version checks stop this one's next write on that thread).

The store renews every lease it has of a holder, so one this runtime let go of, or failed
to take, while the store was out of reach (the store may have done it all the same) would
be renewed with the others for as long as the process lives: such a lease is *stray*, and
is given up again with the next renewal until the store says it is done. So is one reported
lost: the store may have it still (it counts a lease's time from when it renewed it, after
this runtime asked; a renewal may have landed whose answer was lost).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from collections.abc import AsyncIterator, Callable

from ..errors import StoreError
from ..stores.base import LeaseStore
from ..stores.erasure import thread_lease

__all__ = [
    "Leases",
    "describe_holder",
    "holder_instance",
    "holder_name",
    "is_gone_here",
    "thread_lease",
]

log = logging.getLogger("maiden.leases")


def holder_name(instance_id: str) -> str:
    """``{instance}/{pid}@{host}``: this process, as a lease holder."""
    return f"{instance_id}/{os.getpid()}@{socket.gethostname()}"


def holder_instance(holder: str) -> str:
    """The runtime instance a lease holder's name stands for."""
    return _parts(holder)[0]


def _parts(holder: str) -> tuple[str, int | None, str]:
    instance, _, rest = holder.partition("/")
    pid, _, host = rest.partition("@")
    return instance, int(pid) if pid.isdigit() else None, host


def is_gone_here(holder: str) -> bool:
    """Whether ``holder`` is a process of this machine that no longer exists."""
    _, pid, host = _parts(holder)
    if pid is None or host != socket.gethostname() or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def describe_holder(holder: str) -> str:
    """``process 123 on host-a`` (or the name as it is, if it is not one of ours)."""
    _, pid, host = _parts(holder)
    return f"process {pid} on {host}" if pid is not None else holder


class Leases:
    """The leases of one runtime; every method is safe to call from concurrent tasks."""

    def __init__(self, store: LeaseStore, instance_id: str, ttl_s: float, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._store = store
        self.holder = holder_name(instance_id)
        self.ttl_s = ttl_s
        self._clock = clock
        self._held: dict[str, float] = {}
        """Name -> until when (by ``clock``, counted from before the store was asked) it is
        surely ours."""
        self._keeper: asyncio.Task[None] | None = None
        self._on_lost: dict[str, Callable[[], None]] = {}
        self._strays: set[str] = set()
        """Leases this runtime let go of, or did not get, that the store may hold for it
        still (its answer did not come): given up again with the next renewal."""
        self._tidying = asyncio.Lock()
        """Held while strays are given up: a stray taken again waits for it."""

    def holds(self, name: str) -> bool:
        return self._held.get(name, 0.0) > self._clock()

    def kept(self, name: str, now: float | None = None) -> bool:
        """Whether the lease is ours for a while yet (nobody else can take it before then):
        ``take`` then answers without asking the store."""
        return self._held.get(name, 0.0) - (self._clock() if now is None else now) \
            > self.ttl_s / 2

    async def take(self, name: str, *, lost: Callable[[], None] | None = None) -> str | None:
        """Take (or keep) the lease: None when this runtime has it now, else its holder.
        ``lost`` is called if it cannot be renewed in time."""
        asked = self._clock()
        if self.kept(name, asked):
            return None
        if name in self._strays:
            async with self._tidying:  # not given up under the take
                self._strays.discard(name)
        try:
            other = await self._store.take_lease(name, self.holder, self.ttl_s)
            if other is not None and is_gone_here(other):
                log.info("lease %s: its holder %s is gone; taking it", name,
                         describe_holder(other))
                other = await self._store.take_lease(name, self.holder, self.ttl_s,
                                                     steal_from=other)
        except StoreError:
            self._stray(name)  # the store may have given it all the same
            raise
        if other is None:
            self._held[name] = asked + self.ttl_s
            if lost is not None:
                self._on_lost[name] = lost
            self._keep()
        return other

    @contextlib.asynccontextmanager
    async def sending(self, thread_id: str, busy: Callable[[str], bool]
                      ) -> AsyncIterator[bool]:
        """Whether this runtime may send a thread's outbox records that a process no longer
        live left (their run's owner died, or released it): with the thread's lease, held
        already or taken for the send and given back after (unless the thread's worker here,
        ``busy``, began meanwhile: then the lease is its own); False while another process
        holds it (that one sends them). So a dead owner's reply is sent by one replica, not
        by each whose flush comes round."""
        name = thread_lease(thread_id)
        if self.holds(name):
            yield True
            return
        if await self.take(name) is not None:
            yield False
            return
        try:
            yield True
        finally:
            if not busy(thread_id):
                with contextlib.suppress(StoreError):
                    await self.release(name)

    async def ask_for_thread(self, thread_id: str) -> None:
        """Ask whichever process holds the thread's lease to drive its next run now
        (``LeaseStore.ask_for_thread``): it may be keeping the lease idle (lingering)."""
        with contextlib.suppress(StoreError):  # only sooner: the lease ends in time anyway
            await self._store.ask_for_thread(thread_id)

    async def release(self, name: str) -> None:
        """Give the lease up (nothing if this runtime does not have it)."""
        self._on_lost.pop(name, None)
        if self._held.pop(name, None) is not None:
            try:
                await self._store.release_leases(self.holder, [name])
            except StoreError:
                self._stray(name)
                raise

    def _stray(self, name: str) -> None:
        """The store may hold ``name`` for this runtime, unbeknown to it: give it up later."""
        self._strays.add(name)
        self._keep()

    async def close(self) -> None:
        """Give up every lease and stop renewing."""
        keeper, self._keeper = self._keeper, None
        if keeper is not None:
            keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await keeper
        self._held.clear()
        self._on_lost.clear()
        self._strays.clear()
        await self._store.release_leases(self.holder)

    def _keep(self) -> None:
        if self._keeper is None or self._keeper.done():
            self._keeper = asyncio.create_task(self._renew(), name="maiden-leases")

    async def _renew(self) -> None:
        while self._held or self._strays:
            await asyncio.sleep(self.ttl_s / 3)
            asked = self._clock()
            strays = set(self._strays)
            try:
                kept = set(await self._store.renew_leases(self.holder, self.ttl_s))
            except StoreError as exc:
                log.warning("could not renew leases (%s); trying again", exc)
                kept = set()
            else:
                with contextlib.suppress(StoreError):  # they stay strays
                    await self._give_up_strays(strays, kept)
            for name in list(self._held):
                if name in kept:
                    self._held[name] = asked + self.ttl_s
                elif self._held[name] <= self._clock():
                    del self._held[name]
                    self._strays.add(name)  # the store may have it still
                    log.error("lease %s was lost (not renewed in time): another process may "
                              "take it over", name)
                    lost = self._on_lost.pop(name, None)
                    if lost is not None:
                        lost()

    async def _give_up_strays(self, strays: set[str], kept: set[str]) -> None:
        """Give up the ``strays`` (as they were before the store was asked) that the store
        still has for this runtime (``kept``: what it just renewed), unless taken again
        since; forget the others (a stray later than the renewal waits for the next)."""
        async with self._tidying:
            held = sorted(strays & kept & self._strays)
            if held:
                log.info("giving up lease %s, let go of while the store was out of reach",
                         ", ".join(held))
                await self._store.release_leases(self.holder, held)
            self._strays -= strays
