"""/v1/runs: list runs, read one, follow its events, cancel or resume it."""

# No `from __future__ import annotations`: FastAPI reads the routes' annotations at runtime.
from typing import Annotated

from fastapi import APIRouter, Depends, Query
from fastapi.responses import StreamingResponse

from runtime import RunState

from ..api import claimed
from ..deps import Api, Caller, Operator, needs, secured
from ..errors import problem_responses
from ..models import CancelIn, RunDetail, RunOut, RunPage
from .common import DENIED, FOLLOW_DOC, MAX_OFFSET

__all__ = ["router"]

router = APIRouter(tags=["runs"])


@router.get("/v1/runs", dependencies=secured, responses=problem_responses(*DENIED, 422))
async def list_runs(
    api: Api,
    who: Caller,
    state: Annotated[list[RunState] | None, Query(description="any of these")] = None,
    thread_id: str | None = None,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> RunPage:
    """Runs the caller may see, newest first, optionally of some states or one thread."""
    if thread_id is not None:
        await api.seen_thread(who, thread_id)
    everyone = who.may("operate") or thread_id is not None
    newest = await api.runtime.records.runs(thread_id=thread_id, states=state or None,
                                            limit=offset + limit + 1 if everyone else None)
    if not everyone:
        newest = [r for r in newest if await api.owners.may_see(who, r.thread_id)]
    newest.reverse()
    page = newest[offset:offset + limit]
    return RunPage(runs=[RunDetail.detail(r, None) for r in page],
                   next_offset=offset + limit if len(newest) > offset + limit else None)


@router.get("/v1/runs/{run_id}", dependencies=secured,
            responses=problem_responses(*DENIED, 404))
async def get_run(run_id: str, api: Api, who: Caller) -> RunDetail:
    """A run with its state changes and decisions."""
    run = await api.seen_run(who, run_id)
    return RunDetail.detail(run, await api.runtime.records.transitions(run_id))


@router.get("/v1/runs/{run_id}/events", dependencies=secured,
            response_class=StreamingResponse,
            responses={200: FOLLOW_DOC, **problem_responses(*DENIED, 404)})
async def follow_run(run_id: str, api: Api, who: Caller) -> StreamingResponse:
    """Follow a run's events from now on, as server-sent events, until it ends or pauses."""
    return api.event_stream(await api.seen_run(who, run_id), first=None)


@router.post("/v1/runs/{run_id}/cancel",
             responses=problem_responses(400, *DENIED, 403, 404, 409, 413, 422))
async def cancel(run_id: str, who: Operator, api: Api, body: CancelIn | None = None) -> RunOut:
    """Cancel a run: its model stream and tools stop, and it ends ``cancelled``."""
    by = claimed(who, (body or CancelIn()).by)
    return RunOut.of(await api.runtime.cancel(run_id, by=by))


@router.post("/v1/runs/{run_id}/resume", dependencies=[Depends(needs("operate"))],
             responses=problem_responses(*DENIED, 403, 404, 409, 413, 422))
async def resume(run_id: str, api: Api, wait: bool = False) -> RunOut:
    """Queue a failed, cancelled or timed-out run again from its last checkpoint."""
    return await api.after(await api.runtime.resume(run_id), wait)
