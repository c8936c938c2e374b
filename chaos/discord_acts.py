"""What the soak's people do in Discord besides writing (chaos/discord_plan.py draws it):
click Approve / Deny on maiden's approval prompt, stop a run (``stop`` written to the bot
in its channel, or ``/maiden stop``), vote 👍 / 👎 under answers, and type ``/maiden``
commands — each an interaction (or a message) dispatched on the fake's gateway as Discord
does, and what came of it, for the checks (``discord_checks``).

Discord sends an interaction to one session (the fake's current one); maiden acknowledges
it through the interaction's callback within 3 s (or Discord refuses it, and maiden must
then do nothing), acts, then shows the outcome by editing the original response or with a
follow-up. What an interaction came to is read from the fake's records: its callback, and
what the person was shown for it (``FakeDiscord.shown``; the messages made for it,
``interaction_metadata``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from typing import Any

from channels.clicks import UNSENT
from channels.feedback import UNRECORDED
from tests.fakes.discord import FakeDiscord
from tests.fakes.discord import payloads as p
from tests.fakes.discord.gateway import Link, Session
from tests.fakes.discord.payloads import JSON

from .discord import person_id, place_id, place_of
from .discord_plan import DiscordActs, DiscordCommand, DiscordStop
from .discord_resume import replayed_late
from .sent import Sent
from .slack_acts import Reads, stoppable
from .slack_plan import Vote
from .system import History

__all__ = ["ClickSeen", "DiscordActor", "DiscordCommandSeen", "DiscordStopSeen",
           "DiscordVoteSeen", "answered_as", "made_for"]

NOT_SENT = "(not sent: no live gateway connection)"
NEVER_REPLAYED = "(not sent: held for a RESUME that never came)"
LOST = "(its connection closed unanswered)"
RESUME_WAIT_S = 20.0  # how long a RESUME held (a second or two) may take to come
ANSWER_WAIT_S = 6.0  # Discord's 3 s to answer, and the deferred answer's edit after it
STOP_HOLD_S = 10.0  # a run stopped while it waits: how long before the janitor may deny it


@dataclass
class ClickSeen:
    """One click on a prompt's or an answer's button (or a ``/maiden`` command): the
    interaction, and how it was answered, as the callback type that shows the same at once
    (7: the clicked message updated, 4: a line to the person; a deferral, 5 or 6, followed
    by its edit or follow-up counts as what that showed, and stays 5 or 6 while nothing
    was shown; None: not acknowledged)."""

    tag: str
    run_id: str
    custom_id: str
    interaction: str
    at: float
    answered: int | None = None
    said: str = ""  # what the person was shown (the update's or the line's content)
    channel: str = ""
    answered_at: float | None = None  # when its answer was seen
    held: bool = False  # dispatched while a RESUME was held (chaos/discord_resume.py)
    replayed_in: float | None = None  # held: seconds from its dispatch to its replay

    @property
    def outcome(self) -> str:
        """How it was answered, or why it was not (for the summary and the history)."""
        if self.answered is not None:
            return str(self.answered)
        if self.said.startswith("(not sent"):
            return "not sent"
        late = replayed_late(self.held, self.replayed_in)
        return "lost" if self.said == LOST else "replayed late" if late else "none"


@dataclass
class DiscordStopSeen:
    stop: DiscordStop
    run_id: str | None = None
    state: str = ""
    first: bool = False
    channel: str = ""
    sent: bool = False
    live: bool = False  # a text stop: dispatched on a live connection
    click: ClickSeen | None = None  # a /maiden stop: its interaction
    at: float | None = None
    wall: float | None = None
    skipped: str | None = None


@dataclass
class DiscordVoteSeen:
    vote: Vote
    run_id: str | None = None
    clicks: list[ClickSeen] = field(default_factory=list)
    skipped: str | None = None


@dataclass
class DiscordCommandSeen:
    command: DiscordCommand
    channel: str
    click: ClickSeen | None = None
    done: float = 0.0  # when anything it said was seen
    answers: list[str] = field(default_factory=list)  # the messages made for it


def made_for(fake: FakeDiscord, channel: str, interaction: str) -> list[JSON]:
    """The messages (public or ephemeral) Discord made for ``interaction`` in ``channel``."""
    return [m for m in [*fake.messages(channel), *fake.ephemerals(channel)]
            if str((m.get("interaction_metadata") or {}).get("id")) == interaction]


def answered_as(callback: int, shown: list[JSON], clicked: JSON | None) -> int:
    """The callback type that shows at once what ``callback`` and what came after it
    showed: a deferral (5, 6) whose edit changed the clicked message is a 7, one answered
    with a line to the person (its "thinking" edited, or a follow-up) a 4; one that has
    shown nothing yet stays as it is."""
    if callback not in (5, 6) or not shown:
        return callback
    return 7 if clicked is not None and shown[-1]["id"] == clicked["id"] else 4


def _subcommand(text: str) -> list[JSON]:
    name, *rest = text.split()
    values = {"period": rest[0]} if name == "usage" and rest else \
        {"name": rest[0]} if name.startswith("schedule-") and rest else {}
    return [{"name": name, "type": 1, "options": [
        {"name": k, "type": 3, "value": v} for k, v in values.items()]}]


class DiscordActor:
    """Clicks, stops, votes and commands, as people do them in Discord."""

    def __init__(self, fake: FakeDiscord, acts: DiscordActs, history: History) -> None:
        self.fake = fake
        self.acts = acts
        self.history = history
        self._clicks = set(acts.clicks)
        self._stops = {s.tag: s for s in acts.stops}
        self._votes = {v.tag: v for v in acts.votes}
        self.clicks: list[ClickSeen] = []  # on approval prompts
        self._prompts: dict[str, JSON] = {}  # run -> its prompt as first seen
        self.stops: list[DiscordStopSeen] = []
        self.votes: list[DiscordVoteSeen] = []
        self.commands: list[DiscordCommandSeen] = []

    def clicked(self, tag: str) -> bool:
        """Whether ``tag``'s approval is decided with the prompt's buttons."""
        return tag in self._clicks

    def waits(self, tag: str) -> bool:
        """Whether ``tag``'s run is stopped while it waits (nobody decides it)."""
        return tag in self._stops and self._stops[tag].waiting

    async def act(self, sent: Sent, reads: Reads) -> None:
        """``sent``'s stop or vote, if the plan has one."""
        if sent.op.tag in self._stops:
            await self._stop(sent, self._stops[sent.op.tag], reads)
        elif sent.op.tag in self._votes:
            await self._vote(sent, self._votes[sent.op.tag], reads)

    # -- the interactions ------------------------------------------------------------------

    async def _interact(self, tag: str, run_id: str, data: JSON) -> ClickSeen:
        """Dispatch an INTERACTION_CREATE (Discord's one session) and wait for its answer."""
        seen = ClickSeen(tag, run_id, str((data.get("data") or {}).get("custom_id") or
                                          (data.get("data") or {}).get("name")),
                         str(data["id"]), self.history.now(), channel=str(data["channel_id"]))
        session = self.fake.gateway.current
        link = session.link if session is not None else None
        if session is not None and session is self.fake.gateway.held():
            link = await self._held(session, data, seen)
            if link is None:
                return seen
        elif session is None or link is None or link.ws.closed:
            # Discord shows "This interaction failed": nobody was connected to send it to.
            seen.said = NOT_SENT
            return seen
        else:
            try:
                await self.fake.gateway.emit(session, "INTERACTION_CREATE", data)
            except (ConnectionError, RuntimeError) as exc:
                seen.said = f"{NOT_SENT} ({type(exc).__name__})"
                return seen
        with contextlib.suppress(TimeoutError):
            await self.fake.until(lambda: self._response(seen.interaction) is not None,
                                  what="an interaction's answer", timeout=ANSWER_WAIT_S)
        response = self._response(seen.interaction)
        if response is None:
            if link.ws.closed or session.link is not link:
                seen.said = LOST  # the connection it went to closed before it was answered
            return seen
        with contextlib.suppress(TimeoutError):  # a deferral's edit or follow-up
            await self.fake.until(lambda: bool(self.fake.shown(data)),
                                  what="what the interaction showed", timeout=ANSWER_WAIT_S)
        shown = self.fake.shown(data)
        seen.answered = answered_as(response.type, shown, data.get("message"))
        seen.answered_at = self.history.now()
        seen.said = str(shown[-1].get("content") or "") if shown else ""
        return seen

    async def _held(self, session: Session, data: JSON, seen: ClickSeen) -> Link | None:
        """Dispatch to ``session`` while its RESUME is held (Discord keeps it for the
        session) and wait for the replay; the connection it was replayed on, or None."""
        gateway = self.fake.gateway
        seen.held, made = True, time.monotonic()
        resumes = len(gateway.resumed_at)
        await gateway.emit(session, "INTERACTION_CREATE", data)
        with contextlib.suppress(TimeoutError):
            await self.fake.until(lambda: len(gateway.resumed_at) > resumes
                                  or gateway.current is not session,
                                  what="the RESUME", timeout=RESUME_WAIT_S)
        if len(gateway.resumed_at) <= resumes or session.link is None:
            seen.said = NEVER_REPLAYED
            return None
        seen.replayed_in = gateway.resumed_at[resumes] - made
        return session.link

    def _response(self, interaction: str) -> Any:
        return next((r for r in self.fake.interaction_responses()
                     if r.interaction_id == interaction), None)

    def _button(self, message: JSON, custom_id: str, person: str) -> JSON:
        """The INTERACTION_CREATE of a click on ``message`` (as ``FakeDiscord.click``
        makes it), not dispatched yet."""
        fake = self.fake
        channel_id = message["channel_id"]
        guild_id = fake.world.guild_of(channel_id)
        shown = {k: v for k, v in message.items() if k not in ("guild_id", "member")}
        channel = dict(fake.rest.channel(channel_id))
        if guild_id is not None:
            channel["permissions"] = p.MEMBER_PERMISSIONS
        return p.component_interaction(custom_id, person_id(person), channel_id, shown,
                                       guild_id, application_id=fake.world.app_id,
                                       username=person, channel=channel)

    def _command(self, text: str, person: str, channel: str) -> JSON:
        fake = self.fake
        guild_id = fake.world.guild_of(channel)
        return p.command_interaction("maiden", _subcommand(text), person_id(person), channel,
                                     guild_id, application_id=fake.world.app_id)

    async def _find(self, channel: str, custom_id: str, timeout_s: float) -> JSON | None:
        """The bot's message in ``channel`` showing a button ``custom_id`` starts with."""
        def found() -> JSON | None:
            for m in reversed(self.fake.messages(channel)):
                for row in m.get("components") or ():
                    for b in row.get("components") or ():
                        if str(b.get("custom_id") or "").startswith(custom_id):
                            return m
            return None
        with contextlib.suppress(TimeoutError):
            await self.fake.until(lambda: found() is not None, what=custom_id,
                                  timeout=timeout_s)
        return found()

    # -- approvals -------------------------------------------------------------------------

    async def click(self, sent: Sent, run_id: str, call: str, approve: bool) -> int:
        """Approve or Deny on the run's prompt: 200 when the prompt was updated (decided),
        409 when the person was told why not, 0 when nothing answered (or no prompt)."""
        channel = place_id(place_of(sent.op.thread))
        # A second click is on the prompt as the person saw it first (a double click, before
        # Discord shows the update): maiden must refuse it, not decide again.
        prompt = self._prompts.get(run_id) or await self._find(
            channel, f"maiden:{'a' if approve else 'd'}:{run_id}:", 10.0)
        if prompt is None:
            return 0
        self._prompts[run_id] = prompt
        verb = f"maiden:{'a' if approve else 'd'}:"
        custom_id = next(str(b["custom_id"]) for row in prompt["components"]
                         for b in row["components"] if str(b["custom_id"]).startswith(verb))
        seen = await self._interact(sent.op.tag, run_id,
                                    self._button(prompt, custom_id, sent.op.person))
        self.clicks.append(seen)
        return {7: 200, 4: 409}.get(seen.answered or 0, 0)

    # -- stops -----------------------------------------------------------------------------

    async def _stop(self, sent: Sent, stop: DiscordStop, reads: Reads) -> None:
        seen = DiscordStopSeen(stop)
        self.stops.append(seen)
        try:
            seen.skipped = await self._stopping(sent, seen, reads)
        except TimeoutError:
            seen.skipped = "its run was not found in time"
        self.history.note("dstop", f"{stop.tag} run {seen.run_id} ({stop.how}, "
                          f"{seen.state or seen.skipped})")
        if stop.waiting and seen.sent:
            await asyncio.sleep(STOP_HOLD_S)  # its stop ends it, not the janitor

    async def _stopping(self, sent: Sent, seen: DiscordStopSeen, reads: Reads) -> str | None:
        stop = seen.stop
        why = await stoppable(sent, seen, reads)
        if why is not None:
            return why
        run_id = seen.run_id
        assert run_id is not None  # found by stoppable
        seen.channel = channel = place_id(place_of(sent.op.thread))
        seen.at, seen.wall, seen.sent = self.history.now(), time.time(), True
        if stop.how == "command":
            seen.click = await self._interact(stop.tag, run_id,
                                              self._command("stop", stop.person, channel))
            return None
        bot = self.fake.world.bot_id
        d = self.fake.post_as_user(channel, person_id(stop.person), f"<@{bot}> stop",
                                   mentions=[bot])
        sessions = [s for s in self.fake.gateway.sessions.values()
                    if s.link is not None and not s.link.ws.closed]
        held = self.fake.gateway.held()
        seen.live = bool(sessions) or held is not None  # held: replayed on its RESUME
        sessions = sessions or ([held] if held is not None else [])
        for session in sessions:
            with contextlib.suppress(ConnectionError, RuntimeError):
                await self.fake.gateway.emit(session, "MESSAGE_CREATE", d)
        return None

    # -- votes -----------------------------------------------------------------------------

    async def _vote(self, sent: Sent, vote: Vote, reads: Reads) -> None:
        seen = DiscordVoteSeen(vote)
        self.votes.append(seen)
        message = None
        with contextlib.suppress(TimeoutError):
            seen.run_id = run_id = await reads.find(sent)
            if run_id is not None and await _completed(reads, run_id):
                message = await self._find(place_id(place_of(sent.op.thread)),
                                           f"maiden:f:up:{run_id}", 60.0)
        if message is None or seen.run_id is None:
            seen.skipped = "no answer with buttons to vote on"
            return
        await asyncio.sleep(vote.after_s)
        ups = [vote.up] + {"": [], "same": [vote.up], "other": [not vote.up]}[vote.again]
        for up in ups:
            # Clicked again when nothing answered, or when told to: "still being recorded;
            # try again" (its answer's message id not in the store yet) or "could not be
            # recorded just now; please click again" (the store out of reach), as in Slack.
            for _ in range(3):
                value = "up" if up else "down"
                click = await self._interact(vote.tag, seen.run_id, self._button(
                    message, f"maiden:f:{value}:{seen.run_id}", vote.person))
                seen.clicks.append(click)
                if click.answered is not None and click.said not in (UNSENT, UNRECORDED):
                    break
                await asyncio.sleep(1.5)
        self.history.note("dvote", f"{vote.tag} run {seen.run_id}: " + ", ".join(
            f"{c.custom_id.split(':')[2]} {c.outcome}" for c in seen.clicks))

    # -- /maiden ---------------------------------------------------------------------------

    async def command(self, command: DiscordCommand) -> None:
        channel = place_id(command.place)
        seen = DiscordCommandSeen(command, channel)
        self.commands.append(seen)
        seen.click = await self._interact("", "", self._command(command.text, command.person,
                                                                channel))
        await asyncio.sleep(ANSWER_WAIT_S)  # a deferred answer's edit, or anything more
        seen.done = self.history.now()
        seen.answers = [str(m.get("content") or "")
                        for m in made_for(self.fake, channel, seen.click.interaction)]
        self.history.note("dcommand", f"/maiden {command.text} by {command.person} in "
                          f"{command.place}: {seen.click.outcome}")


async def _completed(reads: Reads, run_id: str) -> bool:
    async with asyncio.timeout(180):
        while True:
            run = await reads.run_of(run_id)
            if run is not None and run["terminal"]:
                return bool(run["state"] == "completed")
            await asyncio.sleep(0.5)
