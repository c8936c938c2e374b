"""The soak's Slack: the fake Slack (``tests/fakes/slack``) in Socket Mode, which every
replica connects to; people who mention the bot in a few channels, each message of a
Slack thread after the first in that thread; and what the fake's records must show.

An event is accepted once a replica acks its envelope. One not acked in time (its
replica was killed, or stopped) is delivered again, with the next ``retry_attempt``, to
another connection, as Slack does, at most three times.
"""

from __future__ import annotations

import asyncio
import re
from collections import defaultdict

from channels.slack.render import APPROVE, DENY
from tests.fakes.slack import BOT_USER, TEAM, FakeSlack, block_actions_payload
from tests.fakes.slack.store import JSON

from .invariants import Stored, Violation
from .plan import Plan
from .system import History
from .workload import Sent

__all__ = ["SlackPeople", "check_slack", "slack_env", "slack_summary", "slack_toml",
           "user_of"]

ACK_S = 6.0
_ANSWER = re.compile(r"answer to (m\d{5}):")


def user_of(person: str) -> str:
    return f"U0CHAOS{person.upper()}"


def slack_toml(fake: FakeSlack, people: list[str]) -> str:
    users = ", ".join(f'"{user_of(p)}"' for p in people)
    return f'\n[channels.slack]\napi_url = "{fake.api_url}"\nallow_users = [{users}]\n'


def slack_env(fake: FakeSlack) -> dict[str, str]:
    return {"SLACK_BOT_TOKEN": fake.bot_token, "SLACK_APP_TOKEN": fake.app_token}


def channel_of(thread: str) -> str:
    """A Slack thread of the plan is ``slack/{seed}/{channel}/sNN``."""
    return thread.split("/")[2]


class SlackPeople:
    def __init__(self, fake: FakeSlack, history: History) -> None:
        self.fake = fake
        self.history = history
        self.roots: dict[str, str] = {}  # plan thread -> the ts of its first message
        self.prompts: dict[tuple[str, str], JSON] = {}  # (run, call) -> its prompt, as posted

    async def send(self, sent: Sent) -> None:
        """Post ``sent``'s message (the first of its thread at top level) and deliver its
        event until a replica acks it."""
        op, fake = sent.op, self.fake
        channel = channel_of(op.thread)
        root = self.roots.get(op.thread)
        text = f"<@{BOT_USER}> {op.text}"
        event = fake.user_event(channel, user_of(op.person), text, thread_ts=root,
                                mention=True)
        if root is None:
            root = self.roots[op.thread] = str(event["event"]["ts"])
        sent.thread = f"slack:{TEAM}:{channel}:{root}"
        envelope: str | None = None
        for attempt in range(4):  # the event, then Slack's three retries
            live = fake.socket.live
            to = None if live <= 1 else (op.replica + attempt) % live
            try:
                envelope = (await fake.socket_event(event, to=to) if envelope is None else
                            await fake.socket_redeliver(envelope, reason="timeout", to=to))
                await fake.acked(envelope, timeout=ACK_S)
            except TimeoutError:
                sent.attempts.append(f"{self.history.now():.1f} slack: no ack (to {to})")
                continue
            sent.acked, sent.accepted_at = True, self.history.now()
            sent.answered_at = sent.accepted_at
            return
        sent.attempts.append(f"{self.history.now():.1f} slack: never acked")


    async def click(self, sent: Sent, run_id: str, call: str, approve: bool) -> int:
        """Click Approve or Deny on the run's prompt in its Slack thread, as the person who
        asked: 200 once a replica acked the click, 404 if no prompt was posted in 15 s, 0
        if no replica acked it."""
        channel, root = channel_of(sent.op.thread), self.roots[sent.op.thread]
        # A second click is on the prompt as the person's client still shows it.
        prompt = self.prompts.get((run_id, call))
        for _ in range(0 if prompt else 75):
            prompt = next((m for m in self.fake.messages(channel) if m.get("thread_ts") == root
                           and _buttons(m, run_id, call)), None)
            if prompt is not None:
                self.prompts[(run_id, call)] = prompt
                break
            await asyncio.sleep(0.2)
        if prompt is None:
            return 404
        value = _buttons(prompt, run_id, call)
        payload = block_actions_payload(
            user_of(sent.op.person), channel, str(prompt["ts"]), APPROVE if approve else DENY,
            value, block_id="maiden_approval", thread_ts=root, message=prompt)
        try:
            await self.fake.acked(await self.fake.socket_interactive(payload), timeout=ACK_S)
        except TimeoutError:
            return 0
        return 200


