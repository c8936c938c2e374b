"""Slack's side of an app's Request URL: the signed POSTs of the Events API over HTTP, and
how Slack judges the answers.

From the reference:

- https://docs.slack.dev/apis/events-api/#responding — every event must be answered with
  an HTTP 2xx within three seconds.
- https://docs.slack.dev/apis/events-api/#retries — one that is not is sent again, at most
  three times ("nearly immediately", then after one minute, then after five), each with
  ``X-Slack-Retry-Num`` (1, 2, 3) and ``X-Slack-Retry-Reason``: ``http_timeout`` when no
  answer came within three seconds (Slack does not wait for it: the first request may
  still be answered later, and the app sees both), ``http_error`` for any other status,
  ``connection_failed`` when the app could not be reached (``too_many_redirects``,
  ``ssl_error``, ``unknown_error`` do not arise on loopback). A non-2xx answer carrying
  ``X-Slack-No-Retry: 1`` is not retried.
- https://docs.slack.dev/interactivity/handling-user-interaction/#acknowledgment_response
  and https://docs.slack.dev/interactivity/implementing-slash-commands/#responding_to_commands
  — a click or a slash command must be answered with a 200 within three seconds too, and is
  not retried (the person sees an error). A command's answer may carry the message the person
  sees: an empty body (nothing), plain text, or a JSON object with ``text`` or ``blocks`` and
  ``response_type`` ``ephemeral`` (the default) or ``in_channel``.
- Each request is signed (``payloads.sign``) with the app's signing secret; events are JSON,
  interactions ``payload=<json>`` and commands their fields, form-encoded.

``RequestUrl.event`` is one delivery, and says what Slack would retry with (``retry``);
who sends again, to which replica and when, is the caller's (the soak compresses the
minutes to seconds). While Slack is down (``FakeSlack.misbehave``) nothing is sent until it
is back; while it is slow, each request leaves late.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, Self

import aiohttp

from . import payloads
from .store import JSON
from .wire import Outage

__all__ = ["RESPOND_WITHIN_S", "RETRY_REASONS", "Delivery", "RequestUrl", "command_message"]

RESPOND_WITHIN_S = 3.0
RETRY_REASONS = frozenset({"http_timeout", "too_many_redirects", "connection_failed",
                           "ssl_error", "http_error", "unknown_error"})
_MAX_RETRIES = 3

Kind = Literal["event", "interaction", "command"]


@dataclass
class Delivery:
    """One request to the app and its answer, as Slack judged it."""

    kind: Kind
    url: str
    retry_num: int | None
    sent_at: float  # time.monotonic()
    status: int | None = None  # None: no answer within the time allowed, or no connection
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    retry: str | None = None
    """The ``X-Slack-Retry-Reason`` Slack would send the event again with; None when it was
    acknowledged, or is not to be retried (an interaction, a command, ``X-Slack-No-Retry``)."""
    late_status: int | None = None
    """The status of an answer that came after the three seconds (Slack ignores it)."""

    @property
    def acked(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


class RequestUrl:
    """Sends what Slack sends an app in HTTP mode, signed with ``secret``."""

    def __init__(self, secret: str, *, within_s: float = RESPOND_WITHIN_S,
                 outage: Callable[[], Outage | None] = lambda: None,
                 wait_s: float = 10.0) -> None:
        self.secret = secret
        self.within_s = within_s
        """The time an answer is waited for (Slack's three seconds unless a test says)."""
        self.outage = outage
        self.wait_s = wait_s
        """How long a delivery waits for Slack to be up again (then ``TimeoutError``)."""
        self.sent: list[Delivery] = []
        self._session: aiohttp.ClientSession | None = None
        self._late: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> Self:
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60))
        return self

    async def __aexit__(self, *exc: object) -> None:
        for task in list(self._late):
            task.cancel()
        await asyncio.gather(*self._late, return_exceptions=True)
        if self._session is not None:
            await self._session.close()

    async def event(self, url: str, payload: JSON, *, retry_num: int | None = None,
                    retry_reason: str = "http_timeout") -> Delivery:
        """POST an ``event_callback`` (``retry_num``: Slack's retry of it, with the reason
        the previous try failed)."""
        if retry_num is not None and not (1 <= retry_num <= _MAX_RETRIES
                                          and retry_reason in RETRY_REASONS):
            raise ValueError(f"Slack retries an event at most {_MAX_RETRIES} times, with a "
                             f"documented reason (not {retry_num}, {retry_reason!r})")
        raw, headers = payloads.signed_event(payload, self.secret, retry_num=retry_num,
                                             retry_reason=retry_reason)
        return await self._post("event", url, raw, headers, retry_num)

    async def interaction(self, url: str, payload: JSON) -> Delivery:
        """POST a click (``payloads.block_actions_payload``, ``feedback_click``)."""
        raw, headers = payloads.signed_interaction(payload, self.secret)
        return await self._post("interaction", url, raw, headers, None)

    async def command(self, url: str, payload: JSON) -> Delivery:
        """POST a slash command (``payloads.slash_command``); ``command_message`` reads
        what its answer shows the person."""
        raw, headers = payloads.signed_command(payload, self.secret)
        return await self._post("command", url, raw, headers, None)

    async def _post(self, kind: Kind, url: str, raw: bytes, headers: dict[str, str],
                    retry_num: int | None) -> Delivery:
        await self._leave()
        # Signed as it leaves (a slow Slack signs late, not stale).
        stamp = int(time.time())
        headers = {**headers, "X-Slack-Request-Timestamp": str(stamp),
                   "X-Slack-Signature": payloads.sign(raw, self.secret, stamp)}
        sent = Delivery(kind, url, retry_num, time.monotonic())
        self.sent.append(sent)
        task = asyncio.create_task(self._exchange(sent, raw, headers))
        done, _ = await asyncio.wait({task}, timeout=self.within_s)
        if not done:  # Slack goes on without it; the answer, if any, is recorded as late
            self._late.add(task)
            task.add_done_callback(self._late.discard)
            sent.retry = "http_timeout" if kind == "event" else None
            return sent
        await task
        if not sent.acked and kind == "event" and sent.retry is None \
                and sent.headers.get("x-slack-no-retry") != "1":
            sent.retry = "http_error"
        return sent

    async def _exchange(self, sent: Delivery, raw: bytes, headers: dict[str, str]) -> None:
        assert self._session is not None, "RequestUrl used outside its context"
        started = time.monotonic()
        try:
            async with self._session.post(sent.url, data=raw, headers=headers) as answer:
                body = await answer.read()
        except (aiohttp.ClientConnectionError, OSError, TimeoutError):
            if time.monotonic() - started < self.within_s:
                sent.retry = "connection_failed" if sent.kind == "event" else None
            return
        if time.monotonic() - started >= self.within_s:
            sent.late_status = answer.status
            sent.retry = "http_timeout" if sent.kind == "event" else None
            return
        sent.status, sent.body = answer.status, body
        sent.headers = {k.lower(): v for k, v in answer.headers.items()}

    async def _leave(self) -> None:
        """Wait while Slack is down (at most ``wait_s``), and its delay while it is slow."""
        deadline = time.monotonic() + self.wait_s
        while (outage := self.outage()) is not None and outage.mode == "down":
            if time.monotonic() >= deadline:
                raise TimeoutError(f"Slack was down for {self.wait_s}s: nothing delivered")
            await asyncio.sleep(min(0.2, max(0.0, outage.until - time.monotonic())) or 0.01)
        if outage is not None and outage.mode == "slow":
            await asyncio.sleep(outage.delay_s)


def command_message(delivery: Delivery) -> JSON | None:
    """What a slash command's answer shows the person (``{"text", "response_type"}``, and
    ``blocks`` if it had them); None for an empty answer (nothing shown). ``ValueError``
    for an answer Slack shows as an error: not a 200, or a body it cannot read."""
    if delivery.status != 200:
        raise ValueError(f"the command was answered {delivery.status} (late: "
                         f"{delivery.late_status}): Slack shows the person an error")
    text = delivery.body.decode()
    if not text.strip():
        return None
    if not delivery.headers.get("content-type", "").startswith("application/json"):
        return {"text": text, "response_type": "ephemeral"}
    message = json.loads(text)
    if not isinstance(message, dict) or not (message.get("text") or message.get("blocks")):
        raise ValueError(f"a JSON answer to a command needs text or blocks: {text[:200]}")
    kind = message.setdefault("response_type", "ephemeral")
    if kind not in ("ephemeral", "in_channel"):
        raise ValueError(f"response_type is ephemeral or in_channel, not {kind!r}")
    return dict(message)
