"""The agent's schedule tools: "remind me every Monday at 8" from chat.

A schedule made here belongs to the conversation (thread) that made it: it runs there
and answers where that conversation's messages came from. Only that conversation may
pause, resume or delete it; schedules from ``agent.toml`` are listed but read-only; and a
run started by a schedule cannot create one (a job that multiplies itself would run up
the bill with nobody watching).
"""

from __future__ import annotations

from typing import Any

from runtime import Tool, ToolContext, tool

from .book import ScheduleBook, ScheduleError
from .config import Schedule
from .cron import next_fires

__all__ = ["SCHEDULE_TOOLS", "schedule_tools"]

SCHEDULE_TOOLS = ("schedule_create", "schedule_list", "schedule_pause", "schedule_resume",
                  "schedule_delete")


def schedule_tools() -> list[Tool]:
    """The five tools, working on the ``schedules`` service (a ``ScheduleBook``) their
    context carries."""
    return [
        tool(name="schedule_create", effect="idempotent_write", timeout_s=15,
             needs=["schedules"])(_create),
        tool(name="schedule_list", effect="read_only", timeout_s=15,
             needs=["schedules"])(_list),
        tool(name="schedule_pause", effect="idempotent_write", timeout_s=15,
             needs=["schedules"])(_pause),
        tool(name="schedule_resume", effect="idempotent_write", timeout_s=15,
             needs=["schedules"])(_resume),
        tool(name="schedule_delete", effect="idempotent_write", timeout_s=15,
             needs=["schedules"])(_delete),
    ]


async def _create(ctx: ToolContext, name: str, cron: str, prompt: str,
                  timezone: str | None = None, paused: bool = False,
                  jitter_s: float = 0.0) -> dict[str, Any]:
    """Create a recurring job in this conversation: each time the 5-field crontab
    `cron` (minute hour day-of-month month day-of-week, Sunday = 0) matches in
    `timezone` (an IANA name; default the agent's), `prompt` is sent as a message here
    and the answer is posted here. "Every Monday at 8:00" is "0 8 * * 1". `paused`:
    create it paused (it fires only once resumed with schedule_resume). `jitter_s` (up
    to 300): each slot starts up to that many seconds late, for jobs many people set for
    the same minute."""
    book = _book(ctx)
    run = await book.runs.get_run(ctx.run_id)
    if (run.idempotency_key or "").startswith("schedule:"):
        raise ScheduleError("refused: a run started by a schedule cannot create schedules")
    schedule = await book.create(name=name, cron=cron, prompt=prompt, timezone=timezone,
                                 thread_id=ctx.thread_id, origin=ctx.origin,
                                 request_key=ctx.idempotency_key, paused=paused,
                                 jitter_s=jitter_s)
    return {"created": _describe(book, schedule)}


async def _list(ctx: ToolContext) -> dict[str, Any]:
    """The schedules this conversation created, and those defined in the config
    (read-only)."""
    book = _book(ctx)
    await book.load()
    mine = book.of_thread(ctx.thread_id)
    configured = [s for s in book.schedules() if s.source == "config"]
    return {"schedules": [_describe(book, s) for s in [*mine, *configured]],
            "limit_per_conversation": book.max_per_thread}


async def _pause(ctx: ToolContext, name: str) -> dict[str, Any]:
    """Pause a schedule this conversation created (its slots are skipped until it is
    resumed)."""
    book = _book(ctx)
    schedule = await book.set_paused(name, True, thread_id=ctx.thread_id)
    return {"paused": _describe(book, schedule)}


async def _resume(ctx: ToolContext, name: str) -> dict[str, Any]:
    """Resume a paused schedule this conversation created; it fires from now on (the
    slots missed while paused are not run)."""
    book = _book(ctx)
    schedule = await book.set_paused(name, False, thread_id=ctx.thread_id)
    return {"resumed": _describe(book, schedule)}


async def _delete(ctx: ToolContext, name: str) -> dict[str, Any]:
    """Delete a schedule this conversation created."""
    book = _book(ctx)
    if book.get(name) is None and book.record(name) is None:
        await book.load()
        if book.get(name) is None:
            return {"deleted": name, "note": "there was no such schedule (already gone)"}
    await book.delete(name, thread_id=ctx.thread_id)
    return {"deleted": name}


def _describe(book: ScheduleBook, schedule: Schedule) -> dict[str, Any]:
    """A schedule as the tools show it: its settings, origin, whether it is paused, and
    its next three fire times (none while it is not active)."""
    record = book.record(schedule.name)
    return {
        "name": schedule.name, "cron": schedule.config.cron,
        "timezone": schedule.cron.timezone, "prompt": schedule.config.prompt,
        "origin": schedule.source, "paused": bool(record and record.paused),
        "next_fires": [f.isoformat() for f in next_fires(schedule.cron, book.clock(), 3)]
        if book.active(schedule) else [],
    }


def _book(ctx: ToolContext) -> ScheduleBook:
    book: ScheduleBook = ctx.service("schedules")
    return book
