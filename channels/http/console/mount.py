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
from .console import BadQuery, Console, ConsoleOptions, NotSignedIn, back, set_session_cookie
from .live import Live
from .pages import Pages
from .security import COOKIE, page_headers

__all__ = ["mount_console"]

STATIC = Path(__file__).parent / "static"
Endpoint = Callable[[Request], Awaitable[Response]]


def mount_console(app: object, runtime: Runtime, credentials: Credentials,
                  options: ConsoleOptions | None = None) -> Live:
    """Add the console's routes to ``app`` (a FastAPI or Starlette app); returns its live
    streams, whose ``stopping`` ends them at shutdown."""
    console = Console(runtime, credentials, options or ConsoleOptions())
    pages, actions = Pages(console), Actions(console)
    live = Live(console, pages)

    def page(view: Endpoint) -> Endpoint:
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

    async def sign_in_form(request: Request) -> Response:
        return console.render(request, "sign_in.html", console.guard.session(request),
                              next=request.query_params.get("next", "/"))

    async def sign_in(request: Request) -> Response:
        form = await request.form()
        given = form.get("token")
        target = form.get("next")
        target = target if isinstance(target, str) and target.startswith("/") \
            and not target.startswith("//") else "/"
        if not console.guard.needs_sign_in:
            caller = console.guard.local()
        else:
            found = console.guard.sign_in(given.strip()) if isinstance(given, str) else None
            if found is None:
                return console.render(request, "sign_in.html", None, status=401,
                                      next=target, error="That is not one of the tokens.")
            caller = found
        cookie, _ = console.guard.new_cookie(caller)
        response = back(target)
        set_session_cookie(response, request, cookie)
        return response

    async def sign_out(request: Request) -> Response:
        session = console.guard.session(request)
        form = await request.form()
        given = form.get("csrf")
        if session is not None and console.guard.csrf_ok(
                session, given if isinstance(given, str) else None):
            response = back("/sign-in" if console.guard.needs_sign_in else "/")
            response.delete_cookie(COOKIE, path="/")
            return response
        return Response("stale form", status_code=403, headers=page_headers())

    async def open_thread(request: Request) -> Response:
        wanted = request.query_params.get("id", "").strip()
        return back(f"/threads/{quote(wanted, safe='')}" if wanted else "/threads")

    routes = [
        Route("/", page(pages.now)),
        Route("/open-thread", page(open_thread)),
        Route("/approvals", page(pages.approvals)),
        Route("/threads", page(pages.threads)),
        Route("/threads/{thread_id:path}", page(pages.thread)),
        Route("/runs", page(pages.runs)),
        Route("/runs/{run_id}", page(pages.run)),
        Route("/schedules", page(pages.schedules)),
        Route("/schedules/{name}", page(pages.schedule)),
        Route("/spend", page(pages.spend)),
        Route("/sign-in", sign_in_form, methods=["GET"]),
        Route("/sign-in", sign_in, methods=["POST"]),
        Route("/sign-out", sign_out, methods=["POST"]),
        Route("/console/send", actions.guarded(actions.send, "talk"), methods=["POST"]),
        Route("/console/decide", actions.guarded(actions.decide, "approve"), methods=["POST"]),
        Route("/console/runs/{run_id}/cancel", actions.guarded(actions.cancel, "operate"),
              methods=["POST"]),
        Route("/console/runs/{run_id}/resume", actions.guarded(actions.resume, "operate"),
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
