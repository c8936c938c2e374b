"""The HTTP API (DESIGN §9): ``create_app(runtime, config)`` returns the FastAPI app.

Every route calls the runtime's public API, as any channel does. A message is
persisted as a queued run before the request is answered; the answer comes once
the run ends or pauses (or at once with 202, for ``"wait": false``), or as a
stream of the run's events (``Accept: text/event-stream``). Errors are
``application/problem+json``.
"""

# No `from __future__ import annotations`: FastAPI reads the routes' annotations at
# runtime, including the body model made for the configured message length.
import asyncio
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Annotated, Any
from urllib.parse import unquote_to_bytes

from fastapi import Depends, FastAPI, Header, Query, Request, Response
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse, StreamingResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.convertors import PathConvertor, register_url_convertor

from runtime import (
    TERMINAL,
    NotFound,
    Origin,
    Run,
    RunEnded,
    RunEvent,
    RunState,
    Runtime,
    ScheduleService,
)

from ..access import Right
from .auth import Credential, Credentials, Unauthorized
from .config import HttpConfig
from .console import ConsoleOptions, RulesSource, StatusSource, mount_console
from .console.live import Live
from .errors import (
    ApiError,
    BodyLimit,
    fix_openapi,
    install_error_handlers,
    problem_responses,
)
from .guard import HostGuard
from .hosts import Hosts
from .metrics import CONTENT_TYPE, Metrics
from .models import (
    ApprovalIn,
    CancelIn,
    EntryPage,
    Health,
    MessageIn,
    RunDetail,
    RunOut,
    RunPage,
    SchedulePage,
    SlotHistory,
    ThreadDetail,
    ThreadOut,
    ThreadPage,
    message_model,
)

__all__ = ["HttpApi", "create_app"]

log = logging.getLogger("maiden.http")
S = RunState
_SSE = "text/event-stream"
_MAX_OFFSET = 1_000_000_000
_STREAM_DOC = {"description": "the run ended or paused; or, with `Accept: text/event-stream`, "
                              "its events as server-sent events",
               "content": {_SSE: {"schema": {"type": "string"}}}}
_FOLLOW_DOC = {"description": "the run's events as server-sent events, until it ends or pauses",
               "content": {_SSE: {"schema": {"type": "string"}}}}


class HttpApi:
    """The app's link to the runtime, and the switches the process uses at shutdown."""

    def __init__(self, runtime: Runtime, config: HttpConfig, credentials: Credentials) -> None:
        self.runtime = runtime
        self.config = config
        self.credentials = credentials
        self.metrics = Metrics(runtime)
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

    async def submit(self, thread_id: str, body: MessageIn, key: str | None,
                     who: Credential) -> Run:
        if self.closing:
            raise ApiError(503, "the server is shutting down; send the message again later",
                           "shutting_down", {"Retry-After": "5"})
        run = await self.runtime.submit(
            thread_id, body.text, origin=Origin(channel="http", user=claimed(who, body.user)),
            idempotency_key=f"http:{key}" if key is not None else None)
        if key is not None and (run.thread_id != thread_id or run.text != body.text):
            raise ApiError(409, f"Idempotency-Key {key!r} was already used for another "
                           f"message (run {run.id}); use a new key for a new message",
                           "idempotency_key_reused")
        log.info("message accepted as run %s", run.id,
                 extra={"thread_id": run.thread_id, "run_id": run.id})
        return run

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
        return await self.runtime.get_run(run_id)

    def event_stream(self, run: Run, first: str | None) -> StreamingResponse:
        """Answer with the run's events (from its start: the runtime keeps them)."""
        return StreamingResponse(
            self._stream(run, first), media_type=_SSE,
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no",
                     "Location": f"/v1/runs/{run.id}"})

    async def _stream(self, run: Run, first: str | None) -> AsyncIterator[bytes]:
        """SSE: the run's events until its end event.

        Every ``keepalive_s`` of silence sends a comment line, so proxies keep the
        connection; at shutdown the stream ends with where the run stands.
        """
        if first:
            yield _sse(first, RunOut.of(run).model_dump(mode="json"))
        events = self.runtime.follow(run.id)
        released: asyncio.Future[Any] = asyncio.ensure_future(self.released.wait())
        upcoming: asyncio.Future[RunEvent] | None = None
        try:
            while True:
                upcoming = upcoming or asyncio.ensure_future(anext(events))
                await asyncio.wait([upcoming, released], timeout=self.config.keepalive_s,
                                   return_when=asyncio.FIRST_COMPLETED)
                if not upcoming.done():
                    if released.done():
                        ended = RunEnded.of(await self.runtime.get_run(run.id))
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


