"""The plan's webhook deliveries (``hooks.py`` sends and checks them), drawn from a stream
of their own."""

from __future__ import annotations

import random
from dataclasses import dataclass

__all__ = ["HOOK", "HookSend", "draw_hooks"]

HOOK = "ci"
"""The replicas' one ``[[hooks]]`` entry: ``POST /v1/hooks/ci``."""


@dataclass
class HookSend:
    """One delivery at ``at`` s to ``replica``; ``again``: delivered a second time after
    ``again_s``; ``unsigned``: with a signature made with another secret."""

    at: float
    tag: str  # w0000: its delivery id is chaos-{seed}-{tag}
    replica: int
    again: bool = False
    again_s: float = 0.0
    unsigned: bool = False


def draw_hooks(rng: random.Random, seconds: float, replicas: int) -> list[HookSend]:
    """A delivery every 10-30 s, a quarter of them delivered again, one in ten unsigned."""
    sends: list[HookSend] = []
    at = rng.uniform(5, 20)
    while at < seconds:
        again = rng.random() < 0.25
        sends.append(HookSend(round(at, 3), f"w{len(sends):04d}", rng.randrange(replicas),
                              again=again, again_s=round(rng.uniform(0, 3), 3) if again else 0.0,
                              unsigned=rng.random() < 0.1))
        at += rng.uniform(10, 30)
    return sends
