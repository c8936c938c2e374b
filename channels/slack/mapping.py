"""Slack events -> maiden threads: which messages start work, on which thread (pure).

A mention in a channel is a thread ``slack:{team}:{channel}:{root ts}`` (the
message's ``thread_ts``, or its own ``ts`` when it starts a thread), answered in
that Slack thread. A DM is one thread per conversation, ``slack:{team}:{channel}``,
answered at top level; a Slack thread inside the DM is its own maiden thread.
The inbound key is the message, not the event (``slack:{team}:{channel}:{ts}``),
so Slack's retries and the same message arriving as ``app_mention`` and as
``message.*`` make one run.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from runtime import FileSource

from ..access import Place
from ..clicks import Click

__all__ = ["Ignored", "Inbound", "read_click", "read_event", "read_files", "strip_mentions"]

# Messages that are a person saying something; every other subtype (edits, deletions,
# joins, topic changes, bot_message...) is not a message to answer.
_SAYING = {None, "thread_broadcast", "file_share"}
_DIRECT = {"im"}
_PUBLIC = "channel"
"""The ``channel_type`` of a public channel (https://api.slack.com/events/message); ``im``,
``mpim`` and ``group`` are a DM, a group DM and a private channel. An ``app_mention``
carries none (docs.slack.dev/reference/events/app_mention): its ``private`` is None, for the
inbound to ask Slack (``lookups.SlackPrivacy``)."""


@dataclass(frozen=True, slots=True)
class Inbound:
    """A message that may start a run."""

    team: str
    channel: str
    user: str
    ts: str
    text: str
    """Without the bot's mention."""
    thread_id: str
    reply_in: str | None
    """The ``thread_ts`` to answer in; None: at top level (a DM)."""
    mentioned: bool
    direct: bool
    in_thread: bool
    """The message is a reply inside a Slack thread."""
    private: bool | None = False
    """Said in a DM, a group DM or a private channel (its ``channel_type``); None: the
    event did not say (an ``app_mention`` outside a DM)."""
    files: tuple[FileSource, ...] = ()
    """Files shared with it, to download with the bot token (``url_private_download``)."""

    @property
    def key(self) -> str:
        """The message's identity: the run's idempotency key."""
        return f"slack:{self.team}:{self.channel}:{self.ts}"

    @property
    def target(self) -> dict[str, str]:
        target = {"team": self.team, "channel": self.channel, "message_ts": self.ts,
                  "user": self.user}  # whom a stream in a channel goes to
        if self.reply_in is not None:
            target["thread_ts"] = self.reply_in
        return target


@dataclass(frozen=True, slots=True)
class Ignored:
    why: str


def strip_mentions(text: str, bot_user: str) -> str:
    return re.sub(rf"<@{re.escape(bot_user)}(\|[^>]*)?>", "", text).strip()


def read_event(
    event: Mapping[str, Any], *, team: str, bot_user: str, bot_id: str | None = None,
    reply_to_bots: bool = False,
) -> Inbound | Ignored:
    """What an ``app_mention`` or ``message`` event is to maiden."""
    kind = event.get("type")
    if kind not in ("app_mention", "message"):
        return Ignored(f"not a message ({kind})")
    subtype = event.get("subtype")
    user = event.get("user")
    if user == bot_user or (bot_id is not None and event.get("bot_id") == bot_id):
        return Ignored("the bot's own message")
    from_bot = subtype == "bot_message" or bool(event.get("bot_id"))
    if from_bot and not reply_to_bots:
        return Ignored("another bot (reply_to_bots = false)")
    if subtype not in _SAYING and subtype != "bot_message":
        return Ignored(f"a {subtype} event")
    channel, ts = event.get("channel"), event.get("ts")
    if not isinstance(channel, str) or not isinstance(ts, str):
        return Ignored("no channel or ts")
    who = user if isinstance(user, str) else str(event.get("bot_id") or "")
    if not who:
        return Ignored("no user")
    team = str(event.get("team") or team)
    text = str(event.get("text") or "")
    mentioned = kind == "app_mention" or f"<@{bot_user}" in text
    direct = event.get("channel_type") in _DIRECT or (kind == "message" and
                                                      channel.startswith("D"))
    thread_ts = event.get("thread_ts")
    in_thread = isinstance(thread_ts, str) and thread_ts != ts
    if direct and not in_thread:
        thread_id, reply_in = f"slack:{team}:{channel}", None
    else:
        root = thread_ts if isinstance(thread_ts, str) else ts
        thread_id, reply_in = f"slack:{team}:{channel}:{root}", root
    return Inbound(team=team, channel=channel, user=who, ts=ts,
                   text=strip_mentions(text, bot_user), thread_id=thread_id, reply_in=reply_in,
                   mentioned=mentioned, direct=direct, in_thread=in_thread,
                   private=_private(event, direct),
                   files=read_files(event.get("files")))


def _private(event: Mapping[str, Any], direct: bool) -> bool | None:
    """Whether the event's channel is private, by its ``channel_type``; None if it has
    none (an ``app_mention``), True for a ``channel_type`` that is not ``channel``."""
    kind = event.get("channel_type")
    if direct:
        return True
    return None if kind is None else kind != _PUBLIC


def read_files(files: Any) -> tuple[FileSource, ...]:
    """The files a message event carries that can be downloaded (not a tombstone, not
    one past the workspace's storage limit, not an external link)."""
    found = []
    for item in files if isinstance(files, list) else ():
        if not isinstance(item, Mapping) or item.get("mode") in ("tombstone", "hidden_by_limit",
                                                                 "external"):
            continue
        url = item.get("url_private_download") or item.get("url_private")
        if not isinstance(url, str) or not url:
            continue
        size = item.get("size")
        found.append(FileSource(
            via="slack", url=url, id=str(item.get("id") or "") or None,
            name=str(item.get("name") or item.get("title") or item.get("id") or "file"),
            media_type=str(item.get("mimetype") or "application/octet-stream"),
            size=size if isinstance(size, int) else None))
    return tuple(found)


def read_click(body: Mapping[str, Any]) -> Click | None:
    """Who clicked a button on which message, from a ``block_actions`` payload (signed by
    Slack, so its user and container are Slack's word); None for a click that is not on a
    message (the App Home tab's)."""
    container = body.get("container") or {}
    user = str((body.get("user") or {}).get("id") or "")
    channel = str(container.get("channel_id") or (body.get("channel") or {}).get("id") or "")
    message = str(container.get("message_ts") or (body.get("message") or {}).get("ts") or "")
    if container.get("type", "message") != "message" or not (user and channel and message):
        return None
    return Click(via="slack", user=user, channel=channel, message=message,
                 place=Place.of(channel, direct=channel.startswith("D")))
