"""The Discord part of a plan beyond the messages: which deploys are decided with the
approval prompt's buttons in Discord (the rest through the HTTP API), the runs people stop
(``stop`` written in the channel, or ``/maiden stop``), their votes 👍 / 👎 under answers,
and the ``/maiden`` commands they type (``status``, ``usage``, ``help``).

Drawn from a stream of its own (``{seed}:{store}:discord-acts``), after the rest of the
plan, so that a seed's messages, decisions and faults stay what they were; a plan file
written before it replays with none (every Discord decision through the HTTP API).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Literal

from .ops import Drawing
from .slack_plan import Vote

__all__ = ["DiscordActs", "DiscordCommand", "DiscordStop", "draw_discord_acts", "draw_resumes"]

# What people type after /maiden in Discord, per mille (a stop is a ``DiscordStop``).
COMMANDS: list[tuple[int, str]] = [(500, "status"), (300, "usage 24h"), (200, "help")]
_AGAIN: tuple[Literal["", "same", "other"], ...] = ("",) * 5 + ("same", "other", "same")


@dataclass
class DiscordStop:
    """``person`` stops the run of the Discord message ``tag``, ``after_s`` once it is under
    way (``waiting``: once it waits for its approval, which then nobody decides), by
    writing ``stop`` to the bot in its channel (``text``) or with ``/maiden stop``
    (``command``)."""

    tag: str
    person: str
    how: Literal["text", "command"]
    after_s: float
    waiting: bool


@dataclass
class DiscordCommand:
    """``person`` types ``/maiden {text}`` in the plan's Discord place ``place`` at ``at``."""

    at: float
    text: str
    place: str
    person: str


@dataclass
class DiscordActs:
    clicks: list[str] = field(default_factory=list)  # tags decided with the prompt's buttons
    stops: list[DiscordStop] = field(default_factory=list)
    votes: list[Vote] = field(default_factory=list)  # (``replica`` unused: Discord picks)
    commands: list[DiscordCommand] = field(default_factory=list)

    @classmethod
    def load(cls, raw: dict[str, Any]) -> DiscordActs:
        return cls(list(raw.get("clicks", [])),
                   [DiscordStop(**s) for s in raw.get("stops", [])],
                   [Vote(**v) for v in raw.get("votes", [])],
                   [DiscordCommand(**c) for c in raw.get("commands", [])])


def draw_discord_acts(seed: int, plan: Drawing, places: list[str]) -> None:
    """The Discord clicks, stops, votes and commands of ``plan`` (none without Discord)."""
    ops = [op for op in plan.ops if op.route == "discord"]
    if not ops:
        return
    acts = plan.discord_acts
    rng = random.Random(f"{seed}:{plan.store}:discord-acts")
    for op in ops:
        if op.cancel_after_s is not None:
            continue
        person = op.person if rng.random() < 0.7 else rng.choice(plan.people)
        how: Literal["text", "command"] = "text" if rng.random() < 0.6 else "command"
        if op.decide is not None and rng.random() < 0.2:
            acts.stops.append(DiscordStop(op.tag, person, how, round(rng.uniform(0.1, 2.0), 3),
                                          waiting=True))
        elif op.decide is not None:
            if rng.random() < 0.8:  # the prompt's buttons, twice or late as the plan says
                acts.clicks.append(op.tag)
        elif rng.random() < (0.15 if op.steps else 0.04):
            acts.stops.append(DiscordStop(op.tag, person, how, round(rng.uniform(0.0, 0.6), 3),
                                          waiting=False))
        elif rng.random() < 0.3:
            acts.votes.append(Vote(op.tag, person, up=rng.random() < 0.7,
                                   after_s=round(rng.uniform(0.5, 4.0), 3),
                                   again=rng.choice(_AGAIN), replica=0))
    at = rng.uniform(2, 12)
    while at < plan.seconds:
        text = rng.choices([t for _, t in COMMANDS], weights=[w for w, _ in COMMANDS])[0]
        acts.commands.append(DiscordCommand(round(at, 3), text, rng.choice(places),
                                            rng.choice(plan.people)))
        at += rng.expovariate(1 / 10.0)


RESUME_GAP_S = (0.5, 2.0)
"""How long a RESUME is held (chaos/discord_resume.py): short enough that what is replayed
is still within an interaction's 3 s."""


def draw_resumes(seed: int, plan: Drawing, places: list[str]
                 ) -> list[tuple[float, float, str]]:
    """When the gateway holder's connection is sent away to RESUME, about every 5-12 s
    (often enough that a 75 s PostgreSQL pass, whose gateway is down much of the time,
    still RESUMEs a few times):
    ``(at, gap_s, how)``, ``how`` ``reconnect`` (op 7) or ``close`` (closed 4000, which
    Discord documents as resumable). A person types ``/maiden status`` within each gap, so
    every RESUME replays an interaction (added to the plan's commands). From a stream of its
    own (``{seed}:{store}:discord-resumes``), so the rest of a seed's plan is unchanged."""
    if not any(op.route == "discord" for op in plan.ops):
        return []
    rng = random.Random(f"{seed}:{plan.store}:discord-resumes")
    out: list[tuple[float, float, str]] = []
    at = rng.uniform(4, 10)
    while at < plan.seconds:
        gap = round(rng.uniform(*RESUME_GAP_S), 3)
        out.append((round(at, 3), gap, "reconnect" if rng.random() < 0.6 else "close"))
        plan.discord_acts.commands.append(DiscordCommand(
            round(at + gap * rng.uniform(0.2, 0.6), 3), "status", rng.choice(places),
            rng.choice(plan.people)))
        at += gap + rng.uniform(5, 12)
    plan.discord_acts.commands.sort(key=lambda c: c.at)
    return out
