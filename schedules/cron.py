"""Crontab as the user means it, and the arithmetic of its slots. Pure: no I/O, no clock.

A schedule fires at *slots*: instants at which a 5-field crontab
(``minute hour day-of-month month day-of-week``) matches the wall clock of
the schedule's IANA timezone. Each slot is claimed once, under
:func:`slot_key`, so the arithmetic here must give every slot exactly one
instant, whichever way it is asked (:func:`next_fires` step by step, or
:func:`slots_between` in one go).

Where crontab and APScheduler 3 disagree, crontab wins:

- **Day of week.** Crontab counts from Sunday = 0 (and 7); APScheduler from
  Monday = 0. :meth:`Cron.trigger` translates to APScheduler's *names*
  (``mon-fri``, ``sat-sun``), so no number is ever read the wrong way, and a
  range that wraps once translated (``0-2`` = Sun to Tue) comes out as a list.
- **Day of month OR day of week.** When both fields are restricted, crontab
  fires on a day matching *either*; APScheduler ANDs them. We implement the OR
  (``0 0 1 * mon`` = the 1st and every Monday): the slot arithmetic tests the
  days itself, and :meth:`Cron.trigger` returns an ``OrTrigger`` of two
  ``CronTrigger`` (earliest wins). Refusing would reject a line users copy
  from real crontabs. As in Vixie cron and cronie, a field that *starts*
  with ``*`` (``*``, ``*/2``) counts as unrestricted.
- **Daylight saving time.** A wall time that does not exist (02:30 on the
  day clocks spring forward) fires once, at the transition (03:00 local);
  a wall time that happens twice (02:30 on the day clocks fall back) fires
  once, at its first occurrence. APScheduler 3.11's ``CronTrigger`` fires
  the missing 02:30 at 03:30 (it reads the wall time with the old offset),
  drops missing slots of a ``*``-hour schedule, and fires a repeated wall
  time twice. The slot functions here do not follow it: a scheduler claims
  :func:`last_slot` of the trigger's scheduled fire time, which maps
  APScheduler's 03:30 to our 03:00 slot and both 02:30 fires to one slot, so
  the second claim finds the key taken.

Wall times are matched on the naive local calendar, and mapped to instants
by one monotone rule (``_instant``), which is what makes walking forward and
walking backward agree.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from apscheduler.triggers.base import BaseTrigger  # type: ignore[import-untyped]
from apscheduler.triggers.combining import OrTrigger  # type: ignore[import-untyped]
from apscheduler.triggers.cron import CronTrigger  # type: ignore[import-untyped]

from runtime.errors import ConfigError

__all__ = ["Cron", "MisfirePolicy", "SlotAlarm", "last_slot", "misfire", "next_fires",
           "parse_crontab", "slot_key", "slots_between"]

MisfirePolicy = Literal["skip", "once", "all"]

_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_CRON_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_APS_DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_FIELD_NAMES = "minute hour day-of-month month day-of-week"


@dataclass(frozen=True)
class _Field:
    what: str  # "a minute", as in "61 is not a minute (0-59)"
    low: int
    high: int
    names: tuple[str, ...] = ()  # names[i] means low + i
    hint: str = ""

    def describe(self) -> str:
        return f"{self.what} ({self.low}-{self.high}{self.hint})"


_MINUTE = _Field("a minute", 0, 59)
_HOUR = _Field("an hour", 0, 23)
_DOM = _Field("a day of the month", 1, 31)
_MONTH = _Field("a month", 1, 12, _MONTHS, " or jan-dec")
_DOW = _Field("a day of the week", 0, 7, (*_CRON_DAYS, "sun"), " or sun-sat")


@dataclass(frozen=True)
class Cron:
    """A parsed crontab line in an IANA timezone. Weekdays are crontab's: 0 = Sunday."""

    expr: str
    timezone: str
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    days_restricted: bool
    weekdays_restricted: bool

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    def day_matches(self, day: date) -> bool:
        """Crontab's day rule: both day fields restricted -> either matches; else both."""
        if day.month not in self.months:
            return False
        by_day = day.day in self.days
        by_weekday = day.isoweekday() % 7 in self.weekdays
        if self.days_restricted and self.weekdays_restricted:
            return by_day or by_weekday
        return by_day and by_weekday

    def trigger(self) -> CronTrigger | OrTrigger:
        """APScheduler 3's trigger for this line (an ``OrTrigger`` for the dom/dow OR rule).

        Its fire times differ from :func:`next_fires` only around DST changes (see the
        module docstring).
        """
        common = {"minute": _aps_list(self.minutes, _MINUTE),
                  "hour": _aps_list(self.hours, _HOUR),
                  "month": _aps_list(self.months, _MONTH), "timezone": self.zone}
        days, weekdays = _aps_list(self.days, _DOM), _aps_weekdays(self.weekdays)
        if self.days_restricted and self.weekdays_restricted:
            return OrTrigger([CronTrigger(day=days, day_of_week="*", **common),
                              CronTrigger(day="*", day_of_week=weekdays, **common)])
        return CronTrigger(day=days, day_of_week=weekdays, **common)


class SlotAlarm(BaseTrigger):  # type: ignore[misc]
    """APScheduler's trigger for a schedule's alarm: the crontab's ``CronTrigger``, and no
    later than the schedule's next slot by our own arithmetic. The two differ only at a
    spring-forward change, where APScheduler would go off half an hour late (02:30 read as
    03:30) and this goes off at the transition, when the slot is due."""

    __slots__ = ("cron", "inner")

    def __init__(self, cron: Cron) -> None:
        self.cron = cron
        self.inner = cron.trigger()

    def get_next_fire_time(self, previous_fire_time: datetime | None,
                           now: datetime) -> datetime | None:
        theirs: datetime | None = self.inner.get_next_fire_time(previous_fire_time, now)
        after = _utc(now) - timedelta(microseconds=1)
        if previous_fire_time is not None:
            after = max(after, _utc(previous_fire_time))
        ours = next_fires(self.cron, after, 1)
        if not ours or (theirs is not None and _utc(theirs) <= _utc(ours[0])):
            return theirs
        return ours[0]

    def __str__(self) -> str:
        return f"slots of {self.inner}"