class _ThreadIdConvertor(PathConvertor):
    """A thread id in a route: anything, a newline included. With ``path`` (``.*``) an id
    holding one would match no route, a 404, where the runtime's rule answers 422 saying
    why."""

    regex = "(?s:.*)"


register_url_convertor("thread_id", _ThreadIdConvertor())


def _thread_path(request: Request) -> None:
    """Refuse a thread id that is empty or not valid UTF-8 in the URL: decoded with
    replacement characters, ``a%FEb`` and ``a%FFb`` would be one thread."""
    raw = request.scope.get("raw_path") or request.url.path.encode()
    try:
        unquote_to_bytes(raw).decode("utf-8")
    except UnicodeDecodeError:
        raise ApiError(422, "the thread id in the URL is not valid UTF-8 once decoded",
                       "invalid_thread_id") from None
    if not request.path_params.get("thread_id"):
        raise ApiError(422, "the thread id is empty; list threads with GET /v1/threads",
                       "invalid_thread_id")


def _answer(run: Run) -> JSONResponse:
    settled = run.state in TERMINAL or run.state is S.AWAITING_APPROVAL
    return JSONResponse(RunOut.of(run).model_dump(mode="json"),
                        status_code=200 if settled else 202,
                        headers={"Location": f"/v1/runs/{run.id}"})


def _page(offset: int, limit: int, total: int) -> int | None:
    return offset + limit if offset + limit < total else None


