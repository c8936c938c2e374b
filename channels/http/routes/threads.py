"""/v1/threads: send a message on a thread, list threads, read one."""

# No `from __future__ import annotations`: FastAPI reads the routes' annotations at
# runtime, including the body model made for the configured message length.
from typing import Annotated

from fastapi import APIRouter, Depends, Header, Query, Request, Response
from fastapi.responses import JSONResponse

from runtime import TERMINAL, Run, RunState

from ..api import SSE
from ..deps import Api, Caller, Talker, secured, thread_path
from ..errors import ApiError, problem_responses
from ..models import (
    EntryPage,
    MessageIn,
    RunOut,
    ThreadDetail,
    ThreadOut,
    ThreadPage,
    message_model,
)
from .common import DENIED, MAX_OFFSET, STREAM_DOC, ThreadPaths, next_offset

__all__ = ["message_router", "router"]

router = APIRouter(tags=["threads"], route_class=ThreadPaths)


def message_router(max_chars: int) -> APIRouter:
    """The message route, whose body model states this app's message length limit in the
    schema (the one route that depends on the configuration, hence built per app)."""
    messages = APIRouter(tags=["threads"])
    Message = message_model(max_chars)

    @messages.post("/v1/threads/{thread_id:thread_id}/messages", response_model=RunOut,
                   dependencies=[Depends(thread_path)],
                   responses={200: STREAM_DOC, 202: {"model": RunOut, "description": (
                       "accepted: the run goes on (`wait` false, or the server is stopping)")},
                       **problem_responses(400, *DENIED, 403, 409, 413, 422, 503)})
    async def post_message(
        thread_id: str, body: Message, request: Request,  # type: ignore[valid-type]
        who: Talker, api: Api,
        idempotency_key: Annotated[str | None, Header(
            alias="Idempotency-Key", max_length=200,
            description="a retried request with the same key returns the same run")] = None,
    ) -> Response:
        """Send a message on a thread (any string, URL-encoded); answer with the run.

        Files go in ``files`` (base64), or the body is ``multipart/form-data``: a part
        named ``message`` holding this JSON object, and a part per file."""
        message: MessageIn = body
        run = await api.submit(thread_id, message, idempotency_key, who,
                               trace=request.headers.get("traceparent", ""))
        if SSE in request.headers.get("accept", ""):
            return api.event_stream(run, first="run.accepted")
        if message.wait:
            run = await api.settle(run.id)
        return _answer(run)

    return messages


def _answer(run: Run) -> JSONResponse:
    settled = run.state in TERMINAL or run.state is RunState.AWAITING_APPROVAL
    return JSONResponse(RunOut.of(run).model_dump(mode="json"),
                        status_code=200 if settled else 202,
                        headers={"Location": f"/v1/runs/{run.id}"})


@router.get("/v1/threads", dependencies=secured, responses=problem_responses(*DENIED, 422))
async def list_threads(
    api: Api,
    who: Caller,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> ThreadPage:
    """Threads the caller may see, most recently updated first."""
    if who.may("operate"):
        page = await api.runtime.records.threads(offset=offset, limit=limit)
        total = (await api.runtime.records.stats()).threads
    else:
        # Each thread's owner is read once and kept: the walk reads the list, then only
        # the threads not seen before.
        seen = [t for t in await api.runtime.records.threads()
                if await api.owners.may_see(who, t.id)]
        page, total = seen[offset:offset + limit], len(seen)
    return ThreadPage(threads=[ThreadOut.of(t) for t in page], total=total,
                      next_offset=next_offset(offset, limit, total))


@router.get("/v1/threads/{thread_id:thread_id}",
            dependencies=[*secured, Depends(thread_path)],
            responses=problem_responses(*DENIED, 404, 422))
async def get_thread(
    thread_id: str,
    api: Api,
    who: Caller,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET, description="first entry")] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    runs_limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> ThreadDetail:
    """A thread's entries (a page, oldest first) and its newest runs."""
    await api.seen_thread(who, thread_id)
    runtime = api.runtime
    # One page of the history is read, not the whole thread.
    total = await runtime.records.thread_length(thread_id)
    entries = await runtime.records.entries(thread_id, offset=offset, limit=limit)
    runs = await runtime.records.runs(thread_id=thread_id)
    if not total and not runs:
        raise ApiError(404, f"no thread {thread_id!r}", "not_found")
    page = EntryPage(items=entries, total=total, offset=offset,
                     next_offset=next_offset(offset, limit, total))
    return ThreadDetail(thread_id=thread_id, entries=page, runs_total=len(runs),
                        runs=[RunOut.of(r) for r in runs[-runs_limit:]])
