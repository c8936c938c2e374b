"""Crontab as the user means it: a 5-field line read into the sets it names. Pure.

Where crontab and APScheduler 3 disagree, crontab wins, and nothing here is handed to
APScheduler's own parser (the slots are ours, see ``schedules.cron``):

- **Day of week.** Crontab counts from Sunday = 0 (and 7); APScheduler from Monday = 0.
  :class:`Cron` keeps crontab's numbers; ``0-2`` is Sunday to Tuesday, ``5-0`` Friday to
  Sunday.
- **Day of month OR day of week.** When both fields are restricted, crontab fires on a day
  matching *either* (``0 0 1 * mon`` = the 1st and every Monday); APScheduler ANDs them.
  :meth:`Cron.day_matches` is the OR. Refusing would reject a line users copy from real
  crontabs. As in Vixie cron and cronie, a field that *starts* with ``*`` (``*``, ``*/2``)
  counts as unrestricted.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from runtime import ConfigError

__all__ = ["At", "Cron", "Timing", "check_zone", "parse_crontab"]

_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_CRON_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
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

@dataclass(frozen=True, slots=True)
class At:
    """A one-shot's only slot: ``moment``, in the zone ``timezone`` it was asked in."""

    moment: datetime
    timezone: str

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    @property
    def expr(self) -> str:
        """How it is shown where a crontab line would be."""
        return f"at {self.moment.astimezone(self.zone).isoformat(timespec='minutes')}"


Timing = Cron | At
"""When a schedule's slots are: a crontab line, or a one-shot's one instant."""


def check_zone(timezone: str, *, key: str = "timezone") -> ZoneInfo:
    """The zone of an IANA name; ``ConfigError`` naming ``key`` if there is none."""
    try:
        return ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise ConfigError([(key, f"unknown timezone {timezone!r}")]) from None


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