def create_app(
    runtime: Runtime, config: HttpConfig | None = None, *, token: str | None = None,
    credentials: Credentials | None = None, statuses: StatusSource | None = None,
    rules: RulesSource | None = None,
) -> FastAPI:
    """The HTTP API over ``runtime``, and the operator console at ``/`` (``[http]
    console``); ``app.state.maiden`` is its ``HttpApi``.

    ``credentials``: the named tokens every /v1 route and /metrics require, each with its
    rights (none: every caller is ``local``, which the app only allows on loopback);
    ``token``: one token with every right, named ``operator``. The console signs in with
    a token once per browser session. ``statuses``: each channel's state, for the console
    (and ``rules``: who may do what on each chat channel).
    """
    config = config or HttpConfig()
    credentials = credentials if credentials is not None else Credentials.single(token)
    api = HttpApi(runtime, config, credentials)
    channel_statuses = statuses or (lambda: [("http", "serving")])

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        watcher = asyncio.create_task(api.metrics.watch(), name="maiden-http-metrics")
        try:
            yield
        finally:
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)

    # No /docs or /redoc: their pages load assets from a CDN, blank on an offline machine.
    # The schema is at /openapi.json for any viewer.
    app = FastAPI(title="maiden", version="1", lifespan=lifespan, docs_url=None,
                  redoc_url=None,
                  description="Talk to the agent, follow its runs, decide approvals.")
    app.state.maiden = api
    app.add_middleware(BodyLimit, limit=config.max_body_bytes)
    if config.cors_origins:
        app.add_middleware(CORSMiddleware, allow_origins=config.cors_origins,
                           allow_methods=["GET", "POST"],
                           allow_headers=["Authorization", "Content-Type", "Idempotency-Key",
                                          "Accept"])
    # Outermost: a request that does not name this server reaches nothing else.
    app.add_middleware(HostGuard, hosts=Hosts.of(config.host, config.allowed_hosts,
                                                 config.cors_origins))
    install_error_handlers(app)
    caller, needs = _authority(credentials)
    secured = [Depends(caller)]
    denied = (401,) if credentials.required else ()
    Talker = Annotated[Credential, Depends(needs("talk"))]
    Approver = Annotated[Credential, Depends(needs("approve"))]
    Operator = Annotated[Credential, Depends(needs("operate"))]
    Message = message_model(runtime.agent.max_message_chars)

    @app.post("/v1/threads/{thread_id:thread_id}/messages", response_model=RunOut,
              dependencies=[Depends(_thread_path)], tags=["threads"],
              responses={200: _STREAM_DOC, 202: {"model": RunOut, "description": (
                  "accepted: the run goes on (`wait` false, or the server is stopping)")},
                  **problem_responses(400, *denied, 403, 409, 413, 422, 503)})
    async def post_message(
        thread_id: str, body: Message, request: Request,  # type: ignore[valid-type]
        who: Talker,
        idempotency_key: Annotated[str | None, Header(
            alias="Idempotency-Key", max_length=200,
            description="a retried request with the same key returns the same run")] = None,
    ) -> Response:
        """Send a message on a thread (any string, URL-encoded); answer with the run."""
        message: MessageIn = body
        run = await api.submit(thread_id, message, idempotency_key, who)
        if _SSE in request.headers.get("accept", ""):
            return api.event_stream(run, first="run.accepted")
        if message.wait:
            run = await api.settle(run.id)
        return _answer(run)

    @app.get("/v1/threads", dependencies=secured, tags=["threads"],
             responses=problem_responses(*denied, 422))
    async def list_threads(
        offset: Annotated[int, Query(ge=0, le=_MAX_OFFSET)] = 0,
        limit: Annotated[int, Query(ge=1, le=500)] = 50,
    ) -> ThreadPage:
        """Threads, most recently updated first."""
        page = await runtime.threads(offset=offset, limit=limit)
        total = (await runtime.stats()).threads
        return ThreadPage(threads=[ThreadOut.of(t) for t in page], total=total,
                          next_offset=_page(offset, limit, total))

    @app.get("/v1/threads/{thread_id:thread_id}", dependencies=[*secured, Depends(_thread_path)],
             tags=["threads"],
             responses=problem_responses(*denied, 404, 422))
    async def get_thread(
        thread_id: str,
        offset: Annotated[int, Query(ge=0, le=_MAX_OFFSET, description="first entry")] = 0,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
        runs_limit: Annotated[int, Query(ge=1, le=500)] = 50,
    ) -> ThreadDetail:
        """A thread's entries (a page, oldest first) and its newest runs."""
        # One page of the history is read, not the whole thread.
        total = await runtime.thread_length(thread_id)
        entries = await runtime.entries(thread_id, offset=offset, limit=limit)
        runs = await runtime.runs(thread_id=thread_id)
        if not total and not runs:
            raise ApiError(404, f"no thread {thread_id!r}", "not_found")
        page = EntryPage(items=entries, total=total, offset=offset,
                         next_offset=_page(offset, limit, total))
        return ThreadDetail(thread_id=thread_id, entries=page, runs_total=len(runs),
                            runs=[RunOut.of(r) for r in runs[-runs_limit:]])

    @app.get("/v1/runs", dependencies=secured, tags=["runs"],
             responses=problem_responses(*denied, 422))
    async def list_runs(
        state: Annotated[list[RunState] | None, Query(description="any of these")] = None,
        thread_id: str | None = None,
        offset: Annotated[int, Query(ge=0, le=_MAX_OFFSET)] = 0,
        limit: Annotated[int, Query(ge=1, le=500)] = 50,
    ) -> RunPage:
        """Runs, newest first, optionally of some states or one thread."""
        newest = await runtime.runs(thread_id=thread_id, states=state or None,
                                    limit=offset + limit + 1)
        newest.reverse()
        page = newest[offset:offset + limit]
        return RunPage(runs=[RunDetail.detail(r, None) for r in page],
                       next_offset=offset + limit if len(newest) > offset + limit else None)

    @app.get("/v1/runs/{run_id}", dependencies=secured, tags=["runs"],
             responses=problem_responses(*denied, 404))
    async def get_run(run_id: str) -> RunDetail:
        """A run with its state changes and decisions."""
        run = await runtime.get_run(run_id)
        return RunDetail.detail(run, await runtime.transitions(run_id))

    @app.get("/v1/runs/{run_id}/events", dependencies=secured, tags=["runs"],
             response_class=StreamingResponse,
             responses={200: _FOLLOW_DOC, **problem_responses(*denied, 404)})
    async def follow_run(run_id: str) -> StreamingResponse:
        """Follow a run's events from now on, as server-sent events, until it ends or pauses."""
        return api.event_stream(await runtime.get_run(run_id), first=None)

    async def _after(run: Run, wait: bool) -> RunOut:
        return RunOut.of(await api.settle(run.id) if wait else run)

    @app.post("/v1/runs/{run_id}/approvals/{tool_call_id}",
              tags=["runs"], responses=problem_responses(400, *denied, 403, 404, 409, 413, 422))
    async def decide(run_id: str, tool_call_id: str, body: ApprovalIn,
                     who: Approver) -> RunOut:
        """Approve or deny the tool call a run waits for; the run then goes on. The decision
        is recorded under the token's name (``local`` without tokens)."""
        by = claimed(who, body.by)
        run = await runtime.decide(run_id, tool_call_id, approve=body.approve, by=by,
                                   reason=body.reason, arguments_hash=body.arguments_hash)
        log.info("call %s %s by %s", tool_call_id, "approved" if body.approve else "denied",
                 by, extra={"thread_id": run.thread_id, "run_id": run.id})
        return await _after(run, body.wait)

    @app.post("/v1/runs/{run_id}/cancel", tags=["runs"],
              responses=problem_responses(400, *denied, 403, 404, 409, 413, 422))
    async def cancel(run_id: str, who: Operator, body: CancelIn | None = None) -> RunOut:
        """Cancel a run: its model stream and tools stop, and it ends ``cancelled``."""
        by = claimed(who, (body or CancelIn()).by)
        return RunOut.of(await runtime.cancel(run_id, by=by))

    @app.post("/v1/runs/{run_id}/resume", dependencies=[Depends(needs("operate"))],
              tags=["runs"], responses=problem_responses(*denied, 403, 404, 409, 413, 422))
    async def resume(run_id: str, wait: bool = False) -> RunOut:
        """Queue a failed, cancelled or timed-out run again from its last checkpoint."""
        return await _after(await runtime.resume(run_id), wait)

    @app.get("/v1/schedules", dependencies=secured, tags=["schedules"],
             responses=problem_responses(*denied))
    async def list_schedules() -> SchedulePage:
        """Every schedule this process fires (from the config and from chat), with its next
        fires and its last slot's outcome; empty when it fires none."""
        found = await runtime.schedules.listing() if runtime.schedules is not None else []
        return SchedulePage.model_validate({"schedules": found})

    @app.post("/v1/schedules/{name}/run", dependencies=[Depends(needs("operate"))],
              tags=["schedules"], responses=problem_responses(*denied, 403, 404, 409, 422))
    async def run_schedule(name: str, wait: bool = False) -> RunOut:
        """Run a schedule once now, outside its slots (its own key: a second request is a
        second run); ``wait``: answer when the run ends or pauses."""
        if runtime.schedules is None:
            raise NotFound(f"no schedule named {name!r}: this process fires no schedules")
        return await _after(await runtime.schedules.run_now(name), wait)

    def _schedules() -> ScheduleService:
        if runtime.schedules is None:
            raise NotFound("this process fires no schedules")
        return runtime.schedules

    @app.get("/v1/schedules/{name}/history", dependencies=secured, tags=["schedules"],
             responses=problem_responses(*denied, 404, 422))
    async def schedule_history(
        name: str, limit: Annotated[int, Query(ge=1, le=200)] = 20,
    ) -> SlotHistory:
        """A schedule's newest slots, newest first: each slot's run, its state, and where
        its answer was delivered (or the error)."""
        slots = await _schedules().history(name, limit)
        return SlotHistory.model_validate({"name": name, "slots": slots})

    @app.post("/v1/schedules/{name}/pause", dependencies=[Depends(needs("operate"))],
              tags=["schedules"], responses=problem_responses(*denied, 403, 404))
    async def pause_schedule(name: str) -> Response:
        """Pause a schedule (its slots are not run until it is resumed)."""
        await _schedules().set_paused(name, True)
        return Response(status_code=204)

    @app.post("/v1/schedules/{name}/resume", dependencies=[Depends(needs("operate"))],
              tags=["schedules"], responses=problem_responses(*denied, 403, 404))
    async def resume_schedule(name: str) -> Response:
        """Resume a paused schedule: it fires from its next slot on (the slots missed while
        it was paused are not caught up)."""
        await _schedules().set_paused(name, False)
        return Response(status_code=204)

    @app.get("/healthz", tags=["service"], response_model=Health,
             responses={503: {"model": Health, "description": "the store or runtime is not"}})
    async def healthz() -> JSONResponse:
        """Whether the store answers and takes writes, and the runtime takes work (no auth)."""
        try:
            await runtime.runs(limit=1)
            problem = runtime.health()
            store = "ok" if problem is None else f"cannot be written: {problem}"
        except Exception as exc:
            store = f"unavailable: {exc}"
        state = "stopping" if api.closing else "ok"
        ok = store == "ok" and state == "ok"
        health = Health(status="ok" if ok else "unavailable", store=store, runtime=state,
                        channels=dict(channel_statuses()))
        return JSONResponse(health.model_dump(), status_code=200 if ok else 503)

    @app.get("/metrics", dependencies=secured, tags=["service"], response_class=Response,
             responses={200: {"description": "Prometheus text format",
                              "content": {"text/plain": {"schema": {"type": "string"}}}},
                        **problem_responses(*denied)})
    async def metrics() -> Response:
        """Prometheus metrics: runs by state, turn and tool latency, tokens, cost, outbox."""
        return Response(await api.metrics.render(), media_type=CONTENT_TYPE)

    original = app.openapi
    cache: dict[str, dict[str, Any]] = {}

    def openapi() -> dict[str, Any]:
        if "schema" not in cache:
            cache["schema"] = fix_openapi(original())
        return cache["schema"]

    app.openapi = openapi  # type: ignore[method-assign]
    if config.console:
        api.console = mount_console(app, runtime, credentials, ConsoleOptions(
            approvals=config.console_approvals,
            statuses=channel_statuses, rules=rules))
    return app


