"""Requests between processes on one store: a `maiden approve` or `maiden cancel` typed in a
terminal reaches the run that a `maiden run` server is holding."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import MaidenError, RunError, StoreError
from ..model.requests import ControlRequest, Instance, News
from ..stores.base import unlistened
from .leases import Leases, is_gone_here

if TYPE_CHECKING:
    from ..stores.base import ControlStore, Store

__all__ = ["ControlRequest", "Instance", "Upkeep", "Verbs", "ask", "instance_lease",
           "live_instances", "serve_requests"]

log = logging.getLogger("maiden.control")


class Verbs(Protocol):
    """What a request from another process asks of a runtime (``steering.Steering``)."""

    async def decide(self, run_id: str, tool_call_id: str, *, approve: bool, by: str,
                     reason: str, arguments_hash: str | None,
                     approvers: Sequence[str] | None) -> Any: ...

    async def cancel(self, run_id: str, *, by: str, forward: bool) -> Any: ...

    async def resume(self, run_id: str) -> Any: ...


class Upkeep(Protocol):
    """What the control loop does now and then for a runtime (``upkeep.RuntimeUpkeep``)."""

    instance_id: str
    clock: Callable[[], float]
    leases: Leases

    def holds(self, run_id: str) -> bool: ...

    async def expire_approvals(self) -> Any: ...

    async def flush_deliveries(self) -> Any: ...

    async def adopt_orphans(self) -> Any: ...

    def report_store(self, problem: str | None) -> None:
        """What the last attempt to write the store found: None when it worked."""

    def report_peers(self, others: int) -> None:
        """How many other runtimes serve the store, as last found."""

    def heard(self, news: News, key: str) -> None:
        """What the store told of a thread (``LeaseStore.listen_threads``)."""


FLUSH_EVERY_S = 5.0
"""How often a serving runtime retries replies that failed to send."""

REPORT_EVERY_S = 60.0
"""How often a store that cannot be written is reported again while it lasts."""

REQUEST_TTL_S = 300.0
"""A request nobody took within this long is expired, not carried out late."""


def instance_lease(instance_id: str) -> str:
    """The lease a serving runtime holds while it is alive."""
    return f"instance:{instance_id}"


async def live_instances(store: Store) -> list[Instance]:
    """The serving runtimes whose lease has not expired (by the store's clock) and that
    still exist, when they are on this machine (a kill -9 leaves its lease behind)."""
    held = {lease.name: lease.holder for lease in await store.leases()}
    return [i for i in await store.instances()
            if (holder := held.get(instance_lease(i.id))) is not None
            and not is_gone_here(holder)]


async def serve_requests(
    verbs: Verbs, rt: Upkeep, store: Store, poll_interval_s: float, stop: asyncio.Event, *,
    adopt_every_s: float = 5.0,
) -> None:
    """Beat, answer requests meant for this process, expire approvals, retry failed sends,
    take up the runs of processes that died; until ``stop``.

    The heartbeat is also the store's health check (``_Heart``).
    """
    # Woken by a request's notification (where the store sends them) or by ``stop``;
    # otherwise every poll interval, which is also the fallback.
    wake = asyncio.Event()
    heart = _Heart(rt, store, wake)
    last_flush = last_adopt = rt.clock()
    stopper = asyncio.ensure_future(stop.wait())
    stopper.add_done_callback(lambda _: wake.set())
    try:
        while not stop.is_set():
            wake.clear()
            try:
                now = rt.clock()
                if await heart.beat(now):  # else the round is over (it was reported)
                    live = {i.id for i in await live_instances(store)}
                    rt.report_peers(len(live - {heart.me.id}))
                    for request in await store.requests():
                        await _handle(verbs, rt, store, request, live)
                    await rt.expire_approvals()
                    if now - last_flush >= FLUSH_EVERY_S:
                        last_flush = now
                        await rt.flush_deliveries()  # replies whose send failed: try again
                    if now - last_adopt >= adopt_every_s:
                        last_adopt = now
                        await rt.adopt_orphans()  # runs of a process that died, elsewhere too
            except StoreError as exc:
                log.error("handling requests from other processes failed (%s); retrying", exc)
            except Exception:
                log.exception("handling requests from other processes failed; retrying")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), poll_interval_s)
    finally:
        stopper.cancel()
        await heart.stop()


class _Heart:
    """A serving runtime's heartbeat, which is also the store's health check: a store that
    stops taking writes (a full disk, a read-only remount) is reported once, then every
    ``REPORT_EVERY_S`` while it lasts, and once more when it takes writes again. The first
    beat that works starts listening for requests (``wake``) and for news of threads."""

    def __init__(self, rt: Upkeep, store: Store, wake: asyncio.Event) -> None:
        self.rt = rt
        self.store = store
        self.wake = wake
        self.me = Instance(id=rt.instance_id, pid=os.getpid(), host=socket.gethostname(),
                           started_at=rt.clock(), beat_at=rt.clock())
        self.reported: float | None = None
        self.unlisten: Callable[[], Awaitable[None]] = unlistened
        self.unhear: Callable[[], Awaitable[None]] = unlistened

    async def beat(self, now: float) -> bool:
        """Beat and hold the instance's lease; False if the store cannot be written."""
        rt, store, me = self.rt, self.store, self.me
        lost = store.gone()  # the store said so in its log line: not again here
        if lost is not None:
            rt.report_store(lost)
            return False
        try:
            await store.beat(me.model_copy(update={"beat_at": now}))
            await rt.leases.take(instance_lease(me.id))
            if self.unlisten is unlistened:
                self.unlisten = await store.listen_requests(self.wake.set)
            if self.unhear is unlistened:
                self.unhear = await store.listen_threads(rt.heard)
        except StoreError as exc:
            rt.report_store(str(exc))
            if self.reported is None or now - self.reported >= REPORT_EVERY_S:
                self.reported = now
                log.error("the store cannot be written: %s (nothing is lost: runs "
                          "wait, and go on once it can be written again)", exc)
            return False
        if self.reported is not None:
            self.reported = None
            log.warning("the store can be written again")
        rt.report_store(None)
        return True

    async def stop(self) -> None:
        """Stop listening, say this process is gone, and give up its lease."""
        for stop_listening in (self.unlisten, self.unhear):
            with contextlib.suppress(Exception):
                await stop_listening()
        with contextlib.suppress(Exception):
            await self.store.beat(self.me, gone=True)
        with contextlib.suppress(Exception):
            await self.rt.leases.release(instance_lease(self.me.id))


async def _handle(
    verbs: Verbs, rt: Upkeep, store: Store, request: ControlRequest, live: set[str]
) -> bool:
    """Carry out one request if it is this process's to answer; True if it was."""
    if request.created_at < rt.clock() - REQUEST_TTL_S:
        await store.finish_request(request.model_copy(update={
            "handled_at": rt.clock(), "handled_by": rt.instance_id, "ok": False,
            "result": "expired: nobody took it in time"}))
        return True
    run = await store.get_run(request.run_id)
    holder = run.owner if run.owner in live else None
    if request.kind == "cancel" and holder not in (None, rt.instance_id) \
            and not rt.holds(run.id):
        return False  # the process driving it will cancel it: its tools stop for real
    p = request.payload
    error: str | None
    try:
        if request.kind == "decide":
            await verbs.decide(request.run_id, str(p["tool_call_id"]), approve=bool(p["approve"]),
                            by=str(p.get("by", "")), reason=str(p.get("reason", "")),
                            arguments_hash=p.get("arguments_hash"),
                            approvers=p.get("approvers"))
        elif request.kind == "cancel":
            # Never asked of another process from here: a request's answer waiting on a
            # request of its own stalls this loop (up to its timeout, if that one is gone).
            await verbs.cancel(request.run_id, by=str(p.get("by", "")), forward=False)
        else:
            await verbs.resume(request.run_id)
        ok, result, error = True, "done", None
    except RunError as exc:
        if exc.reason == "driven_elsewhere":
            return False  # it came alive after all (the round's view was stale): its own
        ok, result, error = False, str(exc), exc.reason
    except MaidenError as exc:
        ok, result, error = False, str(exc), type(exc).__name__
    await store.finish_request(request.model_copy(update={
        "handled_at": rt.clock(), "handled_by": rt.instance_id, "ok": ok, "result": result,
        "error": error}))
    return True


async def ask(
    store: ControlStore, request: ControlRequest, *, timeout_s: float = 10.0, poll_s: float = 0.1
) -> ControlRequest:
    """Store a request and wait until a serving process has handled it."""
    stored = await store.add_request(request)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        current = await store.get_request(stored.id)
        if current.handled_at is not None:
            return current
        await asyncio.sleep(poll_s)
    # Withdraw it, so no server carries it out later behind the caller's back.
    withdrawn = stored.model_copy(update={"handled_at": time.time(), "ok": False,
                                          "result": "withdrawn: nobody answered in time"})
    if not await store.finish_request(withdrawn):
        return await store.get_request(stored.id)
    raise RunError("request_timeout", f"no serving process answered request {stored.id} "
                   f"within {timeout_s:g} s")
