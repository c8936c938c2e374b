"""Recurring agent jobs on cron schedules.

``cron`` is the pure core: a crontab line read as crontab means it (Sunday = 0
and 7, day-of-month OR day-of-week), the APScheduler 3 trigger it becomes, and
the slot arithmetic (next fires, slots missed in a span, DST handled once per
slot, misfire policy, idempotency keys) that later code uses to claim each slot
exactly once. ``config`` reads ``[[schedules]]`` (checked at load time). The
runner that submits runs is not built yet.
"""

from schedules.config import Schedule, ScheduleConfig, deliver_origin, load_schedules
from schedules.cron import (
    Cron,
    MisfirePolicy,
    last_slot,
    misfire,
    next_fires,
    parse_crontab,
    slot_key,
    slots_between,
)

__all__ = [
    "Cron",
    "MisfirePolicy",
    "Schedule",
    "ScheduleConfig",
    "deliver_origin",
    "last_slot",
    "load_schedules",
    "misfire",
    "next_fires",
    "parse_crontab",
    "slot_key",
    "slots_between",
]
