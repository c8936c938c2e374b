"""What several routers share: the paging arithmetic, the documented responses, and how
a thread's routes are told apart (``ThreadPaths``)."""

from typing import Any

from fastapi.routing import APIRoute
from starlette.routing import Match
from starlette.types import Scope

from .. import api

__all__ = ["DENIED", "FOLLOW_DOC", "MAX_OFFSET", "STREAM_DOC", "UNDER_A_THREAD", "ThreadPaths",
           "next_offset"]

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


UNDER_A_THREAD = (b"/messages", b"/export")
"""What the routes under a thread add after its id."""


class ThreadPaths(APIRoute):
    """Tells a thread's id from a route under the thread by the path as sent, where an id's
    own ``/`` is ``%2F``: a route under a thread (``.../export``) matches only a path that
    ends so as sent (``a%2Fexport`` names the thread ``a/export``, whose path decodes to
    the same), and the thread's own route none that does (``DELETE .../messages`` is not
    a deletion of a thread ``.../messages``: a 405)."""

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        match, child = super().matches(scope)
        if match is Match.NONE or "{thread_id" not in self.path:
            return match, child
        tail = self.path.rpartition("}")[2].encode()
        raw = scope.get("raw_path") or scope.get("path", "").encode()
        if not raw.endswith(tail) if tail else raw.endswith(UNDER_A_THREAD):
            return Match.NONE, {}
        return match, child
