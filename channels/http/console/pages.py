"""The console's pages (GET): each reads through the runtime's public API only."""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from runtime import (
    ACTIVE_STATES,
    TERMINAL,
    AssistantTurn,
    NotFound,
    Run,
    RunState,
    ToolResult,
)

from ..blobs import file_response
from .console import Console, query_int
from .spend import bar_chart, feedback_of, spend_of
from .waiting import WAITING, queued_behind

__all__ = ["Pages"]

THREADS_PAGE = 50
ENTRIES_PAGE = 100
RUNS_SHOWN = 200
SEARCH_SCAN = 5_000
"""Threads looked through for a search (the most recently active first)."""
SPEND_RUNS = 20_000
"""The newest runs the spend page adds up."""
RESUMABLE = {RunState.FAILED, RunState.CANCELLED, RunState.TIMED_OUT}
SINCE = {"1h": 3600, "24h": 86400, "7d": 7 * 86400, "30d": 30 * 86400}


class Pages:
    def __init__(self, console: Console) -> None:
        self.c = console
        self.rt = console.runtime

    async def now(self, request: Request) -> Response:
        return self.c.page(request, "now.html", **await self.now_values(request))

    async def now_values(self, request: Request) -> dict[str, Any]:
        """Runs in progress (with the tool each runs now), the queue by thread, channels:
        those the caller may see."""
        active = await self.c.seen(request,
                                   await self.rt.records.runs(states=list(ACTIVE_STATES)))
        behind = self._behind(active)
        now = self.c.options.clock()
        moving: list[dict[str, Any]] = []
        queued: dict[str, list[Run]] = {}
        for run in active:
            if run.state is RunState.QUEUED:
                queued.setdefault(run.thread_id, []).append(run)
                continue
            moving.append({"run": run, "tool": await self._current_tool(run),
                           "elapsed": now - (run.started_at or run.created_at),
                           "behind": behind.get(run.id)})
        return {"moving": moving, "queued": queued,
                "statuses": list(self.c.options.statuses()),
                "rules": list(self.c.options.rules()),
                "pending": len(await self.c.seen(request,
                                                 await self.rt.records.pending_approvals()))}

    def _behind(self, active: list[Run]) -> dict[str, Run]:
        """Each unfinished run that waits for its turn, and the run it waits behind."""
        return queued_behind(active, self.rt.operator.holds,
                             one_at_a_time=self.rt.operator.settings.concurrency == "global")

    async def _behind_of(self, run_id: str | None) -> tuple[Run, Run] | None:
        """Run ``run_id`` and the run it waits behind, if it waits."""
        if not run_id:
            return None
        active = await self.rt.records.runs(states=list(ACTIVE_STATES))
        waiting = next((r for r in active if r.id == run_id), None)
        behind = self._behind(active).get(run_id)
        return (waiting, behind) if waiting is not None and behind is not None else None

    async def _current_tool(self, run: Run) -> str | None:
        """The calls of the run's newest turn that have no result yet."""
        if run.state is not RunState.AWAITING_TOOL:
            return run.pending_approval.name if run.pending_approval else None
        length = await self.rt.records.thread_length(run.thread_id)
        tail = await self.rt.records.entries(run.thread_id, offset=max(0, length - 20))
        done = {e.tool_call_id for e in tail if isinstance(e, ToolResult)}
        turn = next((e for e in reversed(tail) if isinstance(e, AssistantTurn)
                     and e.run_id == run.id), None)
        calls = [c.name for c in (turn.tool_calls if turn else ()) if c.id not in done]
        return ", ".join(calls) or None

    async def approvals(self, request: Request) -> Response:
        waiting = await self.c.seen(request, await self.rt.records.pending_approvals())
        items = [{"run": r, "approval": r.pending_approval,
                  "arguments": _pretty(r.pending_approval.arguments if r.pending_approval
                                       else None)} for r in waiting]
        decided = request.query_params.get("decided")
        return self.c.page(request, "approvals.html", items=items, decided=decided,
                           waits=await self._behind_of(decided))

    async def threads(self, request: Request) -> Response:
        q = request.query_params.get("q", "").strip()
        offset = query_int(request, "offset", 0)
        everyone = self.c.session(request)[0].may("operate")
        if q or not everyone:
            scanned = await self.rt.records.threads(limit=SEARCH_SCAN if q else None)
            matching = [t for t in scanned if q.lower() in t.id.lower()
                        and (everyone or await self.c.sees(request, t.id))]
            page = matching[offset:offset + THREADS_PAGE]
            total = len(matching)
        else:
            page = await self.rt.records.threads(offset=offset, limit=THREADS_PAGE)
            total = (await self.rt.records.stats()).threads
        return self.c.page(request, "threads.html", threads=page, q=q, offset=offset,
                           total=total, size=THREADS_PAGE, scanned=SEARCH_SCAN)

    async def thread(self, request: Request) -> Response:
        thread_id = request.path_params["thread_id"]
        if not await self.c.sees(request, thread_id):
            return self.c.page(request, "error.html", status=404,
                               message=f"There is no thread {thread_id!r} yet.",
                               new_thread=thread_id)
        total = await self.rt.records.thread_length(thread_id)
        last_page = max(0, total - ENTRIES_PAGE)
        offset = min(query_int(request, "offset", last_page), last_page)
        entries = await self.rt.records.entries(thread_id, offset=offset, limit=ENTRIES_PAGE)
        runs = (await self.rt.records.runs(thread_id=thread_id, limit=20))[::-1]
        if not total and not runs:
            return self.c.page(request, "error.html", status=404,
                               message=f"There is no thread {thread_id!r} yet.",
                               new_thread=thread_id)
        transitions = {r.id: await self.rt.records.transitions(r.id) for r in runs}
        return self.c.page(request, "thread.html", thread_id=thread_id, entries=entries,
                           offset=offset, total=total, size=ENTRIES_PAGE, runs=runs,
                           transitions=transitions, pretty=_pretty)

    async def runs(self, request: Request) -> Response:
        params = request.query_params
        state = params.get("state") or None
        thread = params.get("thread", "").strip() or None
        since = params.get("since") or ""
        try:
            states = [RunState(state)] if state else None
        except ValueError:
            states = None
        found = await self.c.seen(request, await self.rt.records.runs(
            thread_id=thread, states=states, limit=RUNS_SHOWN))
        cutoff = self.c.options.clock() - SINCE[since] if since in SINCE else None
        shown = [r for r in reversed(found) if cutoff is None or r.created_at >= cutoff]
        return self.c.page(request, "runs.html", runs=shown, state=state or "",
                           thread=thread or "", since=since, states=list(RunState),
                           spans=list(SINCE), limit=RUNS_SHOWN)

    async def run(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        try:
            run = await self.rt.records.get_run(run_id)
            if not await self.c.sees(request, run.thread_id):
                raise NotFound(run_id)
        except NotFound:
            return self.c.page(request, "error.html", status=404,
                               message=f"There is no run {run_id!r}.")
        waits = await self._behind_of(run.id) if run.state in WAITING else None
        return self.c.page(request, "run.html", run=run, waits=waits,
                           trace_link=self.rt.operator.trace_link(run),
                           transitions=await self.rt.records.transitions(run_id),
                           votes=await self.rt.kept.feedback.votes(run_id=run_id),
                           resumable=run.state in RESUMABLE,
                           cancellable=run.state not in TERMINAL,
                           arguments=_pretty(run.pending_approval.arguments
                                             if run.pending_approval else None))

    async def file(self, request: Request) -> Response:
        """A file a thread names, for its thumbnail or chip: served as the API serves it
        (images in place, the rest as a download; never a page that could run)."""
        session, _ = self.c.session(request)  # signed in, as for any page
        try:
            if not await self.c.owners.may_fetch(session.caller, request.path_params["digest"]):
                raise NotFound("no such file")
            info, data = await self.rt.kept.files.read(request.path_params["digest"])
        except NotFound:
            return self.c.page(request, "error.html", status=404, message="No such file.")
        return file_response(data, info.media_type,
                             request.query_params.get("name") or info.digest)

    async def schedules(self, request: Request) -> Response:
        found = await self.c.options.schedules.listing() \
            if self.c.options.schedules is not None else []
        return self.c.page(request, "schedules.html", schedules=found,
                           firing=self.c.options.schedules is not None)

    async def schedule(self, request: Request) -> Response:
        name = request.path_params["name"]
        service = self.c.options.schedules
        listed = await service.listing() if service is not None else []
        found = next((s for s in listed if s["name"] == name), None)
        if service is None or found is None:
            return self.c.page(request, "error.html", status=404,
                               message=f"There is no schedule named {name!r}.")
        return self.c.page(request, "schedule.html", s=found,
                           history=await service.history(name, 30))

    async def spend(self, request: Request) -> Response:
        days = 30 if request.query_params.get("days") == "30" else 7
        runs = await self.c.seen(request, await self.rt.records.runs(limit=SPEND_RUNS))
        now = self.c.options.clock()
        spend = spend_of(runs, days=days, now=now,
                         default_agent=self.rt.operator.agents.default.name)
        votes = [v for v in await self.rt.kept.feedback.votes(since=now - days * 86_400)
                 if await self.c.sees(request, v.thread_id)]
        labels = [d.day.strftime("%m-%d") for d in spend.days]
        return self.c.page(
            request, "spend.html", spend=spend, days=days,
            feedback=feedback_of(votes, days=days, now=now),
            cost_chart=bar_chart([d.cost_usd for d in spend.days], labels,
                                 title=f"cost per day, last {days} days", unit="$",
                                 css="cost"),
            tokens_chart=bar_chart([float(d.tokens) for d in spend.days], labels,
                                   title=f"tokens per day, last {days} days", unit="tokens",
                                   css="tokens"))


def _pretty(value: Any) -> str:
    """Arguments and tool output as indented JSON text (escaped by the template)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)
