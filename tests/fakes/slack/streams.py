"""Slack's message streaming, faked: ``chat.startStream``, ``chat.appendStream`` and
``chat.stopStream`` (docs.slack.dev/reference/methods/chat.startStream and its siblings).

A stream is a bot message that grows, a reply in a thread (``thread_ts``) or, in a
channel, a top-level message: ``startStream`` opens it, with optional first ``markdown_text``
or ``chunks``;
``appendStream`` adds ``markdown_text`` (and ``markdown_text`` chunks) to its text and
keeps the latest state of each ``task_update`` chunk by id and the last ``plan_update``
title; ``stopStream`` adds the last text, ``blocks`` and ``metadata`` and ends it, after
which it is an ordinary message (``chat.update`` works on it), and sets the thread's agent
session, if it has one, to its ``session_status`` (``active`` when not given: "Default:
active"). Appending to or stopping a
message that is not streaming answers ``message_not_in_streaming_state``. A stream a person
stopped (the stop button of an agent session, ``stopped_by_user``) takes no more appends
(``stopped_by_user``) but may still be stopped by the app. The arguments are checked against
the contract (``contract.py``) before these run.

What the docs leave open is assumed as the fake does it: a streaming message has no
metadata until it is stopped (``startStream`` takes none); ``refuse`` makes
``startStream`` answer an error for a channel (or every channel), as Slack does where
streaming is not allowed (``not_allowed``) or not available (``method_not_supported``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from .store import JSON, SlackError, Store

__all__ = ["Streams"]


def _text(params: JSON, chunks: list[Any]) -> str:
    text = str(params.get("markdown_text") or "")
    for chunk in chunks:
        if isinstance(chunk, dict) and chunk.get("type") == "markdown_text":
            text += str(chunk.get("text") or "")
    return text


class Streams:
    """The streaming methods over a workspace's ``Store``."""

    def __init__(self, store: Store, bot_fields: Callable[[], JSON],
                 decoded: Callable[[JSON, str, str], Any],
                 channel_of: Callable[[JSON], str]) -> None:
        self.store = store
        self._bot_fields = bot_fields
        self._decoded = decoded
        self._channel_of = channel_of
        self.streaming: set[tuple[str, str]] = set()
        """(channel, ts) of every message still streaming."""
        self.halted: set[tuple[str, str]] = set()
        """(channel, ts) of every stream a person stopped, not yet stopped by the app."""
        self.tasks: dict[tuple[str, str], dict[str, JSON]] = {}
        """Each message's tasks, by task id: its latest ``task_update`` chunk."""
        self.plans: dict[tuple[str, str], str] = {}
        self.appends: Counter[tuple[str, str]] = Counter()
        self.refused: dict[str | None, str] = {}
        """channel (None: every channel) -> the error ``startStream`` answers there."""
        self.session_status: Callable[[str, str, str], None] = lambda *_: None
        """Sets the agent session of (channel, thread_ts), if there is one, to a status
        (``chat.stopStream``'s ``session_status``); the sessions put theirs here."""

    def stopped_by_user(self, where: tuple[str, str]) -> None:
        """A person stopped this stream (the agent session's stop button)."""
        self.streaming.discard(where)
        self.halted.add(where)

    def refuse(self, error: str = "not_allowed", channel: str | None = None) -> None:
        """Make ``startStream`` answer ``error`` in ``channel`` (every channel: None)."""
        self.refused[channel] = error

    def table(self) -> dict[str, Callable[[JSON], JSON]]:
        return {"chat.startStream": self.start, "chat.appendStream": self.append,
                "chat.stopStream": self.stop, "chat.delete": self.delete}

    def _chunks(self, params: JSON) -> list[Any]:
        chunks = self._decoded(params, "chunks", "invalid_chunks")
        if chunks is None:
            return []
        if not isinstance(chunks, list):
            raise SlackError("invalid_chunks")
        return chunks

    def _keep(self, where: tuple[str, str], chunks: list[Any]) -> None:
        for chunk in chunks:
            if not isinstance(chunk, dict):
                raise SlackError("invalid_chunks")
            if chunk.get("type") == "task_update":
                if not chunk.get("id") or not chunk.get("title") or chunk.get("status") not in (
                        "pending", "in_progress", "complete", "error"):
                    raise SlackError("invalid_chunks")
                self.tasks.setdefault(where, {})[str(chunk["id"])] = dict(chunk)
            elif chunk.get("type") == "plan_update":
                self.plans[where] = str(chunk.get("title") or "")

    def start(self, params: JSON) -> JSON:
        channel = self._channel_of(params)
        thread_ts = params.get("thread_ts") or None
        refused = self.refused.get(channel) or self.refused.get(None)
        if refused:
            raise SlackError(refused)
        chunks = self._chunks(params)
        message = self.store.post(channel, {**self._bot_fields(),
                                            "text": _text(params, chunks)},
                                  thread_ts=None if thread_ts is None else str(thread_ts))
        where = (channel, message["ts"])
        self.streaming.add(where)
        self._keep(where, chunks)
        return {"channel": channel, "ts": message["ts"]}

    def delete(self, params: JSON) -> JSON:
        """``chat.delete`` of a bot message (a stream's surplus part after a crash)."""
        channel = self._channel_of(params)
        ts = str(params.get("ts") or "")
        message = self.store.get(channel, ts)
        if message.get("user") != self._bot_fields()["user"]:
            raise SlackError("cant_delete_message")
        del self.store.channel(channel)[ts]
        self.streaming.discard((channel, ts))
        self.halted.discard((channel, ts))
        return {"channel": channel, "ts": ts}

    def _streaming(self, params: JSON) -> tuple[tuple[str, str], JSON]:
        channel = self._channel_of(params)
        ts = str(params.get("ts") or "")
        message = self.store.get(channel, ts)  # message_not_found
        where = (channel, ts)
        if where not in self.streaming | self.halted:
            raise SlackError("message_not_in_streaming_state")
        return where, message

    def append(self, params: JSON) -> JSON:
        where, message = self._streaming(params)
        if where in self.halted:
            raise SlackError("stopped_by_user")
        chunks = self._chunks(params)
        message["text"] = str(message.get("text") or "") + _text(params, chunks)
        self._keep(where, chunks)
        self.appends[where] += 1
        return {"channel": where[0], "ts": where[1]}

    def stop(self, params: JSON) -> JSON:
        where, message = self._streaming(params)
        chunks = self._chunks(params)
        message["text"] = str(message.get("text") or "") + _text(params, chunks)
        self._keep(where, chunks)
        blocks = self._decoded(params, "blocks", "invalid_blocks")
        if blocks:
            message["blocks"] = blocks
        metadata = self._decoded(params, "metadata", "invalid_metadata_format")
        if metadata is not None:
            if not (isinstance(metadata, dict) and isinstance(metadata.get("event_type"), str)):
                raise SlackError("invalid_metadata_format")
            message["metadata"] = {"event_type": metadata["event_type"],
                                   "event_payload": metadata.get("event_payload") or {}}
        self.streaming.discard(where)
        self.halted.discard(where)
        thread_ts = message.get("thread_ts")
        if thread_ts:
            self.session_status(where[0], str(thread_ts),
                                str(params.get("session_status") or "active"))
        return {"channel": where[0], "ts": where[1]}
