"""The crash drill's jobs (``--job``): schedules whose runs play fixed steps instead of
asking the model (``runtime/model/jobs.py``).

- ``--fire SLOT --job say``: ``remind``, a one-shot of the config (``at = SLOT``, ``say``,
  ``mention = "u1"``), posting into room r1 of the test chat;
- ``--send THREAD TEXT --job chat``: the model calls ``schedule_create`` with ``in = "2h"``
  and ``say``, on a clock standing at ``CHAT_NOW`` (so the reminder ``nudge`` is due at
  ``CHAT_NOW + 2h``), then answers; ``--fire SLOT --job chat`` fires it (the book reads it
  from the store);
- ``--fire SLOT --job tool``: ``check``, daily at SLOT's UTC time, runs ``effect_tool``
  (``n = 1``) with ``post = "on_change"``: the tool's output is ``DIR/status.txt``'s line
  (``green`` when there is none), posted only when it differs from the last slot's.

Each is built as ``load_schedules`` builds a config schedule, but delivering to the test
chat, which a config's ``deliver`` cannot name (only Slack and Discord are targets).
Kill points besides the driver's: ``after_slot_recorded``, the store's record of a fire
(the slot marked claimed) written, whether or not the slot's run has started.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from runtime import Origin

__all__ = ["CHAT_NOW", "CHAT_SCRIPT", "CHECK", "JOB_KILL_POINTS", "JOB_KINDS", "NUDGE",
           "REMINDER", "SAY", "STATUS_FILE", "job_schedules", "status_of"]

JOB_KINDS = ("say", "chat", "tool")

JOB_KILL_POINTS = (
    "after_schedule_saved",     # the fresh record written before the slot: down from then on
    "after_queued",             # the slot's run is claimed (queued under its key), nothing run
    "after_slot_recorded",      # the record says the slot is claimed (its run may have begun)
    "after_intent",             # --job tool: the job's call is written ahead, not run
    "in_tool_after_effect",     # --job tool: the tool's effect is done, its result unstored
    "after_tool_result",        # --job tool: the result is stored, the output not yet posted
    "after_final_answer",       # the words (or output) committed with their post, unsent
    "after_delivery_sent",      # posted, its id not recorded
    "after_delivery_recorded",  # posted and recorded
)

REMINDER = "remind"
"""``--job say``'s schedule (from the config)."""
NUDGE = "nudge"
"""``--job chat``'s schedule (made by the model with ``schedule_create``)."""
CHECK = "check"
"""``--job tool``'s schedule."""
SAY = "check the deploy"
CHAT_NOW = datetime(2026, 3, 2, 7, 0, tzinfo=UTC)
"""Where the clock stands when ``--send --job chat`` asks for the reminder."""
REMIND_IN = "2h"
CHAT_SCRIPT: list[dict[str, Any]] = [
    {"tool_calls": [{"name": "schedule_create",
                     "arguments": {"name": NUDGE, "in": REMIND_IN, "say": SAY}}]},
    {"text": "I will remind you."},
]
STATUS_FILE = "status.txt"


def status_of(workdir: Path) -> dict[str, str]:
    """What ``--job tool``'s check reports: ``status.txt``'s line, ``green`` without one."""
    path = workdir / STATUS_FILE
    return {"status": path.read_text(encoding="utf-8").strip() if path.exists() else "green"}


def job_schedules(kind: str, slot: datetime, origin: Origin, tool: str) -> tuple[list[Any], str]:
    """The schedules a ``--fire SLOT --job KIND`` process defines, and the one it fires."""
    from schedules import Schedule, ScheduleConfig
    from schedules.config import timing_of

    slot = slot.astimezone(UTC)
    if kind == "chat":
        return [], NUDGE  # the book reads it from the store
    if kind == "say":
        config = ScheduleConfig(name=REMINDER, at=slot.isoformat(), say=SAY, mention="u1")
    else:
        config = ScheduleConfig(name=CHECK, cron=f"{slot.minute} {slot.hour} * * *", tool=tool,
                                args={"n": 1}, post="on_change", misfire="once")
    place = Origin(channel=origin.channel, target=dict(origin.target))
    return [Schedule(config, timing_of(config, "UTC"), place)], config.name


def chat_due() -> datetime:
    """When ``nudge`` is due."""
    return CHAT_NOW + timedelta(hours=2)
