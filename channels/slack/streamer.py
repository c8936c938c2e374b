"""Replies streamed into Slack as the model writes them (``runtime.Streamer``).

Native streaming (``[channels.slack] stream = "native"``, the default): ``chat.startStream``
opens the reply in its thread, ``chat.appendStream`` adds markdown text and the tool calls
as tasks (``task_update`` chunks; a ``plan_update`` when a turn asks for several), and
``chat.stopStream`` ends it, carrying the delivery key in its metadata. Outside a DM Slack
streams to one person: ``recipient_user_id`` and ``recipient_team_id`` name the one who
asked (a reply with nobody to stream to, a schedule's, is edited instead). With
``stream = "edit"``, or once Slack answers a stream method with an error (a refusal,
``not_allowed`` or ``method_not_supported``, marks the channel for good; any other error
only that reply), the reply is posted once, with its key in the metadata, and
``chat.update`` rewrites it as it grows, at the edit pace (about once a second); the
first fallback in a channel is logged with Slack's reason. A call that got no answer at
all (the connection dropped) is not a refusal: it fails, and the outbox finds the stream
again.

Exactly once: the runtime records the message's ``ts`` as soon as Slack returns it. A
stream opened by a process that died before recording it is found again in its thread:
the bot's message carrying its key, or (native: ``startStream`` takes no metadata) the
bot's message since the stream was recorded that carries no key of any delivery; only one
run answers in a thread at a time, so that message is this stream's.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from typing import Any, Literal

from slack_sdk.models.messages.chunk import (
    Chunk,
    MarkdownTextChunk,
    PlanUpdateChunk,
    TaskUpdateChunk,
)

from runtime import StreamDelivery, ToolUpdate, split_message

from .deliverer import EVENT_TYPE, SlackCallError, SlackDeliverer
from .render import feedback_blocks, markdown_blocks

__all__ = ["REFUSALS", "SlackStreamer", "StreamMode"]

log = logging.getLogger("maiden.slack")

StreamMode = Literal["native", "edit"]

REFUSALS = ("not_allowed", "method_not_supported", "not_allowed_token_type",
            "feature_not_enabled")
"""Slack's answers to ``chat.startStream`` that mean: post and edit instead."""

_NOT_STREAMING = "message_not_in_streaming_state"
_SLACK_LAG_S = 5.0
"""How much earlier than the stream's record a message it opened may be stamped."""


