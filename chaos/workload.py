"""The people: each message of the plan sent at its time to its replica (another if that
one is down or fails), cancels and approval decisions, and a janitor who denies the
calls a crash left uncertain (approving them would run them again, by design).

What the client saw of each message is kept in a ``Sent`` (``sent.py``) for the invariants.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from typing import Any, Protocol

import httpx

from .client import Answer, Client, Refused
from .discord_plan import DiscordActs, DiscordCommand
from .files import refuses_message
from .plan import Command, Plan, Stop, Vote
from .responses import respond
from .sent import Lookups, Sent
from .system import History, Replica, settled
from .terminal import EXIT_PAUSED, EXIT_USAGE, send_from_terminal

__all__ = ["DiscordSender", "SlackSender", "Workload"]

SEND_DEADLINE_S = 240.0  # one message, every resend included
TAKEN = "was taken, then the store failed"  # `maiden send`: its run was made (bot/commands)
TYPED_LOOKUP_S = 90.0  # `maiden send` ended without its reply: how long its run is looked for
STOP_HOLD_S = 10.0  # a run stopped while it waits: how long before the janitor may deny it


class SlackSender(Protocol):
    async def send(self, sent: Sent) -> None: ...

    async def click(self, sent: Sent, run_id: str, call: str, approve: bool) -> int: ...

    async def stop(self, sent: Sent, stop: Stop, reads: Workload) -> None: ...

    async def vote(self, sent: Sent, vote: Vote, reads: Workload) -> None: ...

    async def command(self, command: Command) -> None: ...


class DiscordSender(Protocol):
    async def send(self, sent: Sent) -> None: ...


class DiscordActing(Protocol):
    """What people do in Discord besides writing (chaos/discord_acts.py)."""

    acts: DiscordActs

    def clicked(self, tag: str) -> bool: ...

    def waits(self, tag: str) -> bool: ...

    async def act(self, sent: Sent, reads: Workload) -> None: ...

    async def click(self, sent: Sent, run_id: str, call: str, approve: bool) -> int: ...

    async def command(self, command: DiscordCommand) -> None: ...


class Workload(Lookups):
    def __init__(self, plan: Plan, replicas: list[Replica], client: Client,
                 history: History, slack: SlackSender | None = None,
                 discord: DiscordSender | None = None,
                 discord_acts: DiscordActing | None = None) -> None:
        super().__init__(replicas, client)
        self.plan = plan
        self.history = history
        self.sent = {op.tag: Sent(op, key=f"chaos:{plan.seed}:{op.tag}", thread=op.thread)
                     for op in plan.ops}
        self.slack = slack
        self.discord = discord
        self.discord_acts = discord_acts
        self.janitor_denied: list[str] = []
        self.clicked = 0  # decisions made with a prompt's buttons (Slack's or Discord's)
        self.tasks: set[asyncio.Task[None]] = set()
        self._deciding: set[str] = set()  # tags whose person decides their own approval

    def _spawn(self, work: Any) -> None:
        task = asyncio.create_task(work)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def run(self) -> None:
        """Launch every op and command at its time (returns once the last is launched)."""
        await asyncio.gather(self._messages(), self._commands(), self._discord_commands())

    async def _messages(self) -> None:
        stops = {s.tag: s for s in self.plan.stops}
        votes = {v.tag: v for v in self.plan.votes}
        for op in self.plan.ops:
            await asyncio.sleep(max(0.0, op.at - self.history.now()))
            sent = self.sent[op.tag]
            self._spawn(self._send(sent))
            if op.cancel_after_s is not None:
                self._spawn(self._cancel(sent, op.cancel_after_s))
            stop = stops.get(op.tag) if self.slack is not None else None
            acting = self.discord_acts if op.route == "discord" else None
            if acting is not None:  # its stop or vote in Discord (before any decision)
                self._spawn(self._discord_act(sent, acting))
            if op.decide is not None:
                self._deciding.add(op.tag)  # (a person who stops it instead decides nothing)
                if not (acting and acting.waits(op.tag)):
                    self._spawn(self._stop(sent, stop) if stop and stop.waiting
                                else self._decide(sent))
            if stop is not None and not stop.waiting:
                self._spawn(self._stop(sent, stop))
            if op.tag in votes and self.slack is not None:
                self._spawn(self.slack.vote(sent, votes[op.tag], self))

    async def _commands(self) -> None:
        for command in self.plan.commands if self.slack is not None else ():
            await asyncio.sleep(max(0.0, command.at - self.history.now()))
            assert self.slack is not None
            self._spawn(self.slack.command(command))

    async def _discord_commands(self) -> None:
        acting = self.discord_acts
        for command in acting.acts.commands if acting is not None else ():
            await asyncio.sleep(max(0.0, command.at - self.history.now()))
            assert acting is not None
            self._spawn(acting.command(command))

    async def _discord_act(self, sent: Sent, acting: DiscordActing) -> None:
        """A Discord stop or vote; a run stopped while it waits is left to its stop."""
        try:
            await acting.act(sent, self)
        finally:
            if acting.waits(sent.op.tag):
                self._deciding.discard(sent.op.tag)

    async def _stop(self, sent: Sent, stop: Stop) -> None:
        """A person's stop in Slack; a run stopped while it waits is left to it a while
        (not decided by the janitor: its stop is what ends it)."""
        assert self.slack is not None
        try:
            await self.slack.stop(sent, stop, self)
            if stop.waiting:
                await asyncio.sleep(STOP_HOLD_S)
        finally:
            self._deciding.discard(sent.op.tag)

    async def drain(self, timeout_s: float) -> bool:
        """Wait for every message, cancel and decision in flight; whether all finished."""
        return await settled(self.tasks, timeout_s, cancel=False)

    async def cancel_all(self) -> None:
        for task in list(self.tasks):
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)

    async def _send(self, sent: Sent) -> None:
        op = sent.op
        if op.route == "slack":
            assert self.slack is not None
            await self.slack.send(sent)
            return
        if op.route == "discord":
            assert self.discord is not None
            await self.discord.send(sent)
            return
        if op.via == "cli":
            await self._type(sent)
            return
        deadline = self.history.now() + SEND_DEADLINE_S
        attempt = 0
        while self.history.now() < deadline:
            replica = self.pick(op.replica + attempt)
            attempt += 1
            if replica is None:
                await asyncio.sleep(0.5)
                continue
            starts = replica.starts  # the same process before and after, or not
            try:
                answer = await (respond(self.client, replica.url, op, sent.key)
                                if op.route.startswith("responses")
                                else self.client.send(replica.url, op, sent.key))
            except httpx.HTTPError as exc:
                sent.attempts.append(f"{self.history.now():.1f} {replica.name}: "
                                     f"{type(exc).__name__}")
                await asyncio.sleep(0.2)
                continue
            except Refused as exc:
                if refuses_message(op):
                    sent.turned_down = str(exc)
                else:
                    sent.refused = f"{replica.name}: {exc}"
                return
            if answer.run_id is None:
                sent.attempts.append(f"{self.history.now():.1f} {replica.name}: {answer.status}")
                await asyncio.sleep(0.3)
                continue
            if sent.run_id is None:
                sent.run_id, sent.accepted_at = answer.run_id, self.history.now()
            sent.answers.append(answer)  # each names its run: the invariants compare them
            if not answer.ended:  # a stream cut off: ask again for the answer elsewhere
                if replica.up and not replica.stopping and replica.starts == starts:
                    sent.open_streams.append(f"{self.history.now():.1f} {replica.name}")
                sent.attempts.append(f"{self.history.now():.1f} {replica.name}: stream cut")
                continue
            sent.answered_at = self.history.now()
            return
        sent.attempts.append(f"{self.history.now():.1f}: gave up")

    async def _type(self, sent: Sent) -> None:
        """``maiden send --file`` at the replica's terminal (another's if it fails before
        making a run: the command has no key to be sent again with)."""
        op = sent.op
        for attempt in range(3):
            replica = self.replicas[(op.replica + attempt) % len(self.replicas)]
            typed_at = self.history.now()
            typed = await send_from_terminal(replica, op)
            now = self.history.now()
            sent.attempts.append(f"{now:.1f} {replica.name}: maiden send: exit {typed.code}"
                                 + (f" ({typed.err.splitlines()[-1][:200]})" if typed.err
                                    else ""))
            if typed.code == 0 and typed.out:
                sent.acked, sent.accepted_at = True, typed_at
                sent.answers.append(Answer(None, "completed", typed.out, 200))
                sent.answered_at = now
                return
            if typed.code != EXIT_USAGE:
                sent.typed += 1
            if typed.code == EXIT_PAUSED or TAKEN in typed.err:
                # It named its run ("run … is queued: the thread has a run waiting for
                # approval", or "run … was taken, then the store failed"): nobody types it
                # again. (Other failures may or may not have made a run: a person who
                # cannot tell types it again, a new message.)
                sent.acked, sent.accepted_at = True, typed_at
                return
            if typed.code == EXIT_USAGE and "--file" in typed.err:  # the file refused
                if refuses_message(op):
                    sent.turned_down = typed.err
                else:
                    sent.refused = f"{replica.name}: maiden send: {typed.err[-300:]}"
                return
            # It made its run, and ended otherwise? (Looked up through a replica: one may
            # be down for a while, so it is looked for until one has been up a while.) Exit
            # 2 but for a file: the store could not be opened (out of reach), so no run.
            made = typed.code != EXIT_USAGE
            with contextlib.suppress(TimeoutError):
                if made and await self.find(sent, timeout_s=TYPED_LOOKUP_S) is not None:
                    sent.acked, sent.accepted_at = True, typed_at
                    return
            await asyncio.sleep(1.0)

    async def _cancel(self, sent: Sent, after_s: float) -> None:
        with contextlib.suppress(TimeoutError):
            run_id = await self.find(sent)
            if run_id is None:
                return
            await asyncio.sleep(after_s)
            for attempt in range(10):
                replica = self.pick(attempt + 1)
                if replica is None:
                    await asyncio.sleep(0.5)
                    continue
                try:
                    status = await self.client.cancel(replica.url, sent.op.person, run_id)
                except httpx.HTTPError:
                    await asyncio.sleep(0.3)
                    continue
                sent.cancelled.append(status)
                self.history.note("cancel", f"{sent.op.tag} run {run_id}: {status}")
                if status < 500:
                    return
                await asyncio.sleep(0.5)

    async def _decide(self, sent: Sent) -> None:
        assert sent.op.decide is not None
        decide = sent.op.decide
        try:
            run_id = await self.find(sent)
            call = await self.awaiting(sent, run_id) if run_id else None
            if run_id is None or call is None:
                return
            await asyncio.sleep(decide.after_s)
            # In Slack, by the prompt's buttons (the HTTP API if that fails).
            button = sent.op.route == "slack" or bool(
                self.discord_acts and self.discord_acts.clicked(sent.op.tag))
            await self._post_decision(sent, run_id, call, decide.approve, button)
            if decide.twice:  # clicked again, half the time the other button
                flip = stable(f"{self.plan.seed}:{sent.op.tag}:flip") < 0.5
                await self._post_decision(sent, run_id, call, decide.approve != flip, button)
        except TimeoutError:
            pass
        finally:
            self._deciding.discard(sent.op.tag)

    async def _post_decision(self, sent: Sent, run_id: str, call: str, approve: bool,
                             button: bool = False) -> None:
        clicker = self.discord_acts if sent.op.route == "discord" else self.slack
        if button and clicker is not None:  # the prompt's button in the Slack thread
            status = await clicker.click(sent, run_id, call, approve)
            sent.decided.append((approve, status))
            self.history.note("click", f"{sent.op.tag} run {run_id} call {call} "
                              f"{'approve' if approve else 'deny'}: {status}")
            if status == 200:
                self.clicked += 1
                return
        for attempt in range(10):
            replica = self.pick(attempt)
            if replica is None:
                await asyncio.sleep(0.5)
                continue
            try:
                status = await self.client.decide(replica.url, sent.op.person, run_id, call,
                                                  approve)
            except httpx.HTTPError:
                await asyncio.sleep(0.3)
                continue
            sent.decided.append((approve, status))
            self.history.note("decision", f"{sent.op.tag} run {run_id} call {call} "
                              f"{'approve' if approve else 'deny'}: {status}")
            if status < 500:
                return
            await asyncio.sleep(0.5)

    async def janitor(self) -> None:
        """Every 2 s: deny what a crash left uncertain, and any approval nobody else will
        decide (its person decided already, or never meant to)."""
        by_text = {s.op.text: s for s in self.sent.values()}
        while True:
            await asyncio.sleep(2.0)
            replica = self.pick(1)
            if replica is None:
                continue
            with contextlib.suppress(httpx.HTTPError):
                waiting = await self.client.runs(replica.url, "ana", state="awaiting_approval")
                for run in waiting:
                    sent = by_text.get(run["text"])
                    approval = run.get("approval")
                    if sent is None or approval is None or sent.op.tag in self._deciding:
                        continue
                    tag = f"{sent.op.tag}:{approval['tool_call_id']}:{run['updated_at']}"
                    if tag in self.janitor_denied:
                        continue
                    self.janitor_denied.append(tag)
                    self.history.note("janitor", f"deny {sent.op.tag} {approval['name']} "
                                      f"({approval['reason']})")
                    await self._post_decision(sent, run["run_id"], approval["tool_call_id"],
                                              False)


def stable(text: str) -> float:
    """A number in [0, 1) from ``text``: choices the plan did not make, made the same way
    on a replay."""
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") / 2**64
