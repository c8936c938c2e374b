"""The Slack part of a plan beyond the messages: which replicas take Slack over HTTP (the
Events API) rather than Socket Mode, and what people do in Slack besides writing — stop a
run (Slack's stop button, or ``stop`` in the thread), type ``/maiden`` commands, and vote
on answers with the 👍 / 👎 under them.

Drawn from streams of their own (``{seed}:{store}:slack-http``, ``:slack-acts``), after
the rest of the plan, so that a seed's messages, decisions and faults stay what they were;
a plan file written before them replays with none (every replica in Socket Mode).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Literal

from .ops import Drawing

__all__ = ["COMMANDS", "Command", "Stop", "Vote", "draw_slack"]

# What people type after /maiden, per mille. ``schedules pause|resume|run`` are left out:
# the schedules' invariant (3) follows their changes through the HTTP API only.
COMMANDS: list[tuple[int, str]] = [(350, "status"), (200, "usage 24h"), (100, "help"),
                                   (200, "stop"), (150, "schedules")]
_AGAIN: tuple[Literal["", "same", "other"], ...] = ("",) * 6 + ("same", "other")


@dataclass
class Stop:
    """``person`` stops the run of the Slack message ``tag``, ``after_s`` once it is under
    way (``waiting``: once it waits for its approval, which its person then does not
    decide), with the stop button (``button``, if Slack shows one then: else ``stop`` in the
    thread) or by writing ``stop`` in the thread (``text``)."""

    tag: str
    person: str
    how: Literal["button", "text"]
    after_s: float
    waiting: bool
    replica: int


@dataclass
class Vote:
    """``person`` clicks 👍 (``up``) or 👎 under the answer to ``tag``, ``after_s`` once it
    shows; ``again``: a second click, on the same button or the other one."""

    tag: str
    person: str
    up: bool
    after_s: float
    again: Literal["", "same", "other"]
    replica: int


@dataclass
class Command:
    """``person`` types ``/maiden {text}`` in ``channel`` at ``at`` s."""

    at: float
    text: str
    channel: str
    person: str
    replica: int


def draw_slack(seed: int, plan: Drawing, channels: list[str]) -> None:
    """The Slack replicas over HTTP, the stops, votes and commands of ``plan``."""
    if not any(op.route == "slack" for op in plan.ops):
        return
    rng = random.Random(f"{seed}:{plan.store}:slack-http")
    n = plan.replicas
    # At least one replica each way on PostgreSQL; SQLite's one replica either way.
    plan.slack_http = sorted(rng.sample(range(n), rng.randint(1, n - 1))) if n > 1 else (
        [0] if rng.random() < 0.5 else [])
    rng = random.Random(f"{seed}:{plan.store}:slack-acts")
    for op in plan.ops:
        if op.route != "slack" or op.cancel_after_s is not None:
            continue
        person = op.person if rng.random() < 0.7 else rng.choice(plan.people)
        if op.decide is not None and rng.random() < 0.25:
            plan.stops.append(Stop(op.tag, person, "text", round(rng.uniform(0.1, 2.0), 3),
                                   waiting=True, replica=rng.randrange(n)))
        elif op.decide is None and rng.random() < (0.12 if op.steps else 0.03):
            # Soon after the message: a run with tools takes a second or so.
            how: Literal["button", "text"] = "button" if rng.random() < 0.6 else "text"
            plan.stops.append(Stop(op.tag, person, how, round(rng.uniform(0.0, 0.6), 3),
                                   waiting=False, replica=rng.randrange(n)))
        elif rng.random() < 0.25:
            plan.votes.append(Vote(op.tag, person, up=rng.random() < 0.7,
                                   after_s=round(rng.uniform(0.5, 4.0), 3),
                                   again=rng.choice(_AGAIN), replica=rng.randrange(n)))
    at = rng.uniform(2, 12)
    while at < plan.seconds:
        text = rng.choices([t for _, t in COMMANDS], weights=[w for w, _ in COMMANDS])[0]
        plan.commands.append(Command(round(at, 3), text, rng.choice(channels),
                                     rng.choice(plan.people), rng.randrange(n)))
        at += rng.expovariate(1 / 10.0)
