"""/v1/schedules: list the schedules, run one now, read its slots, pause or resume it."""

# No `from __future__ import annotations`: FastAPI reads the routes' annotations at runtime.
from typing import Annotated

from fastapi import APIRouter, Depends, Header, Query, Response

from runtime import NotFound, ScheduleService

from ..api import HttpApi, caller_key
from ..deps import Api, Operator, needs, secured
from ..errors import problem_responses
from ..models import RunOut, SchedulePage, SlotHistory
from .common import DENIED

__all__ = ["router"]

router = APIRouter(tags=["schedules"])
_operate = [Depends(needs("operate"))]


def _schedules(api: HttpApi) -> ScheduleService:
    if api.schedules is None:
        raise NotFound("this process fires no schedules")
    return api.schedules


@router.get("/v1/schedules", dependencies=secured, responses=problem_responses(*DENIED))
async def list_schedules(api: Api) -> SchedulePage:
    """Every schedule this process fires (from the config and from chat), with its next
    fires and its last slot's outcome; empty when it fires none."""
    found = await api.schedules.listing() if api.schedules is not None else []
    return SchedulePage.model_validate({"schedules": found})


@router.post("/v1/schedules/{name}/run",
             responses=problem_responses(*DENIED, 403, 404, 409, 422))
async def run_schedule(
    name: str, api: Api, who: Operator, wait: bool = False,
    idempotency_key: Annotated[str | None, Header(
        alias="Idempotency-Key", max_length=200,
        description="a retried request with the same key returns the same run")] = None,
) -> RunOut:
    """Run a schedule once now, outside its slots: each request a run of its own, but one
    sent again with its ``Idempotency-Key`` (a lost answer, retried) is the same run;
    ``wait``: answer when the run ends or pauses."""
    if api.schedules is None:
        raise NotFound(f"no schedule named {name!r}: this process fires no schedules")
    request = caller_key("http", who, idempotency_key)
    return await api.after(await api.schedules.run_now(name, request=request), wait)


@router.get("/v1/schedules/{name}/history", dependencies=secured,
            responses=problem_responses(*DENIED, 404, 422))
async def schedule_history(
    name: str, api: Api, limit: Annotated[int, Query(ge=1, le=200)] = 20,
) -> SlotHistory:
    """A schedule's newest slots, newest first: each slot's run, its state, and where
    its answer was delivered (or the error)."""
    slots = await _schedules(api).history(name, limit)
    return SlotHistory.model_validate({"name": name, "slots": slots})


@router.post("/v1/schedules/{name}/pause", dependencies=_operate, status_code=204,
             response_class=Response,
             responses={204: {"description": "paused (or it already was)"},
                        **problem_responses(*DENIED, 403, 404)})
async def pause_schedule(name: str, api: Api) -> None:
    """Pause a schedule (its slots are not run until it is resumed)."""
    await _schedules(api).set_paused(name, True)


@router.post("/v1/schedules/{name}/resume", dependencies=_operate, status_code=204,
             response_class=Response,
             responses={204: {"description": "resumed (or it was not paused)"},
                        **problem_responses(*DENIED, 403, 404)})
async def resume_schedule(name: str, api: Api) -> None:
    """Resume a paused schedule: it fires from its next slot on (the slots missed while
    it was paused are not caught up)."""
    await _schedules(api).set_paused(name, False)
