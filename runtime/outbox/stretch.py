"""One run's stream in this process (``Stretch``: what ``LiveReplies`` keeps of it from its
start here to its end or pause), and how a stream ends before the run's reply or prompt."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Literal

from ..model.entries import ToolCall
from ..model.runs import ApprovalDelivery, Delivery, ReplyDelivery, StreamDelivery
from .streamer import ToolUpdate, arguments_summary

__all__ = ["WAITING_NOTE", "Stretch", "stream_ending", "tool_update"]

WAITING_NOTE = "⏸ waiting for a person to approve the next step"


@dataclass
class Stretch:
    """One run's stream in this process, from its start here to its end or pause."""

    run_id: str
    thread_id: str
    started: float = 0.0
    """When its stretch of the run began here."""
    inert: bool = False
    """Not streamed here: no streamer for its channel, taken up after a crash, or the
    platform refused."""
    text: list[str] = field(default_factory=list)
    tools: list[ToolUpdate] = field(default_factory=list)
    streamed: str = ""
    summaries: dict[str, str] = field(default_factory=dict)
    """Each call's arguments summary, by call id (its end repeats it)."""
    stream: StreamDelivery | None = None
    opening: str | None = None
    """The key of the stream it opened, or is opening (recorded before the platform is
    asked, so before ``stream`` is set)."""
    ended: bool = False
    """Its stretch of the run is over (ended, paused, or stopped being driven here)."""
    closed: bool = False
    """Ended for good (completed, failed, cancelled, timed out), not paused for a person:
    its reply, posted whole, says all it has to."""
    held: bool = False
    """The store did not take its stream's ids: nothing more is appended until it does."""
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    after: asyncio.Task[None] | None = None
    """The send of what the run left unsent as it started: its stream opens after it."""
    earlier: asyncio.Task[None] | None = None
    """The stream of the run's earlier life here, which left with no end (a commit lost to
    another writer): its last flush goes first, and this life's reply replaces its text."""


def tool_update(call: ToolCall, status: Literal["in_progress", "complete", "error"]) -> ToolUpdate:
    return ToolUpdate(call.id, call.name, arguments_summary(call.arguments), status)


def stream_ending(delivery: Delivery, stream: StreamDelivery,
                  live: Stretch | None) -> tuple[str | None, str | None]:
    """How a stream ends before ``delivery`` (``live``: its run's stretch here, if this
    process streamed it): ``(replace, note)`` for ``finish_stream``."""
    # Whole: the stream shows all the run wrote (none of it held back for want of ids).
    whole = live is not None and not live.inert and live.stream is not None \
        and live.stream.key == stream.key and not "".join(live.text).strip()
    if isinstance(delivery, ApprovalDelivery):
        return None, WAITING_NOTE
    assert isinstance(delivery, ReplyDelivery)
    if not whole:
        return delivery.text, None  # cut off by a crash: the final answer replaces it
    assert live is not None
    if delivery.text.strip() and delivery.text.strip() in live.streamed:
        return None, None  # what was streamed is the answer
    return None, delivery.text  # a failure or a stop: said at the end
