"""What the fake Discord's records must show of what people did there besides writing
(``discord_acts``), once the system settled:

- an approval prompt's buttons decide once: at most one click updates the prompt
  (``Approved by …`` / ``Denied by …``), and the run's decision is that click's; every
  other click is told why not, once (invariants 1 and 4);
- an acknowledged stop ends its run cancelled (as Slack's check says, ``slack_checks``),
  and each cancelled run of a Discord thread has one closing line there (invariants 6, 1);
- each ``/maiden`` command is answered exactly once: one callback (its acknowledgement),
  one message made for it, saying what that command says (a deferred one's "thinking"
  message, never edited, is no answer) (invariant 1), and a ``/maiden stop`` that stopped
  runs is said once in its channel (``⏹ <@…> stopped N run(s) here.``), as Slack's is;
- at most one vote per person per run, the last acknowledged click's (invariant 4).
maiden acknowledges an interaction (a deferral) before it acts, then shows the outcome by an
edit or a follow-up: an interaction counts as answered with what that showed
(``discord_acts.answered_as``); one acknowledged that never showed anything, with no fault
around, is unanswered.

An interaction or a message sent with Discord, a replica or the store in trouble around it
may go unanswered: Discord does not send it again, and the person tries again. Only an
answer that never came with no such fault around is held against maiden. One dispatched
while the session's RESUME was held (chaos/discord_resume.py) is held to the same, once
replayed; only one replayed too near its 3 s (or never) is excused (``replayed_late``).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from typing import Any

from channels.clicks import UNSENT
from channels.commands import ANSWER_DEADLINE_S
from channels.feedback import THANKS, UNRECORDED
from tests.fakes.discord import GUILD_ID
from tests.fakes.discord.payloads import LOADING

from .discord import person_id
from .discord_acts import ClickSeen, DiscordActor, DiscordStopSeen, made_for
from .discord_resume import replayed_late
from .invariants import Stored, Violation
from .outages import STORE_OUTAGES
from .sent import Sent
from .slack_acts import StopSeen
from .slack_checks import CLOSING, STOPPED_N, _stop
from .slack_plan import Stop
from .system import History

__all__ = ["check_discord_acts", "discord_acts_summary"]

QUIET_S = 8.0
_TROUBLE = ("kill", "term", "died", "start", "discord", "discord_end",
            *(kind for outage in STORE_OUTAGES for kind in outage))
_FITS = {"status": r"Nothing is running here\.$|\d+ run\(s\) here:",
         "usage": r"The last 24 hours:\n", "help": r"Commands:\n",
         "stop": r"Stopped \d+ run\(s\)\.$|Nothing is running here\.$|Nothing left to stop",
         "schedule-pause": r"Schedule `\S+` (paused\.|is already paused\.)$",
         "schedule-resume": r"Schedule `\S+` (resumed\.|is already running\.)$",
         "schedule-run": r"Schedule `\S+` started: run `\w+`\.$",
         "schedules": r"• `|No schedules\.$|This process fires no schedules\.$"}
_FAILED = re.compile(r"(Something failed|Not done|That did not work): ")
_DECIDED = re.compile(r"^(Approved|Denied) by <@(\d+)>: `deploy`$")


def _trouble(history: History, at: float, after: float = QUIET_S) -> bool:
    """A fault began or ended within a second before ``at`` to ``after`` after it."""
    return any(at - 1.0 <= t <= at + after for t, kind, _ in history.events
               if kind in _TROUBLE)


def check_discord_acts(actor: DiscordActor, sent: dict[str, Sent], stored: Stored,
                       votes: list[dict[str, Any]], history: History) -> list[Violation]:
    threads = {s.op.tag: s.thread for s in sent.values()}
    runs = {r["run_id"]: r for r in stored.runs}
    out = _clicks(actor, threads, runs, history)
    for seen in actor.stops:
        acked = _stop_acked(seen, history)
        stop = seen.stop
        as_slack = StopSeen(Stop(stop.tag, stop.person, "text", stop.after_s, stop.waiting, 0),
                            seen.run_id, stop.how, seen.state, seen.first, acked, seen.at,
                            seen.wall, seen.skipped)
        if (v := _stop(as_slack, runs, threads, stored, history)) is not None:
            out.append(v)
    out += _closings(actor, stored)
    out += _commands(actor, history)
    out += _announced(actor, history)
    out += _votes(actor, threads, votes, history)
    return out


def _held(click: ClickSeen) -> bool:
    """Whether an unanswered ``click`` counts: it reached a live connection, which stayed,
    or was replayed on a RESUME in time to be answered."""
    if click.answered is not None:
        return True
    return not click.said.startswith(("(not sent", "(its con")) and not replayed_late(
        click.held, click.replayed_in)


def _stop_acked(seen: DiscordStopSeen, history: History) -> bool:
    """A ``/maiden stop`` answered; a ``stop`` dispatched on a live connection with no
    fault around it (Discord acknowledges nothing: maiden must have taken it)."""
    if not seen.sent or seen.at is None:
        return False
    if seen.click is not None:
        return seen.click.answered is not None
    return seen.live and not _trouble(history, seen.at)


def _clicks(actor: DiscordActor, threads: dict[str, str], runs: dict[str, dict[str, Any]],
            history: History) -> list[Violation]:
    out: list[Violation] = []
    by_run: dict[str, list[ClickSeen]] = {}
    for click in actor.clicks:
        by_run.setdefault(click.run_id, []).append(click)
    for run_id, clicks in by_run.items():
        thread = threads.get(clicks[0].tag, "?")
        updates = [c for c in clicks if c.answered == 7]
        if len(updates) > 1:
            out.append(Violation(1, thread, run_id, f"{clicks[0].tag}: its approval prompt was "
                                 f"updated {len(updates)} times: {[c.said for c in updates]}"))
        decisions = [d for d in (runs.get(run_id) or {}).get("decisions") or ()
                     if d["by"] != "chaos"]
        for c in updates[:1]:
            said = _DECIDED.match(c.said)
            approve = c.custom_id.startswith("maiden:a:")
            if said is None or (said.group(1) == "Approved") != approve:
                out.append(Violation(1, thread, run_id, f"{c.tag}: a click {c.custom_id} "
                                     f"updated the prompt to {c.said!r}", c.at))
            elif not any(d["approve"] == approve and d["by"] == said.group(2)
                         for d in decisions):
                out.append(Violation(4, thread, run_id, f"{c.tag}: the prompt says "
                                     f"{c.said!r}; the run's decisions are {decisions}", c.at))
        out += _told_once(actor, clicks, thread)
        for c in clicks:  # 6: acknowledged, the prompt never edited nor a line shown
            if c.answered in (None, 6) and _held(c) and not _trouble(history, c.at):
                out.append(Violation(1, thread, run_id, f"{c.tag}: a click {c.custom_id} at "
                                     f"{c.at:.1f}s with no fault around was never answered"
                                     + (" (acknowledged, nothing shown)" if c.answered else ""),
                                     c.at))
    return out


def _said(actor: DiscordActor, click: ClickSeen) -> str | None:
    """What ``click`` showed the person: as seen then, or, for a deferral that showed
    nothing then (5), its edit if it came later; None if nothing."""
    if click.answered != 5:
        return click.said if click.answered is not None else None
    made = [str(m.get("content") or "") for m in made_for(actor.fake, click.channel,
                                                          click.interaction)
            if not int(m.get("flags") or 0) & LOADING]
    return made[-1] if made else None


def _told_once(actor: DiscordActor, clicks: list[ClickSeen], thread: str) -> list[Violation]:
    """No click made more than one message (its ephemeral line) for the person."""
    return [Violation(1, thread, c.run_id, f"{c.tag}: a click {c.custom_id} was answered with "
                      f"{len(made)} messages: {[m.get('content') for m in made]}", c.at)
            for c in clicks if len(made := made_for(actor.fake, c.channel, c.interaction)) > 1]


def _closings(actor: DiscordActor, stored: Stored) -> list[Violation]:
    """One closing line (``Stopped (cancelled …).``) in a Discord place per cancelled run
    of its thread."""
    out: list[Violation] = []
    bot = actor.fake.world.bot_id
    cancelled = Counter(r["thread_id"] for r in stored.runs if r["state"] == "cancelled"
                        and r["thread_id"].startswith("discord:"))
    for channel in sorted({t.split(":", 2)[2] for t in cancelled}):
        thread = f"discord:{GUILD_ID}:{channel}"
        shown = sum(1 for m in actor.fake.messages(channel) if m["author"]["id"] == bot
                    and CLOSING.search(str(m.get("content") or "")))
        if shown != cancelled[thread]:
            out.append(Violation(1, thread, None, f"Discord shows {shown} closing line(s) "
                                 f"('Stopped (cancelled …).'); the thread has "
                                 f"{cancelled[thread]} cancelled run(s)"))
    return out


def _commands(actor: DiscordActor, history: History) -> list[Violation]:
    out: list[Violation] = []
    fake = actor.fake
    asked = [(s.command.text, s.command.person, s.channel, s.click) for s in actor.commands]
    asked += [("stop", s.stop.person, s.channel, s.click)
              for s in actor.stops if s.click is not None]
    for text, person, channel, click in asked:
        if click is None or not _held(click):
            continue
        said = f"/maiden {text} by {person} at {click.at:.1f}s"
        where = f"discord:{GUILD_ID}:{channel}"
        # A deferred answer's "thinking" message (flag LOADING, no content) is not an
        # answer: the edit never came (its process killed within the answer's deadline,
        # chaos seed 9595: read as an empty answer). Its answer may come until the
        # deadline, so a fault until then may have taken it.
        made = [m for m in made_for(fake, channel, click.interaction)
                if not int(m.get("flags") or 0) & LOADING]
        if click.answered is None or (click.answered == 5 and not made):
            after = QUIET_S + (ANSWER_DEADLINE_S if click.answered == 5 else 0.0)
            if not _trouble(history, click.at, after):
                out.append(Violation(1, where, None, f"{said}, with no fault around, was "
                                     "never answered" + (" (deferred, never edited)"
                                                         if click.answered else ""),
                                     click.at))
            continue
        answers = [str(m.get("content") or "") for m in made]
        kind = text.split()[0]
        if len(answers) != 1 or not (_FAILED.match(answers[0])
                                     or re.match(_FITS[kind], answers[0])):
            out.append(Violation(1, where, None, f"{said} was answered (callback "
                                 f"{click.answered}) with {answers}", click.at))
    return out


def _announced(actor: DiscordActor, history: History) -> list[Violation]:
    """A ``/maiden stop`` that stopped runs (answered ``Stopped N run(s).``) is said once in
    its channel, ``⏹ <@…> stopped N run(s) here.``, as Slack's is (``slack_checks``); one
    that stopped none is not. Counted per channel and person: a line may be missing for a
    stop with a fault around it (its post failed), and one more may show for each stop
    whose answer never showed (it may have stopped runs all the same)."""
    out: list[Violation] = []
    fake, bot = actor.fake, actor.fake.world.bot_id
    places: dict[tuple[str, str], list[DiscordStopSeen]] = defaultdict(list)
    for seen in actor.stops:
        if seen.click is not None:
            places[(seen.channel, seen.stop.person)].append(seen)
    for (channel, person), stops in sorted(places.items()):
        line = f"⏹ <@{person_id(person)}> "
        posted = Counter(str(m.get("content")) for m in fake.messages(channel)
                         if m["author"]["id"] == bot and str(m.get("content")).startswith(line))
        wanted: Counter[str] = Counter()
        excused = unanswered = 0
        for seen in stops:
            assert seen.click is not None
            made = [str(m.get("content") or "") for m in made_for(fake, channel,
                                                                   seen.click.interaction)]
            stopped = next((found for a in made if (found := STOPPED_N.match(a))), None)
            if stopped is not None:
                wanted[f"{line}stopped {stopped.group(1)} run(s) here."] += 1
                excused += _trouble(history, seen.click.at)
            elif not made:
                unanswered += 1
        missing, extra = wanted - posted, posted - wanted
        if missing.total() > excused or extra.total() > unanswered:
            out.append(Violation(1, f"discord:{GUILD_ID}:{channel}", None, f"{person}'s "
                                 f"/maiden stop(s) there stopped {sorted(wanted.elements())} "
                                 f"({unanswered} unanswered); the channel was told "
                                 f"{sorted(posted.elements())}", stops[0].at))
    return out


def _votes(actor: DiscordActor, threads: dict[str, str], votes: list[dict[str, Any]],
           history: History) -> list[Violation]:
    out: list[Violation] = []
    mine = [v for v in votes if str(v["thread_id"]).startswith("discord:")]
    counts = Counter((v["run_id"], v["user"]) for v in mine)
    out += [Violation(4, "discord", run, f"{n} votes by {user} on one run")
            for (run, user), n in counts.items() if n > 1]
    stored = {(v["run_id"], v["user"]): v for v in mine}
    for seen in actor.votes:
        if not seen.clicks:
            continue
        tag, user = seen.vote.tag, person_id(seen.vote.person)
        thread, vote = threads.get(tag, "?"), stored.pop((seen.run_id, user), None)
        values = [c.custom_id.split(":")[2] for c in seen.clicks]
        for c, value in zip(seen.clicks, values, strict=True):
            said = _said(actor, c)
            if said is None and c.answered is not None and not _trouble(history, c.at):
                out.append(Violation(1, thread, seen.run_id, f"{tag}: {user}'s click {value} "
                                     "was acknowledged, and with no fault around nothing was "
                                     "shown", c.at))
            elif said is not None and said not in (THANKS[value], UNSENT, UNRECORDED) \
                    and not _FAILED.match(said):
                out.append(Violation(1, thread, seen.run_id, f"{tag}: {user}'s click {value} "
                                     f"was answered {said!r}", c.at))
        out += _told_once(actor, seen.clicks, thread)
        last = seen.clicks[-1]
        settled = last.answered is not None and all(
            c.answered is not None or v == values[-1] for c, v in zip(seen.clicks, values,
                                                                       strict=True))
        if settled and last.said == THANKS[values[-1]] and (
                vote is None or vote["value"] != values[-1]):
            out.append(Violation(4, thread, seen.run_id, f"{tag}: {user} clicked {values}, the "
                                 f"last acknowledged; the store has "
                                 f"{vote['value'] if vote else 'no vote'}", last.at))
        elif vote is not None and vote["value"] not in values:
            out.append(Violation(4, thread, seen.run_id, f"{tag}: {user} clicked {values}; "
                                 f"the store has {vote['value']}"))
    out += [Violation(4, v["thread_id"], v["run_id"], f"a Discord vote {v['value']} by "
                      f"{v['user']} that nobody gave") for v in stored.values()]
    return out


def discord_acts_summary(actor: DiscordActor) -> str:
    clicks = Counter(c.outcome for c in actor.clicks)
    stops = Counter(f"{s.stop.how} {'sent' if s.sent else 'not sent'}" for s in actor.stops)
    commands = Counter(s.click.outcome if s.click else "-" for s in actor.commands)
    votes = [c for v in actor.votes for c in v.clicks]
    held = [c for c in [*actor.clicks, *votes, *(s.click for s in actor.commands),
                        *(s.click for s in actor.stops)] if c is not None and c.held]
    bot = actor.fake.world.bot_id
    lines = sum(1 for channel in {s.channel for s in actor.stops if s.click is not None}
                for m in actor.fake.messages(channel)
                if m["author"]["id"] == bot and str(m.get("content")).startswith("⏹ "))

    def count(counter: Counter[str]) -> str:
        return ", ".join(f"{k} {v}" for k, v in sorted(counter.items())) or "none"

    return (f"  discord acts prompt clicks {count(clicks)} (by answer: 7 the prompt updated, 4 a "
            f"line to the person, 5/6 acknowledged, nothing shown); stops "
            f"{count(stops)} ({lines} said in the channel); commands {count(commands)}; "
            f"votes {len(actor.votes)} "
            f"({sum(1 for v in actor.votes if v.skipped)} not given), {len(votes)} clicks "
            f"({count(Counter(c.outcome for c in votes))}); held for a RESUME "
            f"{count(Counter(c.outcome for c in held))} (by answer)")
