"""Who may talk to the agent on a chat channel, shared by Slack and Discord: fail closed."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

__all__ = ["RIGHTS", "Allowlist", "Right"]

Right = Literal["talk", "approve", "operate"]
"""talk: start and continue runs; approve: decide calls; operate: stop, resume, schedules."""
RIGHTS: tuple[Right, ...] = ("talk", "approve", "operate")


@dataclass(frozen=True, slots=True)
class Allowlist:
    """``open``: everyone; otherwise only the listed users, or anyone in a listed place
    (a channel, or a Discord guild). Nothing listed and not open: nobody."""

    open: bool = False
    users: frozenset[str] = frozenset()
    places: frozenset[str] = frozenset()

    @classmethod
    def of(cls, *, open: bool, users: Iterable[str] = (), places: Iterable[str] = ()
           ) -> Allowlist:
        return cls(open=open, users=frozenset(users), places=frozenset(places))

    @property
    def nobody(self) -> bool:
        """True when no one at all is served (the banner says so)."""
        return not self.open and not self.users and not self.places

    def allows(self, user: str, *places: str) -> bool:
        return self.open or user in self.users or any(p in self.places for p in places)

    def describe(self) -> str:
        if self.open:
            return "open to everyone"
        if self.nobody:
            return "serving nobody: set open = true, allow_users or allow_channels"
        parts = []
        if self.users:
            parts.append(f"{len(self.users)} user(s)")
        if self.places:
            parts.append(f"{len(self.places)} place(s)")
        return "allowed: " + " and ".join(parts)
