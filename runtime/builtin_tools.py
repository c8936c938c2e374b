"""The tools every agent has unless ``[tools] builtins`` says otherwise."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from .tools import Tool, tool

__all__ = ["BUILTIN_TOOLS", "clock"]


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


BUILTIN_TOOLS: dict[str, Tool] = {"clock": clock}
