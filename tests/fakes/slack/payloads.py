"""What Slack sends an app: Events API payloads, interactions, Socket Mode envelopes, signatures.

The shapes follow payloads Slack really sends (as recorded in slack-sdk's and bolt's own test
data): an ``event_callback`` wraps the event with ``event_id``, ``event_time``, ``team_id``,
``api_app_id`` and ``authorizations``; HTTP mode signs the exact body bytes with
``v0=hmac_sha256(secret, "v0:{ts}:{body}")``; interactions arrive form-encoded as
``payload=<json>``.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import time
import uuid
from typing import Any, Literal
from urllib.parse import urlencode

JSON = dict[str, Any]

TEAM = "T0FAKE0001"
APP = "A0FAKEAPP1"
BOT_USER = "U0FAKEBOT1"
BOT = "B0FAKEBOT1"

ChannelType = Literal["channel", "group", "im", "mpim"]

_event_ids = itertools.count(1)


def sign(body: bytes, secret: str, ts: int) -> str:
    """Slack's request signature: ``v0=`` + hex HMAC-SHA256 of ``v0:{ts}:{body}``."""
    base = b"v0:" + str(ts).encode() + b":" + body
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


def _headers(body: bytes, secret: str, ts: int | None, content_type: str) -> dict[str, str]:
    stamp = int(time.time()) if ts is None else ts
    return {
        "Content-Type": content_type,
        "User-Agent": "Slackbot 1.0 (+https://api.slack.com/robots)",
        "X-Slack-Request-Timestamp": str(stamp),
        "X-Slack-Signature": sign(body, secret, stamp),
    }


def signed_event(body: JSON, secret: str, *, ts: int | None = None,
                 retry_num: int | None = None, retry_reason: str = "http_timeout"
                 ) -> tuple[bytes, dict[str, str]]:
    """The body bytes and headers of an Events API POST (``ts`` defaults to now)."""
    raw = json.dumps(body, separators=(",", ":")).encode()
    headers = _headers(raw, secret, ts, "application/json")
    if retry_num is not None:
        headers["X-Slack-Retry-Num"] = str(retry_num)
        headers["X-Slack-Retry-Reason"] = retry_reason
    return raw, headers


def signed_interaction(payload: JSON, secret: str, *, ts: int | None = None
                       ) -> tuple[bytes, dict[str, str]]:
    """The body bytes and headers of an interactivity POST: form-encoded ``payload=<json>``."""
    raw = urlencode({"payload": json.dumps(payload, separators=(",", ":"))}).encode()
    return raw, _headers(raw, secret, ts, "application/x-www-form-urlencoded")


def url_verification(challenge: str = "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"
                     ) -> JSON:
    """The handshake Slack sends when a Request URL is saved; the app echoes ``challenge``."""
    return {"token": "Jhj5dZrVaK7ZwHHjRyZWjbDl", "challenge": challenge,
            "type": "url_verification"}


def message_event(team: str, channel: str, user: str, text: str, ts: str,
                  thread_ts: str | None = None,
                  channel_type: ChannelType = "channel",
                  subtype: str | None = None, bot_id: str | None = None, *,
                  parent_user_id: str | None = None) -> JSON:
    """A ``message`` event as delivered in ``event_callback.event``."""
    event: JSON = {"type": "message", "text": text, "user": user, "ts": ts, "team": team,
                   "channel": channel, "event_ts": ts, "channel_type": channel_type}
    if bot_id is None and subtype is None:
        event["client_msg_id"] = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{channel}/{ts}"))
        event["blocks"] = _rich_text(text)
    if thread_ts is not None:
        event["thread_ts"] = thread_ts
    if parent_user_id is not None:
        event["parent_user_id"] = parent_user_id
    if subtype is not None:
        event["subtype"] = subtype
    if bot_id is not None:
        event["bot_id"] = bot_id
        event["app_id"] = APP
        event["bot_profile"] = {"id": bot_id, "app_id": APP, "name": "maiden",
                                "team_id": team, "deleted": False}
    return event