def parse_crontab(
    expr: str, timezone: str, *, key: str = "cron", timezone_key: str | None = None
) -> Cron:
    """Parse a 5-field crontab line in ``timezone``.

    Raises ``ConfigError`` listing every problem under ``key`` (the expression's key path)
    or ``timezone_key`` (default: ``timezone`` beside ``key``, e.g. ``schedules.0.timezone``).
    """
    if timezone_key is None:
        parent = key.rpartition(".")[0]
        timezone_key = f"{parent}.timezone" if parent else "timezone"
    problems: list[tuple[str, str]] = []
    try:
        ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        problems.append((timezone_key, f"unknown timezone {timezone!r}"))

    parts = expr.split()
    if len(parts) != 5:
        got = "an empty expression" if not parts else f"{len(parts)}"
        problems.append((key, f"expected 5 fields, got {got} ({_FIELD_NAMES})"))
        raise ConfigError(problems)

    sets: list[frozenset[int]] = []
    for text, field in zip(parts, (_MINUTE, _HOUR, _DOM, _MONTH, _DOW), strict=True):
        try:
            sets.append(_parse_field(text, field))
        except ValueError as exc:
            problems.append((key, str(exc)))
            sets.append(frozenset())
    if problems:
        raise ConfigError(problems)

    minutes, hours, days, months, weekdays = sets
    cron = Cron(expr=expr, timezone=timezone, minutes=minutes, hours=hours, days=days,
                months=months, weekdays=frozenset(d % 7 for d in weekdays),
                days_restricted=not parts[2].startswith("*"),
                weekdays_restricted=not parts[4].startswith("*"))
    if not cron.weekdays_restricted or not cron.days_restricted:
        # Only the day of the month picks days: make sure one of them exists at all.
        longest = {m: 29 if m == 2 else 30 if m in (4, 6, 9, 11) else 31 for m in months}
        if not any(d <= longest[m] for m in months for d in days):
            raise ConfigError([(key, f"{expr!r} never fires: no chosen month has that day")])
    return cron


def _parse_field(text: str, field: _Field) -> frozenset[int]:
    values: set[int] = set()
    for item in text.split(","):
        if not item:
            raise ValueError(f"empty item in {text!r}")
        span, slash, step_text = item.partition("/")
        step = 1
        if slash:
            if not _is_number(step_text) or int(step_text) == 0:
                raise ValueError(f"{step_text!r} is not a step (a whole number from 1)")
            step = int(step_text)
        if span == "*":
            low, high = field.low, field.high
            if field is _DOW:
                high = 6  # 7 is a second Sunday, not an eighth day
        elif "-" in span:
            first, _, last = span.partition("-")
            low, high = _value(first, field), _value(last, field)
            if field is _DOW and high == 0:
                high = 7  # fri-sun, 5-0: the week ends on Sunday
            if low > high:
                raise ValueError(f"range {span!r} runs backwards")
        elif slash:
            raise ValueError(f"step {item!r} needs a range or '*' before the '/'")
        else:
            low = high = _value(span, field)
        values.update(range(low, high + 1, step))
    return frozenset(values)


def _value(token: str, field: _Field) -> int:
    lowered = token.lower()
    if lowered in field.names:
        return field.low + field.names.index(lowered)
    if _is_number(token) and field.low <= int(token) <= field.high:
        return int(token)
    shown = token if _is_number(token) else repr(token)
    raise ValueError(f"{shown} is not {field.describe()}")


def _is_number(token: str) -> bool:
    return token.isascii() and token.isdigit()  # not "³", which isdigit() but int() refuses


def _runs(values: list[int]) -> list[tuple[int, int]]:
    runs: list[tuple[int, int]] = []
    for v in sorted(values):
        if runs and runs[-1][1] == v - 1:
            runs[-1] = (runs[-1][0], v)
        else:
            runs.append((v, v))
    return runs


def _aps_list(values: frozenset[int], field: _Field) -> str:
    if values == frozenset(range(field.low, field.high + 1)):
        return "*"
    return ",".join(f"{a}-{b}" if a != b else f"{a}" for a, b in _runs(list(values)))


def _aps_weekdays(weekdays: frozenset[int]) -> str:
    if len(weekdays) == 7:
        return "*"
    monday_based = [(d + 6) % 7 for d in weekdays]
    return ",".join(f"{_APS_DAYS[a]}-{_APS_DAYS[b]}" if a != b else _APS_DAYS[a]
                    for a, b in _runs(monday_based))


# --- slots -----------------------------------------------------------------------------------

_MARGIN = timedelta(days=1)  # wider than any DST shift, so no slot near an edge is missed


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


def _slots(cron: Cron, edge: datetime, forward: bool) -> Iterator[datetime]:
    """Distinct slot instants strictly after ``edge`` (forward) or at/before it (backward)."""
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


def next_fires(cron: Cron, after: datetime, count: int) -> list[datetime]:
    """The next ``count`` slots strictly after ``after``, in the schedule's timezone."""
    found: list[datetime] = []
    if count <= 0:
        return found
    for slot in _slots(cron, after, forward=True):
        found.append(slot)
        if len(found) == count:
            break
    return found


def slots_between(cron: Cron, start: datetime, end: datetime, limit: int) -> list[datetime]:
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


def last_slot(cron: Cron, moment: datetime) -> datetime:
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
