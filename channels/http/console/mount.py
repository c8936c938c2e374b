"""``mount_console(app, runtime, token, options)``: the console's routes on the API's app.

Pages at ``/`` (the API stays under ``/v1``), their assets under ``/console/static``, live
streams under ``/console/live``. Behind the API's tokens: a sign-in form takes one once and
keeps a session cookie for the browser session, under that token's name and with its
rights; with no token (loopback only), as the API, none is asked and the operator is
``local``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from runtime import Runtime

from ..auth import Credentials
from .actions import Actions
from .console import BadQuery, Console, ConsoleOptions, NotSignedIn, back
from .erasure import Erasure
from .knowledge import KnowledgePage
from .live import Live
from .memories import MemoryPage
from .pages import Pages
from .signing import Signing

__all__ = ["mount_console"]

STATIC = Path(__file__).parent / "static"
Endpoint = Callable[[Request], Awaitable[Response]]


def _page(console: Console, view: Endpoint) -> Endpoint:
    """A page's endpoint: a bad query is a 422 page; signed out, the sign-in form, back
    here after."""
    async def endpoint(request: Request) -> Response:
        try:
            try:
                return await view(request)
            except BadQuery as exc:
                return console.page(request, "error.html", status=422, message=str(exc))
        except NotSignedIn:
            target = request.url.path + (f"?{request.url.query}" if request.url.query
                                         else "")
            return back(f"/sign-in?next={quote(target, safe='')}")

    return endpoint


def mount_console(app: object, runtime: Runtime, credentials: Credentials,
                  options: ConsoleOptions | None = None) -> Live:
    """Add the console's routes to ``app`` (a FastAPI or Starlette app); returns its live
    streams, whose ``stopping`` ends them at shutdown."""
    console = Console(runtime, credentials, options or ConsoleOptions())
    pages, actions = Pages(console), Actions(console)
    live = Live(console, pages)

    def page(view: Endpoint) -> Endpoint:
        return _page(console, view)

    signing = Signing(console)
    erasure = Erasure(console)
    memory = MemoryPage(console)
    knowledge = KnowledgePage(console)

    routes = [
        Route("/", page(pages.now)),
        Route("/open-thread", page(signing.open_thread)),
        Route("/approvals", page(pages.approvals)),
        Route("/threads", page(pages.threads)),
        Route("/threads/{thread_id:path}", page(pages.thread)),
        Route("/runs", page(pages.runs)),
        Route("/runs/{run_id}", page(pages.run)),
        Route("/schedules", page(pages.schedules)),
        Route("/schedules/{name}", page(pages.schedule)),
        Route("/spend", page(pages.spend)),
        Route("/memory", page(memory.page)),
        Route("/knowledge", page(knowledge.page)),
        Route("/console/files/{digest}", page(pages.file)),
        Route("/console/export", page(erasure.export)),
        Route("/sign-in", signing.form, methods=["GET"]),
        Route("/sign-in", signing.sign_in, methods=["POST"]),
        Route("/sign-out", signing.sign_out, methods=["POST"]),
        Route("/console/send", actions.guarded(actions.send, "talk"), methods=["POST"]),
        Route("/console/decide", actions.guarded(actions.decide, "approve"), methods=["POST"]),
        Route("/console/runs/{run_id}/cancel", actions.guarded(actions.cancel, "operate"),
              methods=["POST"]),
        Route("/console/runs/{run_id}/resume", actions.guarded(actions.resume, "operate"),
              methods=["POST"]),
        Route("/console/threads/delete", actions.guarded(erasure.delete, "operate"),
              methods=["POST"]),
        Route("/console/memories/edit", actions.guarded(memory.edit, "talk"),
              methods=["POST"]),
        Route("/console/memories/forget", actions.guarded(memory.forget, "talk"),
              methods=["POST"]),
        Route("/console/knowledge/index", actions.guarded(knowledge.index, "operate"),
              methods=["POST"]),
        Route("/console/schedules/{name}/{what}", actions.guarded(actions.schedule, "operate"),
              methods=["POST"]),
        Route("/console/live/now", live.now),
        Route("/console/live/runs/{run_id}", live.run),
        Mount("/console/static", StaticFiles(directory=STATIC), name="console-static"),
    ]
    router = app.router  # type: ignore[attr-defined]
    router.routes.extend(routes)
    return live
