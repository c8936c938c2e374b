"""The fake workspace's state: channels of messages in Slack's own JSON, threads, reactions.

No I/O here: the web layer parses a request, calls these, and renders what they return. Errors
are ``SlackError`` with the Web API's error code, which the web layer answers with HTTP 200 and
``{"ok": false, "error": code}`` as Slack does.

Timestamps are one workspace-wide sequence, as Slack's are: the posting time in epoch seconds
with microseconds, strictly increasing, so a message's ``ts`` orders it against every other
message, whoever posted it, and a client may page history by time (``oldest``). Slack's clock
is not the host's: ``Store.skew_s`` sets it off by that many seconds (negative: behind).
"""

from __future__ import annotations

import base64
import binascii
import copy
import time
from collections.abc import Sequence
from typing import Any

JSON = dict[str, Any]

_STEP_US = 100


class SlackError(Exception):
    """A Web API error: answered as ``{"ok": false, "error": code, **extra}``."""

    def __init__(self, code: str, **extra: Any) -> None:
        super().__init__(code)
        self.code = code
        self.extra = extra

    def body(self) -> JSON:
        return {"ok": False, "error": self.code, **self.extra}


def make_ts(us: int) -> str:
    """A timestamp from microseconds since the epoch."""
    return f"{us // 1_000_000}.{us % 1_000_000:06d}"


def encode_cursor(ts: str) -> str:
    """A cursor in Slack's own shape: base64 of ``next_ts:<ts>``."""
    return base64.b64encode(f"next_ts:{ts}".encode()).decode()


def decode_cursor(cursor: str) -> str:
    try:
        text = base64.b64decode(cursor.encode(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError) as exc:
        raise SlackError("invalid_cursor") from exc
    prefix, _, ts = text.partition(":")
    if prefix != "next_ts" or not ts:
        raise SlackError("invalid_cursor")
    return ts


def paginate(items: Sequence[JSON], cursor: str | None, limit: int
             ) -> tuple[list[JSON], str]:
    """One page of ``items`` (already in answer order) from ``cursor``; the next cursor or ''."""
    start = 0
    if cursor:
        ts = decode_cursor(cursor)
        index = next((i for i, m in enumerate(items) if m["ts"] == ts), None)
        if index is None:
            raise SlackError("invalid_cursor")
        start = index
    page = list(items[start:start + limit])
    rest = items[start + limit:]
    return page, encode_cursor(rest[0]["ts"]) if rest else ""


def render(message: JSON, *, metadata: bool) -> JSON:
    """A copy of a stored message as the read methods answer it."""
    out = copy.deepcopy(message)
    if not metadata:
        out.pop("metadata", None)
    return out


class Store:
    """Channels of messages, keyed by ``ts`` in posting order."""

    def __init__(self, *, skew_s: float = 0.0) -> None:
        self._channels: dict[str, dict[str, JSON]] = {}
        self._last_us = 0
        self.ephemerals: dict[str, list[JSON]] = {}
        self.skew_s = skew_s
        """How far the workspace's clock is from the host's, in seconds (negative: behind,
        as a drill sets it to show that nothing is reconciled by comparing the two)."""

    def next_ts(self) -> str:
        now = (time.time_ns() // 1_000 + round(self.skew_s * 1_000_000)) // _STEP_US * _STEP_US
        self._last_us = max(now, self._last_us + _STEP_US)
        return make_ts(self._last_us)

    def channel(self, channel: str) -> dict[str, JSON]:
        return self._channels.setdefault(channel, {})

    def has(self, channel: str) -> bool:
        """Whether ``channel`` has been used (a message posted or read there)."""
        return channel in self._channels

    def get(self, channel: str, ts: str) -> JSON:
        message = self.channel(channel).get(ts)
        if message is None:
            raise SlackError("message_not_found")
        return message

    def root_of(self, channel: str, ts: str, *, missing: str) -> JSON:
        """The thread root for ``ts`` (itself, or its parent if it is a reply)."""
        message = self.channel(channel).get(ts)
        if message is None:
            raise SlackError(missing)
        parent = message.get("thread_ts")
        if parent is not None and parent != message["ts"]:
            return self.get(channel, parent)
        return message

    def post(self, channel: str, fields: JSON, *, thread_ts: str | None = None) -> JSON:
        """Store a new message (``fields`` in Slack's message shape, without ``ts``)."""
        root = None
        if thread_ts is not None:
            root = self.root_of(channel, thread_ts, missing="invalid_thread_ts")
        ts = self.next_ts()
        message: JSON = {"type": "message", **copy.deepcopy(fields), "ts": ts}
        if root is not None:
            message["thread_ts"] = root["ts"]
            if "user" in root:
                message["parent_user_id"] = root["user"]
            self._count_reply(root, message)
        self.channel(channel)[ts] = message
        return message

    @staticmethod
    def _count_reply(root: JSON, reply: JSON) -> None:
        root["thread_ts"] = root["ts"]
        root["reply_count"] = root.get("reply_count", 0) + 1
        users: list[str] = root.setdefault("reply_users", [])
        if reply.get("user") and reply["user"] not in users:
            users.append(reply["user"])
        root["reply_users_count"] = len(users)
        root["latest_reply"] = reply["ts"]
        root.setdefault("is_locked", False)
        root.setdefault("subscribed", False)

    def update(self, channel: str, ts: str, fields: JSON, *, editor: str) -> JSON:
        message = self.get(channel, ts)
        if message.get("user") != editor:
            raise SlackError("cant_update_message")
        message.update(copy.deepcopy(fields))
        message["edited"] = {"user": editor, "ts": self.next_ts()}
        return message

    def react(self, channel: str, ts: str, name: str, user: str, *, add: bool) -> None:
        message = self.get(channel, ts)
        reactions: list[JSON] = message.setdefault("reactions", [])
        entry = next((r for r in reactions if r["name"] == name), None)
        if add:
            if entry is not None and user in entry["users"]:
                raise SlackError("already_reacted")
            if entry is None:
                entry = {"name": name, "users": [], "count": 0}
                reactions.append(entry)
            entry["users"].append(user)
            entry["count"] += 1
            return
        if entry is None or user not in entry["users"]:
            raise SlackError("no_reaction")
        entry["users"].remove(user)
        entry["count"] -= 1
        if not entry["users"]:
            reactions.remove(entry)
        if not reactions:
            del message["reactions"]

    def thread(self, channel: str, ts: str) -> tuple[JSON, list[JSON]]:
        """The root and its replies, oldest first."""
        root = self.root_of(channel, ts, missing="thread_not_found")
        replies = [m for m in self.channel(channel).values()
                   if m.get("thread_ts") == root["ts"] and m["ts"] != root["ts"]]
        return root, replies

    def top_level(self, channel: str) -> list[JSON]:
        """Messages outside threads and thread roots, newest first."""
        return [m for m in reversed(self.channel(channel).values())
                if m.get("thread_ts") in (None, m["ts"])]

    def all(self, channel: str) -> list[JSON]:
        """Every message of the channel, oldest first."""
        return list(self.channel(channel).values())
