"""Posting to Discord exactly once.

Every message is created with a ``nonce`` derived from its delivery key and
``enforce_nonce``: for a few minutes Discord answers a repeated create with the
message it already made, so a retried post whose answer was lost is not made twice.
Past that window, recovery reads the channel's recent history (newest 100
messages) and takes as already posted the bot's own message that answers the same
person's message (``message_reference``) with exactly the part's text; in a DM, where
replies carry no reference, the bot's message with that text posted after the
delivery was recorded. Only what is missing is sent. discord.py's rate-limit
handling (429, ``Retry-After``) stays on.
"""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Callable
from typing import Any

import discord
from discord.http import HTTPClient, Route

from runtime import (
    ApprovalDelivery,
    Delivery,
    DeliveryError,
    FileDelivery,
    ReplyDelivery,
    UploadStarted,
)

from ..base import Link
from .acks import PASSING
from .render import approval_components, approval_content, feedback_components

__all__ = ["DiscordDeliverer", "nonce"]


def nonce(key: str) -> str:
    """A delivery key as a Discord nonce (at most 25 characters), the same every time."""
    return hashlib.sha256(key.encode()).hexdigest()[:25]


class DiscordDeliverer:
    """A ``Deliverer`` for Discord over discord.py's HTTP client."""

    max_chars: int | None = 2_000
    """Discord's limit for a message's content."""

    def __init__(self, http: HTTPClient, *, link: Link | None = None,
                 streaming: Callable[[DiscordDeliverer], Any] | None = None) -> None:
        self.http = http
        self.link = link if link is not None else Link(offline=None)
        """Where its channel stands with Discord (by default: connected, the bot unknown):
        it posts only while connected, and knows its own messages by the bot's id."""
        self.streamer: Any = None if streaming is None else streaming(self)
        """Shows replies while they are written (a ``DiscordStreamer``, made by
        ``streaming`` for this deliverer), or None."""

    @property
    def offline(self) -> str | None:
        """Why it cannot post now (its channel is not connected), or None."""
        return self.link.offline

    @property
    def bot(self) -> str:
        """The bot's user id once its channel signed in ("" until then): its own messages
        are told apart from people's by it (``reconcile``, ``find_stream``)."""
        return self.link.bot or ""

    async def send(self, delivery: Delivery) -> str:
        target = delivery.target
        payload: dict[str, Any] = {"nonce": nonce(delivery.key), "enforce_nonce": True,
                                   "allowed_mentions": {"parse": [], "replied_user": True}}
        if isinstance(delivery, ApprovalDelivery):
            payload["content"] = approval_content(delivery)
            payload["components"] = approval_components(delivery)
        else:
            payload["content"] = delivery.text
            if isinstance(delivery, ReplyDelivery) and delivery.feedback:
                payload["components"] = feedback_components(delivery.run_id)
        if target.get("guild") and target.get("message"):
            payload["message_reference"] = {"message_id": target["message"],
                                            "fail_if_not_exists": False}
        message = await self.call(Route("POST", "/channels/{channel_id}/messages",
                                         channel_id=target["channel"]), json=payload)
        return str(message["id"])

    async def upload(self, delivery: FileDelivery, data: bytes, started: UploadStarted
                     ) -> str:
        """The file as a message's attachment (a multipart create, with the delivery's
        nonce), answering the message that asked, as a reply does; the message's id. One
        request: there is no upload id to record first (``started`` is not needed)."""
        target, name = delivery.target, delivery.file.name
        payload: dict[str, Any] = {"nonce": nonce(delivery.key), "enforce_nonce": True,
                                   "content": "", "attachments": [{"id": 0, "filename": name}],
                                   "allowed_mentions": {"parse": [], "replied_user": False}}
        if target.get("guild") and target.get("message"):
            payload["message_reference"] = {"message_id": target["message"],
                                            "fail_if_not_exists": False}
        file = discord.File(io.BytesIO(data), filename=name)
        form = [{"name": "payload_json", "value": json.dumps(payload)},
                {"name": "files[0]", "value": file.fp, "filename": name,
                 "content_type": delivery.file.media_type}]
        message = await self.call(Route("POST", "/channels/{channel_id}/messages",
                                         channel_id=target["channel"]), form=form, files=[file])
        return str(message["id"])

    async def reconcile(self, delivery: Delivery) -> str | None:
        target = delivery.target
        history = await self.call(Route("GET", "/channels/{channel_id}/messages",
                                         channel_id=target["channel"]), params={"limit": 100})
        text = approval_content(delivery) if isinstance(delivery, ApprovalDelivery) \
            else delivery.text
        for message in history:
            if self._carries(message, delivery, text):
                return str(message["id"])
        return None

    def _carries(self, message: dict[str, Any], delivery: Delivery, text: str) -> bool:
        author = (message.get("author") or {}).get("id")
        if self.bot and author != self.bot:
            return False
        if isinstance(delivery, FileDelivery):
            if not any(a.get("filename") == delivery.file.name
                       for a in message.get("attachments") or []):
                return False
        elif message.get("content") != text:
            return False
        answered = (message.get("message_reference") or {}).get("message_id")
        if delivery.target.get("guild"):
            return bool(answered == delivery.target.get("message"))
        made = discord.utils.snowflake_time(int(message["id"])).timestamp()
        return made >= delivery.created_at - 1

    async def call(self, route: Route, **options: Any) -> Any:
        """One REST call; ``DeliveryError`` when it fails, and at once while offline."""
        if self.offline is not None:
            raise DeliveryError(f"Discord {route.method} {route.path} not tried: "
                                f"{self.offline}")
        try:
            return await self.http.request(route, **options)
        except discord.HTTPException as exc:
            raise DeliveryError(f"Discord {route.method} {route.path} failed: {exc.status} "
                                f"{exc.text}") from exc
        except (discord.DiscordException, *PASSING) as exc:
            raise DeliveryError(f"Discord {route.method} {route.path} failed: "
                                f"{type(exc).__name__}: {exc}") from exc
