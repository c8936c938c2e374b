"""The outbox: what a run says to a channel is written in a checkpoint and sent after.

A reply (the final answer, or why the run stopped) is written with the run's end;
an approval prompt with the pause. Sending comes after the checkpoint, and the
channel's message id is recorded once sent (DESIGN §5). A crash between the two
leaves a record with no message id: it is reconciled with the channel, and sent
only if it is really missing. What a channel implements, and the sending of one
record through it, are in ``deliverer``; which records go when, and who sends them,
here.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence

from ..engine.tracing import NO_TRACING, Tracing
from ..errors import DeliveryError, NotFound, StoreError
from ..model.events import RunEvent, RunStarted
from ..model.runs import (
    NOT_POSTED,
    ApprovalDelivery,
    Delivery,
    FileDelivery,
    ReplyDelivery,
    Run,
    StreamDelivery,
)
from ..stores.base import Checkpoint, Store
from .claims import Claims, never_gone
from .deliverer import Deliverer, Uploader, UploadStarted, deliver, parts, upload
from .live import LiveReplies
from .ordering import ORDER_HOLD_S, Place, holds_back, in_run_order, place, superseded

__all__ = ["ORDER_HOLD_S", "Deliverer", "Elsewhere", "Outbox", "Sender", "UploadStarted",
           "Uploader", "deliver", "parts", "upload"]

log = logging.getLogger("maiden.delivery")

Elsewhere = Callable[[str], Awaitable[bool]]
"""Whether another live process owns a run (``Peers.elsewhere``): its records are left to it."""


async def _nowhere_else(run_id: str) -> bool:
    return False


Claim = Callable[[str], contextlib.AbstractAsyncContextManager[bool]]
"""For a thread's id, whether this process may send its records left by a process no
longer live (``Leases.sending``), held for the send."""


@contextlib.asynccontextmanager
async def _always(thread_id: str) -> AsyncIterator[bool]:
    yield True


class Outbox:
    """The runtime's deliverers and the sending of what runs left in the outbox.

    A thread's messages are posted in the order they were written (to each channel): a run's
    are sent after the thread's older ones not sent yet, and the outbox's sweep goes through
    them in order; one that cannot go now holds back those after it (``ORDER_HOLD_S``).
    Who sends a record is unchanged by that: the process that wrote it, at once; later (a
    retry, a recovery), any process, reconciling first, unless the run's owner is another
    live process (``elsewhere``). A prompt or closing words that the run has moved past
    are not posted (``superseded``): they are recorded as done, ``NOT_POSTED``.

    ``deliverers``: each channel's, by name; a record for a channel that has none here
    stays in the outbox (a process with no channels, a channel not configured here)."""

    def __init__(self, store: Store, born: float,
                 clock: Callable[[], float] = time.time, *,
                 deliverers: Mapping[str, Deliverer] | None = None,
                 tracing: Tracing = NO_TRACING,
                 elsewhere: Callable[[], Elsewhere] = lambda: _nowhere_else,
                 claim: Claim = _always, sender: str = "this process",
                 gone: Callable[[str], bool] = never_gone) -> None:
        self._store = store
        self._born = born
        self._clock = clock
        self._tracing = tracing
        self._elsewhere = elsewhere
        """A fresh ``Elsewhere`` for each pass over the outbox (it keeps what it looked up)."""
        self._claim = claim
        """Whether this process may send a thread's records that a process no longer live
        left (``Leases.sending``: it has the thread's lease for the send)."""
        self._claims = Claims(store, sender, gone, clock)
        """The store's claims on records, taken just before each send (``claims.py``)."""
        self._deliverers: dict[str, Deliverer] = dict(deliverers or {})
        self._sending: dict[str, asyncio.Future[bool]] = {}
        """Deliveries being sent now, each done when its send is: True if it was posted (or
        superseded), False if it stays in the outbox."""
        self._unsure: set[str] = set()
        """Records whose send here failed, perhaps after the post, and stayed unsent: never
        sent again without asking the channel first, even if the store could not record the
        failure (chaos finding 33: a notice posted as the store was cut, posted again at its
        run's end)."""
        self.live = LiveReplies(store, self._deliverers, clock)
        """The streams of runs driven here (channels whose deliverer has a ``streamer``):
        fed by the event bus, finished by the run's reply."""
        self._starting: set[asyncio.Task[None]] = set()
        """The sends of what runs left unsent as they started here (``on_event``)."""

    async def post(self, delivery: ReplyDelivery) -> str | None:
        """A message that is not a run's reply (a tool's ``send_message``): recorded in the
        outbox under its key, then sent. Its message id; None while it waits in the outbox
        (no deliverer for its channel here, or the send failed: it is tried again).

        The same key again (a retried call, a recovery) sends nothing twice: a record with
        a message id is the answer; one without is reconciled with the channel first.
        """
        existing = await self._find(delivery.run_id, delivery.key)
        if existing is not None and existing.remote_id:
            return existing.remote_id
        if existing is None:
            await self._store.commit(Checkpoint(delivery.thread_id, None,
                                                deliveries=[delivery]))
        await self._send(existing or delivery, fresh=existing is None)
        sent = await self._find(delivery.run_id, delivery.key)
        return None if sent is None else sent.remote_id

    async def posted(self, run_id: str, key: str) -> Delivery | None:
        """The outbox record of a message ``post`` took, or None if it never got that far."""
        return await self._find(run_id, key)

    async def _find(self, run_id: str, key: str) -> Delivery | None:
        return next((d for d in await self._store.deliveries(run_id=run_id) if d.key == key),
                    None)

    async def send_pending(self, run: Run) -> None:
        """Send what a run put in the outbox and is not sent yet, in order: when it ends or
        pauses; and as it starts or is taken up again (``on_event``: a notice written at its
        start goes out before its answer streams).

        The thread's older records not sent yet go first, in order (a reply left in the
        outbox while its channel was not up, after a restart, or whose send failed), so
        that the thread's messages are posted in the order of its runs; one of them that
        cannot go now leaves the run's to the outbox's sweep, behind it."""
        if run.origin.target:
            await self._send_run(
                run, await self._store.deliveries(thread_id=run.thread_id, pending=True))

    async def _send_run(self, run: Run, pending: list[Delivery]) -> None:
        """``send_pending`` with the thread's records not sent yet (``pending``), up to the
        run's last: each is judged superseded or not by its run as the store has it when it
        is sent (``_superseded``), not by ``run``, which may be older than the records."""
        pending = await in_run_order(self._store, pending)
        last = max((i for i, d in enumerate(pending) if d.run_id == run.id), default=None)
        if last is None:
            return
        await self._in_order(pending[:last + 1], self._elsewhere(), own=run)

    def on_event(self, event: RunEvent) -> None:
        """Fed by the event bus: a run that starts with records left unsent (a notice
        written as it started, or what an earlier life of it left) has them sent now, and
        its stream, if it has one, opens after them (``RunStarted.unsent``)."""
        sending = None
        if isinstance(event, RunStarted) and event.unsent:
            sending = asyncio.create_task(self._send_started(event.run_id, event.thread_id),
                                          name=f"maiden-send:{event.run_id}")
            self._starting.add(sending)
            sending.add_done_callback(self._starting.discard)
        self.live.on_event(event, after=sending)

    async def _send_started(self, run_id: str, thread_id: str) -> None:
        # The records first, then the run: it may have gone on meanwhile (paused, ended),
        # and a record it wrote since must not be judged by the run as it was before.
        try:
            pending = await self._store.deliveries(thread_id=thread_id, pending=True)
            run = await self._store.get_run(run_id)
            if run.origin.target:
                await self._send_run(run, pending)
        except NotFound:
            pass  # erased meanwhile: nothing of it is sent
        except StoreError as exc:
            log.warning("run %s: sending what it left unsent as it started failed (%s); the "
                        "outbox's sweep sends it", run_id, exc)

    async def close(self) -> None:
        """Shutdown: stop the streams and the sends begun as runs started (what they did not
        post stays in the outbox, sent at the next start)."""
        for task in self._starting:
            task.cancel()
        await asyncio.gather(*self._starting, return_exceptions=True)
        await self.live.close()

    async def flush(self, skip: Elsewhere | None = None, *, channel: str | None = None
                    ) -> None:
        """Send every record with no message id yet, reconciling first, in order: those a
        crash or a failed send left behind, or written while their channel was not up here
        (``channel``: that channel's only); except the runs ``skip`` says another process
        holds (by default, ``elsewhere``'s)."""
        skip = skip or self._elsewhere()
        pending = await in_run_order(self._store,
            [d for d in await self._store.deliveries(pending=True)
             if d.channel in self._deliverers and channel in (None, d.channel)])
        await self._in_order([d for d in pending if not isinstance(d, StreamDelivery)], skip)
        for stream in pending:
            if isinstance(stream, StreamDelivery) and not await skip(stream.run_id):
                await self._tidy(stream)

    async def _tidy(self, stream: StreamDelivery) -> None:
        """Finish a stream a crash left open (``LiveReplies.tidy``); while its channel
        refuses (not connected yet, down), leave it for a later sweep: a start sweeps before
        its channels are up, and a refusal that escaped ended every start (chaos seed 9797:
        each replica died again and again on the same stream)."""
        try:
            await self.live.tidy(stream, await self._store.get_run(stream.run_id))
        except NotFound:
            return  # erased meanwhile
        except DeliveryError as exc:
            log.warning("finishing run %s's stream failed (%s); it stays in the outbox and is "
                        "tried again", stream.run_id, exc)

    async def _in_order(self, records: Sequence[Delivery], skip: Elsewhere, *,
                        own: Run | None = None) -> None:
        """Send ``records`` (oldest first), each after those before it to the same channel
        (``ordering.place``): one that stays in the outbox holds back the rest of its
        place's, while it is younger than ``ORDER_HOLD_S``. ``own``: the run whose end or
        start this is, whose records this process wrote (sent without reconciling if
        written since it started)."""
        held: set[Place] = set()
        now = self._clock()
        for delivery in records:
            where = place(delivery)
            if isinstance(delivery, StreamDelivery) or where in held:
                continue  # a stream is finished by its run's reply (or ``flush``'s tidying)
            done = await self._sent_meanwhile(delivery.key)
            tried = done is not None or delivery.attempts_failed > 0
            if done:
                pass  # another send of it under way here posted it
            elif own is not None and delivery.run_id == own.id:
                # Written since this runtime started, by it, and never tried: nothing to
                # reconcile. Else (a send under way here failed, say) it is asked first.
                # With the thread's lease too (held already at a run's end: no trip to the
                # store), as another process's send of it would be: a run that never
                # started here (a queued run cancelled) has no owner, and another replica's
                # sweep may be sending its record now (chaos finding 23: posted twice).
                async with self._claim(delivery.thread_id) as mine:
                    done = mine and await self._send(
                        delivery, fresh=not tried and delivery.created_at >= self._born,
                        trace=own.trace)
            elif await skip(delivery.run_id):
                done = False  # its run's owner, alive, sends it
            else:
                # Left by a process no longer live: sent here if this process has the
                # thread (else the one that has it sends it), reconciling first.
                async with self._claim(delivery.thread_id) as mine:
                    done = mine and await self._send(
                        delivery, fresh=False, trace=await self._trace_of(delivery))
            if not done and holds_back(delivery, now):
                held.add(where)

    async def _sent_meanwhile(self, key: str) -> bool | None:
        """Whether another send of ``key`` under way here posted it (or found it superseded),
        once it is over; None if none is (so that a run's messages are posted in their
        order: its answer after a notice that a retry of the outbox is posting)."""
        busy = self._sending.get(key)
        if busy is None:
            return None
        await asyncio.wait([busy])
        return busy.result()

    async def _trace_of(self, delivery: Delivery) -> str:
        """The trace of the delivery's run, when traces are made ('' when not)."""
        if not self._tracing.enabled:
            return ""
        try:
            return (await self._store.get_run(delivery.run_id)).trace
        except NotFound:
            return ""

    async def _superseded(self, delivery: Delivery, records: Sequence[Delivery]
                          ) -> str | None:
        """``superseded`` for a prompt or a run's closing words, with its ``records`` and the
        run as the store has it after they were read: never a copy read before them (a
        worker's, as the run paused). Another process may have moved the run on since,
        writing the record judged now: a cancellation's closing line, judged by the paused
        copy, "went on after it" and was never posted (chaos finding 39)."""
        if not isinstance(delivery, ApprovalDelivery) and not (
                isinstance(delivery, ReplyDelivery) and delivery.answer):
            return None
        try:
            run = await self._store.get_run(delivery.run_id)
        except NotFound:
            return None
        return superseded(delivery, run, records)

    async def _deliver(self, deliverer: Deliverer, delivery: Delivery, *, fresh: bool
                       ) -> None:
        if isinstance(delivery, FileDelivery) and isinstance(deliverer, Uploader):
            await upload(self._store, deliverer, delivery, fresh=fresh)
        elif not await self.live.finish(delivery):  # else its stream shows it now
            await deliver(self._store, deliverer, delivery, fresh=fresh)

    async def _send(self, delivery: Delivery, *, fresh: bool, trace: str = "") -> bool:
        """Send one record: True once it is done (posted, or superseded), False while it
        stays in the outbox."""
        if isinstance(delivery, StreamDelivery):
            return False  # finished by its run's reply (or ``flush``'s tidying)
        deliverer = self._deliverers.get(delivery.channel)
        what = "approval prompt" if isinstance(delivery, ApprovalDelivery) else \
            "file" if isinstance(delivery, FileDelivery) else "reply"
        if deliverer is None:
            log.warning("no %r channel to deliver run %s's %s; it stays in the outbox",
                        delivery.channel, delivery.run_id, what)
            return False
        if delivery.key in self._sending:
            return bool(await self._sent_meanwhile(delivery.key))  # already on its way
        self._sending[delivery.key] = asyncio.get_running_loop().create_future()
        done = False
        why = None
        try:
            done = await self._post(deliverer, delivery, what, fresh=fresh, trace=trace)
        except (DeliveryError, StoreError) as exc:
            # The channel said why (down, refused, still connecting), or the store could not
            # be read or written: one line, no trace.
            log.warning("delivering run %s's %s failed (%s); it stays in the outbox and is "
                        "tried again", delivery.run_id, what, exc)
            why = str(exc)
        except Exception as exc:
            log.exception("delivering run %s's %s failed; it stays in the outbox and is "
                          "tried again", delivery.run_id, what)
            why = f"{type(exc).__name__}: {exc}"
        finally:
            self._sending.pop(delivery.key).set_result(done)
            (self._unsure.discard if done else self._unsure.add)(delivery.key)
        if why is not None:
            # After letting go of the key: a retry may start meanwhile; if it posts first,
            # the store leaves the sent record alone.
            try:
                await self._store.delivery_failed(delivery.key, why[:500])
            except Exception as problem:  # the store may be what failed
                log.warning("could not record why the send failed: %s", problem)
        return done

    async def _post(self, deliverer: Deliverer, delivery: Delivery, what: str, *,
                    fresh: bool, trace: str) -> bool:
        """Post a record claimed here (``_send``): True once it is done (posted now or
        before, or superseded); False if another process is sending it; raises why it
        could not be."""
        # Claimed in the store, not only here (no other send of it starts here): a process
        # that believes it may send a record (its own run's, or with a lease that expired
        # while it was starved) may be wrong, and the store settles it (chaos finding 23).
        claimed = await self._claims.take(delivery, what)
        if claimed is None:
            return False
        if claimed.remote_id is not None:
            return True  # sent since the caller read it (by a sweep that read it first)
        records = await self._store.deliveries(run_id=delivery.run_id)
        delivery = next((d for d in records if d.key == delivery.key), claimed)
        # A send of it was begun elsewhere, or here and failed.
        fresh = fresh and claimed.attempts_failed == 0 and delivery.key not in self._unsure
        if (stale := await self._superseded(delivery, records)) is not None:
            log.info("run %s's %s is not posted: %s", delivery.run_id, what, stale)
            await self._store.mark_delivered(delivery.key, NOT_POSTED, self._clock())
            return True
        span = self._tracing.delivery(delivery, what, fresh=fresh, parent=trace)
        with span as traced:
            try:
                await self._deliver(deliverer, delivery, fresh=fresh)
            except Exception as exc:
                traced.failed(f"{type(exc).__name__}: {exc}")
                raise
        # Which process sent which record, and how (a reconciled send may have found it
        # posted): what a reply shown twice or never is traced back by.
        log.info("run %s's %s delivered (%s, %s)", delivery.run_id, what, delivery.key[:12],
                 "written here, not tried" if fresh else "reconciled first")
        return True


class Sender:
    """The ``send`` service a tool declares it needs (``send_message``): a message to a
    channel target, through the outbox, exactly once per key."""

    def __init__(self, outbox: Outbox, channels: frozenset[str] | None) -> None:
        self._outbox = outbox
        self.channels = channels
        """The chat channels the agent is configured for; None: not known, any channel."""

    def allows(self, channel: str) -> bool:
        return self.channels is None or channel in self.channels

    async def post(self, delivery: ReplyDelivery) -> str | None:
        """Its message id, or None while it waits in the outbox (``Outbox.post``)."""
        return await self._outbox.post(delivery)

    async def posted(self, run_id: str, key: str) -> Delivery | None:
        """The outbox record of a message ``post`` took, if it got that far."""
        return await self._outbox.posted(run_id, key)
