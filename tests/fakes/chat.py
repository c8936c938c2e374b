"""A reference chat channel: the smallest deliverer that keeps the outbox's contract.

Messages live in a list, each with the delivery key it carried (as Slack message
metadata or a Discord nonce would). ``fail`` makes the next send fail before or
after posting, as a dropped connection does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from runtime import ApprovalDelivery, Delivery, StreamDelivery, ToolUpdate

__all__ = ["MemoryChat", "MemoryStreamer", "Posted", "Streamed"]


@dataclass(frozen=True)
class Posted:
    id: str
    key: str
    kind: str
    text: str
    target: dict[str, str] = field(default_factory=dict)


class MemoryChat:
    """A ``Deliverer`` over a list of posted messages."""

    def __init__(self, max_chars: int | None = 500, *, stream: bool = False) -> None:
        self.max_chars = max_chars
        self.posted: list[Posted] = []
        self.fail: Literal["before", "after"] | None = None
        self.streamer = MemoryStreamer(self) if stream else None
        """With ``stream``: replies are shown while they are written."""

    async def send(self, delivery: Delivery) -> str:
        if self.fail == "before":
            self.fail = None
            raise ConnectionError("channel down")
        text = delivery.text
        if isinstance(delivery, ApprovalDelivery):
            text = f"Approve? {delivery.text} [Approve] [Deny]"
        if self.max_chars is not None and len(text) > self.max_chars:
            raise ValueError(f"message of {len(text)} characters over the limit")
        message = Posted(id=f"m{len(self.posted) + 1}", key=delivery.key, kind=delivery.kind,
                         text=text, target=dict(delivery.target))
        self.posted.append(message)
        if self.fail == "after":
            self.fail = None
            raise TimeoutError("posted, but the answer never came back")
        return message.id

    async def reconcile(self, delivery: Delivery) -> str | None:
        return next((m.id for m in self.posted if m.key == delivery.key), None)


@dataclass
class Streamed:
    """A message a stream opened: its text so far, whether it still streams, its tasks."""

    id: str
    key: str
    text: str
    streaming: bool = True
    tasks: dict[str, str] = field(default_factory=dict)
    """Each tool call's latest status."""
    appends: int = 0
    feedback: str | None = None
    """The run whose 👍 / 👎 buttons the finished message carries."""


class MemoryStreamer:
    """``MemoryChat``'s ``Streamer``: a stream is one message that grows, then stops.

    ``fail_open`` makes the next ``open_stream`` raise (a platform that refuses)."""

    stream_every_s = 0.0

    def __init__(self, chat: MemoryChat) -> None:
        self.chat = chat
        self.messages: dict[str, Streamed] = {}
        self.fail_open = False
        self.opened = asyncio.Event()
        """Set once a stream has opened."""
        self.refused = asyncio.Event()
        """Set once ``fail_open`` has refused a stream."""

    async def open_stream(self, stream: StreamDelivery, text: str,
                          tools: Sequence[ToolUpdate]) -> list[str]:
        if self.fail_open:
            self.fail_open = False
            self.refused.set()
            raise ConnectionError("streaming is not allowed here")
        message = Streamed(id=f"s{len(self.messages) + 1}", key=stream.key, text=text)
        self.messages[message.id] = message
        self._tools(message, tools)
        self.opened.set()
        return [message.id]

    async def append_stream(self, stream: StreamDelivery, text: str,
                            tools: Sequence[ToolUpdate]) -> list[str]:
        message = self.messages[stream.remote_ids[-1]]
        assert message.streaming, "append to a stopped stream"
        message.text += text
        message.appends += 1
        self._tools(message, tools)
        return list(stream.remote_ids)

    async def finish_stream(self, stream: StreamDelivery, *, replace: str | None,
                            note: str | None, key: str, feedback: str | None = None
                            ) -> list[str]:
        message = self.messages[stream.remote_ids[-1]]
        if message.streaming and note:
            message.text += f"\n{note}"
        message.streaming = False
        if replace is not None:
            message.text = replace
        message.feedback = feedback
        return list(stream.remote_ids)

    async def find_stream(self, stream: StreamDelivery) -> list[str]:
        return [m.id for m in self.messages.values() if m.key == stream.key]

    def _tools(self, message: Streamed, tools: Sequence[ToolUpdate]) -> None:
        for update in tools:
            message.tasks[f"{update.name}:{update.call_id}"] = update.status

    def visible(self) -> list[str]:
        """The text of every message a person sees: streams, then plain posts."""
        return [m.text for m in self.messages.values()] + [p.text for p in self.chat.posted]
