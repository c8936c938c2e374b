"""/v1/files: a file someone shared (or a tool made), by its sha256."""

# No `from __future__ import annotations`: FastAPI reads the routes' annotations at runtime.
from typing import Annotated

from fastapi import APIRouter, Path, Query
from fastapi.responses import Response

from runtime import NotFound

from ..blobs import INLINE_TYPES, file_response
from ..deps import Api, Caller, secured
from ..errors import ApiError, problem_responses
from .common import DENIED

__all__ = ["router"]

router = APIRouter(tags=["files"])

_FILE_DOC = {"description": "the file's bytes", "content": {
    "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
    **{t: {"schema": {"type": "string", "format": "binary"}} for t in sorted(INLINE_TYPES)}}}


@router.get("/v1/files/{digest}", dependencies=secured, response_class=Response,
            responses={200: _FILE_DOC, **problem_responses(*DENIED, 404, 422)})
async def get_file(
    api: Api,
    who: Caller,
    digest: Annotated[str, Path(description="the file's sha256, 64 lowercase hex digits")],
    name: Annotated[str | None, Query(max_length=255, description=(
        "the name to save it under (a file is stored by content, not by name)"))] = None,
) -> Response:
    """A stored file's bytes: images as themselves, anything else as a download (a file
    a thread the caller may see names)."""
    await api.seen_file(who, digest)
    try:
        info, data = await api.runtime.kept.files.read(digest)
    except NotFound as exc:
        raise ApiError(404, str(exc), "not_found") from None
    return file_response(data, info.media_type, name or digest)
