"""The Web API methods the fake serves, by Slack's rules, over a ``Store``.

Each method takes the request's parameters (query and body merged; form values are strings,
JSON values keep their types) and returns the ``ok`` answer or raises ``SlackError``. Auth,
scopes and faults are the web layer's business (``web.py``).

Where Slack's behaviour is not documented the fake takes the stricter reading, so that an
adapter which copes with the fake copes with Slack: ``conversations.replies`` repeats the thread
root at the top of every page (dedupe by ``ts``), and a ``thread_ts`` that names no message is
refused (``invalid_thread_ts``) rather than silently starting a new thread.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .payloads import APP, BOT, BOT_USER, TEAM
from .sessions import Sessions
from .store import JSON, SlackError, Store, paginate, render
from .streams import Streams

SCOPES = ("app_mentions:read", "assistant:write", "channels:history", "channels:read",
          "chat:write", "commands", "files:read", "files:write", "groups:history",
          "groups:read", "im:history", "im:write", "mpim:history", "mpim:read",
          "reactions:read", "reactions:write", "users:read")

_CHANNEL = re.compile(r"^[CDG][A-Z0-9]{2,}$")


@dataclass(frozen=True)
class Workspace:
    """Who the fake is: the workspace, the app's bot, its tokens and its granted scopes."""

    team_id: str = TEAM
    team: str = "Maiden Test"
    domain: str = "maiden-test"
    app_id: str = APP
    bot_id: str = BOT
    bot_user_id: str = BOT_USER
    bot_name: str = "maiden"
    bot_token: str = "xoxb-1-fake-bot-token"
    app_token: str = "xapp-1-A0FAKEAPP1-1-fake-app-token"
    signing_secret: str = "8f742231b10e8888abcd99yyyzzz85a5"
    """What HTTP-mode requests are signed with (``request_url``)."""
    scopes: tuple[str, ...] = SCOPES


def _str(params: JSON, name: str) -> str | None:
    value = params.get(name)
    return None if value is None else str(value)


def _require(params: JSON, *names: str) -> None:
    missing = [n for n in names if params.get(n) in (None, "")]
    if missing:
        raise SlackError("invalid_arguments", response_metadata={
            "messages": [f"[ERROR] missing required field: {n}" for n in missing]})


def _channel(params: JSON, name: str = "channel") -> str:
    channel = _str(params, name)
    if channel is None or not _CHANNEL.match(channel):
        raise SlackError("channel_not_found")
    return channel


def flag(params: JSON, name: str) -> bool:
    """A boolean argument: JSON true, or "true"/"1" in a form or query."""
    value = params.get(name)
    return value is True or (isinstance(value, str) and value.lower() in ("true", "1"))


def _int(params: JSON, name: str, default: int, maximum: int) -> int:
    value = params.get(name)
    if value in (None, "", 0, "0"):
        return default
    try:
        number = int(str(value))
    except ValueError as exc:
        raise SlackError("invalid_arguments") from exc
    return max(1, min(number, maximum))


def _decoded(params: JSON, name: str, error: str) -> Any:
    """A JSON-typed argument, sent as JSON or as a JSON string in a form."""
    value = params.get(name)
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError as exc:
            raise SlackError(error) from exc
    return value


def _ts_key(ts: str) -> tuple[int, int]:
    seconds, _, fraction = ts.partition(".")
    try:
        return int(seconds or 0), int((fraction + "000000")[:6])
    except ValueError as exc:
        raise SlackError("invalid_ts_oldest") from exc


def history_scope(channel: str) -> str:
    return {"D": "im:history", "G": "groups:history"}.get(channel[:1], "channels:history")


def needed_scopes(method: str, params: JSON) -> tuple[str, ...]:
    """The scopes of which the bot token needs one for this call."""
    if method in ("conversations.history", "conversations.replies"):
        channel = _str(params, "channel") or ""
        return (history_scope(channel),)
    return {
        "chat.postMessage": ("chat:write",), "chat.update": ("chat:write",),
        "chat.postEphemeral": ("chat:write",), "chat.startStream": ("chat:write",),
        "chat.appendStream": ("chat:write",), "chat.stopStream": ("chat:write",),
        "chat.delete": ("chat:write",),
        "reactions.add": ("reactions:write",), "reactions.remove": ("reactions:write",),
        "assistant.threads.setStatus": ("assistant:write", "chat:write"),
        "assistant.threads.setSuggestedPrompts": ("assistant:write",),
        "assistant.threads.setTitle": ("assistant:write",),
        "files.getUploadURLExternal": ("files:write",),
        "files.completeUploadExternal": ("files:write",),
        "files.info": ("files:read",),
        # docs.slack.dev/ai/agent-sessions: "The chat:write scope is required to manage
        # thread-based sessions" (assistant:write comes with declaring the app an agent)
        "agents.sessions.setStatus": ("chat:write",),
        "agents.sessions.rename": ("chat:write",),
        "users.info": ("users:read",),
    }.get(method, ())


