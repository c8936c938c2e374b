"""How the soak's Slack reaches the replicas: over Socket Mode, or over HTTP (the Events API)
through a load balancer.

A replica is in one mode for the whole pass (``plan.slack_http`` lists the ones in HTTP
mode): Socket Mode replicas connect to the fake Slack; HTTP ones take Slack's signed POSTs
at ``POST /slack/events``. A Slack app has one mode, so such a fleet is what a move from
Socket Mode to the Events API looks like while it rolls out, one store behind both. Each
thing a person does in Slack (a message, a stop, a click, a command) goes the way the
replica the plan names for it takes Slack: Socket Mode to any live connection (Slack picks
one), HTTP to the load balancer, which sends it to that replica, or the next HTTP one up.

What Slack sends again, and when: an event not acknowledged (Socket Mode: its envelope not
acked within ``ACK_S``; HTTP: no 2xx within Slack's three seconds,
``tests/fakes/slack/request_url.py``) is delivered again, at most three times, with the
next ``retry_attempt`` (Socket Mode) or ``X-Slack-Retry-Num`` and the reason (HTTP), the
retries' minutes compressed to ``RETRY_PAUSES_S``. Clicks and commands are sent once:
Slack does not retry them (the person sees an error).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass

from tests.fakes.slack import FakeSlack, command_message
from tests.fakes.slack.store import JSON

from .system import History, Replica

__all__ = ["ACK_S", "NO_REPLICA", "RETRY_PAUSES_S", "SLACK_DOWN", "Answered", "SlackWire"]

ACK_S = 6.0  # Socket Mode: how long an envelope waits for its ack (Slack's 3 s, doubled
# for a 2-core machine shared with other work)
RETRY_PAUSES_S = (1.0, 10.0, 25.0)  # HTTP: Slack's "nearly immediately, 1 min, 5 min",
# compressed, yet longer than a replica's restart (the load balancer may have none up)
EVENTS = "/slack/events"
NO_REPLICA = "no replica up"  # the load balancer had none to send it to
SLACK_DOWN = "Slack down"  # Slack could not send it at all


@dataclass
class Answered:
    """A click's or a command's fate: acknowledged in time, and what the acknowledgement
    showed the person (a command's answer; None: nothing)."""

    acked: bool
    shown: JSON | None = None
    error: str | None = None  # an answer Slack shows as an error (a command's)


class SlackWire:
    def __init__(self, fake: FakeSlack, replicas: list[Replica], http: list[int],
                 history: History) -> None:
        self.fake = fake
        self.replicas = replicas
        self.http = set(http)
        self.history = history
        self.counts: Counter[str] = Counter()  # what went which way, and the retries' reasons

    def over_http(self, replica: int) -> bool:
        return replica % len(self.replicas) in self.http

    def _backend(self, start: int) -> Replica | None:
        """The load balancer's pick: the replica ``start`` if it is an HTTP one and up, else
        the next such one (None if none is)."""
        n = len(self.replicas)
        for i in range(n):
            replica = self.replicas[(start + i) % n]
            if replica.index in self.http and replica.up:
                return replica
        return None

    async def event(self, payload: JSON, replica: int, log: list[str]) -> bool:
        """Deliver an ``event_callback`` until it is acknowledged, as Slack does (four
        tries); whether it was. What went wrong on the way is added to ``log``."""
        if self.over_http(replica):
            return await self._http_event(payload, replica, log)
        envelope: str | None = None
        fake = self.fake
        for attempt in range(4):  # the event, then Slack's three retries
            live = fake.socket.live
            to = None if live <= 1 else (replica + attempt) % live
            try:
                envelope = (await fake.socket_event(payload, to=to) if envelope is None else
                            await fake.socket_redeliver(envelope, reason="timeout", to=to))
                self.counts["socket events" if attempt == 0 else "socket retries"] += 1
                await fake.acked(envelope, timeout=ACK_S)
            except (TimeoutError, ConnectionError):  # (or the link closing as its replica died)
                log.append(f"{self.history.now():.1f} slack: no ack (to {to})")
                continue
            return True
        log.append(f"{self.history.now():.1f} slack: never acked")
        return False

    async def _http_event(self, payload: JSON, replica: int, log: list[str]) -> bool:
        reason, tries = "http_timeout", 0
        for attempt in range(4):
            if attempt:
                await asyncio.sleep(RETRY_PAUSES_S[attempt - 1])
            target = self._backend(replica + attempt)
            if target is None:  # the load balancer has nobody to send it to
                reason = "connection_failed"
                log.append(f"{self.history.now():.1f} slack http: no replica up")
                tries += 1
                continue
            try:
                sent = await self.fake.request_url.event(
                    target.url + EVENTS, payload, retry_num=tries or None, retry_reason=reason)
            except TimeoutError:  # Slack itself was down all along: nothing left it
                log.append(f"{self.history.now():.1f} slack http: Slack down")
                continue
            tries += 1
            self.counts["http events" if tries == 1 else "http retries"] += 1
            if sent.acked:
                return True
            self.counts[f"http {sent.status or sent.retry}"] += 1  # (a status: maiden's)
            log.append(f"{self.history.now():.1f} slack http: {target.name} "
                       f"{sent.retry or sent.status}")
            if sent.retry is None:  # X-Slack-No-Retry
                return False
            reason = sent.retry
        log.append(f"{self.history.now():.1f} slack http: never acked")
        return False

    async def click(self, payload: JSON, replica: int) -> Answered:
        """A ``block_actions`` click, sent once."""
        if self.over_http(replica):
            target = self._backend(replica)
            if target is None:
                return Answered(False, error=NO_REPLICA)
            self.counts["http clicks"] += 1
            try:
                sent = await self.fake.request_url.interaction(target.url + EVENTS, payload)
            except TimeoutError:
                return Answered(False, error=SLACK_DOWN)
            return Answered(sent.acked)
        self.counts["socket clicks"] += 1
        try:
            await self.fake.acked(await self.fake.socket_interactive(payload), timeout=ACK_S)
        except (TimeoutError, ConnectionError):  # (the link closing as its replica died)
            return Answered(False)
        return Answered(True)

    async def command(self, payload: JSON, replica: int) -> Answered:
        """A slash command, sent once; what its acknowledgement showed."""
        if self.over_http(replica):
            target = self._backend(replica)
            if target is None:
                return Answered(False, error=NO_REPLICA)
            self.counts["http commands"] += 1
            try:
                sent = await self.fake.request_url.command(target.url + EVENTS, payload)
            except TimeoutError:
                return Answered(False, error=SLACK_DOWN)
            try:
                return Answered(sent.acked, command_message(sent))
            except ValueError as exc:
                return Answered(sent.acked, error=str(exc))
        self.counts["socket commands"] += 1
        try:
            ack = await self.fake.acked(await self.fake.socket_command(payload), timeout=ACK_S)
        except (TimeoutError, ConnectionError):  # (the link closing as its replica died)
            return Answered(False)
        return Answered(True, ack.get("payload") or None)
