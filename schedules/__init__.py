"""Recurring agent jobs on cron schedules.

``crontab`` reads a crontab line as crontab means it (Sunday = 0 and 7,
day-of-month OR day-of-week); ``cron`` is the pure slot arithmetic (next fires,
slots missed in a span, DST handled once per slot, misfire policy, idempotency
keys) that later code uses to claim each slot exactly once, and ``trigger`` hands
that same arithmetic to APScheduler 3 as the alarm clock. ``config`` reads
``[[schedules]]`` (checked at load time); ``book`` holds every schedule (config
and chat) and their records in the store; ``runner`` claims each slot as one run;
``status`` tells what each did last; ``tools`` are the agent's schedule tools.
``once`` reads one-shots ("in 2h", "tomorrow at 9": an ``At`` where a crontab would be),
and ``hooks`` the jobs a webhook starts.
"""

from schedules.book import ScheduleBook, ScheduleError
from schedules.config import Schedule, ScheduleConfig, deliver_origin, load_schedules
from schedules.cron import (
    At,
    Cron,
    MisfirePolicy,
    last_slot,
    misfire,
    next_fires,
    parse_crontab,
    slot_key,
    slots_between,
)
from schedules.runner import Fired, Scheduler, manual_key
from schedules.status import ScheduleStatus, statuses
from schedules.tools import SCHEDULE_TOOLS, schedule_tools
from schedules.trigger import SlotTrigger

__all__ = [
    "SCHEDULE_TOOLS",
    "At",
    "Cron",
    "Fired",
    "MisfirePolicy",
    "Schedule",
    "ScheduleBook",
    "ScheduleConfig",
    "ScheduleError",
    "ScheduleStatus",
    "Scheduler",
    "SlotTrigger",
    "deliver_origin",
    "last_slot",
    "load_schedules",
    "manual_key",
    "misfire",
    "next_fires",
    "parse_crontab",
    "schedule_tools",
    "slot_key",
    "slots_between",
    "statuses",
]