class WebAPI:
    """The message methods; ``table()`` maps Slack method names to them."""

    def __init__(self, workspace: Workspace, store: Store) -> None:
        self.workspace = workspace
        self.store = store
        self.statuses: list[JSON] = []
        self.suggested: list[JSON] = []
        """Every ``assistant.threads.setSuggestedPrompts`` carried out."""
        self.titles: list[JSON] = []
        """Every ``assistant.threads.setTitle`` carried out."""
        self.streams = Streams(store, self.bot_fields, _decoded, _channel)
        """Streaming messages (``chat.startStream`` and its siblings)."""
        self.sessions = Sessions(store, self.streams)
        """Agent sessions (``agents.sessions.*``)."""
        self.extra: dict[str, Callable[[JSON], JSON]] = {}
        """More methods, kept elsewhere (the uploads)."""
        self.homes: dict[str, list[JSON]] = {}
        """Every Home tab published, by user, in order."""

    def table(self) -> dict[str, Callable[[JSON], JSON]]:
        return {
            "chat.postMessage": self.post_message,
            "chat.update": self.update,
            "chat.postEphemeral": self.post_ephemeral,
            "conversations.replies": self.replies,
            "conversations.history": self.history,
            "reactions.add": self.reactions_add,
            "reactions.remove": self.reactions_remove,
            "assistant.threads.setStatus": self.set_status,
            "assistant.threads.setSuggestedPrompts": self.set_prompts,
            "assistant.threads.setTitle": self.set_title,
            **self.streams.table(),
            **self.sessions.table(),
            "views.publish": self.publish_view,
            **self.extra,
        }

    def _content(self, params: JSON) -> JSON:
        """text / blocks / attachments / metadata of a posted or updated message."""
        fields: JSON = {}
        text = _str(params, "text")
        blocks = _decoded(params, "blocks", "invalid_blocks")
        attachments = _decoded(params, "attachments", "invalid_attachments")
        if blocks is not None and not isinstance(blocks, list):
            raise SlackError("invalid_blocks")
        if attachments is not None and not isinstance(attachments, list):
            raise SlackError("invalid_attachments")
        if not text and not blocks and not attachments:
            raise SlackError("no_text")
        if text is not None and len(text) > 40_000:
            raise SlackError("msg_too_long")
        fields["text"] = text or ""
        if blocks:
            fields["blocks"] = blocks
        if attachments:
            fields["attachments"] = attachments
        metadata = _decoded(params, "metadata", "invalid_metadata_format")
        if metadata is not None:
            if not (isinstance(metadata, dict) and isinstance(metadata.get("event_type"), str)
                    and isinstance(metadata.get("event_payload"), dict)):
                raise SlackError("invalid_metadata_format")
            fields["metadata"] = {"event_type": metadata["event_type"],
                                  "event_payload": metadata["event_payload"]}
        return fields

    def publish_view(self, params: JSON) -> JSON:
        user = _str(params, "user_id")
        view = _decoded(params, "view", "invalid_arguments")
        if not user or not isinstance(view, dict) or view.get("type") != "home":
            raise SlackError("invalid_arguments")
        self.homes.setdefault(user, []).append(view)
        return {"view": {"id": f"V{len(self.homes[user]):09d}", "type": "home", **view}}

    def bot_fields(self) -> JSON:
        ws = self.workspace
        return {"user": ws.bot_user_id, "bot_id": ws.bot_id, "app_id": ws.app_id,
                "team": ws.team_id,
                "bot_profile": {"id": ws.bot_id, "app_id": ws.app_id, "name": ws.bot_name,
                                "team_id": ws.team_id, "deleted": False}}

    def post_message(self, params: JSON) -> JSON:
        channel = _channel(params)
        fields = {**self.bot_fields(), **self._content(params)}
        message = self.store.post(channel, fields, thread_ts=_str(params, "thread_ts") or None)
        return {"channel": channel, "ts": message["ts"], "message": render(message, metadata=True)}

    def update(self, params: JSON) -> JSON:
        channel = _channel(params)
        _require(params, "ts")
        ts = str(params["ts"])
        if (channel, ts) in self.streams.streaming:
            raise SlackError("streaming_state_conflict")
        message = self.store.update(channel, ts, self._content(params),
                                    editor=self.workspace.bot_user_id)
        return {"channel": channel, "ts": ts, "text": message["text"],
                "message": render(message, metadata=True)}

    def post_ephemeral(self, params: JSON) -> JSON:
        channel = _channel(params)
        _require(params, "user")
        content = self._content(params)
        ts = self.store.next_ts()
        self.store.ephemerals.setdefault(channel, []).append({
            "type": "message", "subtype": "ephemeral", "user": str(params["user"]),
            "thread_ts": _str(params, "thread_ts"), "message_ts": ts, **content})
        return {"message_ts": ts}

    def replies(self, params: JSON) -> JSON:
        channel = _channel(params)
        _require(params, "ts")
        root, replies = self.store.thread(channel, str(params["ts"]))
        per_page = max(1, _int(params, "limit", 1000, 1000) - 1)
        page, cursor = paginate(replies, _str(params, "cursor"), per_page)
        metadata = flag(params, "include_all_metadata")
        return {"messages": [render(m, metadata=metadata) for m in [root, *page]],
                "has_more": bool(cursor), "response_metadata": {"next_cursor": cursor}}

    def history(self, params: JSON) -> JSON:
        channel = _channel(params)
        inclusive = flag(params, "inclusive")
        oldest = _ts_key(_str(params, "oldest") or "0")
        latest_ts = _str(params, "latest")
        latest = _ts_key(latest_ts) if latest_ts else None

        def within(message: JSON) -> bool:
            key = _ts_key(message["ts"])
            above = key >= oldest if inclusive else key > oldest
            below = latest is None or (key <= latest if inclusive else key < latest)
            return above and below

        messages = [m for m in self.store.top_level(channel) if within(m)]
        page, cursor = paginate(messages, _str(params, "cursor"),
                                _int(params, "limit", 100, 999))
        metadata = flag(params, "include_all_metadata")
        return {"messages": [render(m, metadata=metadata) for m in page],
                "has_more": bool(cursor), "pin_count": 0, "channel_actions_ts": None,
                "channel_actions_count": 0, "response_metadata": {"next_cursor": cursor}}

    def _react(self, params: JSON, *, add: bool) -> JSON:
        channel = _channel(params)
        _require(params, "name", "timestamp")
        name = str(params["name"]).strip(":")
        self.store.react(channel, str(params["timestamp"]), name,
                         self.workspace.bot_user_id, add=add)
        return {}

    def reactions_add(self, params: JSON) -> JSON:
        return self._react(params, add=True)

    def reactions_remove(self, params: JSON) -> JSON:
        return self._react(params, add=False)

    def set_prompts(self, params: JSON) -> JSON:
        channel = _channel(params, "channel_id")
        prompts = _decoded(params, "prompts", "invalid_arguments")
        if not isinstance(prompts, list) or not prompts or len(prompts) > 4 or not all(
                isinstance(p, dict) and p.get("title") and p.get("message") for p in prompts):
            raise SlackError("invalid_arguments")
        self.suggested.append({"channel_id": channel, "thread_ts": _str(params, "thread_ts"),
                               "prompts": prompts})
        return {}

    def set_title(self, params: JSON) -> JSON:
        channel = _channel(params, "channel_id")
        _require(params, "thread_ts", "title")
        self.titles.append({"channel_id": channel, "thread_ts": str(params["thread_ts"]),
                            "title": str(params["title"])})
        return {}

    def set_status(self, params: JSON) -> JSON:
        channel = _channel(params, "channel_id")
        _require(params, "thread_ts")
        if "status" not in params:
            _require(params, "status")
        thread_ts = str(params["thread_ts"])
        root = self.store.root_of(channel, thread_ts, missing="invalid_thread_ts")
        if root["ts"] != thread_ts:
            raise SlackError("invalid_thread_ts")  # Slack wants the root, not a reply
        status: JSON = {"channel_id": channel, "thread_ts": thread_ts,
                        "status": str(params["status"])}
        loading = _decoded(params, "loading_messages", "invalid_arguments")
        if loading is not None:
            status["loading_messages"] = loading
        self.statuses.append(status)
        return {}
