"""What several routers share: the paging arithmetic and the documented responses."""

from typing import Any

from .. import api

__all__ = ["DENIED", "FOLLOW_DOC", "MAX_OFFSET", "STREAM_DOC", "next_offset"]

MAX_OFFSET = 1_000_000_000
DENIED = (401,)
"""Every secured route's 401; an app without tokens drops it from its schema."""
STREAM_DOC: dict[str, Any] = {
    "description": "the run ended or paused; or, with `Accept: text/event-stream`, "
                   "its events as server-sent events",
    "content": {api.SSE: {"schema": {"type": "string"}}}}
FOLLOW_DOC: dict[str, Any] = {
    "description": "the run's events as server-sent events, until it ends or pauses",
    "content": {api.SSE: {"schema": {"type": "string"}}}}


def next_offset(offset: int, limit: int, total: int) -> int | None:
    return offset + limit if offset + limit < total else None
