"""What the soak's people do in Slack besides writing (chaos/slack_plan.py draws it): stop a
run with Slack's stop button or ``stop`` in its thread, type ``/maiden`` commands, and
vote 👍 / 👎 under answers — each sent the way its replica takes Slack (``slack_wire``),
and what each came to, for the checks (``slack_checks``).

A person does one thing at a time in Slack (``Person.lock``): what Slack shows them alone
(ephemeral lines) after a click or a command is that act's. An act that was not
acknowledged in time may still be answered later, so the next ones of that person for a
while are not held to what they were told (``sure``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Protocol

from channels.clicks import UNSENT
from channels.feedback import UNRECORDED
from tests.fakes.slack import BOT_USER, TEAM, FakeSlack, feedback_click, slash_command
from tests.fakes.slack.store import JSON

from .plan import Command, Stop, Vote
from .sent import Sent
from .slack_wire import NO_REPLICA, SLACK_DOWN, SlackWire
from .system import History

__all__ = ["CommandSeen", "Reads", "SlackActs", "StopSeen", "VoteSeen", "channel_of",
           "told_again", "user_of"]

UNSURE_S = 30.0  # after an act not acknowledged, how long its late answer may still come
LATER_S = 15.0  # how long a command acknowledged "On it" waits for its answer
RETYPE_S = 5.0  # a command Slack could not send anywhere is typed again this much later
UNSENT_ERRORS = (NO_REPLICA, SLACK_DOWN)  # nothing reached maiden: no answer may come late


def told_again(told: list[str]) -> bool:
    """Whether a vote's answer asks the person to click again: its message is still being
    recorded (``UNSENT``), or the store could not take the vote (``UNRECORDED``)."""
    return any(line in (UNSENT, UNRECORDED) or "try again" in line for line in told)


def user_of(person: str) -> str:
    return f"U0CHAOS{person.upper()}"


def channel_of(thread: str) -> str:
    """A Slack thread of the plan is ``slack/{seed}/{channel}/sNN``."""
    return thread.split("/")[2]


class Reads(Protocol):
    """What a person can find out about a run (through the HTTP API, as the workload does)."""

    async def find(self, sent: Sent, timeout_s: float = ...) -> str | None: ...

    async def awaiting(self, sent: Sent, run_id: str) -> str | None: ...

    async def run_of(self, run_id: str) -> dict[str, Any] | None: ...

    async def first_active(self, thread: str) -> str | None: ...


@dataclass
class StopSeen:
    stop: Stop
    run_id: str | None = None
    how: str = ""  # as sent: "button", "text", or "text (no stop button shown)"
    state: str = ""  # the run's state just before
    first: bool = False  # it was its thread's first active run (the one a stop ends)
    acked: bool = False
    at: float | None = None  # soak time of the ack
    wall: float | None = None  # time.time() of the ack
    skipped: str | None = None  # why nothing was sent


@dataclass
class Click:
    up: bool
    acked: bool
    told: list[str]  # what Slack showed the person alone meanwhile
    sure: bool  # ``told`` is this click's
    at: float


@dataclass
class VoteSeen:
    vote: Vote
    run_id: str | None = None
    clicks: list[Click] = field(default_factory=list)
    skipped: str | None = None


@dataclass
class CommandSeen:
    command: Command
    at: float = 0.0
    acked: bool = False
    shown: str | None = None  # the acknowledgement's text
    error: str | None = None  # an answer Slack shows as an error
    later: list[str] = field(default_factory=list)  # ephemeral lines after it
    announced: list[str] = field(default_factory=list)  # its lines in the channel
    sure: bool = False
    done: float = 0.0  # when everything it said was seen
    request: str = ""  # how maiden names the asking (its trigger: the same when retried)

    @property
    def answer(self) -> str | None:
        """What it answered: the acknowledgement, or the line after "On it"."""
        if not self.acked or self.error is not None:
            return None
        if self.shown == ON_IT:
            return self.later[0] if self.later else None
        return self.shown


class SlackActs:
    """Stops, votes and commands, as people do them."""

    def __init__(self, fake: FakeSlack, wire: SlackWire, history: History,
                 roots: dict[str, str]) -> None:
        self.fake = fake
        self.wire = wire
        self.history = history
        self.roots = roots  # plan thread -> its first message's ts (chaos/slack.py)
        self.locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        self.unsure_until: dict[str, float] = {}
        self.stops: list[StopSeen] = []
        self.votes: list[VoteSeen] = []
        self.commands: list[CommandSeen] = []

    # -- stops -----------------------------------------------------------------------------

    async def stop(self, sent: Sent, stop: Stop, reads: Reads) -> None:
        seen = StopSeen(stop)
        self.stops.append(seen)
        try:
            seen.skipped = await self._stop(sent, seen, reads)
        except TimeoutError:
            seen.skipped = "its run was not found in time"
        if seen.acked:
            seen.at, seen.wall = self.history.now(), time.time()
        self.history.note("stop", f"{stop.tag} run {seen.run_id} ({seen.how or '-'}, "
                          f"{seen.state or seen.skipped}): {'acked' if seen.acked else 'no'}")

    async def _stop(self, sent: Sent, seen: StopSeen, reads: Reads) -> str | None:
        """Stop the run once it is under way (or waits); why not, if it was not."""
        why = await stoppable(sent, seen, reads)
        if why is None:
            seen.acked = await self._send_stop(sent, seen)
        return why

    async def _send_stop(self, sent: Sent, seen: StopSeen) -> bool:
        stop = seen.stop
        channel, root = channel_of(sent.op.thread), self.roots[sent.op.thread]
        user = user_of(stop.person)
        event = self.fake.stop_button(channel, root, user) if stop.how == "button" else None
        seen.how = stop.how if event is not None or stop.how == "text" \
            else "text (no stop button shown)"
        if event is None:
            event = self.fake.user_event(channel, user, f"<@{BOT_USER}> stop", thread_ts=root,
                                         mention=True)
        return await self.wire.event(event, stop.replica, sent.attempts)

    # -- votes -----------------------------------------------------------------------------

    async def vote(self, sent: Sent, vote: Vote, reads: Reads) -> None:
        seen = VoteSeen(vote)
        self.votes.append(seen)
        try:
            seen.run_id = run_id = await reads.find(sent)
            message = await self._answer(sent, run_id, reads) if run_id else None
        except TimeoutError:
            message = None
        if message is None:
            seen.skipped = "no answer with buttons to vote on"
            return
        await asyncio.sleep(vote.after_s)
        ups = [vote.up] + {"": [], "same": [vote.up], "other": [not vote.up]}[vote.again]
        for up in ups:
            # Clicked again when Slack showed an error (not acknowledged), or when told
            # to (``told_again``).
            for _ in range(3):
                click = await self._click(vote.person, channel_of(sent.op.thread), message, up,
                                          vote.replica)
                seen.clicks.append(click)
                if click.acked and not told_again(click.told):
                    break
                await asyncio.sleep(1.5)
        self.history.note("vote", f"{vote.tag} run {run_id}: " + ", ".join(
            f"{'up' if c.up else 'down'} {'acked' if c.acked else 'no'}" for c in seen.clicks))

    async def _answer(self, sent: Sent, run_id: str, reads: Reads) -> JSON | None:
        """The run's answer in Slack once it shows its feedback buttons (None if the run
        did not complete, or no such message showed within a minute)."""
        async with asyncio.timeout(180):
            while True:
                run = await reads.run_of(run_id)
                if run is not None and run["terminal"]:
                    break
                await asyncio.sleep(0.5)
        if run["state"] != "completed":
            return None
        channel, root = channel_of(sent.op.thread), self.roots[sent.op.thread]
        block = f"maiden_feedback:{run_id}"
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(60):
                while True:
                    for m in self.fake.messages(channel):
                        if m.get("thread_ts") == root and m["ts"] != root and any(
                                b.get("block_id") == block for b in m.get("blocks") or ()):
                            return m
                    await asyncio.sleep(0.5)
        return None

    async def _click(self, person: str, channel: str, message: JSON, up: bool,
                     replica: int) -> Click:
        user = user_of(person)
        async with self.locks[person]:
            sure = self._sure(person)
            before = len(self._told(channel, user))
            answered = await self.wire.click(feedback_click(user, channel, message,
                                                            positive=up), replica)
            told = self._told(channel, user)[before:]
            if not answered.acked:
                self.unsure_until[person] = time.monotonic() + UNSURE_S
        return Click(up, answered.acked, told, sure and answered.acked, self.history.now())

    # -- /maiden ---------------------------------------------------------------------------

    async def command(self, command: Command) -> None:
        seen = CommandSeen(command, at=self.history.now())
        self.commands.append(seen)
        user, channel = user_of(command.person), command.channel
        payload = slash_command(TEAM, channel, user, command.text)
        seen.request = f"slack:{TEAM}:{payload['trigger_id']}"
        async with self.locks[command.person]:
            seen.sure = self._sure(command.person)
            told, said = len(self._told(channel, user)), len(self._said(channel))
            for _ in range(3):  # typed again while Slack could not send it anywhere
                answered = await self.wire.command(payload, command.replica)
                if answered.error not in UNSENT_ERRORS:
                    break
                await asyncio.sleep(RETYPE_S)
            seen.acked, seen.error = answered.acked, answered.error
            seen.shown = str((answered.shown or {}).get("text")) if answered.shown else None
            if seen.acked and seen.shown == ON_IT:
                with contextlib.suppress(TimeoutError):
                    await self.fake.until(lambda: len(self._told(channel, user)) > told,
                                          what="a command's answer", timeout=LATER_S)
            await asyncio.sleep(0.5)  # anything more it says comes now, or never
            seen.later = self._told(channel, user)[told:]
            seen.announced = [t for t in self._said(channel)[said:]
                              if t.startswith((f"⏹ <@{user}>", f"⏸ <@{user}>",
                                               f"▶ <@{user}>"))]
            seen.done = self.history.now()
            if not seen.acked:
                self.unsure_until[command.person] = time.monotonic() + UNSURE_S
                seen.sure = False
        self.history.note("command", f"/maiden {command.text} by {command.person} in "
                          f"{channel}: {seen.shown!r}{'' if seen.acked else ' (not acked)'}")

    # -- what Slack shows ------------------------------------------------------------------

    def _sure(self, person: str) -> bool:
        return time.monotonic() >= self.unsure_until.get(person, 0.0)

    def _told(self, channel: str, user: str) -> list[str]:
        """The ephemeral lines ``user`` was shown in ``channel``, oldest first."""
        return [str(m.get("text") or "") for m in self.fake.ephemerals(channel)
                if m.get("user") == user]

    def _said(self, channel: str) -> list[str]:
        """The bot's top-level messages in ``channel``, oldest first."""
        return [str(m.get("text") or "") for m in self.fake.messages(channel)
                if m.get("user") == BOT_USER and m.get("thread_ts") in (None, m["ts"])]


ON_IT = "⏳ On it…"


async def stoppable(sent: Sent, seen: Any, reads: Reads) -> str | None:
    """Wait until ``seen.stop``'s moment for the run of ``sent`` (under way, or waiting for
    its approval when the stop is for a waiting run), noting its run id, state and whether
    it is its thread's first unfinished run on ``seen``; why it is not to be stopped, or
    None (Slack's and Discord's stops alike)."""
    stop = seen.stop
    seen.run_id = run_id = await reads.find(sent)
    if run_id is None:
        return "its run was not found"
    if stop.waiting and await reads.awaiting(sent, run_id) is None:
        return "it ended before it waited"
    await asyncio.sleep(stop.after_s)
    run = await reads.run_of(run_id)
    if run is None or run["terminal"]:
        return "it ended first"
    seen.state = str(run["state"])
    seen.first = await reads.first_active(sent.thread) == run_id
    return None
