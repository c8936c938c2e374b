"""/v1/runs/{run_id}/approvals: decide the tool call a run waits for."""

# No `from __future__ import annotations`: FastAPI reads the routes' annotations at runtime.
import logging

from fastapi import APIRouter

from ..api import claimed
from ..deps import Api, Approver
from ..errors import problem_responses
from ..models import ApprovalIn, RunOut
from .common import DENIED

__all__ = ["router"]

log = logging.getLogger("maiden.http")
router = APIRouter(tags=["runs"])


@router.post("/v1/runs/{run_id}/approvals/{tool_call_id}",
             responses=problem_responses(400, *DENIED, 403, 404, 409, 413, 422))
async def decide(run_id: str, tool_call_id: str, body: ApprovalIn, who: Approver,
                 api: Api) -> RunOut:
    """Approve or deny the tool call a run waits for; the run then goes on. The decision
    is recorded under the token's name (``local`` without tokens)."""
    by = claimed(who, body.by)
    await api.seen_run(who, run_id)
    run = await api.runtime.decide(run_id, tool_call_id, approve=body.approve, by=by,
                                   reason=body.reason, arguments_hash=body.arguments_hash)
    log.info("call %s %s by %s", tool_call_id, "approved" if body.approve else "denied",
             by, extra={"thread_id": run.thread_id, "run_id": run.id})
    return await api.after(run, body.wait)