class SlackStreamer:
    """Streams over a ``SlackDeliverer``'s client (its pacing, its offline switch)."""

    def __init__(self, deliverer: SlackDeliverer, *, mode: StreamMode = "native",
                 append_every_s: float = 0.25, edit_every_s: float = 1.0) -> None:
        self.deliverer = deliverer
        self.mode = mode
        self.append_every_s = append_every_s
        self.edit_every_s = edit_every_s
        self._refused: set[str] = set()
        """Channels where Slack refused native streaming: they get edits."""
        self._logged: set[str] = set()
        """Channels where a fallback to edits was logged (once each)."""
        self._edited: dict[str, str] = {}
        """The text so far of each stream shown by edits, by delivery key."""
        self._current: dict[str, str] = {}
        """The text of each native stream's current message."""
        self.max_chars = deliverer.max_chars or 3_900
        """Past this, a streamed reply goes on in a new message (as long replies do)."""

    @property
    def stream_every_s(self) -> float:
        return self.edit_every_s if self.mode == "edit" else self.append_every_s

    def _native(self, channel: str) -> bool:
        return self.mode == "native" and channel not in self._refused

    # -- the Streamer protocol

    async def open_stream(self, stream: StreamDelivery, text: str,
                          tools: Sequence[ToolUpdate]) -> list[str]:
        channel, thread_ts = stream.target["channel"], stream.target.get("thread_ts")
        if self.deliverer.offline is not None:
            return []  # not connected yet: the reply goes out whole once it is
        if self._native(channel) and thread_ts and _recipient(stream.target) is not None:
            head, rest = self._fit(stream.key, text)
            try:
                ts = await self._start(stream, _chunks(head, tools) or None)
                return await self._go_on(stream, [ts], rest)
            except SlackCallError as exc:
                if exc.slack_error is None:
                    raise  # no answer: the stream may be open; the outbox finds it
                self._fell_back(channel, "chat.startStream", exc.slack_error)
                self._current.pop(stream.key, None)
        self._edited[stream.key] = text
        try:
            response = await self.deliverer.call(
                "chat.postMessage", self.deliverer.client.chat_postMessage, channel=channel,
                thread_ts=thread_ts, text=_shown(text, tools), blocks=_blocks(text, tools),
                metadata=_metadata(stream.key), unfurl_links=False, unfurl_media=False)
        except BaseException:
            # Not open as far as this process knows: nothing kept of it (a message Slack
            # made regardless carries the key, and is found again with its text).
            self._edited.pop(stream.key, None)
            raise
        return [str(response["ts"])]

    async def append_stream(self, stream: StreamDelivery, text: str,
                            tools: Sequence[ToolUpdate]) -> list[str]:
        channel, ids = stream.target["channel"], list(stream.remote_ids)
        if stream.key in self._edited:
            return await self._edit(stream, ids, self._edited[stream.key] + text, tools)
        before, opened = self._current.get(stream.key, ""), len(ids)
        try:
            head, rest = self._fit(stream.key, text)
            if head or tools:
                await self.deliverer.call(
                    "chat.appendStream", self.deliverer.client.chat_appendStream,
                    channel=channel, ts=ids[-1], chunks=_chunks(head, tools))
            return await self._go_on(stream, ids, rest)
        except SlackCallError as exc:
            if exc.slack_error is None:
                raise
            self._fell_back(channel, "chat.appendStream", exc.slack_error)
            # What the last message shows from now on: its text so far and the new text.
            shown = before + text if len(ids) == opened else self._current.get(stream.key, "")
            return await self._to_edits(stream, ids, shown, tools)

    async def _edit(self, stream: StreamDelivery, ids: list[str], shown: str,
                    tools: Sequence[ToolUpdate]) -> list[str]:
        """The last message shows ``shown`` (and the running tools); past Slack's length
        (``chat.update`` takes 4,000 characters) it ends where long replies are cut and the
        rest goes on in new messages."""
        channel = stream.target["channel"]
        limit = self.max_chars - len(_status_line(tools))
        pieces = split_message(shown, limit) if len(shown) > limit else [shown]
        for i, piece in enumerate(pieces):
            now = tools if i == len(pieces) - 1 else ()
            if i == 0:
                await self.deliverer.call(
                    "chat.update", self.deliverer.client.chat_update, channel=channel,
                    ts=ids[-1], text=_shown(piece, now), blocks=_blocks(piece, now))
            else:
                response = await self.deliverer.call(
                    "chat.postMessage", self.deliverer.client.chat_postMessage,
                    channel=channel, thread_ts=stream.target.get("thread_ts"),
                    text=_shown(piece, now), blocks=_blocks(piece, now),
                    metadata=_metadata(f"{stream.key}:{len(ids)}"), unfurl_links=False,
                    unfurl_media=False)
                ids.append(str(response["ts"]))
        self._edited[stream.key] = pieces[-1]
        return ids

    async def _to_edits(self, stream: StreamDelivery, ids: list[str], shown: str,
                        tools: Sequence[ToolUpdate]) -> list[str]:
        """The rest of this reply by edits: its stream stopped (if Slack still lets it be),
        its last message rewritten with what it shows."""
        self._current.pop(stream.key, None)
        with contextlib.suppress(SlackCallError):
            await self._stop(stream, ts=ids[-1], metadata=_metadata(stream.key))
        return await self._edit(stream, ids, shown, tools)

    def _fell_back(self, channel: str, method: str, error: str) -> None:
        """Slack answered a stream method with ``error``: this reply goes on by edits (and
        every later one in ``channel``, for a refusal); said once per channel."""
        if error in REFUSALS:
            self._refused.add(channel)
        if channel not in self._logged:
            self._logged.add(channel)
            log.warning("slack: %s answered %s in %s; the reply is edited there instead%s",
                        method, error, channel,
                        " (and every reply after it)" if error in REFUSALS else "")

    async def _start(self, stream: StreamDelivery, chunks: list[Chunk] | None) -> str:
        """``chat.startStream`` in the stream's thread, to the person who asked (outside a
        DM Slack requires them); the new message's ``ts``."""
        target = stream.target
        user, team = _recipient(target) or (None, None)
        response = await self.deliverer.call(
            "chat.startStream", self.deliverer.client.chat_startStream,
            channel=target["channel"], thread_ts=target.get("thread_ts"), chunks=chunks,
            recipient_user_id=user, recipient_team_id=team, task_display_mode="timeline")
        return str(response["ts"])

    async def _go_on(self, stream: StreamDelivery, ids: list[str],
                     pieces: Sequence[str]) -> list[str]:
        """Past Slack's length: each message ends and the next piece opens a new one."""
        for piece in pieces:
            await self._stop(stream, ts=ids[-1], metadata=_metadata(stream.key))
            ids.append(await self._start(stream, _chunks(piece, ())))
        return ids

    async def _stop(self, stream: StreamDelivery, **params: Any) -> None:
        """``chat.stopStream`` of one of the stream's messages, carrying the thread's agent
        session status now (``session_status``: without it Slack makes the session
        ``active``, even while the reply goes on in a new message), set one at a time
        with the thread's other status changes here (``Sessions.stopping``)."""
        sessions = self.deliverer.sessions
        async with sessions.stopping(stream) if sessions is not None \
                else contextlib.nullcontext(None) as status:
            await self.deliverer.call(
                "chat.stopStream", self.deliverer.client.chat_stopStream,
                channel=stream.target["channel"], session_status=status, **params)

    def _fit(self, key: str, text: str) -> tuple[str, list[str]]:
        """What of ``text`` the stream's current message takes, and the pieces that go on
        in new messages: cut where ``split_message`` cuts long replies."""
        current = self._current.get(key, "")
        whole = current + text
        pieces = split_message(whole, self.max_chars) if len(whole) > self.max_chars \
            else [whole]
        if len(pieces) == 1:
            head, rest = text, []
        elif len(pieces[0]) >= len(current) and pieces[0].startswith(current):
            head, rest = pieces[0][len(current):], pieces[1:]
        else:  # the cut falls in what is shown already: the new text starts a message
            head, rest = "", split_message(text.lstrip(), self.max_chars) or [text]
        self._current[key] = rest[-1] if rest else current + head
        return head, rest

    async def finish_stream(self, stream: StreamDelivery, *, replace: str | None,
                            note: str | None, key: str, feedback: str | None = None
                            ) -> list[str]:
        """The stream ends (``Streamer.finish_stream``), and with it the run's stretch: the
        thread's agent session says where the thread stands now, first
        (``SlackDeliverer.shown``: a failure leaves nothing done to do twice), and again
        with the ``chat.stopStream`` (``session_status``, else Slack's ``active``)."""
        await self.deliverer.shown(stream)
        return await self._finish(stream, replace=replace, note=note, key=key,
                                  feedback=feedback)

    async def _finish(self, stream: StreamDelivery, *, replace: str | None,
                      note: str | None, key: str, feedback: str | None) -> list[str]:
        channel, ids = stream.target["channel"], list(stream.remote_ids)
        buttons = feedback_blocks(feedback) if feedback else []
        current = self._current.pop(stream.key, None)
        edited = self._edited.pop(stream.key, None)
        native = edited is None and self._native(channel)
        if not native and replace is None:
            if edited is None:
                return ids
            return await self._end_edits(stream, ids, edited + (f"\n\n{note}" if note else ""),
                                         key, buttons)
        if native:
            try:
                await self._stop(
                    stream, ts=ids[-1],
                    chunks=[MarkdownTextChunk(text=f"\n\n{note}")] if note else None,
                    blocks=buttons or None, metadata=_metadata(key))
            except SlackCallError as exc:
                if exc.slack_error is None:
                    raise
                if exc.slack_error != _NOT_STREAMING and replace is None:
                    # Slack refused to end it: the final text goes in by an edit.
                    self._fell_back(channel, "chat.stopStream", exc.slack_error)
                    replace = (current or "") + (f"\n\n{note}" if note else "")
                # (not streaming: stopped already, by a crash after stopStream or the stop button)
        if replace is None:
            return ids
        pieces = split_message(replace, self.max_chars) or [replace]
        for i, piece in enumerate(pieces):
            last = buttons if i == len(pieces) - 1 else []
            if i < len(ids):
                await self._update(channel, ids[i], piece, key if i == 0 else f"{key}:{i}",
                                   last)
            else:
                response = await self.deliverer.call(
                    "chat.postMessage", self.deliverer.client.chat_postMessage,
                    channel=channel, thread_ts=stream.target.get("thread_ts"), text=piece,
                    blocks=markdown_blocks(piece) + last, metadata=_metadata(f"{key}:{i}"))
                ids.append(str(response["ts"]))
        for extra in ids[len(pieces):]:
            await self.deliverer.call("chat.delete", self.deliverer.client.chat_delete,
                                      channel=channel, ts=extra)
        return ids[:len(pieces)]

    async def _end_edits(self, stream: StreamDelivery, ids: list[str], final: str, key: str,
                         buttons: list[dict[str, Any]]) -> list[str]:
        """An edited reply's last message ends with ``final`` (cut as long replies are, the
        rest in new messages, keyed as the reply's pieces are); its buttons on the last."""
        pieces = split_message(final, self.max_chars) if len(final) > self.max_chars \
            else [final]
        for i, piece in enumerate(pieces):
            last = i == len(pieces) - 1
            mark = key if i == 0 else f"{key}:{len(ids)}"
            if i == 0:
                await self._update(stream.target["channel"], ids[-1], piece, mark,
                                   buttons if last else [])
            else:
                response = await self.deliverer.call(
                    "chat.postMessage", self.deliverer.client.chat_postMessage,
                    channel=stream.target["channel"], thread_ts=stream.target.get("thread_ts"),
                    text=piece, blocks=markdown_blocks(piece) + (buttons if last else []),
                    metadata=_metadata(mark))
                ids.append(str(response["ts"]))
        return ids

    async def find_stream(self, stream: StreamDelivery) -> list[str]:
        found = await self.deliverer.reconcile(stream)
        if found is not None:
            return [found]
        thread_ts = stream.target.get("thread_ts")
        if not thread_ts or not self._native(stream.target["channel"]):
            return []
        since = stream.created_at - _SLACK_LAG_S
        async for message in self.deliverer.thread_messages(stream.target["channel"],
                                                            thread_ts):
            if message.get("ts") == thread_ts or float(message.get("ts", 0)) < since:
                continue
            mine = self.deliverer.bot_user is None \
                or message.get("user") == self.deliverer.bot_user
            keyed = (message.get("metadata") or {}).get("event_type") == EVENT_TYPE
            if mine and not keyed and message.get("bot_id", True):
                return [str(message["ts"])]
        return []

    async def _update(self, channel: str, ts: str, text: str, key: str,
                      buttons: list[dict[str, Any]]) -> None:
        await self.deliverer.call(
            "chat.update", self.deliverer.client.chat_update, channel=channel, ts=ts,
            text=text, blocks=markdown_blocks(text) + buttons, metadata=_metadata(key))


