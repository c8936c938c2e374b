"""``[[schedules]]`` in agent.toml (the key names are the contract), checked at load time:
a bad expression, zone or target is a config error naming the schedule and the key."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from runtime import ConfigError, Job, Origin, parse_target

from .cron import At, Timing, parse_crontab
from .once import parse_at, span

__all__ = ["Schedule", "ScheduleConfig", "deliver_origin", "delivered_to", "entry_key",
           "load_schedules", "timing_of"]

LATE = timedelta(seconds=60)
"""A one-shot claimed later than this after its time says it is late."""

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class ScheduleConfig(BaseModel):
    """One recurring job."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="unique; letters, digits, _ . - (the slot keys use it)")
    cron: str | None = Field(default=None, description=(
        "5-field crontab: minute hour day-of-month month weekday (or at, for one time)"))
    at: str | None = Field(default=None, description=(
        "instead of cron, one time: ISO 8601, with an offset or in timezone "
        "(2026-12-07T09:00); it runs once and is kept as done"))
    timezone: str | None = Field(default=None, description="IANA; default [agent] timezone")
    prompt: str | None = Field(default=None, description=(
        "the message the agent is sent at each slot (or say, or tool)"))
    say: str | None = Field(default=None, description=(
        "instead of prompt: words posted as they are, no model asked (a reminder)"))
    mention: str | None = Field(default=None, description=(
        "with say: the person (their id on the channel) mentioned in what is posted"))
    tool: str | None = Field(default=None, description=(
        "instead of prompt: a tool run at each slot, its output posted (no model asked)"))
    args: dict[str, Any] = Field(default_factory=dict, description="with tool: its arguments")
    post: Literal["always", "on_change"] = Field(default="always", description=(
        'with tool: "on_change" posts the output only when it differs from the last slot\'s'))
    then_prompt: str | None = Field(default=None, description=(
        "with tool: the model is asked this about the output (only when it changed, with "
        'post = "on_change") and its answer is posted'))
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

    @model_validator(mode="after")
    def _one_of_each(self) -> ScheduleConfig:
        if (self.cron is None) == (self.at is None):
            raise ValueError("give either cron (a recurring job) or at (one time)")
        given = [k for k in ("prompt", "say", "tool") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("give one of prompt (the agent is asked), say (words posted as "
                             "they are) or tool (a tool run, its output posted)"
                             + (f"; got {', '.join(given)}" if given else ""))
        if self.tool is None and (self.args or self.then_prompt or self.post != "always"):
            raise ValueError("args, post and then_prompt go with tool")
        if self.mention is not None and self.say is None:
            raise ValueError("mention goes with say")
        return self

    @property
    def job(self) -> Job | None:
        """What its runs do instead of asking the model (``say``, ``tool``), if anything."""
        if self.say is not None:
            words = f"<@{self.mention}> {self.say}" if self.mention else self.say
            return Job(say=words)
        if self.tool is not None:
            return Job(tool=self.tool, args=self.args, post=self.post,
                       then_prompt=self.then_prompt)
        return None

    @property
    def message(self) -> str:
        """The message its runs carry: the prompt, the words, or what the check asks."""
        return self.prompt or self.then_prompt or self.say or \
            f"(scheduled check: {self.tool} {json.dumps(self.args, sort_keys=True)})"


@dataclass(frozen=True, slots=True)
class Schedule:
    """A schedule as configured (or created from chat), its crontab read and its target
    resolved."""

    config: ScheduleConfig
    cron: Timing
    """Its slots: a crontab line, or a one-shot's one instant (``At``)."""
    origin: Origin
    source: Literal["config", "chat"] = "config"

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def thread(self) -> str:
        return self.config.thread or f"schedule:{self.config.name}"

    def asked(self, late: timedelta | None = None) -> tuple[str, Job | None]:
        """What a slot's run carries: its message, and its job (``ScheduleConfig.job``).
        ``late``: how long after its slot it is claimed; a one-shot found more than a
        minute after its time (maiden was not running) says so."""
        text, job = self.config.message, self.config.job
        if isinstance(self.cron, At) and late is not None and late > LATE:
            note = f"(late by {span(late)}: maiden was not running at the time)"
            text = f"{text}\n\n{note}"
            if job is not None and job.say is not None:
                job = job.model_copy(update={"say": f"{job.say} {note}"})
        return text, job

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


def timing_of(config: ScheduleConfig, timezone: str, *, where: str = "",
              timezone_key: str = "timezone") -> Timing:
    """When ``config``'s slots are (its crontab, or its one time); ``ConfigError`` naming
    ``{where}cron`` or ``{where}at`` otherwise."""
    if config.at is not None:
        return parse_at(config.at, timezone, key=f"{where}at", timezone_key=timezone_key)
    assert config.cron is not None  # (one of the two: ScheduleConfig checks)
    return parse_crontab(config.cron, timezone, key=f"{where}cron", timezone_key=timezone_key)


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
            cron: Timing | None = timing_of(
                config, config.timezone or default_timezone, where=f"{where}.",
                timezone_key=f"{where}.timezone" if config.timezone else "agent.timezone")
        except ConfigError as exc:
            problems.extend(exc.problems)
            cron = None
        origin = delivered_to(where, config.deliver, channels, problems)
        if origin is not None and cron is not None:
            schedules.append(Schedule(config, cron, origin))
    if problems:
        raise ConfigError(problems)
    return schedules
