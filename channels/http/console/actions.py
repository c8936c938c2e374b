"""The console's actions (POST, each with the session's CSRF token): every one is a call
of the runtime's public API, the same the HTTP API's routes make."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from urllib.parse import quote

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import Response

from runtime import MaidenError, NotFound, Origin

from ...access import Right
from .console import Console, back, quote_path
from .security import Session

__all__ = ["Actions"]

Action = Callable[[Request, FormData, Session], Awaitable[Response]]


class Actions:
    def __init__(self, console: Console) -> None:
        self.c = console
        self.rt = console.runtime

    def guarded(self, action: Action, right: Right) -> Callable[[Request], Awaitable[Response]]:
        """The action behind the session and CSRF checks and the session's token holding
        ``right``; a refusal of the runtime (a stale approval, a run that already ended) is
        shown as a page saying why."""

        async def endpoint(request: Request) -> Response:
            session = self.c.guard.session(request)
            if session is None:
                return self.c.render(request, "error.html", None, status=401,
                                     message="Sign in first (your session has ended).")
            form = await request.form()
            given = request.headers.get("X-CSRF-Token") or form.get("csrf")
            if not self.c.guard.csrf_ok(session, given if isinstance(given, str) else None):
                return self.c.render(request, "error.html", session, status=403,
                                     message="This form is stale or was not sent from the "
                                             "console (CSRF token missing or wrong). Reload "
                                             "the page and try again.")
            if not session.may(right):
                return self.c.render(request, "error.html", session, status=403,
                                     message=f"{session.operator} may not do this: it needs "
                                             f"the {right!r} right ([[http.tokens]] rights).")
            try:
                return await action(request, form, session)
            except NotFound as exc:
                return self.c.render(request, "error.html", session, status=404,
                                     message=str(exc))
            except MaidenError as exc:
                return self.c.render(request, "error.html", session, status=409,
                                     message=str(exc))

        return endpoint

    def by(self, session: Session) -> str:
        return session.operator

    async def send(self, request: Request, form: FormData, session: Session) -> Response:
        thread_id, text = _field(form, "thread"), _field(form, "text")
        if not await self.c.sees(request, thread_id, write=True):
            raise NotFound(f"no thread {thread_id!r}")
        run = await self.rt.submit(thread_id, text,
                                   origin=Origin(channel="console", user=session.operator,
                                                 rights=tuple(sorted(session.caller.rights))))
        if request.headers.get("HX-Request"):
            html = self.c.fragment("_reply.html", run=run, text=text)
            return self.c.render_fragment(html)
        return back(f"/threads/{quote_path(thread_id)}#run-{run.id}")

    async def decide(self, request: Request, form: FormData, session: Session) -> Response:
        if not self.c.options.approvals:
            return self.c.render(request, "error.html", session, status=403,
                                 message="This console may not decide approvals "
                                         "([http] console_approvals = false).")
        # The operator's name decides: with [agent] approvers set, the runtime refuses
        # anyone not on that list, as it does for every channel.
        run_id = _field(form, "run_id")
        if not await self.c.sees(request, (await self.rt.records.get_run(run_id)).thread_id):
            raise NotFound(f"no run {run_id!r}")
        approve = _field(form, "decision") == "approve"
        await self.rt.decide(run_id, _field(form, "tool_call_id"), approve=approve,
                             by=self.by(session), reason=_field(form, "reason", ""),
                             arguments_hash=_field(form, "arguments_hash"))
        return back(_next(form, f"/approvals?decided={quote(run_id)}"))

    async def cancel(self, request: Request, form: FormData, session: Session) -> Response:
        run_id = request.path_params["run_id"]
        await self.rt.cancel(run_id, by=self.by(session))
        return back(_next(form, f"/runs/{quote(run_id)}"))

    async def resume(self, request: Request, form: FormData, session: Session) -> Response:
        run_id = request.path_params["run_id"]
        await self.rt.resume(run_id)
        return back(f"/runs/{quote(run_id)}")

    async def schedule(self, request: Request, form: FormData, session: Session) -> Response:
        name, what = request.path_params["name"], request.path_params["what"]
        service = self.c.options.schedules
        if service is None:
            raise NotFound("this process fires no schedules")
        if what == "run":
            run = await service.run_now(name)
            return back(f"/runs/{quote(run.id)}")
        if what not in ("pause", "resume"):
            raise NotFound(f"no action {what!r}")
        await service.set_paused(name, what == "pause")
        return back(f"/schedules/{quote_path(name)}")


def _field(form: FormData, name: str, default: str | None = None) -> str:
    value = form.get(name)
    if isinstance(value, str):
        return value
    if default is not None:
        return default
    raise MaidenError(f"the form has no {name!r}")


def _next(form: FormData, default: str) -> str:
    """Where to go after the action: a console path from the form, else ``default``."""
    value = form.get("next")
    if isinstance(value, str) and value.startswith("/") and not value.startswith("//"):
        return value
    return default
