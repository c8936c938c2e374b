"""``--stream`` in the crash drill: the "testchat" channel shows replies while they are
written. Its messages live in one JSON file (replaced atomically, as a platform keeps
them whatever happens to maiden), each with the stream's key (as Slack's metadata or
Discord's nonce carries it), its text, whether it still streams, and its appends."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from runtime import StreamDelivery, ToolUpdate

__all__ = ["STREAM_KILL_POINTS", "STREAM_SCRIPT", "FileStreamer", "read_streams"]

STREAM_KILL_POINTS = (
    "after_stream_opening",     # the stream's record written; the platform not asked yet
    "before_stream_recorded",   # the platform opened the message; its id not stored
    "after_stream_recorded",    # its id stored; nothing appended yet
    "mid_stream",               # inside the platform's first append: part of the text shown
    "after_final_answer",       # the run completed; its stream still open
    "before_delivery_recorded", # the platform finished the message; the reply not recorded
    "before_stream_finished",   # the reply recorded as shown by it; the stream not yet
    "after_stream_finished",    # all recorded
)

STREAM_SCRIPT: list[dict[str, Any]] = [
    {"text": "Let me check that. ", "chunks": 2,
     "tool_calls": [{"name": "effect_tool", "arguments": {"n": 1}}]},
    {"text": "All done: the thing is finished and checked.", "chunks": 4, "chunk_delay_s": 0.05},
]


class Switch(Protocol):
    def reached(self, point: str) -> None: ...


def read_streams(path: Path) -> dict[str, dict[str, Any]]:
    """The channel's streamed messages, by id ({} before the first)."""
    if not path.exists():
        return {}
    data: dict[str, dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))
    return data


class FileStreamer:
    """A ``Streamer`` over ``path``; kills at ``mid_stream`` through ``switch``."""

    stream_every_s = 0.0

    def __init__(self, path: Path, switch: Switch) -> None:
        self.path = path
        self.switch = switch

    def _save(self, messages: dict[str, dict[str, Any]]) -> None:
        part = self.path.with_suffix(".part")
        with part.open("w", encoding="utf-8") as f:
            json.dump(messages, f, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(part, self.path)

    async def open_stream(self, stream: StreamDelivery, text: str,
                          tools: Sequence[ToolUpdate]) -> list[str]:
        messages = read_streams(self.path)
        message_id = f"stream-{len(messages) + 1}"
        messages[message_id] = {"key": stream.key, "text": text, "streaming": True,
                                "appends": 0}
        self._save(messages)
        return [message_id]

    async def append_stream(self, stream: StreamDelivery, text: str,
                            tools: Sequence[ToolUpdate]) -> list[str]:
        messages = read_streams(self.path)
        message = messages[stream.remote_ids[-1]]
        assert message["streaming"], "an append to a stopped stream"
        message["text"] += text
        message["appends"] += 1
        self._save(messages)
        self.switch.reached("mid_stream")
        return list(stream.remote_ids)

    async def finish_stream(self, stream: StreamDelivery, *, replace: str | None,
                            note: str | None, key: str, feedback: str | None = None
                            ) -> list[str]:
        messages = read_streams(self.path)
        message = messages[stream.remote_ids[-1]]
        if message["streaming"] and note:
            message["text"] += f"\n{note}"
        message["streaming"] = False
        if replace is not None:
            message["text"] = replace
        if feedback is not None:  # buttons stay once added (an edit without them keeps them)
            message["feedback"] = feedback
        self._save(messages)
        return list(stream.remote_ids)

    async def find_stream(self, stream: StreamDelivery) -> list[str]:
        return [i for i, m in read_streams(self.path).items() if m["key"] == stream.key]
