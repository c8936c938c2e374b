"""``HttpApi``: the HTTP app's link to the runtime (``app.state.maiden``), which every
route reaches through ``deps.Api``, and the switches the process uses at shutdown."""

# No `from __future__ import annotations`: the routes' modules import these names for
# annotations FastAPI reads at runtime.
import asyncio
import base64
import json
import logging
from collections.abc import AsyncIterator, Sequence
from typing import Any

from fastapi.responses import StreamingResponse

from runtime import (
    FileRef,
    FileRefused,
    Origin,
    Run,
    RunEnded,
    RunEvent,
    RunState,
    Runtime,
    ScheduleService,
)

from .auth import Credential, Credentials
from .config import HttpConfig, OpenAIApiConfig
from .console import StatusSource
from .console.live import Live
from .errors import ApiError
from .metrics import Metrics
from .models import FileIn, MessageIn, RunOut
from .owners import Owners

__all__ = ["SSE", "HttpApi", "caller_key", "check_reuse", "claimed"]

log = logging.getLogger("maiden.http")
SSE = "text/event-stream"


class HttpApi:
    """The app's link to the runtime, and the switches the process uses at shutdown."""

    def __init__(self, runtime: Runtime, config: HttpConfig, credentials: Credentials,
                 statuses: StatusSource | None = None,
                 schedules: ScheduleService | None = None,
                 openai: OpenAIApiConfig | None = None) -> None:
        self.runtime = runtime
        self.openai = openai or OpenAIApiConfig()
        """``[openai_api]``: the OpenAI wire's settings."""
        self.schedules = schedules
        """The schedules this process fires (None: it fires none)."""
        self.config = config
        self.credentials = credentials
        self.statuses: StatusSource = statuses or (lambda: [("http", "serving")])
        self.metrics = Metrics(runtime)
        self.owners = Owners(runtime)
        """Whose each thread is: what a caller may see (``seen_thread``, ``seen_run``)."""
        self.closing = False
        self.released = asyncio.Event()
        self.console: Live | None = None
        """The console's live streams, ended by ``release``."""

    def stop_intake(self) -> None:
        """New messages are refused with 503 from now on."""
        self.closing = True

    def release(self) -> None:
        """Answer every request still waiting for a run with where the run stands now."""
        self.released.set()
        if self.console is not None:
            self.console.stopping.set()

    async def seen_thread(self, who: Credential, thread_id: str, *,
                          write: bool = False) -> None:
        """404 unless ``who`` may see ``thread_id`` (``write``: send a message into it,
        which makes a new thread the caller's own): a thread the caller may not see
        does not exist for it."""
        if not await self.owners.may_see(who, thread_id, write=write):
            raise ApiError(404, f"no thread {thread_id!r}", "not_found")

    async def seen_run(self, who: Credential, run_id: str) -> Run:
        """The run, if ``who`` may see its thread; else the same 404 as no run at all."""
        run = await self.runtime.records.get_run(run_id)
        if not await self.owners.may_see(who, run.thread_id):
            raise ApiError(404, f"no run {run_id!r}", "not_found")
        return run

    async def seen_file(self, who: Credential, digest: str) -> None:
        """404 unless ``who`` may see a thread that names the file (``operate``: any file).
        Without ``operate`` the caller's threads are read through until one names it:
        what a caller may fetch is what its own conversations hold."""
        if not await self.owners.may_fetch(who, digest):
            raise ApiError(404, f"no file {digest} in the store", "not_found")

    async def submit(self, thread_id: str, body: MessageIn, key: str | None,
                     who: Credential, trace: str = "") -> Run:
        if self.closing:
            raise ApiError(503, "the server is shutting down; send the message again later",
                           "shutting_down", {"Retry-After": "5"})
        await self.seen_thread(who, thread_id, write=True)
        files = await self._files(body.files)
        run = await self.runtime.submit(
            thread_id, body.text, origin=Origin(channel="http", user=claimed(who, body.user),
                                              rights=tuple(sorted(who.rights))),
            idempotency_key=caller_key("http", who, key), files=files, trace=trace)
        check_reuse(key, run, body.text, files, thread_id)
        log.info("message accepted as run %s", run.id,
                 extra={"thread_id": run.thread_id, "run_id": run.id})
        return run

    async def _files(self, given: list[FileIn]) -> list[FileRef]:
        """The message's files, stored (before its run is: a run names stored files);
        413 for one too big, 415 for a type not taken, 422 for data that is not base64."""
        files = self.runtime.kept.files
        try:
            files.too_many(len(given))
        except FileRefused as exc:
            raise ApiError(422, str(exc), "file_refused") from None
        stored = []
        for item in given:
            try:
                data = base64.b64decode(item.data, validate=True)
            except ValueError:
                raise ApiError(422, f"{item.name}: its data is not base64", "invalid_file") \
                    from None
            try:
                stored.append(await files.put(item.name, item.media_type, data))
            except FileRefused as exc:
                status = {"size": 413, "type": 415}.get(exc.limit or "", 422)
                raise ApiError(status, str(exc), "file_refused") from None
        return stored

    async def settle(self, run_id: str) -> Run:
        """The run once it ends or pauses (or once the server stops waiting)."""
        waiting = asyncio.ensure_future(self.runtime.wait(run_id))
        released = asyncio.ensure_future(self.released.wait())
        try:
            await asyncio.wait([waiting, released], return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (waiting, released):
                task.cancel()
            await asyncio.gather(waiting, released, return_exceptions=True)
        if waiting.done() and not waiting.cancelled():
            return waiting.result()
        return await self.runtime.records.get_run(run_id)

    async def after(self, run: Run, wait: bool) -> RunOut:
        """The run as it is now, or (``wait``) once it ends or pauses."""
        return RunOut.of(await self.settle(run.id) if wait else run)

    def event_stream(self, run: Run, first: str | None) -> StreamingResponse:
        """Answer with the run's events (from its start: the runtime keeps them)."""
        return StreamingResponse(
            self._stream(run, first), media_type=SSE,
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no",
                     "Location": f"/v1/runs/{run.id}"})

    async def _stream(self, run: Run, first: str | None) -> AsyncIterator[bytes]:
        """SSE: the run's events until its end event.

        Every ``keepalive_s`` of silence sends a comment line, so proxies keep the
        connection; at shutdown the stream ends with where the run stands.
        """
        if first:
            yield _sse(first, RunOut.of(run).model_dump(mode="json"))
        # A message just accepted (its first event "run.accepted", the run queued): its
        # events from its start, even if its worker answered it before this stream began.
        events = self.runtime.follow(run.id, accepted=bool(first) and run.state is RunState.QUEUED)
        released: asyncio.Future[Any] = asyncio.ensure_future(self.released.wait())
        upcoming: asyncio.Future[RunEvent] | None = None
        try:
            while True:
                upcoming = upcoming or asyncio.ensure_future(anext(events))
                await asyncio.wait([upcoming, released], timeout=self.config.keepalive_s,
                                   return_when=asyncio.FIRST_COMPLETED)
                if not upcoming.done():
                    if released.done():
                        ended = RunEnded.of(await self.runtime.records.get_run(run.id))
                        yield _sse(ended.kind, ended.model_dump(mode="json"))
                        return
                    yield b": keepalive\n\n"
                    continue
                event, upcoming = upcoming.result(), None
                yield _sse(event.kind, event.model_dump(mode="json"))
                if isinstance(event, RunEnded):
                    return
        finally:
            for task in (released, upcoming):
                if task is not None:
                    task.cancel()
            await asyncio.gather(*(t for t in (released, upcoming) if t is not None),
                                 return_exceptions=True)
            await events.aclose()


