"""What ``/maiden`` answers, whatever the platform (Slack's slash command, Discord's
application commands): the subcommands, who may use each, and their answers as text.
Everything goes through the runtime's public API and the app's schedules; a platform's
adapter only parses its payload, checks rights with its access rules, and replies."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from runtime import (
    ACTIVE_STATES,
    ApprovalDelivery,
    MaidenError,
    NotFound,
    Run,
    RunError,
    RunState,
    Runtime,
    ScheduleService,
)

from .access import Place, Right
from .recollect import forgotten, listed, origin_of

__all__ = ["COMMANDS", "Answer", "Asked", "Commands", "Linker", "parse", "right_for"]

COMMANDS: dict[str, str] = {
    "status": "what is running here: active and queued runs, approvals waiting",
    "stop": "stop the running run here (yours; anyone's with the operate right)",
    "schedules": "the schedules, with their next fire and last outcome",
    "schedules run NAME": "run a schedule now",
    "schedules pause NAME": "pause a schedule (resume NAME: resume it)",
    "usage [7d]": "tokens and cost here and yours (default 7 days; 24h, 30d...)",
    "memory": "what I remember that applies here, with ids and sources",
    "forget ID": "forget a memory shown here (yours, one about you; any with operate)",
    "help": "this list",
}


ANSWER_DEADLINE_S = 10.0
"""How long an answer may take before the person is told it failed: a platform shows the
acknowledgement's "On it" meanwhile, and a later answer is lost with its process."""


@dataclass(frozen=True, slots=True)
class Asked:
    """One command: what was typed after ``/maiden``, by whom, where, and its identity
    (the platform's id of the invocation: a retry of it acts once)."""

    words: tuple[str, ...]
    user: str
    channel: str
    """The platform's name (``slack``)."""
    place: str
    """The platform's id of where it was typed (a Slack channel)."""
    request: str
    where: Place = field(default_factory=Place)
    """Where it was typed, as the access rules see it (a DM, a private channel)."""
    thread_id: str = ""
    """The thread a message typed there would start (a DM's own; a channel's top level):
    the conversation whose memories ``memory`` lists."""

    @property
    def name(self) -> str:
        return self.words[0].lower() if self.words else "help"


@dataclass(frozen=True, slots=True)
class Answer:
    text: str
    announce: str | None = None
    """A line for everyone in the place (a stop, a pause), posted once."""


def parse(text: str) -> tuple[str, ...]:
    return tuple(text.split())


def right_for(asked: Asked) -> Right:
    """The right a command needs here (``stop`` checks others' runs itself)."""
    if asked.name == "schedules":
        return "operate"
    return "talk"


Linker = Callable[[str, str], str | None]
"""``(place, message id) -> a link to that message`` on the platform, if it can make one."""

Labeller = Callable[[str, str], str]
"""``(url, text) -> a link labelled with text`` in the platform's markup."""


def slack_label(url: str, text: str) -> str:
    return f"<{url}|{text}>"


def markdown_label(url: str, text: str) -> str:
    """Discord's (markdown) link; Slack's ``<url|text>`` shows there as written."""
    return f"[{text}]({url})"


