"""The soak's schedules changed: ``pulse`` paused and resumed through the HTTP API at the
plan's times, the ``/maiden`` pauses and resumes of the chats followed, every schedule
paused at the end (so no slot fires while the store is read), and the times no replica was
up watched.

Each change is kept as a ``Change``: the state it set and when it took effect, as far as
the soak can tell (between asking and hearing back; not known if no answer said so). The
check of invariant 3 (``schedules.py``) reads them to tell a slot that ran while its
schedule was paused.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import httpx

from .chat_toggles import done, toggled_to
from .client import Client
from .plan import Plan
from .system import History, Replica

__all__ = ["Change", "Toggles"]


@dataclass
class Change:
    """A schedule made, paused or resumed: somewhere in ``[start, end]`` (wall clock);
    ``end`` None: not known to have happened, or when."""

    state: str  # "active" or "paused"
    start: float
    end: float | None


@dataclass
class Toggles:
    """The schedules paused and resumed at the plan's times, the chat's pauses and resumes
    followed, every schedule paused at the end, and when no replica was up."""

    plan: Plan
    replicas: list[Replica]
    client: Client
    history: History
    toggled: Counter[str] = field(default_factory=Counter)
    chat_toggled: Counter[str] = field(default_factory=Counter)  # /maiden: done, or not known
    changes: dict[str, list[Change]] = field(default_factory=lambda: defaultdict(list))
    gaps: list[list[float]] = field(default_factory=list)  # wall: no replica up
    ended: float | None = None  # wall: when every schedule was paused at the end

    def wall(self, t: float) -> float:
        """The wall-clock time of ``t`` s into the soak."""
        return time.time() - self.history.now() + t

    def _pick(self, start: int) -> Replica | None:
        n = len(self.replicas)
        return next((r for i in range(n) if (r := self.replicas[(start + i) % n]).up), None)

    async def _post(self, name: str, pause: bool, start: int) -> int:
        """Pause or resume ``name`` through the HTTP API, at another replica on a transport
        error or a 5xx: the status (0: never answered)."""
        action = "pause" if pause else "resume"
        for attempt in range(40):
            replica = self._pick(start + attempt)
            if replica is None:
                await asyncio.sleep(0.5)
                continue
            try:
                response = await self.client.http.post(
                    f"{replica.url}/v1/schedules/{name}/{action}",
                    headers=Client._auth("ana"))
            except httpx.HTTPError:
                await asyncio.sleep(0.3)
                continue
            if response.status_code < 500:
                return response.status_code
            await asyncio.sleep(0.3)
        return 0

    async def run(self) -> None:
        """Each toggle of the plan at its time."""
        for toggle in self.plan.toggles:
            await asyncio.sleep(max(0.0, toggle.at - self.history.now()))
            start = time.time()
            status = await self._post(toggle.schedule, toggle.pause, toggle.replica)
            action = "pause" if toggle.pause else "resume"
            self.toggled[f"{action} {status}"] += 1
            self.history.note("schedule", f"{action} {toggle.schedule}: {status}")
            self.changes[toggle.schedule].append(Change(
                "paused" if toggle.pause else "active", start,
                time.time() if status == 204 else None))

    def follow(self, text: str, start: float, end: float, answer: str | None) -> None:
        """A ``/maiden`` command sent ``start`` s into the soak and answered ``answer`` by
        ``end`` s: if it paused or resumed a schedule (``chat_toggles``), in effect by then
        if its answer says so, else not known to be (a refusal, an error, no answer)."""
        asked = toggled_to(text)
        if asked is not None:
            name, state = asked
            verb = "pause" if state == "paused" else "resume"
            self.chat_toggled[f"{verb} {'done' if done(answer) else 'unknown'}"] += 1
            self.changes[name].append(Change(state, self.wall(start) - 1.0,
                                             self.wall(end) if done(answer) else None))

    async def watch(self) -> None:
        """When no replica was up (wall clock), sampled every 0.5 s."""
        while True:
            if not any(r.up for r in self.replicas):
                now = time.time()
                if self.gaps and self.gaps[-1][1] >= now - 1.0:
                    self.gaps[-1][1] = now
                else:
                    self.gaps.append([now, now])
            await asyncio.sleep(0.5)

    async def pause_all(self) -> None:
        """At the end: every schedule paused, so none fires while the store is read."""
        self.ended = time.time()
        names: list[str] = []
        for attempt in range(20):
            replica = self._pick(attempt)
            if replica is None:
                await asyncio.sleep(0.5)
                continue
            with contextlib.suppress(httpx.HTTPError, ValueError, KeyError):
                response = await self.client.http.get(f"{replica.url}/v1/schedules",
                                                      headers=Client._auth("ana"))
                names = [s["name"] for s in response.json()["schedules"]]
                break
            await asyncio.sleep(0.3)
        for name in names:
            await self._post(name, True, 0)
        for name in names:  # from then on, none may fire
            self.changes[name].append(Change("paused", self.ended, time.time()))
        self.history.note("schedule", f"every schedule paused ({len(names)})")