def caller_key(prefix: str, who: Credential, key: str | None) -> str | None:
    """An ``Idempotency-Key`` as the run holds it: the caller's own, so the same key from
    another caller is another request (a token's name has no ``:``)."""
    return None if key is None else f"{prefix}:{who.name}:{key}"


def check_reuse(key: str | None, run: Run, text: str, files: Sequence[FileRef],
                thread_id: str | None = None) -> None:
    """409 if ``run`` came back for ``key`` but is another message: another text, other
    files, or (where the request names one) another thread."""
    if key is None:
        return
    if run.text != text or [f.digest for f in run.files] != [f.digest for f in files] \
            or (thread_id is not None and run.thread_id != thread_id):
        raise ApiError(409, f"Idempotency-Key {key!r} was already used for another "
                       f"message (run {run.id}); use a new key for a new message",
                       "idempotency_key_reused")


def claimed(who: Credential, named: str | None) -> str:
    """The caller's name; a body that names someone else is refused (who someone is comes
    from their token, never from what a request says)."""
    if named and named != who.name:
        raise ApiError(403, f"this request is authenticated as {who.name!r}; it cannot act as "
                            f"{named!r} (leave the name out: it comes from the token)",
                       "identity_mismatch")
    return who.name


def _sse(kind: str, data: dict[str, Any]) -> bytes:
    return f"event: {kind}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()