def _recipient(target: dict[str, str]) -> tuple[str | None, str | None] | None:
    """Whom a stream in ``target`` goes to: nobody to name in a DM (``(None, None)``); the
    person who asked and their team elsewhere; None when a channel's reply has no person
    (Slack streams only to one)."""
    if target["channel"].startswith("D"):
        return None, None
    user, team = target.get("user"), target.get("team")
    return (user, team) if user and team else None


def _metadata(key: str) -> dict[str, Any]:
    return {"event_type": EVENT_TYPE, "event_payload": {"key": key}}


def _chunks(text: str, tools: Sequence[ToolUpdate]) -> list[Chunk]:
    chunks: list[Chunk] = []
    if text:
        chunks.append(MarkdownTextChunk(text=text))
    started = [t for t in tools if t.status == "in_progress"]
    if len(started) > 1:
        chunks.append(PlanUpdateChunk(title=f"{len(started)} steps"))
    chunks += [TaskUpdateChunk(id=t.call_id, title=_title(t), status=t.status)
               for t in tools]
    return chunks


def _title(update: ToolUpdate) -> str:
    return f"{update.name}({update.summary})" if update.summary else update.name


def _status_line(tools: Sequence[ToolUpdate]) -> str:
    running = [t for t in tools if t.status == "in_progress"]
    return f"\n\n⏳ {', '.join(_title(t) for t in running)}…" if running else ""


def _shown(text: str, tools: Sequence[ToolUpdate]) -> str:
    return (text or "…") + _status_line(tools)


def _blocks(text: str, tools: Sequence[ToolUpdate]) -> list[dict[str, Any]]:
    return markdown_blocks(_shown(text, tools))
