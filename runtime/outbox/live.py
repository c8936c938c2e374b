"""Live replies: a run's answer shown in its channel while the model writes it.

A channel whose deliverer has a ``streamer`` gets the text of each run that answers a
person (its origin names a user and a target; a schedule's post is not streamed) as it
arrives, batched (at most one append every ``stream_every_s``), and its tool calls as
they start and end.
The stream is an outbox record like any other (``StreamDelivery``): written ``opening``
before the platform is asked, ``streaming`` with the platform's message ids as soon as
it returns them, ``finished`` once the reply it shows is final. Partial text is never
checkpointed: after a crash the model turn is asked again, and the messages already
opened are finished with the final answer (their text replaced) when the run's reply
goes out, never a second reply. A run taken up after a crash is not streamed again (its
new text would repeat what those messages show), nor while a stream of an earlier life is
still open; its reply finishes them. Nor while a reply of the thread's earlier runs waits in
the outbox (its channel was not up, its send failed): the thread's messages go out in the
order of its runs, and a stream would show this one first.

A store that fails to record a stream's ids (PostgreSQL out of reach for a moment) does
not make the process forget the messages it opened: it keeps their ids and writes them
again before the stream's next append (its text waits meanwhile), and if the store has not
taken them when the run's reply goes out, the reply finishes those messages all the same,
their ids recorded with it. Finishing what opened, rather than posting the reply apart,
keeps the answer shown once and no message left streaming. The ids are in memory only
because the store would not take them: after a crash before it did, the next start finds
the messages in their thread (``Streamer.find_stream``), as after a crash right after the
platform answered.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..errors import StoreError
from ..model.events import (
    RunEnded,
    RunEvent,
    RunStarted,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
)
from ..model.runs import (
    DRIVABLE,
    Delivery,
    FileDelivery,
    ReplyDelivery,
    Run,
    StreamDelivery,
    idempotency_key,
)
from ..stores.base import Checkpoint, Store
from .ordering import waits_behind
from .streamer import Streamer, ToolUpdate
from .stretch import Stretch, stream_ending, tool_update

__all__ = ["LiveReplies"]

log = logging.getLogger("maiden.live")

RECORD_AGAIN_S = 1.0
"""How often a stream whose ids the store did not take tries again with nothing new to
show (new text tries at once)."""


class LiveReplies:
    """The streams of the runs this process drives, fed by the event bus."""

    def __init__(self, store: Store, deliverers: Mapping[str, Any],
                 clock: Callable[[], float]) -> None:
        self._store = store
        self._deliverers = deliverers
        self._clock = clock
        self._live: dict[str, Stretch] = {}
        self._unrecorded: dict[str, tuple[str, ...]] = {}
        """The ids of messages streams opened here that the store has not taken yet (its
        write failed), by stream key: written again before the stream's next append, and
        what ``finish`` ends; dropped once the store holds them."""

    def streamer(self, channel: str) -> Streamer | None:
        streamer: Streamer | None = getattr(self._deliverers.get(channel), "streamer", None)
        return streamer

    # -- fed by the bus

    def on_event(self, event: RunEvent, after: asyncio.Task[None] | None = None) -> None:
        """A run's event (``after``: for its start, the send of what it left unsent, which
        its stream waits for)."""
        live = self._live.get(event.run_id)
        if event.kind == "run.started":
            assert isinstance(event, RunStarted)
            self._began(event, live, after)
            return
        if live is None:
            return
        if isinstance(event, RunEnded):
            live.ended = True  # an inert one too: what is sent now is of its stretch
            live.closed = event.kind != "run.paused"
        elif live.inert:
            return
        elif isinstance(event, TextDelta):
            live.text.append(event.text)
        elif isinstance(event, ToolCallStarted):
            update = tool_update(event.call, "in_progress")
            live.summaries[update.call_id] = update.summary
            live.tools.append(update)
        elif isinstance(event, ToolCallFinished):
            live.tools.append(ToolUpdate(event.tool_call_id, event.name,
                                         live.summaries.get(event.tool_call_id, ""),
                                         "error" if event.is_error else "complete"))
        else:
            return
        live.wake.set()

    def _began(self, event: RunStarted, live: Stretch | None,
               after: asyncio.Task[None] | None) -> None:
        earlier: asyncio.Task[None] | None = None
        if live is not None and not live.ended:
            # An earlier life of the run here left without an end: it lost a commit to
            # another writer, and is taken up again from its last checkpoint. What it
            # streamed is not this life's (the model is asked again): it stops, and this
            # life's reply replaces what it showed (chaos finding 42: appended to it, the
            # answer showed twice).
            live.ended = live.closed = True
            live.wake.set()
            if live.task is not None and live.after is not None and not live.after.done():
                live.task.cancel()  # still waiting to begin: it showed nothing
            earlier = live.task
        elif live is not None and live.task is not None and not live.task.done():
            return  # its stretch is still flushing its end: this one goes into it
        if event.recovered or not any(getattr(d, "streamer", None) is not None
                                      for d in self._deliverers.values()):
            # Taken up after a crash (its earlier life's stream, if any, stays), or no
            # channel here streams.
            if earlier is not None:  # what finishes the earlier life's stream waits for it
                self._live[event.run_id] = Stretch(event.run_id, event.thread_id,
                                                   started=self._clock(), inert=True,
                                                   earlier=earlier)
            return
        live = self._live[event.run_id] = Stretch(event.run_id, event.thread_id,
                                                started=self._clock(), after=after,
                                                earlier=earlier)
        live.task = asyncio.create_task(self._follow(live),
                                        name=f"maiden-live:{event.run_id}")

    async def _follow(self, live: Stretch) -> None:
        try:
            waits = [t for t in (live.earlier, live.after) if t is not None]
            if waits:  # an earlier life's stream, and what it left unsent, go first
                await asyncio.wait(waits)
            run = await self._store.get_run(live.run_id)
            # A person's message gets a live reply; a schedule's post, read later, does not.
            # A job's run (a reminder, a check) has nothing to stream, and may post nothing.
            watched = bool(run.origin.target and run.origin.user) and run.job is None
            streamer = self.streamer(run.origin.channel) if watched else None
            if streamer is None or await self._behind(run):
                live.inert = True
                return
            while True:
                with contextlib.suppress(TimeoutError):  # held: try its ids again anyway
                    await asyncio.wait_for(live.wake.wait(),
                                           RECORD_AGAIN_S if live.held else None)
                live.wake.clear()
                ending = live.ended  # the end is the last event: this flush takes the rest
                await self._flush(live, run, streamer)
                if ending:
                    return
                if live.ended:  # it came during that flush: one more, at once
                    live.wake.set()
                    continue
                await asyncio.sleep(streamer.stream_every_s)  # the platform's pace
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            # The reply still goes out whole when the run ends, in what opened if it did.
            live.inert = True
            log.warning("run %s: streaming its reply failed (%s: %s); it %s when the run "
                        "ends", live.run_id, type(exc).__name__, exc,
                        "is posted" if live.stream is None else "finishes its message")
        finally:
            if live.stream is None and self._live.get(live.run_id) is live:
                del self._live[live.run_id]  # nothing opened: nothing to finish

    async def _flush(self, live: Stretch, run: Run, streamer: Streamer) -> None:
        if live.stream is not None and not await self._recorded(live):
            return  # its messages' ids first: what was written waits for them
        text, tools = "".join(live.text), list(live.tools)
        if not text.strip() and (live.stream is None or not tools):
            return  # a stream opens with text; whitespace waits for what follows it
        if live.stream is None and live.closed:
            # Ended before its first flush: the reply says it all, posted whole. A stream
            # opened now would race the reply's send, which another replica may be making
            # while this one opens it (chaos finding 28: an answer shown twice). A run paused
            # for a person still shows what it wrote, over its prompt.
            live.inert = True
            return
        live.text.clear()
        live.tools.clear()
        if live.stream is None:
            stream = await self._opening(run, live)
            ids = await streamer.open_stream(stream, text, tools)
            if not ids:  # the channel could not open it now (offline): nothing was posted
                await self._store.stream_progress(stream.key, "finished", [], self._clock())
                live.inert = True
                live.ended = True
                return
        else:
            stream = live.stream
            ids = await streamer.append_stream(stream, text, tools)
        # Known here before the store is asked: if it fails, they are still what this
        # process finishes (never a second message beside one left streaming).
        live.stream = stream.model_copy(update={"state": "streaming",
                                                "remote_ids": tuple(ids)})
        live.streamed += text
        if live.stream.remote_ids != stream.remote_ids:
            self._unrecorded[stream.key] = live.stream.remote_ids
            await self._recorded(live)

    async def _opening(self, run: Run, live: Stretch) -> StreamDelivery:
        """The stream's record, written before the platform is asked to open it."""
        earlier = [d for d in await self._store.deliveries(run_id=run.id)
                   if isinstance(d, StreamDelivery)]
        stream = StreamDelivery(key=idempotency_key(run.id, f"stream@{len(earlier)}"),
                                run_id=run.id, thread_id=run.thread_id,
                                channel=run.origin.channel, target=run.origin.target,
                                created_at=self._clock())
        live.opening = stream.key
        await self._store.commit(Checkpoint(run.thread_id, None, deliveries=[stream]))
        return stream

    async def _recorded(self, live: Stretch) -> bool:
        """Whether the store holds the ids of the messages ``live``'s stream opened, writing
        those it does not (``_unrecorded``); False, and ``live.held``, if it failed to."""
        assert live.stream is not None
        ids = self._unrecorded.get(live.stream.key)
        if ids is not None:
            try:
                await self._store.stream_progress(live.stream.key, "streaming", ids,
                                                  self._clock())
            except StoreError as exc:
                if not live.held:
                    log.warning("run %s: recording its stream's message ids failed (%s: "
                                "%s); the stream waits for them, and its reply finishes "
                                "those messages", live.run_id, type(exc).__name__, exc)
                live.held = True
                return False
            if self._unrecorded.get(live.stream.key) == ids:
                del self._unrecorded[live.stream.key]
        if live.held:
            log.info("run %s: its stream's message ids are recorded; it goes on",
                     live.run_id)
            live.held = False
        return True

    async def _settle(self, run_id: str) -> Stretch | None:
        """The run's stream here with everything written so far appended (its task done;
        held back instead if the store still refuses its ids), or None if this process did
        not stream it."""
        live = self._live.pop(run_id, None)
        if live is None:
            return None
        live.ended = True
        live.wake.set()
        if live.task is not None:
            if live.after is not None and not live.after.done():
                # Still waiting for what the run left unsent as it started (which may be
                # sending this reply, and waiting for this): nothing is streamed, the reply
                # goes out whole after them.
                live.task.cancel()
            await asyncio.gather(live.task, return_exceptions=True)
        if live.earlier is not None:  # an earlier life's last flush, before its stream ends
            await asyncio.gather(live.earlier, return_exceptions=True)
        return live

    # -- the end of a stream, from the outbox

    async def finish(self, delivery: Delivery) -> bool:
        """Before a run's reply or approval prompt is sent: finish the run's streams. True
        when a reply is shown by them (it is recorded as delivered, with their ids); False
        when it is to be sent as a message of its own (nothing was streamed), and for a
        prompt.

        Only the streams of the stretch of the run it ends, and of those before: a run that
        went on here since it was written (a prompt or closing words sent late, which the
        outbox had not found superseded yet) is streaming its next stretch, which its own
        reply ends; that stream is left alone, never finished with a stale note.

        The reply is recorded before its streams are: a crash between the two leaves a
        stream that ``tidy`` records later, never a reply sent a second time."""
        streamer = self.streamer(delivery.channel)
        if streamer is None or isinstance(delivery, StreamDelivery | FileDelivery) \
                or (isinstance(delivery, ReplyDelivery) and not delivery.answer):
            return False
        going = self._live.get(delivery.run_id)
        if going is not None and not going.ended and going.started > delivery.created_at:
            live, newer = None, going.opening  # a later stretch's, still going
        else:
            live, newer = await self._settle(delivery.run_id), None
        shown: str | None = None
        finished: list[tuple[StreamDelivery, list[str]]] = []
        for stream in await self._open_streams(delivery.run_id):
            if stream.key == newer:
                continue
            ids = list(self._unrecorded.get(stream.key) or stream.remote_ids) \
                or await self._found(streamer, stream)
            if ids:
                replace, note = stream_ending(delivery, stream, live)
                shows = delivery.key if isinstance(delivery, ReplyDelivery) else stream.key
                buttons = delivery.run_id if isinstance(delivery, ReplyDelivery) \
                    and delivery.feedback else None
                ids = await streamer.finish_stream(
                    stream.model_copy(update={"remote_ids": tuple(ids)}), replace=replace,
                    note=note, key=shows, feedback=buttons)
                shown = ",".join(ids)
            finished.append((stream, ids))
        answered = isinstance(delivery, ReplyDelivery) and shown is not None
        if answered:
            assert shown is not None
            await self._store.mark_delivered(delivery.key, shown, self._clock())
        for stream, ids in finished:
            await self._store.stream_progress(stream.key, "finished", ids, self._clock())
            self._unrecorded.pop(stream.key, None)
        return answered

    async def tidy(self, stream: StreamDelivery, run: Run) -> None:
        """A stream left unfinished by a crash after its reply was recorded as delivered:
        its messages were finished; record it (ending it on the platform if need be).

        ``stream`` as the caller read it: read again, it may have been finished since (by
        its run's reply, sent by the same sweep). The messages its run's records were
        posted as are not its own, though they answer the same message."""
        streamer = self.streamer(stream.channel)
        if streamer is None or run.state in DRIVABLE or run.id in self._live:
            return
        records = await self._store.deliveries(run_id=run.id)
        stream = next((d for d in records if d.key == stream.key
                       and isinstance(d, StreamDelivery)), stream)
        if stream.remote_id is not None:
            return  # finished meanwhile
        if any(d.remote_id is None and not isinstance(d, StreamDelivery) for d in records):
            return  # its reply or prompt finishes it
        ids = list(self._unrecorded.get(stream.key) or stream.remote_ids) \
            or await self._found(streamer, stream, records)
        if ids:
            ids = await streamer.finish_stream(
                stream.model_copy(update={"remote_ids": tuple(ids)}), replace=None,
                note=None, key=stream.key)
        await self._store.stream_progress(stream.key, "finished", ids, self._clock())
        self._unrecorded.pop(stream.key, None)

    async def _found(self, streamer: Streamer, stream: StreamDelivery,
                     records: Sequence[Delivery] | None = None) -> list[str]:
        """The messages of a stream whose ids the store does not have, found in its thread
        (``Streamer.find_stream``: the bot's answers to the same message since it began),
        but those another of its run's records was posted as: a notice answers the same
        message (chaos finding 27: a refused file's notice, taken for the answer's stream
        and edited into the answer, when Discord had failed both first posts)."""
        if records is None:  # (``tidy`` read them already)
            records = await self._store.deliveries(run_id=stream.run_id)
        posted = {i for d in records if d.remote_id and not isinstance(d, StreamDelivery)
                  for i in d.remote_id.split(",")}
        return [i for i in await streamer.find_stream(stream) if i not in posted]

    async def _behind(self, run: Run) -> bool:
        """Whether the run's reply is not streamed here: a stream of an earlier life of it
        is still open (its reply finishes those messages), or a message of the thread's
        earlier runs to the same place is not sent yet (a reply left in the outbox while
        the channel was not up, say): a stream would show this one first, so it is posted
        whole when the run ends, after them (``ordering.waits_behind``)."""
        pending = await self._store.deliveries(thread_id=run.thread_id, pending=True)
        return any(isinstance(d, StreamDelivery) and d.run_id == run.id for d in pending) \
            or waits_behind(run, pending, self._clock())

    async def _open_streams(self, run_id: str) -> list[StreamDelivery]:
        return [d for d in await self._store.deliveries(run_id=run_id, pending=True)
                if isinstance(d, StreamDelivery)]

    async def close(self) -> None:
        tasks = [t for live in self._live.values() for t in (live.task, live.earlier)
                 if t is not None]
        for task in tasks:
            task.cancel()
        with contextlib.suppress(Exception):
            await asyncio.gather(*tasks, return_exceptions=True)