def app_mention_event(team: str, channel: str, user: str, text: str, ts: str,
                      thread_ts: str | None = None) -> JSON:
    """An ``app_mention`` event (``text`` should hold ``<@BOT_USER>``)."""
    event: JSON = {"type": "app_mention", "text": text, "user": user, "ts": ts, "team": team,
                   "channel": channel, "event_ts": ts,
                   "client_msg_id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"{channel}/{ts}")),
                   "blocks": _rich_text(text)}
    if thread_ts is not None:
        event["thread_ts"] = thread_ts
    return event


def agent_session_stopped_event(channel: str, thread_ts: str, user: str,
                                streaming_message_ts: list[str], event_ts: str) -> JSON:
    """``agent_session_stopped`` (docs.slack.dev/reference/events/agent_session_stopped):
    ``user`` clicked stop; ``streaming_message_ts`` lists the app's streams Slack stopped
    (empty when none was running)."""
    return {"type": "agent_session_stopped", "channel": channel, "thread_ts": thread_ts,
            "user": user, "streaming_message_ts": list(streaming_message_ts),
            "event_ts": event_ts}


def _rich_text(text: str) -> list[JSON]:
    return [{"type": "rich_text", "block_id": "Fake1",
             "elements": [{"type": "rich_text_section",
                           "elements": [{"type": "text", "text": text}]}]}]


def event_callback(event: JSON, *, team_id: str = TEAM, api_app_id: str = APP,
                   bot_user_id: str = BOT_USER, event_id: str | None = None,
                   event_time: int | None = None) -> JSON:
    """The ``event_callback`` wrapper Slack puts around every event (same in HTTP and socket)."""
    when = event_time if event_time is not None else int(float(event.get("event_ts", time.time())))
    return {
        "token": "Jhj5dZrVaK7ZwHHjRyZWjbDl",
        "team_id": team_id,
        "context_team_id": team_id,
        "context_enterprise_id": None,
        "api_app_id": api_app_id,
        "event": event,
        "type": "event_callback",
        "event_id": event_id if event_id is not None else f"Ev0FAKE{next(_event_ids):05d}",
        "event_time": when,
        "authorizations": [{"enterprise_id": None, "team_id": team_id, "user_id": bot_user_id,
                            "is_bot": True, "is_enterprise_install": False}],
        "is_ext_shared_channel": False,
        "event_context": f"4-fake-{team_id}-{event.get('channel', '')}",
    }


def block_actions_payload(user: str, channel: str, message_ts: str, action_id: str,
                          value: str, *, team: str = TEAM, api_app_id: str = APP,
                          block_id: str = "actions", thread_ts: str | None = None,
                          message: JSON | None = None, response_url: str | None = None,
                          text: str = "Button") -> JSON:
    """A button click on a message (``type: block_actions``); ``message`` as stored, if known."""
    container: JSON = {"type": "message", "message_ts": message_ts, "channel_id": channel,
                       "is_ephemeral": False}
    if thread_ts is not None:
        container["thread_ts"] = thread_ts
    shown = message if message is not None else {
        "type": "message", "ts": message_ts, "user": BOT_USER, "bot_id": BOT, "text": ""}
    return {
        "type": "block_actions",
        "user": {"id": user, "username": user.lower(), "name": user.lower(), "team_id": team},
        "api_app_id": api_app_id,
        "token": "Jhj5dZrVaK7ZwHHjRyZWjbDl",
        "container": container,
        "trigger_id": f"{message_ts.replace('.', '')}.{team}.fake",
        "team": {"id": team, "domain": "maiden-test"},
        "enterprise": None,
        "is_enterprise_install": False,
        "channel": {"id": channel, "name": "general"},
        "message": shown,
        "state": {"values": {}},
        "response_url": response_url or f"https://hooks.slack.com/actions/{team}/1/fake",
        "actions": [{"action_id": action_id, "block_id": block_id,
                     "text": {"type": "plain_text", "text": text, "emoji": True},
                     "value": value, "type": "button", "action_ts": f"{time.time():.6f}"}],
    }


