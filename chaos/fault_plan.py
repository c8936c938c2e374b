"""The plan's faults: kills and stops, PostgreSQL cuts and restarts, model outages, clock
skews, the chat platforms misbehaving and disks full (``faults.py`` injects them), each kind
on a clock, or a stream, of its own."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Literal

__all__ = ["SKEW_MAX_S", "Fault", "FaultKind", "draw_faults", "draw_platform_faults",
           "draw_server_disk", "draw_skews", "draw_store_outages"]

FaultKind = Literal["kill", "term", "pg_cut", "model_outage", "skew", "slack", "discord",
                    "pg_restart", "disk_full", "discord_resume"]

SKEW_MAX_S = 6.0  # the furthest a replica's clock is skewed, either way


@dataclass
class Fault:
    at: float
    kind: FaultKind
    replica: int = 0
    duration_s: float = 0.0  # down (kill, term), cut (pg_cut), failing (model_outage),
    # skewed (skew), misbehaving (slack, discord), stopped (pg_restart), full (disk_full),
    # RESUME held (discord_resume)
    status: int = 500  # model_outage, slack, discord: 500 (or 503), or 429 with Retry-After
    skew_s: float = 0.0  # skew: how far the replica's clock (maiden's) is off, + ahead
    mode: str = ""  # slack, discord: "down", "slow" or "status" (answering ``status``);
    # pg_restart: how the server is stopped, "fast" or "immediate"; discord_resume:
    # "reconnect" (op 7) or "close" (closed 4000)
    delay_s: float = 0.0  # slack, discord "slow": how late each request is answered


def draw_faults(rng: random.Random, seconds: float, replicas: int) -> list[Fault]:
    """Kills and stops (never the last replica up, by the planned times), PostgreSQL cuts
    (PostgreSQL plans only) and model outages, each kind on its own clock."""
    faults: list[Fault] = []
    down_until = [0.0] * replicas
    at = rng.uniform(2, 6)
    while at < seconds:
        victim = rng.randrange(replicas)
        up = [r for r in range(replicas) if r != victim and down_until[r] < at]
        if down_until[victim] < at and (up or replicas == 1):
            down = round(rng.uniform(0.2, 4.0), 3)
            kind: FaultKind = "kill" if rng.random() < 0.65 else "term"
            faults.append(Fault(round(at, 3), kind, victim, down))
            down_until[victim] = at + down + 6.0  # a restart takes a few seconds
        at += rng.expovariate(1 / (7.0 if replicas > 1 else 12.0))
    if replicas > 1:
        at = rng.uniform(5, 15)
        while at < seconds:
            faults.append(Fault(round(at, 3), "pg_cut", duration_s=round(rng.uniform(0.5, 4), 3)))
            at += rng.uniform(15, 30)
    at = rng.uniform(4, 12)
    while at < seconds:
        faults.append(Fault(round(at, 3), "model_outage", duration_s=round(rng.uniform(1, 4), 3),
                            status=rng.choice([500, 429])))
        at += rng.uniform(12, 25)
    return sorted(faults, key=lambda f: f.at)


def draw_server_disk(rng: random.Random, seconds: float) -> list[Fault]:
    """PostgreSQL's disk full for 2-8 s, every 40-90 s: a write refused (``53100``), or the
    server stopping itself when its WAL cannot be written, and starting again once freed."""
    faults: list[Fault] = []
    at = rng.uniform(15, 45)
    while at < seconds:
        faults.append(Fault(round(at, 3), "disk_full", duration_s=round(rng.uniform(2, 8), 3)))
        at += faults[-1].duration_s + rng.uniform(40, 90)
    return faults


def draw_store_outages(rng: random.Random, seconds: float, store: str) -> list[Fault]:
    """The store gone from under every replica now and then: PostgreSQL's server stopped
    (``fast`` or ``immediate``) and started again after up to 3 s (``pg_restart``), or
    SQLite's disk full for 2-10 s (``disk_full``); skipped where the machine cannot."""
    faults: list[Fault] = []
    at = rng.uniform(8, 25) if store == "postgres" else rng.uniform(6, 20)
    while at < seconds:
        if store == "postgres":
            faults.append(Fault(round(at, 3), "pg_restart", duration_s=round(
                rng.uniform(0, 3), 3), mode=rng.choice(["fast", "immediate"])))
            at += faults[-1].duration_s + rng.uniform(25, 50)
        else:
            faults.append(Fault(round(at, 3), "disk_full", duration_s=round(
                rng.uniform(2, 10), 3)))
            at += faults[-1].duration_s + rng.uniform(20, 45)
    return faults


def draw_skews(rng: random.Random, seconds: float, replicas: int) -> list[Fault]:
    """A replica's clock (maiden's, not the host's) a few seconds ahead or behind for a
    while, one replica at a time."""
    faults: list[Fault] = []
    at = rng.uniform(3, 15)
    while at < seconds:
        skew = round(rng.uniform(1.5, SKEW_MAX_S) * rng.choice([-1, 1]), 3)
        faults.append(Fault(round(at, 3), "skew", rng.randrange(replicas),
                            duration_s=round(rng.uniform(5, 30), 3), skew_s=skew))
        at += faults[-1].duration_s + rng.uniform(10, 40)
    return faults


# What each platform answers when it fails: Slack's Web API 429 ("ratelimited", with
# Retry-After) and 5xx; Discord's 429 and the 5xx discord.py retries (500, 502).
_STATUSES = {"slack": [429, 500, 503], "discord": [429, 500, 502]}


def draw_platform_faults(rng: random.Random, seconds: float, platform: FaultKind) -> list[Fault]:
    """Slack or Discord down, slow, or answering 5xx/429, for a few seconds now and then."""
    faults: list[Fault] = []
    at = rng.uniform(4, 20)
    while at < seconds:
        mode = rng.choice(["down", "slow", "status", "status"])
        faults.append(Fault(round(at, 3), platform, duration_s=round(rng.uniform(2, 8), 3),
                            status=rng.choice(_STATUSES[platform]), mode=mode,
                            delay_s=round(rng.uniform(1, 3), 3) if mode == "slow" else 0.0))
        at += faults[-1].duration_s + rng.uniform(10, 35)
    return faults