class Commands:
    """The answers; ``may(right)`` says whether the one asking has a right in the place."""

    def __init__(self, runtime: Runtime, schedules: ScheduleService | None,
                 clock: Callable[[], float] = time.time,
                 link: Linker = lambda place, message: None,
                 label: Labeller = slack_label) -> None:
        self.runtime = runtime
        self.schedules = schedules
        self.clock = clock
        self.link = link
        """How a status links to an approval's prompt (its message)."""
        self.label = label
        """How a link is written on the platform."""

    async def answer_within(self, asked: Asked, may: Callable[[Right], bool], seconds: float
                            ) -> tuple[Answer | None, asyncio.Future[Answer]]:
        """The answer if it is ready within ``seconds`` (a platform acknowledges within 3),
        and the future that has it either way (to send when it is ready)."""
        answering = asyncio.ensure_future(self.answer(asked, may))
        done, _ = await asyncio.wait({answering}, timeout=seconds)
        return (answering.result() if done else None), answering

    async def answer(self, asked: Asked, may: Callable[[Right], bool]) -> Answer:
        if not may(right_for(asked)):
            return Answer(f"You may not use `/maiden {asked.name}` here (it needs the "
                          f"{right_for(asked)!r} right).")
        handler = {"status": self._status, "stop": self._stop, "usage": self._usage,
                   "schedules": self._schedules, "memory": self._memory,
                   "forget": self._forget}.get(asked.name)
        if handler is None:
            return Answer(_help(asked.name))
        try:
            async with asyncio.timeout(ANSWER_DEADLINE_S):
                return await handler(asked, may)
        except (RunError, NotFound) as exc:
            return Answer(f"Not done: {exc}")
        except MaidenError as exc:
            return Answer(f"Something failed: {exc}")
        except TimeoutError:
            # The store out of reach, say: an answer now beats one that may never come
            # (a later answer lives in this process only; chaos, seed 9393).
            return Answer(f"Something failed: no answer within {ANSWER_DEADLINE_S:.0f} s "
                          "(the store may be out of reach); try again in a moment.")

    async def _here(self, asked: Asked, states: Sequence[RunState] | None = None) -> list[Run]:
        runs = await self.runtime.records.runs(states=states)
        return [r for r in runs if r.origin.channel == asked.channel
                and r.origin.target.get("channel") == asked.place]

    async def _status(self, asked: Asked, may: Callable[[Right], bool]) -> Answer:
        active = await self._here(asked, ACTIVE_STATES)
        if not active:
            return Answer("Nothing is running here.")
        lines = [f"{len(active)} run(s) here:"]
        for run in active:
            line = f"• `{run.id[-8:]}` {run.state.value.replace('_', ' ')}"
            pending = run.pending_approval
            if pending is not None:
                prompt = await self._prompt(run)
                line += (f": `{pending.name}` waits for a person (approve it on "
                         + (self.label(prompt, "its prompt") if prompt else "its prompt")
                         + f", or `maiden approve {run.id} {pending.tool_call_id}`)")
            by = f" — by <@{run.origin.user}>" if run.origin.user else ""
            lines.append(line + by + f" · {_preview(run.text)}")
        return Answer("\n".join(lines))

    async def _prompt(self, run: Run) -> str | None:
        """A link to the run's approval prompt, once it is posted."""
        prompts = [d for d in await self.runtime.records.deliveries(run_id=run.id)
                   if isinstance(d, ApprovalDelivery) and d.posted]
        if not prompts:
            return None
        latest = prompts[-1]
        return self.link(latest.target.get("channel", ""), str(latest.remote_id).split(",")[0])

    async def _stop(self, asked: Asked, may: Callable[[Right], bool]) -> Answer:
        active = await self._here(asked, ACTIVE_STATES)
        mine = [r for r in active if r.origin.user == asked.user or may("operate")]
        if not active:
            return Answer("Nothing is running here.")
        if not mine:
            return Answer("The runs here are others'; stopping them needs the 'operate' right.")
        stopped = []
        for run in mine:
            try:
                await self.runtime.cancel(run.id, by=f"{asked.channel}:{asked.user}")
            except RunError:
                continue  # it ended meanwhile (or a retry of this command stopped it)
            stopped.append(run)
        if not stopped:
            return Answer("Nothing left to stop here.")
        return Answer(f"Stopped {len(stopped)} run(s).",
                      announce=f"⏹ <@{asked.user}> stopped {len(stopped)} run(s) here.")

    async def _usage(self, asked: Asked, may: Callable[[Right], bool]) -> Answer:
        days = _days(asked.words[1] if len(asked.words) > 1 else "7d")
        if days is None:
            return Answer("Usage: `/maiden usage [24h|7d|30d]`.")
        since = self.clock() - days * 86_400
        runs = [r for r in await self.runtime.records.runs() if r.created_at >= since]
        here = [r for r in runs if r.origin.channel == asked.channel
                and r.origin.target.get("channel") == asked.place]
        yours = [r for r in runs if r.origin.channel == asked.channel
                 and r.origin.user == asked.user]
        span = f"{days * 24:g} hours" if days <= 1 else f"{days:g} days"
        return Answer(f"The last {span}:\n• here: {_sum(here)}\n• yours (everywhere on "
                      f"{asked.channel}): {_sum(yours)}")

    async def _memory(self, asked: Asked, may: Callable[[Right], bool]) -> Answer:
        origin = origin_of(asked.channel, asked.user, asked.where, may)
        return Answer(await listed(self.runtime, origin, asked.thread_id))

    async def _forget(self, asked: Asked, may: Callable[[Right], bool]) -> Answer:
        origin = origin_of(asked.channel, asked.user, asked.where, may)
        return Answer(await forgotten(self.runtime, origin, asked.thread_id, asked.words[1:]))

    async def _schedules(self, asked: Asked, may: Callable[[Right], bool]) -> Answer:
        if self.schedules is None:
            return Answer("This process fires no schedules.")
        words = asked.words[1:]
        if not words:
            listed = await self.schedules.listing()
            if not listed:
                return Answer("No schedules.")
            return Answer("\n".join(_schedule_line(s) for s in listed))
        verb, name = words[0].lower(), " ".join(words[1:])
        if verb not in ("run", "pause", "resume") or not name:
            return Answer("Usage: `/maiden schedules [run|pause|resume NAME]`.")
        if verb == "run":
            run = await self.schedules.run_now(name, request=asked.request)
            return Answer(f"Schedule `{name}` started: run `{run.id[-8:]}`.")
        before = next((s for s in await self.schedules.listing() if s.get("name") == name),
                      None)
        if before is None:
            raise NotFound(f"there is no schedule {name!r}")
        pausing = verb == "pause"
        if bool(before.get("paused")) == pausing:
            return Answer(f"Schedule `{name}` is already {'paused' if pausing else 'running'}.")
        await self.schedules.set_paused(name, pausing)
        said = "paused" if pausing else "resumed"
        return Answer(f"Schedule `{name}` {said}.",
                      announce=f"{'⏸' if pausing else '▶'} <@{asked.user}> {said} the "
                               f"schedule `{name}`.")


