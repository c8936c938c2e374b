"""What a channel implements to show a run's reply while the model writes it (``Streamer``),
and how a tool call is shown in it (``ToolUpdate``). ``LiveReplies`` (``live.py``) drives it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from ..model.guards import canonical_json
from ..model.runs import StreamDelivery

__all__ = ["Streamer", "ToolUpdate", "arguments_summary"]


@dataclass(frozen=True, slots=True)
class ToolUpdate:
    """A tool call as a stream shows it (Slack: a task; Discord: a status line)."""

    call_id: str
    name: str
    summary: str
    """A short, safe summary of its arguments (``arguments_summary``)."""
    status: Literal["in_progress", "complete", "error"]


class Streamer(Protocol):
    """What a channel implements to show replies while they are written.

    Each method gets the stream's record (its key, target and the ids recorded so far)
    and returns the ids of every message the stream has opened, in order: the runtime
    records new ones before anything else is appended.
    """

    stream_every_s: float
    """The least time between two appends (the platform's rate limit, with room)."""

    async def open_stream(self, stream: StreamDelivery, text: str,
                          tools: Sequence[ToolUpdate]) -> list[str]:
        """Open the stream in ``stream.target`` with its first text and tool updates;
        ``[]`` when it surely was not opened (the channel is offline): the reply is then
        posted whole when the run ends."""
        ...

    async def append_stream(self, stream: StreamDelivery, text: str,
                            tools: Sequence[ToolUpdate]) -> list[str]:
        """Add text (and tool updates) to the stream."""
        ...

    async def finish_stream(self, stream: StreamDelivery, *, replace: str | None,
                            note: str | None, key: str, feedback: str | None = None
                            ) -> list[str]:
        """End the stream: with ``replace``, its messages show that text instead of what
        was streamed (a stream cut off by a crash); with ``note``, that line is added (a
        pause, a failure). ``key``: the delivery the messages now show (the run's reply,
        or the stream's own), which they carry from now on where the channel can;
        ``feedback``: the run whose 👍 / 👎 buttons the last message gets (a completed
        run's answer), if any. A stream already ended on the platform is not an error:
        only ``replace``, ``key`` and ``feedback`` are applied to it."""
        ...

    async def find_stream(self, stream: StreamDelivery) -> list[str]:
        """The messages a stream opened before their ids were recorded (a crash right
        after the platform answered): found by what the channel can read back."""
        ...


def arguments_summary(arguments: Any, limit: int = 60) -> str:
    """A call's arguments in one short line: keys and the starts of their values."""
    if isinstance(arguments, dict):
        parts = [f"{k}={_short(v)}" for k, v in arguments.items()]
        text = ", ".join(parts)
    else:
        text = _short(arguments)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else canonical_json(value)
    text = " ".join(text.split())
    return text if len(text) <= 24 else text[:23] + "…"
