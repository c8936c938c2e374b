"""A person's data: ``GET /v1/threads/{id}/export`` (everything kept of a thread, as JSON
lines) and ``DELETE /v1/threads/{id}`` (its erasure, ``operate`` right).

Their paths are told from a thread id's own ``/`` by ``common.ThreadPaths``."""

# No `from __future__ import annotations`: FastAPI reads the routes' annotations at runtime.
from typing import Any

from fastapi import APIRouter, Depends
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from runtime import Erased

from ..blobs import NDJSON, export_response
from ..deps import Api, Caller, Operator, secured, thread_path
from ..errors import problem_responses
from .common import DENIED, ThreadPaths

__all__ = ["ErasedOut", "router"]


router = APIRouter(tags=["threads"], route_class=ThreadPaths)


class ErasedOut(BaseModel):
    """What a deletion removed; ``existed`` false: there was no such thread (nothing to do,
    and no error: a deletion may be repeated)."""

    model_config = ConfigDict(extra="forbid")

    thread_id: str
    existed: bool
    entries: int = Field(description="history entries removed")
    runs: int = Field(description="runs removed (one still going was cancelled first)")
    deliveries: int = Field(description="outbox records removed")
    votes: int = Field(description="votes on its replies removed")
    notes: int = Field(description="notes scoped to it removed (its memory, stops)")
    files: int = Field(description="stored files removed: those no other thread names")
    memories: int = Field(default=0, description="memories removed: those learned in it "
                                                 "or kept for it")

    @classmethod
    def of(cls, erased: Erased) -> "ErasedOut":
        return cls(thread_id=erased.thread_id, existed=erased.existed, entries=erased.entries,
                   runs=erased.runs, deliveries=erased.deliveries, votes=erased.votes,
                   notes=erased.notes, files=erased.blobs, memories=erased.memories)


EXPORT_DOC: dict[str, Any] = {
    "description": "one JSON object a line, each naming its `type`: the `thread`, then "
                   "each `entry` in order, each `run` with its state changes, each `vote`, "
                   "each `note`, each `memory` learned in it or kept for it, and each "
                   "`file` it names, by digest (its bytes: "
                   "`GET /v1/files/{digest}`)",
    "content": {NDJSON: {"schema": {"type": "string"}}}}


@router.get("/v1/threads/{thread_id:thread_id}/export",
            dependencies=[*secured, Depends(thread_path)], response_class=StreamingResponse,
            responses={200: EXPORT_DOC, **problem_responses(*DENIED, 404, 422)})
async def export_thread(thread_id: str, api: Api, who: Caller) -> StreamingResponse:
    """Everything kept of a thread, as JSON lines, for a caller that may see it: its
    entries, runs, votes, notes, memories and the files it names. The configured tokens never
    appear in it (each is written ``[redacted]``)."""
    await api.seen_thread(who, thread_id)
    export = await api.runtime.records.export(
        thread_id, secrets=[credential.token for credential in api.credentials])
    return export_response(export.lines(), thread_id)


@router.delete("/v1/threads/{thread_id:thread_id}", dependencies=[Depends(thread_path)],
               responses=problem_responses(*DENIED, 403, 409, 422))
async def delete_thread(thread_id: str, who: Operator, api: Api) -> ErasedOut:
    """Erase a thread and everything of it: its entries, runs, outbox records, votes, the
    notes scoped to it, the memories learned in it or kept for it, and the files no other
    thread names, in one durable write. A run of
    it still going is cancelled first, wherever it runs. Deleting a thread that is not
    there succeeds too, saying so (``existed`` false)."""
    return ErasedOut.of(await api.runtime.delete_thread(thread_id, by=who.name))
