"""``[[schedules]]`` in agent.toml (the key names are the contract), checked at load time:
a bad expression, zone or target is a config error naming the schedule and the key."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from runtime import ConfigError, Origin, parse_target

from .cron import Cron, parse_crontab

__all__ = ["Schedule", "ScheduleConfig", "deliver_origin", "delivered_to", "entry_key",
           "load_schedules"]

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class ScheduleConfig(BaseModel):
    """One recurring job."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="unique; letters, digits, _ . - (the slot keys use it)")
    cron: str = Field(description="5-field crontab: minute hour day-of-month month weekday")
    timezone: str | None = Field(default=None, description="IANA; default [agent] timezone")
    prompt: str = Field(description="the message the agent is sent at each slot")
    thread: str | None = Field(default=None, description="default schedule:{name}")
    fresh_thread: bool = Field(default=False,
                               description="true: each slot its own thread schedule:{name}:{slot}")
    deliver: str | None = Field(
        default=None, description='"slack:CHANNEL", "slack:CHANNEL:THREAD_TS", "discord:CHANNEL"'
        ", or absent: the answer stays in the thread (maiden show)")
    misfire: Literal["skip", "once", "all"] = Field(
        default="once", description="slots missed while maiden was down: skip them, run the "
        "newest once, or run all of them (at most max_catchup), oldest first")
    overlap: Literal["skip", "queue"] = Field(
        default="skip", description='"skip": a slot whose previous run still waits for an '
        'approval is skipped and recorded with why; "queue": its run waits behind it')
    max_catchup: int = Field(default=10, ge=1, le=1000,
                             description='misfire = "all": at most this many missed slots run')
    enabled: bool = Field(default=True, description="false: listed, but never fired")
    jitter_s: float = Field(default=0.0, ge=0.0, le=300.0, description=(
        "each slot fires up to this many seconds late, the same in every replica (drawn "
        "from the name and the slot): jobs made for the same minute do not all start at "
        "once"))
    agent: str | None = Field(default=None, description=(
        "the agent that runs it (else where [[routes]] send it, else the default agent)"))


@dataclass(frozen=True, slots=True)
class Schedule:
    """A schedule as configured (or created from chat), its crontab read and its target
    resolved."""

    config: ScheduleConfig
    cron: Cron
    origin: Origin
    source: Literal["config", "chat"] = "config"

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def thread(self) -> str:
        return self.config.thread or f"schedule:{self.config.name}"

    def thread_for(self, slot: str) -> str:
        """The thread a slot's run goes to: the schedule's own, or with ``fresh_thread`` one
        per slot, ``schedule:{name}:{slot}``."""
        return f"schedule:{self.config.name}:{slot}" if self.config.fresh_thread else self.thread


def deliver_origin(deliver: str | None, key: str) -> Origin:
    """Where a scheduled run's answer goes, as the origin its run carries."""
    if deliver is None:
        return Origin(channel="schedule")
    try:
        return parse_target(deliver)
    except ValueError as exc:
        raise ConfigError([(key, str(exc))]) from None


def entry_key(kind: str, i: int, name: str, seen: set[str],
              problems: list[tuple[str, str]]) -> str:
    """The key path of entry ``i`` of ``[[kind]]`` (``schedules.1 (standup)``), its name
    checked (a bad or repeated one added to ``problems``, ``seen`` grown)."""
    where = f"{kind}.{i} ({name})" if name else f"{kind}.{i}"
    if not NAME.match(name):
        problems.append((f"{where}.name", f"{name!r} is not a {kind.rstrip('s')} name "
                         "(letters, digits, _ . -; at most 64)"))
    elif name in seen:
        problems.append((f"{where}.name", f"{name!r} is defined twice"))
    seen.add(name)
    return where


def delivered_to(where: str, deliver: str | None, channels: Sequence[str],
                 problems: list[tuple[str, str]]) -> Origin | None:
    """Where an entry's ``deliver`` sends its answers, or None (why, added to
    ``problems``): not a target, or a channel that is not configured."""
    try:
        origin = deliver_origin(deliver, f"{where}.deliver")
    except ConfigError as exc:
        problems.extend(exc.problems)
        return None
    if origin.target and origin.channel not in channels:
        problems.append((f"{where}.deliver", f"delivers to {origin.channel}, but "
                         f"[channels.{origin.channel}] is not configured"))
        return None
    return origin


def load_schedules(
    configs: Sequence[ScheduleConfig], *, default_timezone: str, channels: Sequence[str]
) -> list[Schedule]:
    """Every schedule read and checked; ``ConfigError`` lists each problem by its key.

    ``channels`` are the chat channels configured: a ``deliver`` to any other fails here,
    at startup, not at the first fire.
    """
    problems: list[tuple[str, str]] = []
    schedules: list[Schedule] = []
    seen: set[str] = set()
    for i, config in enumerate(configs):
        # The key path names the schedule too: `schedules.1 (standup).cron: ...`.
        where = entry_key("schedules", i, config.name, seen, problems)
        # Every key is checked, so that one start names every problem of the schedule.
        try:
            cron = parse_crontab(config.cron, config.timezone or default_timezone,
                                 key=f"{where}.cron",
                                 timezone_key=f"{where}.timezone" if config.timezone
                                 else "agent.timezone")
        except ConfigError as exc:
            problems.extend(exc.problems)
            cron = None
        origin = delivered_to(where, config.deliver, channels, problems)
        if origin is not None and cron is not None:
            schedules.append(Schedule(config, cron, origin))
    if problems:
        raise ConfigError(problems)
    return schedules
