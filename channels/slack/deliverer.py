"""Posting to Slack exactly once: every message carries its delivery key in its metadata.

``send`` posts with ``metadata = {"event_type": "maiden_delivery", "event_payload":
{"key": ...}}``; ``reconcile`` reads the conversation back with
``include_all_metadata`` and finds the bot's message carrying that key. The Web
API client retries rate limits (429: Slack did not post) but never a connection
error: a post whose response was lost may have been stored, and blindly sending
it again is how bots answer twice. The outbox reconciles such a post instead.
Posts are paced to about one per second per channel, as Slack asks.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from runtime import ApprovalDelivery, Delivery, DeliveryError, FileDelivery, ReplyDelivery

from .render import approval_blocks, feedback_blocks, markdown_blocks, plain

__all__ = ["EVENT_TYPE", "SlackCallError", "SlackDeliverer"]

EVENT_TYPE = "maiden_delivery"
_LOOKBACK_S = 600.0
"""How far before a record's creation ``conversations.history`` looks for it."""


class SlackCallError(DeliveryError):
    """A Web API call that failed, with Slack's error code when Slack gave one."""

    def __init__(self, message: str, slack_error: str | None = None) -> None:
        super().__init__(message)
        self.slack_error = slack_error


class SlackDeliverer:
    """A ``Deliverer`` for Slack: posts replies and approval prompts, finds them again."""

    max_chars: int | None = 3_900
    """Slack shows up to ~4,000 characters of a message before cutting it."""

    def __init__(
        self,
        client: AsyncWebClient,
        *,
        bot_user: str | None = None,
        pace_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.client = client
        self.bot_user = bot_user
        self.pace_s = pace_s
        self.clock = clock
        self.sleep = sleep
        self._last: dict[str, float] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self.offline: str | None = None
        """Why Slack cannot be posted to now (the channel is still connecting); None: it can.
        Sends fail fast meanwhile, and the outbox keeps the deliveries for later."""
        self.streamer: Any = None
        """Shows replies while they are written (a ``SlackStreamer``), or None."""

    async def send(self, delivery: Delivery) -> str:
        channel = delivery.target["channel"]
        metadata = {"event_type": EVENT_TYPE, "event_payload": {"key": delivery.key}}
        if isinstance(delivery, ApprovalDelivery):
            blocks, text = approval_blocks(delivery), plain(delivery)
        else:
            blocks, text = markdown_blocks(delivery.text), delivery.text
            if isinstance(delivery, ReplyDelivery) and delivery.feedback:
                blocks += feedback_blocks(delivery.run_id)
        async with self._lock(channel):
            await self._pace(channel)
            response = await self.call(
                "chat.postMessage", self.client.chat_postMessage, channel=channel,
                thread_ts=delivery.target.get("thread_ts"), text=text, blocks=blocks,
                metadata=metadata, unfurl_links=False, unfurl_media=False)
        return str(response["ts"])

    async def upload(self, delivery: FileDelivery, data: bytes) -> str:
        """``files_upload_v2`` into the target's thread, titled with the file's name (what
        ``reconcile`` looks for: an upload carries no metadata); the file's id."""
        channel = delivery.target["channel"]
        async with self._lock(channel):
            await self._pace(channel)
            response = await self.call(
                "files.upload_v2", self.client.files_upload_v2, channel=channel,
                thread_ts=delivery.target.get("thread_ts"), file=data,
                filename=delivery.file.name, title=delivery.file.name)
        return str((response.get("file") or response["files"][0])["id"])

    async def reconcile(self, delivery: Delivery) -> str | None:
        channel = delivery.target["channel"]
        thread_ts = delivery.target.get("thread_ts")
        oldest = max(0.0, delivery.created_at - _LOOKBACK_S)
        async for message in self.thread_messages(channel, thread_ts, oldest=oldest):
            if isinstance(delivery, FileDelivery):
                found = self._shares(message, delivery)
                if found is not None:
                    return found
            elif self._carries(message, delivery.key):
                return str(message["ts"])  # the pages after it are not read
        return None

    def _shares(self, message: dict[str, Any], delivery: FileDelivery) -> str | None:
        """The id of the bot's upload of ``delivery``'s file in ``message``: the same title,
        shared no earlier than the delivery was written (a run's files are written with
        its answer, and a thread's runs one after another)."""
        if self.bot_user is not None and message.get("user") != self.bot_user:
            return None
        if float(message.get("ts") or 0) < delivery.created_at - 1.0:
            return None
        for item in message.get("files") or []:
            if item.get("title") == delivery.file.name and item.get("id"):
                return str(item["id"])
        return None

    async def thread_messages(self, channel: str, thread_ts: str | None, *,
                              oldest: float = 0.0) -> AsyncIterator[dict[str, Any]]:
        """A thread's messages (a channel's since ``oldest``, without one), with their
        metadata, page by page as they are read."""
        cursor: str | None = None
        while True:
            if thread_ts:
                page = await self.call(
                    "conversations.replies", self.client.conversations_replies,
                    channel=channel, ts=thread_ts, include_all_metadata=True, limit=200,
                    cursor=cursor)
            else:
                page = await self.call(
                    "conversations.history", self.client.conversations_history,
                    channel=channel, include_all_metadata=True, limit=200, cursor=cursor,
                    oldest=f"{oldest:.6f}")
            for message in page.get("messages") or []:
                yield message
            cursor = (page.get("response_metadata") or {}).get("next_cursor") or None
            if not cursor:
                return

    def _carries(self, message: dict[str, Any], key: str) -> bool:
        metadata = message.get("metadata") or {}
        if metadata.get("event_type") != EVENT_TYPE:
            return False
        if self.bot_user is not None and message.get("user") not in (None, self.bot_user):
            return False  # someone else's message cannot be our delivery
        return bool((metadata.get("event_payload") or {}).get("key") == key)

    def _lock(self, channel: str) -> asyncio.Lock:
        return self._locks.setdefault(channel, asyncio.Lock())

    async def _pace(self, channel: str) -> None:
        last = self._last.get(channel)
        if last is not None:
            wait = last + self.pace_s - self.clock()
            if wait > 0:
                await self.sleep(wait)
        self._last[channel] = self.clock()

    async def call(self, method: str, fn: Callable[..., Awaitable[Any]], **params: Any) -> Any:
        """One Web API call (``None`` parameters left out); ``SlackCallError`` with Slack's
        reason when it fails, and at once while the channel is offline."""
        if self.offline is not None:
            raise SlackCallError(f"Slack {method} not tried: {self.offline}")
        try:
            return await fn(**{k: v for k, v in params.items() if v is not None})
        except SlackApiError as exc:
            error = exc.response.get("error") if exc.response is not None else None
            raise SlackCallError(f"Slack {method} failed: {error or exc}", error) from exc
        except (SlackClientError, aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise SlackCallError(f"Slack {method} failed: {type(exc).__name__}: {exc}") \
                from exc
