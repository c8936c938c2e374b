"""Schedules that deliver their answers into a chat platform (``deliver`` in
``[[schedules]]``): ``herald`` posts each slot's answer into a Slack channel of its own,
``crier`` into a Discord guild channel of its own, in a pass that has that platform.

Both fire every minute into one thread each (``schedule:herald``, ``schedule:crier``), so
each run's answer is its own (``answer to jherald.{hash of the history}: 1 results``); the
slots are checked with the others (chaos/schedules.py), and the runs asked for by hand with
those (chaos/runnow.py). Here, from the fakes' own records: every run of theirs that
completed has its answer posted exactly once in its channel, no answer is posted that no
completed run gave, and nothing is left half-written (a run that failed mid-answer leaves
what it had shown with the failure notice under it, by design: chaos/discord.py).
"""

from __future__ import annotations

import re
from collections import Counter

from tests.fakes.discord import GUILD_ID, FakeDiscord, World, snowflake_at
from tests.fakes.slack import BOT_USER, FakeSlack

from .invariants import Violation
from .model import CRON, job_prompt
from .plan import DELIVERING
from .schedules import Kept

__all__ = ["DISCORD_JOBS", "SLACK_JOBS", "check_delivered", "delivered_summary",
           "delivering_toml", "with_jobs_channel"]

SLACK_JOBS = "C0CHAOSJOBS"
DISCORD_JOBS = str(snowflake_at(1_700_000_000_000 + 90_000, 3))
_FAILED = re.compile(r"\n\nSorry, I could not finish this \([^)]*\)\.$")


def _answer(name: str) -> re.Pattern[str]:
    return re.compile(rf"^answer to j{re.escape(name)}\.[0-9a-f]{{8}}: \d+ results$")


def with_jobs_channel(world: World) -> World:
    """The soak's Discord world with the guild channel ``crier`` delivers to."""
    world.add_text_channel(DISCORD_JOBS, GUILD_ID, "chaos-jobs")
    return world


def delivering_toml(slack: FakeSlack | None, discord: FakeDiscord | None) -> str:
    """The delivering schedules of a pass: each one whose platform the pass has."""
    where = {"slack": f"slack:{SLACK_JOBS}" if slack else None,
             "discord": f"discord:{DISCORD_JOBS}" if discord else None}
    return "".join(f'''
[[schedules]]
name = "{name}"
cron = "{CRON}"
prompt = "{job_prompt(name)}"
misfire = "once"
deliver = "{where[platform]}"
''' for name, platform in DELIVERING.items() if where[platform])


def _posts(slack: FakeSlack | None, discord: FakeDiscord | None, platform: str
           ) -> list[str] | None:
    """The bot's messages in the platform's jobs channel, oldest first (None: no such
    platform in this pass)."""
    if platform == "slack" and slack is not None:
        return [str(m.get("text") or "").strip() for m in slack.messages(SLACK_JOBS)
                if m.get("user") == BOT_USER]
    if platform == "discord" and discord is not None:
        bot = discord.world.bot_id
        return [str(m.get("content") or "") for m in discord.messages(DISCORD_JOBS)
                if m["author"]["id"] == bot]
    return None


def check_delivered(kept: Kept, slack: FakeSlack | None, discord: FakeDiscord | None
                    ) -> list[Violation]:
    """Invariant 1 for the delivering schedules: each completed run's answer posted once in
    its channel, and no other answer; invariant 4: none left half-written."""
    out: list[Violation] = []
    for name, platform in DELIVERING.items():
        posts = _posts(slack, discord, platform)
        if posts is None:
            continue
        place = f"{platform} channel {SLACK_JOBS if platform == 'slack' else DISCORD_JOBS}"
        runs = [r for r in kept.runs if str(r.idempotency_key).startswith(f"schedule:{name}:")]
        answers = {r.reply or "": r for r in runs if r.state == "completed"}
        shown = Counter(posts)
        for reply, run in answers.items():
            if shown[reply] != 1:
                out.append(Violation(1, run.thread_id, run.id, f"{name}'s run completed with "
                                     f"{reply!r}, posted {shown[reply]} times in the {place}"))
        full = _answer(name)
        for text in posts:
            if full.match(text) and text not in answers:
                out.append(Violation(1, f"schedule:{name}", None, f"the {place} shows "
                                     f"{text!r}, which no completed run of {name} answered"))
            elif text.startswith("answer to") and not full.match(text) \
                    and not _FAILED.search(text):
                out.append(Violation(4, f"schedule:{name}", None, f"an answer left "
                                     f"half-written in the {place}: {text!r}"))
    return out


def delivered_summary(kept: Kept, slack: FakeSlack | None, discord: FakeDiscord | None
                      ) -> str:
    parts = []
    for name, platform in DELIVERING.items():
        posts = _posts(slack, discord, platform)
        if posts is None:
            continue
        runs = [r for r in kept.runs if str(r.idempotency_key).startswith(f"schedule:{name}:")]
        done = sum(1 for r in runs if r.state == "completed")
        parts.append(f"{name} ({platform}) {len(runs)} runs, {done} completed, "
                     f"{len(posts)} posts")
    return f"  delivered  {'; '.join(parts) or 'none'}"
