"""Discord messages -> maiden threads, buttons' custom ids, the config: tables, no I/O."""

from __future__ import annotations

from typing import Any

import pytest

from channels.access import Place
from channels.discord import DiscordConfig, Ignored, Inbound, Seen, read_message
from channels.discord.deliverer import nonce
from channels.discord.render import approval_components, custom_id, parse_custom_id
from runtime import ApprovalDelivery, ConfigError

BOT = "900"


def seen(**fields: Any) -> Seen:
    base: dict[str, Any] = {"id": "5001", "channel": "300", "guild": "100", "author": "42",
                            "author_is_bot": False, "content": "hi", "mentions_bot": False,
                            "replies_to_bot": False, "in_thread": False}
    base.update(fields)
    return Seen(**base)


MAPPED = [
    ("a mention in a guild channel", seen(content=f"<@{BOT}> hello", mentions_bot=True),
     "discord:100:300", "hello", True),
    ("a nickname mention", seen(content=f"<@!{BOT}> hey", mentions_bot=True),
     "discord:100:300", "hey", True),
    ("a reply to the bot", seen(replies_to_bot=True), "discord:100:300", "hi", True),
    ("a plain channel message", seen(), "discord:100:300", "hi", False),
    ("a thread is its own channel", seen(channel="777", in_thread=True),
     "discord:100:777", "hi", False),
    ("a DM", seen(guild=None, channel="55"), "discord:dm:55", "hi", True),
]


@pytest.mark.parametrize(("what", "message", "thread_id", "text", "addressed"), MAPPED,
                         ids=[row[0] for row in MAPPED])
def test_mapping(what: str, message: Seen, thread_id: str, text: str, addressed: bool) -> None:
    found = read_message(message, bot=BOT)
    assert isinstance(found, Inbound)
    assert (found.thread_id, found.text, found.addressed) == (thread_id, text, addressed)
    assert found.key == f"discord:{message.id}"
    assert found.target["channel"] == message.channel
    assert found.target["message"] == message.id
    assert read_message(message, bot=BOT, respond_in="all").addressed  # type: ignore[union-attr]


@pytest.mark.parametrize(("message", "options"), [
    (seen(author=BOT), {}),
    (seen(author=BOT), {"reply_to_bots": True}),
    (seen(author_is_bot=True, mentions_bot=True), {}),
])
def test_ignored(message: Seen, options: dict[str, Any]) -> None:
    assert isinstance(read_message(message, bot=BOT, **options), Ignored)


def test_other_bots_with_reply_to_bots() -> None:
    found = read_message(seen(author_is_bot=True, mentions_bot=True), bot=BOT,
                         reply_to_bots=True)
    assert isinstance(found, Inbound)


def prompt(call: str = "call_1") -> ApprovalDelivery:
    return ApprovalDelivery(key="k", run_id="a" * 32, thread_id="t", channel="discord",
                            tool_call_id=call, name="deploy", arguments={"env": "prod"},
                            arguments_hash="0123456789abcdef" * 4, reason="requires_approval")


def test_custom_ids_carry_the_call_and_fit() -> None:
    approve = custom_id(prompt(), True)
    assert approve == f"maiden:a:{'a' * 32}:0123456789abcdef:call_1" and len(approve) <= 100
    choice = parse_custom_id(approve)
    assert choice is not None and choice.approve and choice.call_id == "call_1"
    deny = parse_custom_id(custom_id(prompt(), False))
    assert deny is not None and not deny.approve
    long = custom_id(prompt("x" * 90), True)  # too long for the call id: the pending call
    assert len(long) <= 100 and parse_custom_id(long) is not None
    assert parse_custom_id(long).call_id == ""  # type: ignore[union-attr]
    assert parse_custom_id("maiden:z:nope") is None and parse_custom_id("other") is None
    (row,) = approval_components(prompt())
    assert [b["label"] for b in row["components"]] == ["Approve", "Deny"]


def test_nonces_are_short_and_stable() -> None:
    assert len(nonce("k" * 64)) == 25 and nonce("k1") == nonce("k1") != nonce("k2")


def test_the_token_is_named_when_unset() -> None:
    with pytest.raises(ConfigError, match=r"channels\.discord\.token_env: \$DISCORD_BOT_TOKEN"):
        DiscordConfig().token({})
    assert DiscordConfig(token_env="T").token({"T": "abc"}) == "abc"
    assert DiscordConfig().access.nobody
    assert DiscordConfig(allow_guilds=["100"]).access.allows("42", Place.of("300", "100"),
                                                             "talk")