Needs = Callable[[Right], Callable[..., Awaitable[Credential]]]


def _authority(credentials: Credentials) -> tuple[Callable[..., Awaitable[Credential]], Needs]:
    """FastAPI dependencies: ``caller`` (who the request is: 401 without a valid token) and
    ``needs(right)`` (the caller, who must hold ``right``: 403 otherwise)."""
    caller: Callable[..., Awaitable[Credential]]
    if credentials.required:
        bearer = HTTPBearer(auto_error=False, description="a token from [http] token_env or "
                                                          "[[http.tokens]]")

        async def authenticated(
            given: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
        ) -> Credential:
            try:
                return credentials.identify(given.credentials if given else None)
            except Unauthorized:
                raise ApiError(401, "missing or wrong bearer token: send 'Authorization: "
                               "Bearer <token>' with a token from [http] token_env or "
                               "[[http.tokens]]", "unauthorized",
                               {"WWW-Authenticate": 'Bearer realm="maiden"'}) from None

        caller = authenticated
    else:
        async def local() -> Credential:
            return credentials.identify(None)

        caller = local

    def needs(right: Right) -> Callable[..., Awaitable[Credential]]:
        async def holder(who: Annotated[Credential, Depends(caller)]) -> Credential:
            if not who.may(right):
                raise ApiError(403, f"{who.name!r} may not do this: it needs the {right!r} "
                                    "right ([[http.tokens]] rights)", "forbidden")
            return who

        return holder

    return caller, needs
