"""The soak's Slack: the fake Slack (``tests/fakes/slack``), which the replicas take over
Socket Mode or over HTTP (``slack_wire``); people who mention the bot in a few channels,
each message of a Slack thread after the first in that thread, click the buttons of its
approval prompts, and (``slack_acts``) stop runs, type ``/maiden`` and vote on answers.
What the fake's records must show is ``slack_checks``'.

An event is accepted once a replica acknowledges it (acks its envelope, or answers its POST
with a 2xx in time); one that is not is delivered again, as Slack does, at most three times.
"""

from __future__ import annotations

import asyncio

from channels.slack.render import APPROVE, DENY
from tests.fakes.slack import BOT_USER, TEAM, FakeSlack, block_actions_payload
from tests.fakes.slack.store import JSON

from .files import data_of, media_type
from .holds import Holds
from .plan import PEOPLE, Command, Stop, Vote
from .sent import Sent
from .slack_acts import Reads, SlackActs, channel_of, user_of
from .slack_wire import SlackWire
from .system import History, Replica

__all__ = ["SlackPeople", "slack_env", "slack_toml"]

PROMPT_WAIT_S = 15.0  # how long a person looks for a prompt's buttons before giving up


def slack_toml(fake: FakeSlack, people: list[str], *, http: bool) -> str:
    """``[channels.slack]`` of a replica: Socket Mode, or the Events API (``http``)."""
    users = ", ".join(f'"{user_of(p)}"' for p in people)
    mode = 'mode = "http"\n' if http else ""
    return (f'\n[channels.slack]\n{mode}api_url = "{fake.api_url}"\nallow_users = [{users}]\n'
            f'file_hosts = ["{fake.base_url}"]\n')


def slack_env(fake: FakeSlack) -> dict[str, str]:
    return {"SLACK_BOT_TOKEN": fake.bot_token, "SLACK_APP_TOKEN": fake.app_token,
            "SLACK_SIGNING_SECRET": fake.signing_secret}


class SlackPeople:
    def __init__(self, fake: FakeSlack, history: History, replicas: list[Replica],
                 http: list[int], holds: Holds | None = None) -> None:
        self.fake = fake
        self.history = history
        self.replicas = replicas
        self.holds = holds or Holds(replicas, None)  # held downloads' downloaders killed
        self.wire = SlackWire(fake, replicas, http, history)
        self.roots: dict[str, str] = {}  # plan thread -> the ts of its first message
        self.prompts: dict[tuple[str, str], JSON] = {}  # (run, call) -> its prompt, as posted
        self.acts = SlackActs(fake, self.wire, history, self.roots)
        for person in PEOPLE:  # known to users.info (its time zone is asked for each person)
            fake.person(user_of(person), tz="UTC", name=person)

    async def send(self, sent: Sent) -> None:
        """Post ``sent``'s message (the first of its thread at top level) and deliver its
        event until a replica acknowledges it."""
        op, fake = sent.op, self.fake
        channel = channel_of(op.thread)
        root = self.roots.get(op.thread)
        text = f"<@{BOT_USER}> {op.text}"
        event = fake.share_file(channel, user_of(op.person), text, [
            (name, data_of(name), media_type(name)) for name in op.files], thread_ts=root) \
            if op.files else fake.user_event(channel, user_of(op.person), text,
                                             thread_ts=root, mention=True)
        if op.via == "signin":  # its download answers Slack's sign-in page, not the file
            fake.shared.signed_out.update(str(f["id"]) for f in event["event"]["files"])
        holding = None
        if op.via == "hold":  # its first download held half-way, its downloader killed
            file_id = str(event["event"]["files"][0]["id"])
            holding = asyncio.create_task(self.holds.kill_holder(
                op.tag, fake.shared.hold(file_id), lambda: fake.shared.held_from.get(file_id)))
        if root is None:
            root = self.roots[op.thread] = str(event["event"]["ts"])
        sent.thread = f"slack:{TEAM}:{channel}:{root}"
        try:
            if await self.wire.event(event, op.replica, sent.attempts):
                sent.acked, sent.accepted_at = True, self.history.now()
                sent.answered_at = sent.accepted_at
        finally:
            if holding is not None:
                await holding

    async def click(self, sent: Sent, run_id: str, call: str, approve: bool) -> int:
        """Click Approve or Deny on the run's prompt in its Slack thread, as the person who
        asked: 200 once a replica acknowledged the click, 404 if no prompt was posted in
        15 s, 0 if no replica acknowledged it."""
        channel, root = channel_of(sent.op.thread), self.roots[sent.op.thread]
        # A second click is on the prompt as the person's client still shows it.
        prompt = self.prompts.get((run_id, call))
        for _ in range(0 if prompt else int(PROMPT_WAIT_S / 0.2)):
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
        async with self.acts.locks[sent.op.person]:  # what it tells the person is its own
            answered = await self.wire.click(payload, sent.op.replica)
        return 200 if answered.acked else 0

    async def stop(self, sent: Sent, stop: Stop, reads: Reads) -> None:
        await self.acts.stop(sent, stop, reads)

    async def vote(self, sent: Sent, vote: Vote, reads: Reads) -> None:
        await self.acts.vote(sent, vote, reads)

    async def command(self, command: Command) -> None:
        await self.acts.command(command)


def _buttons(message: JSON, run_id: str, call: str) -> str:
    """The value of a prompt's buttons if they decide ``call`` of ``run_id`` ('' if not)."""
    for block in message.get("blocks") or ():
        for element in block.get("elements") or () if block.get("type") == "actions" else ():
            value = str(element.get("value") or "")
            if element.get("action_id") == APPROVE and f'"run":"{run_id}"' in value \
                    and f'"call":"{call}"' in value:
                return value
    return ""
