"""The alarm clock APScheduler is handed: a trigger whose fire times are our slots.

APScheduler only decides *when to wake*; :func:`schedules.cron.next_fires` decides when a
slot is, so the alarm goes off exactly at each slot (at a spring-forward transition, once
in a repeated hour), and the tables in tests/schedules/test_cron.py that test the arithmetic
test what fires.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from apscheduler.triggers.base import BaseTrigger  # type: ignore[import-untyped]

from .cron import jitter, next_fires
from .crontab import At, Timing, parse_crontab

__all__ = ["SlotTrigger"]


class SlotTrigger(BaseTrigger):  # type: ignore[misc]
    """APScheduler 3 trigger for a schedule: fires at each slot of ``cron``, and nowhere
    else."""

    __slots__ = ("cron", "jitter_s", "name")

    def __init__(self, cron: Timing, *, name: str = "", jitter_s: float = 0.0) -> None:
        self.cron = cron
        self.name = name
        self.jitter_s = jitter_s
        """Each slot's alarm goes off ``jitter(name, slot, jitter_s)`` after it."""

    def get_next_fire_time(self, previous_fire_time: datetime | None,
                           now: datetime) -> datetime | None:
        """The first slot at or after ``now`` and after ``previous_fire_time``.

        At or after ``now``: APScheduler asks with ``now`` when a job is added, and a slot due
        this very instant is still to fire. After the previous fire: its loop over missed
        fire times ends, and one slot never fires twice."""
        after = now - timedelta(microseconds=1)
        if previous_fire_time is not None:
            after = max(after, previous_fire_time)
        if self.jitter_s <= 0:
            fires = next_fires(self.cron, after, 1)
            return fires[0] if fires else None
        # A slot a little before ``after`` may still have its alarm to come.
        alarms = [slot + jitter(self.name, slot, self.jitter_s) for slot in next_fires(
            self.cron, after - timedelta(seconds=self.jitter_s), 8)]
        return min((alarm for alarm in alarms if alarm > after), default=None)

    def __getstate__(self) -> dict[str, Any]:
        # A persistent job store pickles triggers: the line and zone are enough to rebuild.
        when = {"at": self.cron.moment.isoformat()} if isinstance(self.cron, At) else \
            {"expr": self.cron.expr}
        return {"version": 1, **when, "timezone": self.cron.timezone, "name": self.name,
                "jitter_s": self.jitter_s}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.cron = At(datetime.fromisoformat(state["at"]), state["timezone"]) \
            if "at" in state else parse_crontab(state["expr"], state["timezone"])
        self.name, self.jitter_s = state.get("name", ""), state.get("jitter_s", 0.0)

    def __str__(self) -> str:
        return f"slots[{self.cron.expr!r} in {self.cron.timezone}]"

    def __repr__(self) -> str:
        return f"<SlotTrigger {self.cron.expr!r} {self.cron.timezone}>"
