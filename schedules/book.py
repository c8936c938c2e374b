"""Every schedule, from ``agent.toml`` and from chat, and what the store keeps of each.

Config schedules are read-only here. Chat schedules are created, paused, resumed and
deleted from the conversation that created them, through the agent's tools; their
definition lives in the store (a ``ScheduleRecord``), so they survive restarts and any
process on the store sees them.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from runtime import (
    ConfigError,
    MaidenError,
    Origin,
    Records,
    ScheduleRecord,
    ScheduleRecords,
    SlotMark,
    Store,
)

from .config import NAME, Schedule, ScheduleConfig, timing_of
from .crontab import At
from .hooks import Hook

__all__ = ["Clock", "ScheduleBook", "ScheduleError", "ZoneLookup", "utc_now"]

log = logging.getLogger("maiden.schedules")

Clock = Callable[[], datetime]
ZoneLookup = Callable[[str], Awaitable[str | None]]
"""A person's id on a chat platform -> their IANA time zone, or None if unknown."""


def utc_now() -> datetime:
    return datetime.now(UTC)


class ScheduleError(MaidenError, ValueError):
    """A change asked from chat that cannot be made; the message says why."""


class ScheduleBook:
    """The schedules of one agent, and their records in the store.

    It is the ``schedules`` service the schedule tools declare they need."""

    def __init__(
        self,
        store: Store,
        configured: Sequence[Schedule] = (),
        *,
        default_timezone: str = "UTC",
        max_per_thread: int = 10,
        clock: Clock = utc_now,
        hooks: Sequence[Hook] = (),
    ) -> None:
        self.kept = ScheduleRecords(store)
        """The records, through the runtime's API."""
        self.runs = Records(store)
        """The runs and replies of fired slots, read."""
        self.default_timezone = default_timezone
        self.max_per_thread = max_per_thread
        self.clock = clock
        self._configured = {s.name: s for s in configured}
        self.hooks = {h.name: h for h in hooks}
        """The ``[[hooks]]``: jobs started by a webhook (``hooks.py``)."""
        self._chat: dict[str, Schedule] = {}
        self._records: dict[str, ScheduleRecord] = {}
        self.listeners: list[Callable[[], Awaitable[None]]] = []
        """Called after a change made here (the scheduler re-reads the book)."""
        self.zones: dict[str, ZoneLookup] = {}
        """Per chat channel (``"slack"``), how to find a person's time zone by their id
        there: an IANA name, or None when the platform does not say (registered by the
        channel when it is made)."""

    # -- reading

    async def load(self) -> None:
        """Read every record from the store (chat schedules made by any process)."""
        records = {r.name: r for r in await self.kept.all()}
        chat: dict[str, Schedule] = {}
        for record in records.values():
            if record.origin != "chat" or record.name in self._configured:
                continue
            try:
                chat[record.name] = self._from_record(record)
            except (ConfigError, ValidationError, ValueError) as exc:
                log.error("schedule %r from chat cannot be read and is left out: %s",
                          record.name, exc)
        self._records, self._chat = records, chat

    def schedules(self) -> list[Schedule]:
        """Config schedules in file order, then chat schedules by name."""
        return [*self._configured.values(), *sorted(self._chat.values(), key=lambda s: s.name)]

    def get(self, name: str) -> Schedule | None:
        return self._configured.get(name) or self._chat.get(name)

    def record(self, name: str) -> ScheduleRecord | None:
        return self._records.get(name)

    def records(self) -> list[ScheduleRecord]:
        """Every record read, including those of schedules no longer defined."""
        return list(self._records.values())

    async def forget(self, name: str) -> None:
        """Remove a record (of a config schedule taken out of the config)."""
        await self.kept.delete(name)
        self._records.pop(name, None)

    def active(self, schedule: Schedule) -> bool:
        """Enabled in its definition and not paused from chat."""
        record = self._records.get(schedule.name)
        return schedule.config.enabled and not (record is not None and record.paused)

    async def zone_of(self, origin: Origin) -> str:
        """The time zone "tomorrow at 9" means for whoever sent ``origin``'s message: the
        person's own where their platform says (``zones``), else the agent's."""
        lookup = self.zones.get(origin.channel)
        if lookup is not None and origin.user:
            try:
                found = await lookup(origin.user)
            except Exception:  # a lookup that fails falls back, it does not fail the tool
                log.warning("the time zone of %s on %s could not be read; using %s",
                            origin.user, origin.channel, self.default_timezone, exc_info=True)
                found = None
            if found:
                return found
        return self.default_timezone

    def finished(self, schedule: Schedule) -> bool:
        """A one-shot whose time is decided: it ran (or was skipped) and is kept as done."""
        record = self._records.get(schedule.name)
        if not isinstance(schedule.cron, At) or record is None:
            return False
        return max(record.since, record.last_slot or 0.0) >= schedule.cron.moment.timestamp()

    def of_thread(self, thread_id: str) -> list[Schedule]:
        return [s for s in self._chat.values()
                if (r := self._records.get(s.name)) is not None and r.created_by == thread_id]

    async def save(self, records: Sequence[ScheduleRecord]) -> None:
        """Write whole records: definitions made or changed, never a fire's progress."""
        await self.kept.save(records)
        self._records.update((r.name, r) for r in records)

    async def advance(self, marks: Sequence[SlotMark]) -> None:
        """Write what fires decided: the store moves each record forward, changing nothing
        else (a pause, resume or delete made meanwhile by another process stands)."""
        await self.kept.advance(marks)
        for mark in marks:
            if (record := self._records.get(mark.name)) is not None:
                self._records[mark.name] = mark.applied(record)

    # -- changes from chat

    async def create(
        self,
        *,
        name: str,
        thread_id: str,
        origin: Origin,
        request_key: str,
        paused: bool = False,
        **fields: Any,
    ) -> Schedule:
        """A new chat schedule that delivers to ``origin`` (``fields``: its
        ``ScheduleConfig``'s; without ``thread``, it runs in the thread it was made in;
        ``paused``: made paused, it fires only once resumed)."""
        await self.load()
        for record in self._records.values():
            if record.request_key == request_key and record.origin == "chat":
                found = self._chat.get(record.name)
                if found is not None:
                    return found  # the same call, retried after a crash
        if not NAME.match(name):
            raise ScheduleError(f"{name!r} is not a schedule name (letters, digits, _ . -; "
                                "at most 64)")
        if name in self._configured:
            raise ScheduleError(f"{name!r} is defined in agent.toml; choose another name")
        if name in self._records:
            raise ScheduleError(f"a schedule named {name!r} exists already")
        mine = [s for s in self.of_thread(thread_id) if not self.finished(s)]
        if len(mine) >= self.max_per_thread:
            raise ScheduleError(f"this conversation has {len(mine)} schedules, the most "
                                "allowed ([schedules_limits] max_per_thread); delete one first")
        try:
            config = ScheduleConfig(name=name, **{"thread": thread_id, **fields})
        except ValidationError as exc:
            raise ScheduleError("; ".join(str(e["msg"]) for e in exc.errors())) from None
        try:
            schedule = self._parse(config, origin)
        except ConfigError as exc:
            raise ScheduleError("; ".join(message for _, message in exc.problems)) from exc
        now = self.clock()
        since = now.timestamp()
        if isinstance(schedule.cron, At):
            # A one-shot for a time just passed (the tools take one up to a minute old)
            # still has its slot ahead of where its record starts: it fires, at once.
            since = min(since, schedule.cron.moment.timestamp() - 0.001)
        record = ScheduleRecord(
            name=name, origin="chat", created_by=thread_id, request_key=request_key,
            spec={"config": config.model_dump(exclude_defaults=True),
                  "origin": origin.model_dump()},
            since=since, created_at=now.timestamp(), paused=paused)
        await self.save([record])
        self._chat[name] = schedule
        await self._changed()
        return schedule

    async def set_paused(self, name: str, paused: bool, *, thread_id: str | None) -> Schedule:
        """Pause or resume a schedule: from chat (``thread_id``) only one the conversation
        made; from the operator's console (``None``) any, config schedules too."""
        if thread_id is not None:
            schedule, record = await self._own(name, thread_id)
        else:
            await self.load()
            found = self.get(name)
            if found is None:
                raise ScheduleError(f"there is no schedule named {name!r}")
            # A config schedule no scheduler has recorded yet (`maiden run` never ran on
            # this store) gets its record here, paused or not from now.
            now = self.clock().timestamp()
            record = self._records.get(name) or ScheduleRecord(
                name=name, origin=found.source, since=now, created_at=now)
            schedule = found
        if record.paused != paused:
            # Resumed: slots missed while paused are not caught up; it starts from now.
            since = record.since if paused else self.clock().timestamp()
            await self.save([record.model_copy(update={"paused": paused, "since": since})])
            await self._changed()
        return schedule

    async def delete(self, name: str, *, thread_id: str | None) -> None:
        """Delete a chat schedule: from chat (``thread_id``) only one the conversation made;
        from the operator (``None``: the CLI) any. A config schedule is deleted from the
        config, never here."""
        if thread_id is not None:
            await self._own(name, thread_id)
        else:
            await self.load()
            if name in self._configured:
                raise ScheduleError(f"{name!r} is defined in agent.toml: remove it there (or "
                                    "pause it)")
            record = self._records.get(name)
            if record is None or record.origin != "chat":  # (one unreadable goes too)
                raise ScheduleError(f"there is no schedule named {name!r}")
        await self.kept.delete(name)
        self._records.pop(name, None)
        self._chat.pop(name, None)
        await self._changed()

    async def _own(self, name: str, thread_id: str) -> tuple[Schedule, ScheduleRecord]:
        await self.load()
        if name in self._configured:
            raise ScheduleError(f"{name!r} is defined in agent.toml and cannot be changed "
                                "from chat")
        schedule, record = self._chat.get(name), self._records.get(name)
        if schedule is None or record is None:
            raise ScheduleError(f"there is no schedule named {name!r}")
        if record.created_by != thread_id:
            raise ScheduleError(f"{name!r} belongs to another conversation")
        return schedule, record

    async def _changed(self) -> None:
        for listener in self.listeners:
            await listener()

    # -- records to schedules

    def _from_record(self, record: ScheduleRecord) -> Schedule:
        config = ScheduleConfig.model_validate(record.spec.get("config", {}))
        origin = Origin.model_validate(record.spec.get("origin", {}))
        return self._parse(config, origin)

    def _parse(self, config: ScheduleConfig, origin: Origin) -> Schedule:
        cron = timing_of(config, config.timezone or self.default_timezone)
        # Its runs come later, without the person: the rights they held when they made
        # it are not theirs (a workspace memory needs someone with operate there).
        return Schedule(config, cron, origin.model_copy(update={"rights": ()}), source="chat")
