"""The console's state and helpers shared by its pages, actions and live streams."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from runtime import Indexer, MaidenError, Run, Runtime, ScheduleService, human_size

from ..auth import Credentials
from ..owners import Owners
from .security import COOKIE, Guard, Session, page_headers

__all__ = ["BadQuery", "Console", "ConsoleOptions", "NotSignedIn", "RulesSource", "StatusSource",
           "short_id"]

StatusSource = Callable[[], Sequence[tuple[str, str]]]
"""Each channel's name and a line on how it is (connected, or why not)."""
RulesSource = Callable[[], Sequence[tuple[str, list[str]]]]
"""Each chat channel's name and its effective access rules, one line a rule."""


class ConsoleOptions:
    """What the console may do: ``approvals`` False shows approvals without the buttons."""

    def __init__(self, *, approvals: bool = True, statuses: StatusSource | None = None,
                 rules: RulesSource | None = None, schedules: ScheduleService | None = None,
                 knowledge: Indexer | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.approvals = approvals
        self.schedules = schedules
        """The schedules this process fires (None: it fires none)."""
        self.knowledge = knowledge
        """The ``[[knowledge]]`` folders' indexer (None: no sources shown)."""
        self.statuses = statuses or (lambda: [])
        self.rules = rules or (lambda: [])
        self.clock = clock


class NotSignedIn(MaidenError):
    """The request has no valid session (and the console needs one)."""


class BadQuery(MaidenError):
    """A query parameter the page cannot use; shown as a 422 page saying which and why
    (the API answers the same parameters with a 422 too)."""


MAX_OFFSET = 1_000_000_000
"""The largest offset a page takes, as the API's (past it SQLite's integers overflow)."""


def query_int(request: Request, name: str, default: int, *, ge: int = 0,
              le: int = MAX_OFFSET) -> int:
    """The query parameter ``name`` as an int in ``[ge, le]``; ``default`` if absent."""
    given = request.query_params.get(name)
    if given is None or given == "":
        return default
    try:
        value = int(given)
    except ValueError:
        value = None
    if value is None or not ge <= value <= le:
        shown = given if len(given) <= 40 else given[:40] + "…"
        raise BadQuery(f"{name} must be a whole number from {ge} to {le:,}, "
                       f"not {shown!r}")
    return value


class Console:
    def __init__(self, runtime: Runtime, credentials: Credentials,
                 options: ConsoleOptions) -> None:
        self.runtime = runtime
        self.owners = Owners(runtime)
        """Whose each thread is: a page shows a signed-in caller only what it may see."""
        self.guard = Guard(credentials)
        self.options = options
        self.env = Environment(loader=PackageLoader("channels.http.console", "templates"),
                               autoescape=select_autoescape(default=True),
                               trim_blocks=True, lstrip_blocks=True)
        self.env.filters.update(when=self.when, ago=self.ago, q=quote_path, money=money,
                                filesize=human_size,
                                num=lambda n: f"{n:,}", duration=duration,
                                short=short_id, beyond=beyond_state)

    # -- sessions

    def session(self, request: Request) -> tuple[Session, str | None]:
        """The request's session; without a token a new one is made (its cookie is returned
        to be set). ``NotSignedIn`` if a token is needed and the cookie is missing."""
        found = self.guard.session(request)
        if found is not None:
            return found, None
        if self.guard.needs_sign_in:
            raise NotSignedIn
        cookie, made = self.guard.new_cookie(self.guard.local())
        return made, cookie

    # -- rendering

    async def sees(self, request: Request, thread_id: str, *, write: bool = False) -> bool:
        """Whether the request's caller may see ``thread_id`` (``owners.may_see``)."""
        session, _ = self.session(request)
        return await self.owners.may_see(session.caller, thread_id, write=write)

    async def seen(self, request: Request, runs: list[Run]) -> list[Run]:
        """Those of ``runs`` whose thread the request's caller may see."""
        session, _ = self.session(request)
        if session.may("operate"):
            return runs
        return [r for r in runs if await self.owners.may_see(session.caller, r.thread_id)]

    def page(self, request: Request, template: str, *, status: int = 200,
             **values: Any) -> HTMLResponse:
        session, cookie = self.session(request)
        return self.render(request, template, session, cookie, status=status, **values)

    def render(self, request: Request, template: str, session: Session | None,
               cookie: str | None = None, *, status: int = 200, **values: Any) -> HTMLResponse:
        html = self.env.get_template(template).render(
            request=request, session=session, signed_in=session is not None,
            needs_sign_in=self.guard.needs_sign_in,
            csrf=self.guard.csrf(session) if session else "", path=request.url.path,
            may_decide=functools.partial(self.may_approve, session),
            approvers_of=self.approvers_of, approvals_allowed=self.options.approvals,
            **values)
        response = HTMLResponse(html, status_code=status, headers=page_headers())
        if cookie is not None:
            set_session_cookie(response, request, cookie)
        return response

    def may_approve(self, session: Session | None, agent: str | None = None) -> bool:
        """The console may decide, the session's token has the ``approve`` right, and the
        approvers of the run's agent (its ``approvers``, if set) name its holder."""
        approvers = self.approvers_of(agent)
        return (self.options.approvals and session is not None and session.may("approve")
                and (not approvers or session.operator in approvers))

    def approvers_of(self, agent: str | None) -> list[str]:
        """Who may decide the approvals of ``agent``'s runs (the default agent's for a run
        without one, or of an agent no longer configured, as the runtime decides)."""
        return list(self.runtime.operator.agents.answering(agent).config.approvers)

    def fragment(self, template: str, **values: Any) -> str:
        return self.env.get_template(template).render(**values)

    def render_fragment(self, html: str) -> HTMLResponse:
        """A piece of a page, for htmx to swap in."""
        return HTMLResponse(html, headers=page_headers())

    # -- formatting

    def when(self, at: float | None) -> Markup:
        """A moment, kept on one line (a date broken after its hyphens reads as two)."""
        if at is None:
            return Markup("-")
        text = datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        return Markup('<span class="when">{}</span>').format(text)

    def ago(self, at: float | None) -> str:
        if at is None:
            return "-"
        return duration(self.options.clock() - at)


def set_session_cookie(response: Response, request: Request, cookie: str) -> None:
    response.set_cookie(COOKIE, cookie, httponly=True, samesite="strict", path="/",
                        secure=request.url.scheme == "https")


def back(to: str) -> RedirectResponse:
    """After a form: see the result (303: the browser GETs it)."""
    return RedirectResponse(to, status_code=303, headers=page_headers())


def beyond_state(outcome: str, state: str) -> str:
    """What a slot's ``outcome`` says beside its run's ``state``, shown in a column of its
    own: ``completed; delivered to slack C1 as 12.5`` is ``delivered to slack C1 as 12.5``,
    ``completed (in thread t)`` is ``in thread t``, and a bare state is nothing."""
    if not outcome.startswith(state):
        return outcome
    return outcome[len(state):].strip(" ;:").removeprefix("(").removesuffix(")")


def quote_path(value: str) -> str:
    """A thread id or name as one URL path segment (a thread id may hold ``/``). The dots
    of ``.`` and ``..`` are encoded too: as they are, a browser resolves them as the
    current and the parent folder (``/threads/..`` is ``/``), never as a segment."""
    quoted = quote(value, safe="")
    return quoted.replace(".", "%2E") if quoted in (".", "..") else quoted


SHORT_ID = 8


def short_id(run_id: str) -> str:
    """A run id as the console shows it: its last 8 hex digits. Run ids begin with the time
    (so runs sort by it), and runs made close together share a long prefix
    (``01a2373c…``, ``01a2373d…``); the end is random, and tells them apart."""
    return run_id[-SHORT_ID:]


def money(value: float) -> str:
    return f"${value:,.4f}" if value < 1 else f"${value:,.2f}"


def duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m {seconds % 60:02d}s"
    if seconds < 86400:
        return f"{seconds // 3600}h {seconds % 3600 // 60:02d}m"
    return f"{seconds // 86400}d {seconds % 86400 // 3600}h"
