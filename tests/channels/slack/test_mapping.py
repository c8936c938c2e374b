"""Slack events -> maiden threads, and the Slack config: tables, no I/O."""

from __future__ import annotations

from typing import Any

import pytest

from channels.access import Place
from channels.slack import Ignored, Inbound, SlackConfig, read_event
from channels.slack.render import APPROVE, DENY, approval_blocks, parse_choice
from runtime import ApprovalDelivery, ConfigError

BOT = "UBOT"


def event(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"type": "message", "channel": "C1", "user": "U1", "text": "hi",
                            "ts": "100.1", "channel_type": "channel"}
    base.update(fields)
    return {k: v for k, v in base.items() if v is not None}


def read(e: dict[str, Any], **options: Any) -> Inbound | Ignored:
    return read_event(e, team="T1", bot_user=BOT, bot_id="BBOT", **options)


MAPPED = [
    ("a mention starts a Slack thread", event(type="app_mention", text=f"<@{BOT}> hello"),
     "slack:T1:C1:100.1", "100.1", "hello", True),
    ("a mention inside a thread", event(type="app_mention", text=f"<@{BOT}> more",
                                        ts="105.5", thread_ts="100.1"),
     "slack:T1:C1:100.1", "100.1", "more", True),
    ("message.channels with the mention", event(text=f"hey <@{BOT}|maiden> look"),
     "slack:T1:C1:100.1", "100.1", "hey  look", True),
    ("a thread reply without a mention", event(ts="105.5", thread_ts="100.1"),
     "slack:T1:C1:100.1", "100.1", "hi", False),
    ("a DM is one thread, answered at top level", event(channel="D9", channel_type="im"),
     "slack:T1:D9", None, "hi", False),
    ("a Slack thread in a DM is its own thread",
     event(channel="D9", channel_type="im", ts="105.5", thread_ts="100.1"),
     "slack:T1:D9:100.1", "100.1", "hi", False),
    ("a thread broadcast is a message", event(subtype="thread_broadcast", ts="105.5",
                                              thread_ts="100.1"),
     "slack:T1:C1:100.1", "100.1", "hi", False),
]


@pytest.mark.parametrize(("what", "e", "thread_id", "reply_in", "text", "mentioned"), MAPPED,
                         ids=[row[0] for row in MAPPED])
def test_mapping(what: str, e: dict[str, Any], thread_id: str, reply_in: str | None,
                 text: str, mentioned: bool) -> None:
    seen = read(e)
    assert isinstance(seen, Inbound)
    assert (seen.thread_id, seen.reply_in, seen.text, seen.mentioned) == (
        thread_id, reply_in, text, mentioned)
    assert seen.key == f"slack:T1:{seen.channel}:{e['ts']}"  # the message, not the event
    assert seen.target["channel"] == seen.channel and seen.target["message_ts"] == e["ts"]
    assert seen.target.get("thread_ts") == reply_in


def test_the_same_message_as_mention_and_message_has_one_key() -> None:
    mention = read(event(type="app_mention", text=f"<@{BOT}> hi"))
    message = read(event(text=f"<@{BOT}> hi"))
    assert isinstance(mention, Inbound) and isinstance(message, Inbound)
    assert mention.key == message.key and mention.thread_id == message.thread_id


IGNORED: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("the bot's own message", event(user=BOT), {}),
    ("the bot's own bot_id", event(user=None, bot_id="BBOT", subtype="bot_message"), {}),
    ("another bot", event(bot_id="BOTHER"), {}),
    ("another bot's bot_message", event(user=None, bot_id="BOTHER", subtype="bot_message"),
     {}),
    ("an edit", event(subtype="message_changed"), {}),
    ("a deletion", event(subtype="message_deleted"), {}),
    ("a join", event(subtype="channel_join"), {}),
    ("not a message", event(type="reaction_added"), {}),
]


