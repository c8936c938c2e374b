"""/v1/hooks/{name}: a webhook's delivery starts its job (``[[hooks]]``), once per delivery.

No bearer token: the sender proves itself with a signature over the body, made with the
secret it shares with maiden (the schedules' ``hooks`` checks it). The Host check applies
as to every route; a server-to-server sender sends no ``Origin`` (only browsers do), so
the Origin check, which stops cross-site pages, has nothing to refuse."""

# No `from __future__ import annotations`: FastAPI reads the routes' annotations at runtime.
from fastapi import APIRouter, Request, Response
from pydantic import BaseModel

from runtime import HookRefused, NotFound, RunState

from ..deps import Api
from ..errors import ApiError, problem_responses

__all__ = ["router"]

router = APIRouter(tags=["hooks"])


class HookOut(BaseModel):
    """The run a delivery started (202), or the one it started when first sent (200,
    ``again``: nothing more was run)."""

    run_id: str
    thread_id: str
    state: RunState
    again: bool


@router.post("/v1/hooks/{name}", status_code=202,
             responses={200: {"model": HookOut, "description": "a delivery sent before: "
                              "its run, nothing more run"},
                        **problem_responses(401, 404, 413)})
async def take_hook(name: str, request: Request, response: Response, api: Api) -> HookOut:
    """A webhook's delivery: signed over its body (``X-Hub-Signature-256: sha256=…``, or
    the hook's ``signature_header``), it starts one run of the hook's job, keyed by the
    sender's delivery id (``X-GitHub-Delivery``, or the hook's ``delivery_header``; else
    the body's digest). 401: no valid signature; 413: a body over the hook's limit; in
    either case nothing is run."""
    if api.schedules is None:
        raise NotFound(f"there is no hook {name!r}: this process takes no webhooks")
    body = await request.body()
    try:
        run, again = await api.schedules.hook(name, body, request.headers)
    except HookRefused as exc:
        raise ApiError(exc.status, str(exc), "bad_signature" if exc.status == 401
                       else "too_large") from None
    if again:
        response.status_code = 200
    return HookOut(run_id=run.id, thread_id=run.thread_id, state=run.state, again=again)
