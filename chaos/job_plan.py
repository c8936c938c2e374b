"""The plan's jobs without the model (``jobs.py`` writes and checks them), drawn from a
stream of their own: one-shot reminders of the config (``at`` a little after the replicas
start, ``say``), reminders asked for in chat (``schedule_create`` with ``in``, in HTTP
threads), and ``watch``, a tool-only check every minute that posts only what changed."""

from __future__ import annotations

import random
from dataclasses import dataclass

from .ops import Op

__all__ = ["CHAT_REMINDER", "REMINDER", "REMIND_IN", "REMIND_TAG", "WATCH", "Reminder",
           "draw_chat_reminders", "draw_reminders", "job_schedule", "remind_step"]

REMINDER = "remind-"
"""The config's one-shots: ``remind-0``, ``remind-1``, …"""
CHAT_REMINDER = "rem-"
"""Those asked for in chat: ``rem-0``, …"""
WATCH = "watch"
"""The tool-only check (``tool = "probe"``, ``post = "on_change"``)."""
REMIND_IN = "1m"
REMIND_TAG = 95000
"""Chat reminders' messages are m95000 on (chat schedules' m90000 on)."""


@dataclass
class Reminder:
    """A config one-shot ``name``, due ``after_s`` after the replicas' agent.toml is written
    (what it says is ``reminder NAME``), with its misfire policy."""

    name: str
    after_s: float
    misfire: str


def job_schedule(name: str) -> bool:
    """A schedule of this module's (checked by ``jobs.py``, not with the cron slots)."""
    return name.startswith((REMINDER, CHAT_REMINDER)) or name == WATCH


def remind_step(name: str) -> str:
    """The step a chat reminder's message asks for (the model calls ``schedule_create``)."""
    return f"remind={name}"


def draw_reminders(rng: random.Random, seconds: float) -> list[Reminder]:
    """A one-shot every 20-40 s from 20 s in (the replicas take a few seconds to start),
    a third of them ``misfire = "skip"``."""
    reminders: list[Reminder] = []
    at = rng.uniform(20, 30)
    while at < seconds:
        reminders.append(Reminder(f"{REMINDER}{len(reminders)}", round(at, 3),
                                  "skip" if rng.random() < 1 / 3 else "once"))
        at += rng.uniform(20, 40)
    return reminders


def draw_chat_reminders(rng: random.Random, seconds: float, replicas: int,
                        http: list[str], owner: dict[str, str]) -> list[Op]:
    """A message asking for a reminder in a minute every 25-60 s, in an HTTP thread, up
    to a minute before the end (so that most fire within the pass)."""
    ops: list[Op] = []
    at = rng.uniform(3, 20)
    while at < max(seconds - 60, 10):
        thread = rng.choice(http)
        ops.append(Op(at=round(at, 3), tag=f"m{REMIND_TAG + len(ops):05d}", thread=thread,
                      person=owner[thread], route="http", replica=rng.randrange(replicas),
                      steps=[[remind_step(f"{CHAT_REMINDER}{len(ops)}")]]))
        at += rng.uniform(25, 60)
    return ops