def feedback_click(user: str, channel: str, message: JSON, *, positive: bool = True) -> JSON:
    """A click on the 👍 (``positive``) or 👎 of the feedback buttons a stored message
    carries (a ``context_actions`` block with a ``feedback_buttons`` element), as Slack
    sends it: the clicked button's value; ``ValueError`` if the message has none."""
    for block in message.get("blocks") or []:
        if block.get("type") != "context_actions":
            continue
        for element in block.get("elements") or []:
            if element.get("type") != "feedback_buttons":
                continue
            button = element["positive_button" if positive else "negative_button"]
            payload = block_actions_payload(
                user, channel, str(message["ts"]), str(element.get("action_id") or ""),
                str(button["value"]), block_id=str(block.get("block_id") or "feedback"),
                thread_ts=message.get("thread_ts"), message=message,
                text=str(button["text"]["text"]))
            payload["actions"][0]["type"] = "feedback_buttons"
            return payload
    raise ValueError(f"message {message.get('ts')} has no feedback buttons")


def events_api_envelope(payload: JSON, envelope_id: str, *, retry_attempt: int = 0,
                        retry_reason: str = "") -> JSON:
    """A Socket Mode ``events_api`` envelope around an ``event_callback`` payload."""
    return {"envelope_id": envelope_id, "payload": payload, "type": "events_api",
            "accepts_response_payload": False, "retry_attempt": retry_attempt,
            "retry_reason": retry_reason}


def interactive_envelope(payload: JSON, envelope_id: str) -> JSON:
    """A Socket Mode ``interactive`` envelope (block_actions, shortcuts, view submissions)."""
    # slack-sdk's recorded envelopes have false for block_actions and shortcuts; a view
    # submission can answer with a response_action, so it is assumed to accept a payload.
    return {"envelope_id": envelope_id, "payload": payload, "type": "interactive",
            "accepts_response_payload": payload.get("type") == "view_submission"}


def hello(app_id: str, num_connections: int, host: str) -> JSON:
    """The first frame on every Socket Mode connection."""
    return {"type": "hello", "num_connections": num_connections,
            "debug_info": {"host": host, "build_number": 1,
                           "approximate_connection_time": 18060},
            "connection_info": {"app_id": app_id}}


def disconnect(reason: str, app_id: str, num_connections: int, host: str) -> JSON:
    """Slack asking the client to reconnect (``refresh_requested``, ``warning``, ...)."""
    return {"type": "disconnect", "reason": reason, "num_connections": num_connections,
            "debug_info": {"host": host}, "connection_info": {"app_id": app_id}}


def slash_command(team: str, channel: str, user: str, text: str, *, command: str = "/maiden",
                  trigger_id: str | None = None, channel_name: str = "general",
                  api_app_id: str = APP) -> JSON:
    """A slash command's payload, as Slack sends it (form fields; Socket Mode: as JSON)."""
    trigger = trigger_id or f"{uuid.uuid4().int % 10**13}.{uuid.uuid4().int % 10**12}." \
        f"{uuid.uuid4().hex}"
    return {"token": "Jhj5dZrVaK7ZwHHjRyZWjbDl", "team_id": team, "team_domain": "maiden-test",
            "channel_id": channel, "channel_name": channel_name, "user_id": user,
            "user_name": user.lower(), "command": command, "text": text,
            "api_app_id": api_app_id, "is_enterprise_install": "false",
            "response_url": f"https://hooks.slack.com/commands/{team}/1/{uuid.uuid4().hex}",
            "trigger_id": trigger}


def slash_commands_envelope(payload: JSON, envelope_id: str) -> JSON:
    """A Socket Mode ``slash_commands`` envelope: the ack may carry the response."""
    return {"envelope_id": envelope_id, "payload": payload, "type": "slash_commands",
            "accepts_response_payload": True}


def signed_command(payload: JSON, secret: str, *, ts: int | None = None
                   ) -> tuple[bytes, dict[str, str]]:
    """The body bytes and headers of a slash command POST: its fields form-encoded."""
    raw = urlencode(payload).encode()
    return raw, _headers(raw, secret, ts, "application/x-www-form-urlencoded")


def app_home_opened(user: str, channel: str = "D0HOME0001", tab: str = "home") -> JSON:
    """The event Slack sends when a person opens the app's Home (or Messages) tab."""
    ts = f"{time.time():.6f}"
    return {"type": "app_home_opened", "user": user, "channel": channel, "tab": tab,
            "event_ts": ts}
