"""An injected clock for the schedules' tests: it says what ``now`` is set to, and never
moves by itself (no test waits for a real minute)."""

from __future__ import annotations

from datetime import datetime

__all__ = ["Clock"]


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now