def _help(asked: str) -> str:
    head = "" if asked == "help" else f"There is no `/maiden {asked}`. "
    return head + "Commands:\n" + "\n".join(f"• `/maiden {c}`: {what}"
                                           for c, what in COMMANDS.items())


def _preview(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else "(files)"
    return line if len(line) <= 60 else line[:59] + "…"


def _days(text: str) -> float | None:
    unit = text[-1:].lower()
    try:
        number = float(text[:-1])
    except ValueError:
        return None
    if number <= 0 or unit not in ("h", "d"):
        return None
    return number / 24 if unit == "h" else number


def _sum(runs: Sequence[Run]) -> str:
    prompt = sum(r.usage.prompt_tokens for r in runs)
    output = sum(r.usage.output_tokens for r in runs)
    cost = sum(r.cost_usd for r in runs)
    return f"{len(runs)} run(s), {prompt:,} tokens in, {output:,} out, ${cost:.4f}"


def _schedule_line(schedule: dict[str, object]) -> str:
    name = schedule.get("name")
    paused = " (done)" if schedule.get("done") else " (paused)" if schedule.get("paused") \
        else ""
    fires = schedule.get("next_fires") or []
    upcoming = f"next {fires[0]}" if isinstance(fires, list) and fires else \
        f"once at {schedule['at']}" if schedule.get("at") else "no next fire"
    last = schedule.get("outcome") if schedule.get("last_slot") else "never run"
    return f"• `{name}`{paused}: {upcoming}; last: {last}"
