"""Live updates as server-sent events of HTML fragments, which the vendored htmx SSE
extension swaps into the page: the "Now" panel, and a run's reply as it streams."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from markupsafe import escape
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from runtime import (
    NotFound,
    RunEnded,
    StateChanged,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
)

from .console import Console
from .pages import Pages
from .security import page_headers

__all__ = ["Live", "sse"]

REFRESH_S = 5.0
"""The Now panel is sent again at least this often (elapsed times move)."""
SETTLE_S = 0.2
"""Events that come together are shown together."""


def sse(event: str, html: str) -> bytes:
    """One server-sent event; every line of the fragment gets its ``data:``."""
    lines = "".join(f"data: {line}\n" for line in html.split("\n"))
    return f"event: {event}\n{lines}\n".encode()


class Live:
    def __init__(self, console: Console, pages: Pages) -> None:
        self.c = console
        self.pages = pages
        self.rt = console.runtime
        self.stopping = asyncio.Event()
        """Set at shutdown: every stream ends."""

    def _stream(self, request: Request, body: Callable[[], AsyncIterator[bytes]]) -> Response:
        if self.c.guard.session(request) is None and self.c.guard.needs_sign_in:
            return Response("sign in first", status_code=401, headers=page_headers())
        headers = {**page_headers(), "X-Accel-Buffering": "no"}
        return StreamingResponse(body(), media_type="text/event-stream", headers=headers)

    async def now(self, request: Request) -> Response:
        session = self.c.guard.session(request)
        csrf = self.c.guard.csrf(session) if session is not None else ""

        async def body() -> AsyncIterator[bytes]:
            async with self.rt.subscribe() as events:
                while not self.stopping.is_set():
                    values = await self.pages.now_values(request)
                    yield sse("now", self.c.fragment("_now.html", **values, csrf=csrf))
                    await self._next_change(events)

        return self._stream(request, body)

    async def _next_change(self, events: Any) -> None:
        """Until an event comes (and those right behind it), shutdown, or ``REFRESH_S``."""
        stop = asyncio.ensure_future(self.stopping.wait())
        nxt = asyncio.ensure_future(events.next())
        try:
            await asyncio.wait([stop, nxt], timeout=REFRESH_S,
                               return_when=asyncio.FIRST_COMPLETED)
            if nxt.done():
                await asyncio.wait([stop], timeout=SETTLE_S)
                events.ready()  # taken together with the one that woke us
        finally:
            for task in (stop, nxt):
                task.cancel()
            await asyncio.gather(stop, nxt, return_exceptions=True)

    async def run(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        if self.c.guard.session(request) is None and self.c.guard.needs_sign_in:
            return Response("sign in first", status_code=401, headers=page_headers())
        try:
            if not await self.c.sees(request, (await self.rt.records.get_run(run_id)).thread_id):
                raise NotFound(run_id)
        except NotFound:
            return Response("no such run", status_code=404, headers=page_headers())

        async def body() -> AsyncIterator[bytes]:
            follow = self.rt.follow(run_id)
            try:
                async for event in follow:
                    if isinstance(event, TextDelta):
                        yield sse("delta", str(escape(event.text)))
                    elif isinstance(event, ToolCallStarted):
                        yield sse("state", f"calling {escape(event.call.name)}…")
                    elif isinstance(event, ToolCallFinished):
                        yield sse("state", f"{escape(event.name)} done")
                    elif isinstance(event, StateChanged):
                        yield sse("state", str(escape(event.state.value.replace("_", " "))))
                    elif isinstance(event, RunEnded):
                        run = await self.rt.records.get_run(run_id)
                        yield sse("end", self.c.fragment("_ended.html", run=run))
                        return
                    if self.stopping.is_set():
                        return
            finally:
                with contextlib.suppress(Exception):
                    await follow.aclose()

        return self._stream(request, body)