def _buttons(message: JSON, run_id: str, call: str) -> str:
    """The value of a prompt's buttons if they decide ``call`` of ``run_id`` ('' if not)."""
    for block in message.get("blocks") or ():
        for element in block.get("elements") or () if block.get("type") == "actions" else ():
            value = str(element.get("value") or "")
            if element.get("action_id") == APPROVE and f'"run":"{run_id}"' in value \
                    and f'"call":"{call}"' in value:
                return value
    return ""


def slack_summary(sent: dict[str, Sent], fake: FakeSlack) -> str:
    mine = [s for s in sent.values() if s.op.route == "slack"]
    retried = sum(1 for s in mine for a in s.attempts if "no ack" in a)
    bot = sum(1 for c in {channel_of(s.op.thread) for s in mine}
              for m in fake.messages(c) if m.get("user") == BOT_USER)
    return (f"  slack      {sum(1 for s in mine if s.acked)} of {len(mine)} events acked, "
            f"{retried} delivered again; {bot} bot messages; "
            f"{fake.socket.opened} connections opened")


def check_slack(plan: Plan, sent: dict[str, Sent], stored: Stored, fake: FakeSlack
                ) -> list[Violation]:
    """Invariants 1 and 4 from the fake's records: one answer per completed run, in the
    thread of its message, in order; no stream left streaming, no session processing."""
    out: list[Violation] = []
    runs = {r["run_id"]: r for r in stored.runs}
    posted: dict[str, list[str]] = defaultdict(list)  # "channel:root ts" -> answers, in order
    for channel in sorted({channel_of(t) for t in plan.threads if t.startswith("slack/")}):
        for m in fake.messages(channel):
            text = str(m.get("text") or "")
            if m.get("user") == BOT_USER and _ANSWER.search(text):
                posted[f"{channel}:{m.get('thread_ts') or m['ts']}"].append(text.strip())
    # Each completed run's reply once, in the Slack thread of its message, in the order of
    # the thread's runs: the order of arrival (DESIGN §2), not always the order they were
    # posted in (an event not acked is delivered again, maybe after the next one). A run
    # decided after it timed out answers when it is decided, one resumed when it is resumed:
    # it has no place in the order.
    for thread, entries in stored.entries.items():
        if not thread.startswith("slack:"):
            continue
        order = [r for r in dict.fromkeys(e["run_id"] for e in entries if e["kind"] == "user")
                 if runs.get(r, {}).get("state") == "completed"]
        want = [runs[r]["reply"] for r in order]
        got = posted.pop(thread.split(":", 2)[2], [])
        late = {runs[r]["reply"] for r in order if stored.answers_late(r)}
        # (Findings 3 and 4 of chaos/README.md showed here, fixed since: replies out of the
        # order of their runs, and an answer shown twice under a stale note.)
        if sorted(got) != sorted(want) or [t for t in got if t not in late] != [
                t for t in want if t not in late]:
            out.append(Violation(1, thread, None, f"Slack shows the answers {got}; its "
                                 f"completed runs' replies, in order, are {want} (decided "
                                 f"after a timeout or resumed: {sorted(late)})"))
    out += [Violation(1, f"slack:{TEAM}:{where}", None, f"answers in a Slack thread with no "
                      f"run: {texts}") for where, texts in posted.items()]
    out += [Violation(4, f"{c}:{ts}", None, f"a Slack message left streaming ({c} {ts})")
            for c, ts in sorted(fake.api.streams.streaming)]
    for (channel, ts), session in fake.sessions().items():
        thread = f"slack:{TEAM}:{channel}:{ts}"
        if session.get("status") in ("processing", "suspended"):
            out.append(Violation(4, thread, None, f"the agent session is left "
                                 f"{session.get('status')} (statuses "
                                 f"{session.get('statuses')})"))
    return out

