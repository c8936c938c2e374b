"""One-shots ("remind me in 2 hours", "tomorrow at 9"): a schedule with one slot.

An ``At`` stands where a crontab would (``Schedule.cron``), so a one-shot is claimed,
caught up after downtime and skipped by the same rules as every slot: exactly once under
its slot key, late by its ``misfire`` policy, never again once claimed. "At 9" means 9:00
where the asking person is (``ScheduleBook.zone_of``); a wall time that does not exist
there (a spring-forward gap) is the end of the gap, one that happens twice, the first.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from runtime import ConfigError

from .cron import instant
from .crontab import At, check_zone

__all__ = ["At", "parse_at", "parse_in", "when_text"]

_DURATION = re.compile(
    r"^\s*(?:(?P<d>\d+)\s*d)?\s*(?:(?P<h>\d+)\s*h)?\s*(?:(?P<m>\d+)\s*m(?:in)?)?"
    r"\s*(?:(?P<s>\d+)\s*s)?\s*$", re.IGNORECASE)

MAX_AHEAD = timedelta(days=366 * 5)
"""How far ahead a one-shot may be set (a typo in the year is refused, not kept)."""


def parse_in(text: str, now: datetime, timezone: str, *, key: str = "in") -> At:
    """``"2h"``, ``"90m"``, ``"1d"``, ``"1h30m"`` from ``now``, shown in ``timezone``;
    ``ConfigError`` naming ``key`` otherwise."""
    check_zone(timezone)
    match = _DURATION.match(text)
    if not text.strip() or match is None or not any(match.groupdict().values()):
        raise ConfigError([(key, f"{text!r} is not a duration (such as 2h, 90m, 1d, 1h30m)")])
    parts = {k: int(v or 0) for k, v in match.groupdict().items()}
    delta = timedelta(days=parts["d"], hours=parts["h"], minutes=parts["m"],
                      seconds=parts["s"])
    if delta <= timedelta(0):
        raise ConfigError([(key, f"{text!r} is no time from now")])
    return _checked(now + delta, now, timezone, key)


def parse_at(text: str, timezone: str, *, key: str = "at", timezone_key: str = "timezone",
             now: datetime | None = None) -> At:
    """An ISO 8601 time: with an offset (``2026-12-07T09:00:00-03:00``, ``...Z``) that
    instant; without one, that wall time in ``timezone``. With ``now``, a time already
    past is refused (from chat: a reminder that could never fire)."""
    check_zone(timezone, key=timezone_key)
    try:
        parsed = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ConfigError([(key, f"{text!r} is not an ISO 8601 time (such as "
                            "2026-12-07T09:00, with an offset or in the person's zone)")]
                          ) from None
    if parsed.tzinfo is None:  # the one rule for wall times (a gap's end, a repeat's first)
        parsed = instant(parsed, ZoneInfo(timezone))
    if now is None:
        return At(parsed.astimezone(ZoneInfo(timezone)), timezone)
    if parsed < now - timedelta(minutes=1):
        raise ConfigError([(key, f"{parsed.isoformat(timespec='minutes')} has passed (it is "
                            f"{now.astimezone(ZoneInfo(timezone)).isoformat(timespec='minutes')}"
                            f" in {timezone})")])
    return _checked(parsed, now, timezone, key)


def _checked(moment: datetime, now: datetime, timezone: str, key: str) -> At:
    if moment - now > MAX_AHEAD:
        raise ConfigError([(key, f"{moment.isoformat(timespec='minutes')} is more than five "
                            "years ahead")])
    return At(moment.astimezone(ZoneInfo(timezone)), timezone)


def when_text(at: At, now: datetime) -> str:
    """When it fires, as people read it: ``Mon 7 Dec 09:00 America/Sao_Paulo (12:00 UTC),
    in 2 h 5 min``."""
    local = at.moment.astimezone(at.zone)
    utc = at.moment.astimezone(UTC)
    shown = f"{local:%a} {local.day} {local:%b %Y %H:%M} {at.timezone}"
    if at.timezone != "UTC":
        shown += f" ({utc:%Y-%m-%d %H:%M} UTC)"
    ahead = at.moment - now
    if ahead > timedelta(0):
        shown += f", in {span(ahead)}"
    return shown


def span(delta: timedelta) -> str:
    """``2 h 5 min``, ``3 d 4 h``, ``45 s``: a length of time, to the minute."""
    seconds = int(delta.total_seconds())
    days, rest = divmod(seconds, 86_400)
    hours, rest = divmod(rest, 3_600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{n} {unit}" for n, unit in ((days, "d"), (hours, "h"), (minutes, "min")) if n]
    return " ".join(parts[:2]) if parts else f"{secs} s"
