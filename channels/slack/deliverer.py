"""Posting to Slack exactly once: every message carries its delivery key in its metadata.

``send`` posts with ``metadata = {"event_type": "maiden_delivery", "event_payload":
{"key": ...}}``; ``reconcile`` reads the conversation back with
``include_all_metadata`` and finds the bot's message carrying that key. The Web
API client retries rate limits (429: Slack did not post) but never a connection
error: a post whose response was lost may have been stored, and blindly sending
it again is how bots answer twice. The outbox reconciles such a post instead.
Posts are paced to about one per second per channel, as Slack asks.

A file goes up in Slack's three steps: ``files.getUploadURLExternal`` (the file's id and
an upload URL), the bytes POSTed to that URL, ``files.completeUploadExternal`` (which
shares it into the thread). Until completed a file is invisible, so its id is recorded in
the outbox before completing (``Uploader``), and a crash is reconciled by that id alone:
``files.info`` shows it shared in the target, or it is completed now. No clock is
compared, so a Slack clock behind or ahead of the host's changes nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from runtime import (
    ApprovalDelivery,
    Delivery,
    DeliveryError,
    FileDelivery,
    ReplyDelivery,
    StreamDelivery,
    UploadStarted,
)

from ..base import Link
from .render import approval_blocks, feedback_blocks, markdown_blocks, plain

__all__ = ["EVENT_TYPE", "SlackCallError", "SlackDeliverer", "shared_in"]

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
        link: Link | None = None,
        pace_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        sessions: Any = None,
        streaming: Callable[[SlackDeliverer], Any] | None = None,
    ) -> None:
        self.client = client
        self.link = link if link is not None else Link(offline=None)
        """Where its channel stands with Slack (by default: connected, the bot unknown):
        it posts only while connected, and knows its own messages by the bot's id."""
        self.pace_s = pace_s
        self.clock = clock
        self.sleep = sleep
        self._last: dict[str, float] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self.sessions: Any = sessions
        """The channel's agent sessions (``sessions.Sessions``), or None: as a run's reply
        or approval prompt goes to Slack (posted, found posted after a crash, or a stream
        finished with it), the thread's session is set from the store, before the record
        counts as sent (``shown``)."""
        self.streamer: Any = None if streaming is None else streaming(self)
        """Shows replies while they are written (a ``SlackStreamer``, made by ``streaming``
        for this deliverer), or None."""

    @property
    def offline(self) -> str | None:
        """Why it cannot post now (its channel is not connected), or None."""
        return self.link.offline

    @property
    def bot_user(self) -> str | None:
        """The bot's user id once its channel signed in: its own messages are told apart
        from people's by it (``reconcile``)."""
        return self.link.bot

    async def send(self, delivery: Delivery) -> str:
        await self.shown(delivery)  # first: a failure then leaves nothing posted
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

    async def upload(self, delivery: FileDelivery, data: bytes, started: UploadStarted
                     ) -> str:
        """Into the target's thread, titled with the file's name, in Slack's three steps;
        the file's id goes to ``started`` (the outbox records it) before the upload is
        completed. With an id recorded already (``reconcile`` did not find it shared),
        that upload is completed instead, unless Slack has discarded it. The file's id."""
        channel = delivery.target["channel"]
        async with self._lock(channel):
            await self._pace(channel)
            if delivery.upload_id is not None:
                resumed = await self._resume(delivery, delivery.upload_id)
                if resumed is not None:
                    return resumed
            ticket = await self.call(
                "files.getUploadURLExternal", self.client.files_getUploadURLExternal,
                filename=delivery.file.name, length=len(data))
            file_id = str(ticket["file_id"])
            await self._send_bytes(str(ticket["upload_url"]), data, delivery.file.name)
            await started(file_id)
            await self._complete(delivery, file_id)
        return file_id

    async def _complete(self, delivery: FileDelivery, file_id: str) -> None:
        await self.call(
            "files.completeUploadExternal", self.client.files_completeUploadExternal,
            files=[{"id": file_id, "title": delivery.file.name}],
            channel_id=delivery.target["channel"], thread_ts=delivery.target.get("thread_ts"))

    async def _resume(self, delivery: FileDelivery, file_id: str) -> str | None:
        """Complete a recorded upload; its id, or None if Slack no longer has its ticket (an
        upload left uncompleted is discarded: it is made anew). Slack completes an upload
        once and answers ``file_not_found`` after: a file that exists then was completed
        before (its share in the thread not yet shown by ``files.info``)."""
        try:
            await self._complete(delivery, file_id)
        except SlackCallError as exc:
            if exc.slack_error != "file_not_found":
                raise
            return None if await self._file(file_id) is None else file_id
        return file_id

    async def _file(self, file_id: str) -> dict[str, Any] | None:
        """``files.info``'s file: None if Slack has no file by that id (an upload that was
        never completed); for one a person deleted (so it was shared), a tombstone, as
        messages show a deleted file."""
        try:
            info = await self.call("files.info", self.client.files_info, file=file_id)
        except SlackCallError as exc:
            if exc.slack_error == "file_not_found":
                return None
            if exc.slack_error == "file_deleted":
                return {"id": file_id, "mode": "tombstone"}
            raise
        return dict(info.get("file") or {"id": file_id})

    async def _send_bytes(self, url: str, data: bytes, name: str) -> None:
        """The bytes to the upload URL, with the client's own session, timeout, proxy and
        TLS settings. Nothing shows until the upload is completed, so a failure here leaves
        nothing to find."""
        if self.offline is not None:
            raise SlackCallError(f"Slack upload of {name} not tried: {self.offline}")
        client = self.client
        timeout = aiohttp.ClientTimeout(total=client.timeout)
        try:
            async with contextlib.AsyncExitStack() as stack:
                session = client.session
                if session is None:  # as the client itself does: one for this request
                    session = await stack.enter_async_context(
                        aiohttp.ClientSession(timeout=timeout))
                async with session.post(url, data=data, timeout=timeout, proxy=client.proxy,
                                        ssl=True if client.ssl is None else client.ssl
                                        ) as response:
                    status, body = response.status, await response.text()
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise SlackCallError(f"Slack upload of {name} failed: {type(exc).__name__}: "
                                 f"{exc}") from exc
        if status != 200:
            raise SlackCallError(f"Slack upload of {name} failed: HTTP {status}: {body[:200]}")

    async def reconcile(self, delivery: Delivery) -> str | None:
        if isinstance(delivery, FileDelivery):
            return await self._uploaded(delivery)
        channel = delivery.target["channel"]
        thread_ts = delivery.target.get("thread_ts")
        oldest = max(0.0, delivery.created_at - _LOOKBACK_S)
        async for message in self.thread_messages(channel, thread_ts, oldest=oldest):
            if self._carries(message, delivery.key):
                if not isinstance(delivery, StreamDelivery):  # (finishing one says it)
                    await self.shown(delivery)  # a crash may have come before it was said
                return str(message["ts"])  # the pages after it are not read
        return None

    async def shown(self, delivery: Delivery) -> None:
        """``delivery`` goes to Slack now, or is there already: if it is where a run ends
        or pauses (its reply, its approval prompt, a stream finishing), the thread's agent
        session says so. Done before anything is posted (or after a post was found), so a
        failure, which raises (``SlackCallError``), leaves the outbox nothing but the same
        record to try again: never a post to make twice. Nothing is said while the channel
        is not connected (``offline``: it raises at once, as every call does)."""
        if self.sessions is None:
            return
        if self.offline is not None:
            raise SlackCallError(f"Slack agent session not set: {self.offline}")
        if isinstance(delivery, ApprovalDelivery | StreamDelivery) or (
                isinstance(delivery, ReplyDelivery) and delivery.answer):
            await self.sessions.shown(delivery)

    async def _uploaded(self, delivery: FileDelivery) -> str | None:
        """The recorded upload's file id if ``files.info`` shows it shared in the target (or
        deleted since); None if nothing was recorded (nothing was completed: an upload is
        recorded before it is completed) or it is not shared there."""
        if delivery.upload_id is None:
            return None
        found = await self._file(delivery.upload_id)
        if found is None:
            return None
        if found.get("mode") == "tombstone" or shared_in(found, delivery.target):
            return delivery.upload_id
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


def shared_in(file: Mapping[str, Any], target: Mapping[str, str]) -> bool:
    """Whether a file object (``files.info``) is shared in ``target``: in its channel, in
    its thread when it names one, at the top level (perhaps a thread's root since) when
    not. ``shares`` maps ``public`` / ``private`` to channel ids to their shares."""
    thread = target.get("thread_ts")
    for kind in ("public", "private"):
        for share in ((file.get("shares") or {}).get(kind) or {}).get(target["channel"]) or []:
            parent = share.get("thread_ts")
            if parent == thread if thread else parent in (None, share.get("ts")):
                return True
    return False
