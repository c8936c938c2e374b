"""Replies streamed into Discord as the model writes them (``runtime.Streamer``).

The first text is posted as a message (answering the person's message, with a nonce from
the stream's key), then the message is edited as the text grows, at most once every
``edit_every_s`` (edits share Discord's 5-per-5-seconds budget with sends; discord.py
waits out a 429). Past 2,000 characters the message is finished and the text goes on in
a new one, cut where ``split_message`` cuts. Tool calls show as a status line at the end
(``⏳ http_fetch(url=…)…``), gone in the final edit.

Exactly once: the runtime records each message's id as soon as Discord returns it. A
stream opened by a process that died before recording it is found again: the bot's
messages answering the same person's message (in a DM: the bot's messages) since the
stream was recorded, but for approval prompts. A completed run's answer ends with 👍 / 👎
buttons on its last message.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import discord
from discord.http import Route

from runtime import StreamDelivery, ToolUpdate, split_message

from .deliverer import DiscordDeliverer, nonce
from .render import feedback_components, is_prompt

__all__ = ["DiscordStreamer"]

_LIMIT = 2_000
_STATUS_ROOM = 120
"""Characters kept free at the end of a streaming message for its status line."""


class DiscordStreamer:
    """Streams over a ``DiscordDeliverer``'s HTTP client."""

    def __init__(self, deliverer: DiscordDeliverer, *, edit_every_s: float = 1.5) -> None:
        self.deliverer = deliverer
        self.stream_every_s = edit_every_s
        self._texts: dict[str, list[str]] = {}
        """Each stream's messages' text so far, by delivery key."""

    async def open_stream(self, stream: StreamDelivery, text: str,
                          tools: Sequence[ToolUpdate]) -> list[str]:
        if self.deliverer.offline is not None:
            return []  # not connected yet: the reply goes out whole once it is
        self._texts[stream.key] = [""]
        try:
            return await self._grow(stream, [], text, tools)
        except BaseException:
            # What it showed is not known (a post whose answer was lost may have gone
            # through): finishing it reads its messages back instead of blanking them.
            del self._texts[stream.key]
            raise

    async def append_stream(self, stream: StreamDelivery, text: str,
                            tools: Sequence[ToolUpdate]) -> list[str]:
        if stream.key not in self._texts:
            self._texts[stream.key] = await self._read(stream)
        return await self._grow(stream, list(stream.remote_ids), text, tools)

    async def finish_stream(self, stream: StreamDelivery, *, replace: str | None,
                            note: str | None, key: str, feedback: str | None = None
                            ) -> list[str]:
        ids = list(stream.remote_ids)
        buttons = feedback_components(feedback) if feedback else None
        texts = self._texts.pop(stream.key, None)
        first = 0
        if replace is not None:
            pieces = split_message(replace, _LIMIT) or [replace[:_LIMIT]]
        else:
            pieces = texts if texts is not None else await self._read(stream)
            first = len(pieces) - 1  # the earlier ones were finished when they filled up
            if note and not pieces[-1].endswith(note):  # said already, before a crash
                pieces = pieces[:-1] + split_message(f"{pieces[-1]}\n\n{note}", _LIMIT)
        for i, piece in enumerate(pieces):
            if i < first:
                continue
            last = buttons if i == len(pieces) - 1 else None
            if i < len(ids):
                await self._edit(stream, ids[i], piece, last)
            else:
                ids.append(await self._post(stream, len(ids), piece, last))
        for extra in ids[len(pieces):]:
            await self.deliverer.call(Route("DELETE",
                                            "/channels/{channel_id}/messages/{message_id}",
                                            channel_id=stream.target["channel"],
                                            message_id=extra))
        return ids[:len(pieces)]

    async def find_stream(self, stream: StreamDelivery) -> list[str]:
        target = stream.target
        history = await self.deliverer.call(Route("GET", "/channels/{channel_id}/messages",
                                                  channel_id=target["channel"]),
                                            params={"limit": 100})
        found = []
        for message in reversed(history):  # oldest first
            author = (message.get("author") or {}).get("id")
            if self.deliverer.bot and author != self.deliverer.bot:
                continue
            made = discord.utils.snowflake_time(int(message["id"])).timestamp()
            answered = (message.get("message_reference") or {}).get("message_id")
            if made < stream.created_at - 1 or is_prompt(message):
                continue
            if target.get("guild") and answered != target.get("message"):
                continue
            found.append(str(message["id"]))
        return found

    # -- the messages

    async def _grow(self, stream: StreamDelivery, ids: list[str], text: str,
                    tools: Sequence[ToolUpdate]) -> list[str]:
        texts = self._texts[stream.key]
        whole = texts[-1] + text
        status = _status(tools)
        if len(whole) + len(status) <= _LIMIT:
            pieces = [whole]
        else:
            pieces = split_message(whole, _LIMIT - _STATUS_ROOM) or [whole]
        for i, piece in enumerate(pieces):
            shown = piece + (status if i == len(pieces) - 1 else "")
            if i == 0 and ids:
                await self._edit(stream, ids[-1], shown)
            else:
                ids.append(await self._post(stream, len(ids), shown))
        texts[-1:] = pieces
        return ids

    async def _read(self, stream: StreamDelivery) -> list[str]:
        """The text its messages show now (a stream this process did not open)."""
        texts = []
        for message_id in stream.remote_ids:
            message = await self.deliverer.call(
                Route("GET", "/channels/{channel_id}/messages/{message_id}",
                      channel_id=stream.target["channel"], message_id=message_id))
            texts.append(str(message.get("content") or "").split("\n\n⏳ ", 1)[0])
        return texts or [""]

    async def _post(self, stream: StreamDelivery, index: int, content: str,
                    components: list[dict[str, Any]] | None = None) -> str:
        target = stream.target
        payload: dict[str, Any] = {
            "content": content or "…", "nonce": nonce(f"{stream.key}:{index + 1}"),
            "enforce_nonce": True, "allowed_mentions": {"parse": [], "replied_user": True}}
        if components is not None:
            payload["components"] = components
        if target.get("guild") and target.get("message"):
            payload["message_reference"] = {"message_id": target["message"],
                                            "fail_if_not_exists": False}
        message = await self.deliverer.call(Route("POST", "/channels/{channel_id}/messages",
                                                  channel_id=target["channel"]), json=payload)
        return str(message["id"])

    async def _edit(self, stream: StreamDelivery, message_id: str, content: str,
                    components: list[dict[str, Any]] | None = None) -> None:
        change: dict[str, Any] = {"content": content or "…"}
        if components is not None:
            change["components"] = components
        await self.deliverer.call(Route("PATCH", "/channels/{channel_id}/messages/{message_id}",
                                        channel_id=stream.target["channel"],
                                        message_id=message_id),
                                  json=change)


def _status(tools: Sequence[ToolUpdate]) -> str:
    running = [t.name + (f"({t.summary})" if t.summary else "") for t in tools
               if t.status == "in_progress"]
    line = f"\n\n⏳ {', '.join(running)}…" if running else ""
    return line[:_STATUS_ROOM]
