"""The agent's schedule tools: "remind me every Monday at 8" from chat.

A schedule made here belongs to the conversation (thread) that made it: it runs there
and answers where that conversation's messages came from. Only that conversation may
pause, resume or delete it; schedules from ``agent.toml`` are listed but read-only; and a
run started by a schedule cannot create one (a job that multiplies itself would run up
the bill with nobody watching).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from runtime import ConfigError, Tool, ToolContext, tool

from .book import ScheduleBook, ScheduleError
from .config import Schedule
from .cron import next_fires
from .crontab import At
from .once import parse_at, parse_in, when_text

__all__ = ["SCHEDULE_TOOLS", "schedule_tools"]

SCHEDULE_TOOLS = ("schedule_create", "schedule_list", "schedule_pause", "schedule_resume",
                  "schedule_delete")


MENTIONS = ("slack", "discord")
"""The channels where ``<@id>`` mentions a person (what a reminder posts)."""


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


async def _create(ctx: ToolContext, name: str, prompt: str | None = None,
                  cron: str | None = None, at: str | None = None,
                  in_: Annotated[str | None, Field(alias="in")] = None,
                  say: str | None = None, timezone: str | None = None, paused: bool = False,
                  jitter_s: float = 0.0) -> dict[str, Any]:
    """Create a job in this conversation, recurring or one time.

    When: `cron`, a 5-field crontab (minute hour day-of-month month day-of-week, Sunday =
    0) for a recurring job ("every Monday at 8:00" is "0 8 * * 1"); or, for one time, `in`
    (from now: "2h", "90m", "1d", "1h30m") or `at` (ISO 8601, "2026-12-07T09:00"; without
    an offset it is the asking person's own local time). `timezone` (IANA) overrides the
    zone: by default the person's (as their chat profile says), else the agent's.
    What: `say`, a reminder posted here as it is, mentioning the person who asked (no model
    is asked: "remind me in 2 hours to check the deploy" is in="2h", say="check the
    deploy"); or `prompt`, a message the agent is sent then, its answer posted here.
    `paused`: made paused (it fires only once resumed). `jitter_s` (up to 300): each slot
    starts up to that many seconds late. The answer says when it fires; tell the person."""
    book = _book(ctx)
    run = await book.runs.get_run(ctx.run_id)
    if (run.idempotency_key or "").startswith("schedule:"):
        raise ScheduleError("refused: a run started by a schedule cannot create schedules")
    if (at is not None or in_ is not None) == (cron is not None) or \
            (at is not None and in_ is not None):
        raise ScheduleError("give one of cron (recurring), in or at (one time)")
    fields: dict[str, Any] = {"prompt": prompt, "say": say, "jitter_s": jitter_s}
    if say is not None and ctx.origin.channel in MENTIONS and ctx.origin.user:
        fields["mention"] = ctx.origin.user
    if cron is not None:
        fields.update(cron=cron, timezone=timezone)
    else:
        zone = timezone or await book.zone_of(ctx.origin)
        now = book.clock()
        try:
            when = parse_in(in_, now, zone) if in_ is not None else \
                parse_at(at or "", zone, now=now)
        except ConfigError as exc:
            raise ScheduleError("; ".join(f"{k}: {m}" for k, m in exc.problems)) from None
        # A one-shot runs in its own thread (schedule:NAME), posting here: what it says is
        # the bot's message, not this conversation's person saying it again.
        fields.update(at=when.moment.isoformat(), timezone=zone, thread=None)
    schedule = await book.create(name=name, thread_id=ctx.thread_id, origin=ctx.origin,
                                 request_key=ctx.idempotency_key, paused=paused,
                                 **{k: v for k, v in fields.items()
                                    if v is not None or k == "thread"})
    made: dict[str, Any] = {"created": _describe(book, schedule)}
    if isinstance(schedule.cron, At):
        made["fires"] = when_text(schedule.cron, book.clock())
    return made


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
    config = schedule.config
    described = {
        "name": schedule.name, "cron": config.cron, "timezone": schedule.cron.timezone,
        "prompt": config.prompt, "origin": schedule.source,
        "paused": bool(record and record.paused),
        "next_fires": [f.isoformat() for f in next_fires(schedule.cron, book.clock(), 3)]
        if book.active(schedule) else [],
    }
    if isinstance(schedule.cron, At):
        described.update(at=schedule.cron.moment.isoformat(), done=book.finished(schedule))
    if config.say is not None:
        described["say"] = config.say
    return described


def _book(ctx: ToolContext) -> ScheduleBook:
    book: ScheduleBook = ctx.service("schedules")
    return book
