"""The arithmetic of a crontab's slots: the one place that knows when a slot is. Pure: no
I/O, no clock.

A schedule fires at *slots*: instants at which a 5-field crontab (parsed in
``schedules.crontab``) matches the wall clock of the schedule's IANA timezone. Each slot
is claimed once, under :func:`slot_key`, so the arithmetic here must give every slot
exactly one instant, whichever way it is asked (:func:`next_fires` step by step,
:func:`slots_between` in one go, or APScheduler through ``schedules.trigger.SlotTrigger``,
which is :func:`next_fires`).

**Daylight saving time.** A wall time that does not exist (02:30 on the day clocks spring
forward) fires once, at the transition (03:00 local); a wall time that happens twice
(02:30 on the day clocks fall back) fires once, at its first occurrence. (APScheduler
3.11's own ``CronTrigger`` would fire the missing 02:30 at 03:30, drop missing slots of a
``*``-hour schedule and fire a repeated wall time twice: that is why it is not used.)

Wall times are matched on the naive local calendar, and mapped to instants by one
monotone rule (``_instant``), which is what makes walking forward and walking backward
agree.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterator
from datetime import UTC, datetime, time, timedelta
from typing import Literal
from zoneinfo import ZoneInfo

from .crontab import At, Cron, Timing, parse_crontab

__all__ = ["At", "Cron", "MisfirePolicy", "Timing", "due_until", "instant", "jitter",
           "last_slot", "misfire", "next_fires", "parse_crontab", "slot_key", "slots_between"]

MisfirePolicy = Literal["skip", "once", "all"]


# --- slots -----------------------------------------------------------------------------------

_MARGIN = timedelta(days=1)  # wider than any DST shift, so no slot near an edge is missed


def instant(wall: datetime, zone: ZoneInfo) -> datetime:
    """The one instant of a naive local wall time in ``zone`` (as every slot's is found)."""
    return _instant(wall, zone)


def _instant(wall: datetime, zone: ZoneInfo) -> datetime:
    """The one instant of a local wall time: first occurrence, or the end of a DST gap."""
    first = wall.replace(tzinfo=zone, fold=0)
    if first.astimezone(UTC).astimezone(zone).replace(tzinfo=None) == wall:
        return first.astimezone(UTC).astimezone(zone)  # normalised: fold=0, real offset
    later = wall
    for _ in range(2 * 24 * 60):  # the gap ends at the first wall minute that exists
        later += timedelta(minutes=1)
        candidate = later.replace(tzinfo=zone)
        if candidate.astimezone(UTC).astimezone(zone).replace(tzinfo=None) == later:
            return candidate.astimezone(UTC).astimezone(zone)
    raise AssertionError(f"{wall} in {zone.key}: no wall time exists for two days")


def _walls(cron: Cron, start: datetime, forward: bool) -> Iterator[datetime]:
    """Matching naive wall times from ``start`` (inclusive), forward or backward."""
    day, step = start.date(), timedelta(days=1 if forward else -1)
    hours, minutes = sorted(cron.hours), sorted(cron.minutes)
    if not forward:
        hours.reverse()
        minutes.reverse()
    first = True
    while True:
        if cron.day_matches(day):
            for hour in hours:
                if first and ((hour < start.hour) if forward else (hour > start.hour)):
                    continue  # the first day's hours before the start
                for minute in minutes:
                    wall = datetime.combine(day, time(hour, minute))
                    if (wall >= start) if forward else (wall <= start):
                        yield wall
        first = False
        day += step


def _slots(cron: Timing, edge: datetime, forward: bool) -> Iterator[datetime]:
    """Distinct slot instants strictly after ``edge`` (forward) or at/before it (backward)."""
    if isinstance(cron, At):  # a one-shot: its one slot, if it is on that side
        at, edge = _utc(cron.moment), _utc(edge)
        if (at > edge) if forward else (at <= edge):
            yield cron.moment.astimezone(cron.zone)
        return
    zone, edge = cron.zone, _utc(edge)
    local = edge.astimezone(zone).replace(tzinfo=None)
    fixed = _fixed_offset(zone, edge)
    # With no DST change near, the wall clock is the instant shifted: the walk can start at
    # the edge itself. Otherwise a day before it, so no slot near a change is missed.
    margin = timedelta(0) if fixed is not None else _MARGIN
    start = local - margin if forward else local + margin
    last: datetime | None = None
    for wall in _walls(cron, start, forward):
        if fixed is not None and abs(wall - local) < _NEAR:
            instant = (wall - fixed).replace(tzinfo=UTC)
            slot = instant.astimezone(zone)
        else:
            slot = _instant(wall, zone)
            instant = slot.astimezone(UTC)
        if instant == last:
            continue  # several missing wall times share the end of the gap
        if (instant > edge) if forward else (instant <= edge):
            yield slot
            last = instant


_NEAR = timedelta(hours=24)


def _fixed_offset(zone: ZoneInfo, edge: datetime) -> timedelta | None:
    """The zone's UTC offset if it is the same all through ``edge`` ± a day and a bit (no
    DST change near): then walls near the edge map to instants by a plain shift, and the
    walk can start at the edge itself. None near a change."""
    return _offset_around(zone, int(edge.timestamp() // 3600))


@functools.lru_cache(maxsize=4096)
def _offset_around(zone: ZoneInfo, hour: int) -> timedelta | None:
    # By the hour, so a thousand schedules in a few zones ask a few times, not thousands.
    base = datetime.fromtimestamp(hour * 3600, UTC)
    offsets = {(base + timedelta(hours=h)).astimezone(zone).utcoffset() for h in range(-27, 28)}
    offset = offsets.pop()
    return offset if not offsets else None


def _utc(moment: datetime) -> datetime:
    """``moment`` in UTC. Every comparison is made there: two datetimes in one zone compare
    by wall clock, ignoring fold, so 02:30 (first) == 02:30 (second) and APScheduler's
    non-existent 02:30 would sort before 03:00."""
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"{moment!r} is naive; give slot arithmetic an aware datetime")
    return moment.astimezone(UTC)


def next_fires(cron: Timing, after: datetime, count: int) -> list[datetime]:
    """The next ``count`` slots strictly after ``after``, in the schedule's timezone."""
    found: list[datetime] = []
    if count <= 0:
        return found
    for slot in _slots(cron, after, forward=True):
        found.append(slot)
        if len(found) == count:
            break
    return found


def slots_between(cron: Timing, start: datetime, end: datetime, limit: int) -> list[datetime]:
    """The slots in ``(start, end]``, oldest first; at most ``limit``, the NEWEST ones.

    The newest, because the caller is catching up after downtime: slots older than the
    newest ``limit`` are the ones it gives up on. Walks backward from ``end``, so the cost
    is ``limit`` slots however long the gap.
    """
    start = _utc(start)
    found: list[datetime] = []
    if limit <= 0:
        return found
    for slot in _slots(cron, end, forward=False):
        if slot.astimezone(UTC) <= start:
            break
        found.append(slot)
        if len(found) == limit:
            break
    found.reverse()
    return found


def last_slot(cron: Timing, moment: datetime) -> datetime:
    """The newest slot at or before ``moment``: the slot a fire scheduled at ``moment`` claims."""
    return next(_slots(cron, moment, forward=False))


def slot_key(name: str, slot: datetime) -> str:
    """``schedule:{name}:{slot in UTC}``, e.g. ``schedule:daily:2025-03-31T07:00:00+00:00``."""
    return f"schedule:{name}:{_utc(slot).isoformat(timespec='seconds')}"


def misfire(policy: MisfirePolicy, missed: list[datetime], max_catchup: int) -> list[datetime]:
    """The missed slots to run after downtime, oldest first.

    ``skip``: none; ``once``: only the newest; ``all``: the newest ``max_catchup``.
    """
    by_instant = {_utc(slot): slot for slot in reversed(missed)}  # the first of equal instants
    ordered = [by_instant[instant] for instant in sorted(by_instant)]
    if policy == "skip" or not ordered:
        return []
    if policy == "once":
        return ordered[-1:]
    return ordered[-max_catchup:] if max_catchup > 0 else []


def due_slots(slots: list[datetime], policy: MisfirePolicy, max_catchup: int, *,
              on_time: bool) -> list[datetime]:
    """Of ``slots`` (oldest first, none claimed yet), those to run now: the newest when it
    is ``on_time``, with what ``misfire = "all"`` catches up before it; otherwise the
    missed slots that ``policy`` runs."""
    if not slots:
        return []
    if on_time:
        older = misfire("all", slots[:-1], max_catchup - 1) if policy == "all" else []
        return [*older, slots[-1]]
    return misfire(policy, slots, max_catchup)


def jitter(name: str, slot: datetime, jitter_s: float) -> timedelta:
    """How long after ``slot`` the schedule ``name`` fires it (``jitter_s``: up to that
    many seconds), the same in every process: drawn from the schedule's name and the slot,
    so that jobs made for the same minute do not all start at once, and every replica
    waits the same."""
    if jitter_s <= 0:
        return timedelta(0)
    drawn = int.from_bytes(hashlib.sha256(f"{name}:{slot.isoformat()}".encode()).digest()[:8])
    return timedelta(milliseconds=drawn % int(jitter_s * 1000))


def due_until(cron: Timing, name: str, jitter_s: float, mark: datetime, now: datetime
              ) -> datetime:
    """How far the slots after ``mark`` are due at ``now``: ``now``, or just before the
    first slot whose ``jitter`` has not passed yet (its own alarm fires it, after the ones
    before it)."""
    if jitter_s <= 0:
        return now
    recent = slots_between(cron, max(mark, now - timedelta(seconds=jitter_s)), now,
                           limit=1000)
    waiting = [slot for slot in recent if slot + jitter(name, slot, jitter_s) > now]
    return waiting[0] - timedelta(microseconds=1) if waiting else now