@pytest.mark.parametrize(("what", "e", "options"), IGNORED, ids=[row[0] for row in IGNORED])
def test_ignored(what: str, e: dict[str, Any], options: dict[str, Any]) -> None:
    assert isinstance(read(e, **options), Ignored)


def test_other_bots_with_reply_to_bots() -> None:
    seen = read(event(bot_id="BOTHER", type="app_mention", text=f"<@{BOT}> ping"),
                reply_to_bots=True)
    assert isinstance(seen, Inbound) and seen.text == "ping"
    assert isinstance(read(event(user=BOT), reply_to_bots=True), Ignored)  # never itself


@pytest.mark.parametrize(("keys", "user", "channel", "ok"), [
    ({}, "U1", "C1", False),
    ({"open": True}, "U1", "C1", True),
    ({"allow_users": ["U1"]}, "U1", "C9", True),
    ({"allow_users": ["U1"]}, "U2", "C9", False),
    ({"allow_channels": ["C1"]}, "U2", "C1", True),
    ({"allow_users": ["U1"], "allow_channels": ["C1"]}, "U2", "C1", False),  # users AND places
])
def test_access_fails_closed(keys: dict[str, Any], user: str, channel: str, ok: bool) -> None:
    assert SlackConfig.model_validate(keys).access.allows(user, Place.of(channel), "talk") is ok


def test_slack_secrets_name_each_unset_variable() -> None:
    socket = SlackConfig()
    with pytest.raises(ConfigError) as missing:
        socket.secrets({})
    text = str(missing.value)
    assert "channels.slack.bot_token_env: $SLACK_BOT_TOKEN is not set" in text
    assert "channels.slack.app_token_env: $SLACK_APP_TOKEN is not set" in text
    assert "SIGNING" not in text  # socket mode does not need it
    http = SlackConfig(mode="http", bot_token_env="B")
    secrets = http.secrets({"B": "xoxb-1", "SLACK_SIGNING_SECRET": "s"})
    assert (secrets.bot_token, secrets.signing_secret, secrets.app_token) == (
        "xoxb-1", "s", None)


def test_approval_buttons_carry_the_call() -> None:
    prompt = ApprovalDelivery(key="k", run_id="r1", thread_id="t", channel="slack",
                              tool_call_id="c1", name="deploy", arguments={"env": "prod"},
                              arguments_hash="h" * 64, reason="requires_approval",
                              asked_by="U1")
    blocks = approval_blocks(prompt)
    assert blocks[0]["type"] == "markdown" and "deploy" in blocks[0]["text"]
    buttons = blocks[1]["elements"]
    assert [b["action_id"] for b in buttons] == [APPROVE, DENY]
    approve, ids = parse_choice(buttons[0]) or (None, {})
    assert approve is True and ids == {"run": "r1", "call": "c1", "hash": "h" * 64,
                                       "name": "deploy"}
    assert parse_choice({"action_id": DENY, "value": buttons[1]["value"]}) == (False, ids)
    assert parse_choice({"action_id": APPROVE, "value": "not json"}) is None
    assert parse_choice({"action_id": "other", "value": buttons[0]["value"]}) is None


@pytest.mark.parametrize(("e", "private"), [
    (event(), False),  # a public channel
    (event(channel="G1", channel_type="group"), True),  # a private channel
    (event(channel="C7", channel_type="group"), True),  # one with a C id, as new ones have
    (event(channel="G2", channel_type="mpim"), True),  # a group DM
    (event(channel="D9", channel_type="im"), True),  # a DM
    # An app_mention says nothing: the inbound asks Slack (test_privacy.py).
    (event(type="app_mention", text=f"<@{BOT}> hi", channel_type=None), None),
    (event(type="app_mention", channel="D9", text=f"<@{BOT}> hi", channel_type="im"), True),
])
def test_what_is_said_in_a_private_conversation_is_marked_so(e: dict[str, Any],
                                                              private: bool | None) -> None:
    seen = read(e)
    assert isinstance(seen, Inbound) and seen.private is private
