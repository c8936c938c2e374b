"""``clock``: the current date and time in a zone (``read_only``)."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ..tools.base import tool

__all__ = ["clock"]


@tool(effect="read_only", timeout_s=5)
def clock(tz: str = "UTC") -> dict[str, str]:
    """The current date and time in an IANA time zone such as "Europe/Paris"."""
    try:
        zone = ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {tz!r}; use an IANA name like 'Europe/Paris'") \
            from None
    now = datetime.now(zone)
    return {"tz": tz, "iso": now.isoformat(timespec="seconds"), "weekday": now.strftime("%A")}
