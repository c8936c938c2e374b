"""Schedules in the application: the book every process opens (so every process offers the
agent the same tools), and how `maiden run`, the banner and the CLI show them."""

from __future__ import annotations

import os
from collections.abc import Sequence
from zoneinfo import ZoneInfo

from runtime import Store, Tool
from schedules import At, ScheduleBook, ScheduleStatus, schedule_tools
from schedules.status import deliver_text

from .config import LoadedConfig

__all__ = ["chat_schedule_tools", "make_book", "schedule_lines", "status_lines"]


def make_book(loaded: LoadedConfig, store: Store, *, hooks: bool = False) -> ScheduleBook:
    """The config's schedules (checked) and the store's chat schedules: the ``schedules``
    service the schedule tools need; with ``hooks``, the ``[[hooks]]`` too, their secrets
    read from the environment (``ConfigError`` naming a variable that is not set)."""
    cfg = loaded.config
    return ScheduleBook(store, cfg.read_schedules(), default_timezone=cfg.agent.timezone,
                        max_per_thread=cfg.schedules_limits.max_per_thread,
                        hooks=cfg.read_hooks(os.environ) if hooks else ())


def chat_schedule_tools(loaded: LoadedConfig) -> list[Tool]:
    """The tools agents get to change schedules from chat (none with ``[schedules_limits]
    max_per_thread`` = 0)."""
    return schedule_tools() if loaded.config.schedules_limits.max_per_thread > 0 else []


def _target(status: ScheduleStatus) -> str:
    return deliver_text(status.schedule) or f"thread {status.schedule.thread!r}"


def schedule_lines(statuses: Sequence[ScheduleStatus]) -> list[str]:
    """The banner's lines: each schedule and its next fire."""
    if not statuses:
        return ["  schedules   none"]
    lines = [f"  schedules   {len(statuses)}"]
    for status in statuses:
        name = status.schedule.name
        if not status.active or status.done:
            why = "done" if status.done else "paused" if status.paused else "disabled"
            lines.append(f"    {name}: {why}")
            continue
        upcoming = status.next_fires[0].isoformat() if status.next_fires else "-"
        lines.append(f"    {name}: next {upcoming} -> {_target(status)}")
    return lines


def status_lines(statuses: Sequence[ScheduleStatus], timezone: str = "UTC") -> list[str]:
    """`maiden schedules`: name, cron (a one-shot: its time, in ``timezone``, the config's,
    and in its own), zone, next three fires, last slot and its outcome, origin."""
    lines: list[str] = []
    for status in statuses:
        s, c = status.schedule, status.schedule.config
        state = "  (done)" if status.done else "" if status.active else (
            "  (paused)" if status.paused else "  (disabled)")
        when = f"{c.cron!r} {s.cron.timezone}" if not isinstance(s.cron, At) else \
            f"once at {s.cron.moment.astimezone(ZoneInfo(timezone)).isoformat()} " \
            f"{timezone} ({s.cron.moment.isoformat()} {s.cron.timezone})"
        lines.append(f"{c.name}  {when}{state}  -> {_target(status)}  origin={s.source}")
        lines.append(f"    next: {', '.join(f.isoformat() for f in status.next_fires) or '-'}")
        slot = status.last_slot.isoformat() if status.last_slot else "-"
        lines.append(f"    last slot: {slot}  {status.outcome}" if status.last_slot
                     else "    last slot: -")
        if status.skipping and status.skipped_slot is not None:
            lines.append(f"    skipped: {status.skipped_slot.isoformat()}  "
                         f"{status.skipped_why}")
    return lines
