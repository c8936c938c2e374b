"""The Discord gateway RESUMEd under the holder (``discord_resume``, chaos/discord_plan.py
draws when): its live connection is sent RECONNECT (op 7) or closed 4000, both of which
Discord documents as resumable, and discord.py comes back with RESUME; the fake holds that
RESUME for the fault's ``duration_s``, so that what people do meanwhile (a message, a
click, ``/maiden``) is dispatched to the session with no connection holding it, and then
replayed in order when the RESUME is answered, as Discord does
(https://discord.com/developers/docs/events/gateway#resuming).

What is replayed is held to what a live dispatch is held to (chaos/discord.py,
chaos/discord_checks.py): a message must be taken and answered once, in its place and in
order; an interaction answered once. Only an interaction replayed too late for its 3 s
initial response (Discord then refuses the callback, 10062, and shows the person "This
interaction failed": receiving-and-responding#responding-to-an-interaction), or never
replayed (the holder died in the gap), is excused (``replayed_late``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time

from tests.fakes.discord import FakeDiscord

from .fault_plan import Fault
from .system import History

__all__ = ["DEADLINE_S", "REPLAY_LEFT_S", "GatewayResume", "replayed_late"]

DEADLINE_S = 3.0  # Discord's initial response to an interaction (the fake's default)
REPLAY_LEFT_S = 1.0
"""An interaction replayed with less of its 3 s left than this is excused: maiden's own
answer takes that long on a loaded 2-core machine (a live one is given the whole 3 s)."""
RESUMED_WAIT_S = 15.0  # how long the fault waits for the client's RESUME once released


def replayed_late(held: bool, replayed_in: float | None) -> bool:
    """Whether an interaction held for a RESUME could not be answered in time: never
    replayed, or replayed ``replayed_in`` s after it was made, too near its deadline."""
    return held and (replayed_in is None or replayed_in > DEADLINE_S - REPLAY_LEFT_S)


class GatewayResume:
    """The fault: the holder's connection away for a moment, its session RESUMEd."""

    def __init__(self, fake: FakeDiscord, history: History) -> None:
        self.fake = fake
        self.history = history
        self.resumed = 0  # RESUMEs answered after the fault's hold
        self.replayed = 0  # dispatches held for them

    def ready(self) -> bool:
        """A live connection holds the current session (else there is nothing to resume)."""
        return self.fake.gateway.live() is not None

    async def run(self, fault: Fault) -> None:
        gateway = self.fake.gateway
        before = len(gateway.resumes)
        gateway.hold_resumes()
        session = gateway.current
        try:
            try:
                if fault.mode == "close":
                    await gateway.drop(4000)
                else:
                    await gateway.reconnect(None)
            except RuntimeError:  # the connection went a moment ago (a kill, an outage)
                self.history.note("discord_resume", "no live connection any more")
                return
            seq = session.seq if session is not None else 0
            how = "op 7 RECONNECT" if fault.mode != "close" else "closed 4000"
            self.history.note("discord_resume", f"{how}, the RESUME held "
                              f"{fault.duration_s}s")
            await asyncio.sleep(fault.duration_s)
            held = (session.seq - seq) if session is not None else 0
        finally:
            gateway.release_resumes()
        if session is not None:
            await self._resumed(session.id, before, held)

    async def _resumed(self, session: str, before: int, held: int) -> None:
        """Note the session's RESUME (another session's, after a new IDENTIFY, is not it)."""
        started = time.monotonic()

        def resumed() -> bool:
            return any(r.get("session_id") == session
                       for r in self.fake.gateway.resumes[before:])
        with contextlib.suppress(TimeoutError):
            await self.fake.until(resumed, what="a RESUME", timeout=RESUMED_WAIT_S)
        if resumed():
            self.resumed += 1
            self.replayed += held
            self.history.note("discord_resumed", f"RESUMEd {time.monotonic() - started:.2f}s "
                              f"after the hold, {held} dispatch(es) held and replayed")
        else:
            self.history.note("discord_resumed", "no RESUME came (the holder went, or "
                              "identified anew)")
