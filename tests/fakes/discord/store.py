"""The messages of the fake Discord, and the errors its REST API answers with.

No I/O here: the REST layer parses a request, calls these, and answers with what they return.
Errors are ``DiscordError`` carrying the HTTP status and Discord's JSON error code, answered
as ``{"message": ..., "code": ...}`` (with ``errors`` for an invalid form body) as Discord does.

Nonces: a message created with ``enforce_nonce`` and a ``nonce`` that the same author used
within ``nonce_window`` seconds is not created again; the original is returned instead. That is
Discord's documented dedupe, and what makes a retried send safe.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable

from .payloads import EPHEMERAL, JSON, Id, now_iso


class DiscordError(Exception):
    """An API error: HTTP ``status``, Discord's ``code`` and ``message``."""

    def __init__(self, status: int, code: int, message: str,
                 errors: JSON | None = None) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.errors = errors

    def body(self) -> JSON:
        out: JSON = {"message": self.message, "code": self.code}
        if self.errors is not None:
            out["errors"] = self.errors
        return out


def form_error(field: str, code: str, message: str) -> DiscordError:
    """``50035 Invalid Form Body`` about one field (dotted for nesting: ``"content"``)."""
    errors: JSON = {"_errors": [{"code": code, "message": message}]}
    for part in reversed(field.split(".")):
        errors = {part: errors}
    return DiscordError(400, 50035, "Invalid Form Body", errors)


def unknown(what: str) -> DiscordError:
    codes = {"Channel": 10003, "Message": 10008, "User": 10013, "Webhook": 10015,
             "interaction": 10062}
    return DiscordError(404, codes[what], f"Unknown {what}")


class Store:
    """Messages by channel (ids as strings); ephemeral ones kept apart, seen by one user."""

    def __init__(self, *, nonce_window: float = 300.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.nonce_window = nonce_window
        self._clock = clock
        self._channels: dict[str, dict[str, JSON]] = {}
        self._ephemeral: dict[str, dict[str, JSON]] = {}
        self._nonces: dict[tuple[str, str], tuple[str, str, float]] = {}

    def channel(self, channel_id: Id) -> dict[str, JSON]:
        return self._channels.setdefault(str(channel_id), {})

    def create(self, msg: JSON, *, enforce_nonce: bool = False) -> tuple[JSON, bool]:
        """Store ``msg`` (a full message object); or, for an enforced nonce its author used
        lately, return the original. The bool says whether a message was created."""
        nonce = msg.get("nonce")
        key = (str(msg["author"]["id"]), str(nonce))
        if enforce_nonce and nonce is not None:
            seen = self._nonces.get(key)
            if seen is not None and self._clock() - seen[2] <= self.nonce_window:
                original = self.find(seen[0], seen[1], ephemeral=False)
                if original is not None:
                    return copy.deepcopy(original), False
        if msg["flags"] & EPHEMERAL:
            self._ephemeral.setdefault(msg["channel_id"], {})[msg["id"]] = copy.deepcopy(msg)
            return msg, True
        self.channel(msg["channel_id"])[msg["id"]] = copy.deepcopy(msg)
        if nonce is not None:
            self._nonces[key] = (msg["channel_id"], msg["id"], self._clock())
        return msg, True

    def find(self, channel_id: Id, message_id: Id, *, ephemeral: bool) -> JSON | None:
        """A stored message (the object itself); ephemeral ones only if asked for, as only
        the interaction's webhook routes reach them."""
        found = self.channel(channel_id).get(str(message_id))
        if found is None and ephemeral:
            found = self._ephemeral.get(str(channel_id), {}).get(str(message_id))
        return found

    def get(self, channel_id: Id, message_id: Id, *, ephemeral: bool = False) -> JSON:
        found = self.find(channel_id, message_id, ephemeral=ephemeral)
        if found is None:
            raise unknown("Message")
        return copy.deepcopy(found)

    def edit(self, channel_id: Id, message_id: Id, fields: JSON, *, editor: str,
             ephemeral: bool = False) -> JSON:
        msg = self.find(channel_id, message_id, ephemeral=ephemeral)
        if msg is None:
            raise unknown("Message")
        if msg["author"]["id"] != editor:
            raise DiscordError(403, 50005, "Cannot edit a message authored by another user")
        msg.update(copy.deepcopy(fields))
        msg["edited_timestamp"] = now_iso()
        return copy.deepcopy(msg)

    def delete(self, channel_id: Id, message_id: Id, *, ephemeral: bool = False) -> None:
        gone = self.channel(channel_id).pop(str(message_id), None)
        if gone is None and ephemeral:
            gone = self._ephemeral.get(str(channel_id), {}).pop(str(message_id), None)
        if gone is None:
            raise unknown("Message")

    def ephemerals(self, channel_id: Id) -> list[JSON]:
        """Ephemeral messages in the channel (only their one user sees them), oldest first."""
        found = self._ephemeral.get(str(channel_id), {}).values()
        return [copy.deepcopy(m) for m in sorted(found, key=lambda m: int(m["id"]))]

    def all(self, channel_id: Id) -> list[JSON]:
        """Every message of the channel, oldest first."""
        return [copy.deepcopy(m) for m in
                sorted(self.channel(channel_id).values(), key=lambda m: int(m["id"]))]

    def history(self, channel_id: Id, *, limit: int = 50, before: Id | None = None,
                after: Id | None = None, around: Id | None = None) -> list[JSON]:
        """``GET /channels/{id}/messages``: newest first, ``limit`` of them next to the anchor.

        ``after`` takes the oldest ``limit`` after it (still answered newest first), as
        Discord does; discord.py pages forward from the first (newest) of each answer.
        """
        ordered = self.all(channel_id)
        if around is not None:
            pivot = int(around)
            older = [m for m in ordered if int(m["id"]) <= pivot][-(limit // 2 + limit % 2):]
            newer = [m for m in ordered if int(m["id"]) > pivot][:limit // 2]
            return list(reversed(older + newer))
        if before is not None:
            ordered = [m for m in ordered if int(m["id"]) < int(before)]
            return list(reversed(ordered[-limit:]))
        if after is not None:
            ordered = [m for m in ordered if int(m["id"]) > int(after)]
            return list(reversed(ordered[:limit]))
        return list(reversed(ordered[-limit:]))
