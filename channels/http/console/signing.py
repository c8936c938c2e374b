"""Signing in and out of the console with a token, and the "open a thread" box."""

from __future__ import annotations

from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import Response

from .console import Console, back, set_session_cookie
from .security import COOKIE, page_headers

__all__ = ["Signing"]


class Signing:
    """The sign-in form, signing in (a session cookie for a valid token) and out."""

    def __init__(self, console: Console) -> None:
        self.console = console

    async def form(self, request: Request) -> Response:
        guard = self.console.guard
        return self.console.render(request, "sign_in.html", guard.session(request),
                                   next=request.query_params.get("next", "/"))

    async def sign_in(self, request: Request) -> Response:
        form = await request.form()
        given = form.get("token")
        target = form.get("next")
        target = target if isinstance(target, str) and target.startswith("/") \
            and not target.startswith("//") else "/"
        if not self.console.guard.needs_sign_in:
            caller = self.console.guard.local()
        else:
            found = self.console.guard.sign_in(given.strip()) if isinstance(given, str) else None
            if found is None:
                return self.console.render(request, "sign_in.html", None, status=401,
                                           next=target,
                                           error="That is not one of the tokens.")
            caller = found
        cookie, _ = self.console.guard.new_cookie(caller)
        response = back(target)
        set_session_cookie(response, request, cookie)
        return response

    async def sign_out(self, request: Request) -> Response:
        session = self.console.guard.session(request)
        form = await request.form()
        given = form.get("csrf")
        if session is not None and self.console.guard.csrf_ok(
                session, given if isinstance(given, str) else None):
            response = back("/sign-in" if self.console.guard.needs_sign_in else "/")
            response.delete_cookie(COOKIE, path="/")
            return response
        return Response("stale form", status_code=403, headers=page_headers())

    async def open_thread(self, request: Request) -> Response:
        wanted = request.query_params.get("id", "").strip()
        return back(f"/threads/{quote(wanted, safe='')}" if wanted else "/threads")
