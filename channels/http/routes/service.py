"""/healthz and /metrics: how the service is, for probes and Prometheus."""

# No `from __future__ import annotations`: FastAPI reads the routes' annotations at runtime.
from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse

from runtime import maiden_version

from ..deps import Api, secured
from ..errors import problem_responses
from ..metrics import CONTENT_TYPE
from ..models import Health
from .common import DENIED

__all__ = ["router"]

router = APIRouter(tags=["service"])


@router.get("/healthz", response_model=Health,
            responses={503: {"model": Health, "description": "the store or runtime is not"}})
async def healthz(api: Api) -> JSONResponse:
    """Whether the store answers and takes writes, and the runtime takes work (no auth)."""
    runtime = api.runtime
    try:
        await runtime.records.runs(limit=1)
        problem = runtime.operator.health()
        store = "ok" if problem is None else f"cannot be written: {problem}"
    except Exception as exc:
        store = f"unavailable: {exc}"
    state = "stopping" if api.closing else "ok"
    ok = store == "ok" and state == "ok"
    health = Health(status="ok" if ok else "unavailable", version=maiden_version(),
                    store=store, runtime=state, channels=dict(api.statuses()))
    return JSONResponse(health.model_dump(), status_code=200 if ok else 503)


@router.get("/metrics", dependencies=secured, response_class=Response,
            responses={200: {"description": "Prometheus text format",
                             "content": {"text/plain": {"schema": {"type": "string"}}}},
                       **problem_responses(*DENIED)})
async def metrics(api: Api) -> Response:
    """Prometheus metrics: runs by state, turn and tool latency, tokens, cost, outbox."""
    return Response(await api.metrics.render(), media_type=CONTENT_TYPE)
