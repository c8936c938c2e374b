"""Schedules in chat: one paused and resumed with ``/maiden`` in Slack and in Discord, among
the HTTP API's toggles of it, and schedules run now there: drawn here; invariant 3 follows
each from what it answered (``schedules.py`` the toggles, ``runnow.py`` the runs now)."""

from __future__ import annotations

import random
import re

from .discord_plan import DiscordCommand
from .slack_plan import Command

__all__ = ["CHAT_RUN", "CHAT_TOGGLED", "done", "draw_chat_runs", "draw_chat_toggles",
           "run_asked", "started"]

CHAT_TOGGLED = "pulse"
"""The schedule people pause and resume in chat (``misfire = "once"``)."""

CHAT_RUN = ("minute", "pulse")
"""The schedules people run now in chat."""

_STARTED = re.compile(r"Schedule `\S+` started: run `(\w+)`\.$")
_SAID = re.compile(r"Schedule `(\S+)` (paused|resumed|is already paused|is already running)"
                   r"\.$")


def draw_chat_toggles(rng: random.Random, routes: set[str], people: list[str],
                      seconds: float, replicas: int, channels: list[str], places: list[str]
                      ) -> tuple[list[Command], list[DiscordCommand]]:
    """``/maiden schedules pause|resume pulse`` in Slack, ``/maiden schedule-pause|
    schedule-resume pulse`` in Discord (where the plan has messages), about every 40 s,
    pausing and resuming in turn."""
    where = [p for p in ("slack", "discord") if p in routes]
    slack: list[Command] = []
    discord: list[DiscordCommand] = []
    at, pause = rng.uniform(5, 30), True
    while where and at < seconds:
        person, verb = rng.choice(people), "pause" if pause else "resume"
        if rng.choice(where) == "slack":
            slack.append(Command(round(at, 3), f"schedules {verb} {CHAT_TOGGLED}",
                                 rng.choice(channels), person, rng.randrange(replicas)))
        else:
            discord.append(DiscordCommand(round(at, 3), f"schedule-{verb} {CHAT_TOGGLED}",
                                          rng.choice(places), person))
        at += rng.expovariate(1 / 40.0)
        pause = not pause
    return slack, discord


def toggled_to(text: str) -> tuple[str, str] | None:
    """For a chat toggle ``text`` (``schedules pause pulse``, ``schedule-resume pulse``):
    its schedule, and the state it asked for; None for any other command."""
    words = text.replace("schedule-", "schedules ").split()
    if len(words) != 3 or words[0] != "schedules" or words[1] not in ("pause", "resume"):
        return None
    return words[2], "paused" if words[1] == "pause" else "active"


def done(answer: str | None) -> bool:
    """Whether ``answer`` says the toggle is in effect (done now, or already so)."""
    return answer is not None and _SAID.match(answer) is not None


def draw_chat_runs(rng: random.Random, routes: set[str], people: list[str], seconds: float,
                   replicas: int, channels: list[str], places: list[str]
                   ) -> tuple[list[Command], list[DiscordCommand]]:
    """``/maiden schedules run NAME`` in Slack, ``/maiden schedule-run NAME`` (or the
    listing, ``/maiden schedules``) in Discord (where the plan has messages), about every
    60 s."""
    where = [p for p in ("slack", "discord") if p in routes]
    slack: list[Command] = []
    discord: list[DiscordCommand] = []
    at = rng.uniform(10, 40)
    while where and at < seconds:
        person, name = rng.choice(people), rng.choice(CHAT_RUN)
        if rng.choice(where) == "slack":
            slack.append(Command(round(at, 3), f"schedules run {name}", rng.choice(channels),
                                 person, rng.randrange(replicas)))
        else:  # now and then the listing instead (Slack's is drawn with its commands)
            text = f"schedule-run {name}" if rng.random() < 0.7 else "schedules"
            discord.append(DiscordCommand(round(at, 3), text, rng.choice(places), person))
        at += rng.expovariate(1 / 60.0)
    return slack, discord


def run_asked(text: str) -> str | None:
    """The schedule a chat command ``text`` runs now, or None."""
    words = text.replace("schedule-", "schedules ").split()
    return words[2] if len(words) == 3 and words[:2] == ["schedules", "run"] else None


def started(answer: str | None) -> str | None:
    """The end of the run id a run now's ``answer`` names (``run `1a2b3c4d```), or None."""
    found = _STARTED.match(answer or "")
    return found.group(1) if found else None
