"""One contract, every channel's deliverer (DESIGN §5): the same tests run on each.

A channel joins by adding a ``ChannelUnderTest`` factory to ``CHANNELS``: its
deliverer pointed at its fake, a target there, and a way to read back what the
fake received. Sending goes through the runtime's own ``deliver`` (fresh, or
reconciling first as after a crash), so the tests hold the deliverer to the rule
the outbox relies on: a message carries its key, and reconcile finds it by that key.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from channels.base import Link
from runtime import (
    ApprovalDelivery,
    Checkpoint,
    Deliverer,
    Delivery,
    Origin,
    ReplyDelivery,
    Run,
    SQLiteStore,
)
from runtime.outbox.delivery import deliver, parts
from tests.fakes.chat import MemoryChat

TEXT = "Hello! Here is what I found:\n\n" + "\n\n".join(
    f"Paragraph {i}: " + "lorem ipsum dolor sit amet " * 12 for i in range(40))


@dataclass
class ChannelUnderTest:
    deliverer: Deliverer
    target: dict[str, str]
    messages: Callable[[], Awaitable[list[tuple[str, str, str]]]]
    """What the channel holds now: (key, kind, text) per message, oldest first."""


@asynccontextmanager
async def memory_chat() -> AsyncIterator[ChannelUnderTest]:
    chat = MemoryChat(max_chars=500)

    async def messages() -> list[tuple[str, str, str]]:
        return [(m.key, m.kind, m.text) for m in chat.posted]

    yield ChannelUnderTest(chat, {"room": "r1"}, messages)


@asynccontextmanager
async def slack() -> AsyncIterator[ChannelUnderTest]:
    from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
    from slack_sdk.web.async_client import AsyncWebClient

    from channels.slack.deliverer import EVENT_TYPE, SlackDeliverer
    from tests.fakes.slack import BOT_USER, FakeSlack

    async with FakeSlack() as fake:
        client = AsyncWebClient(token=fake.bot_token, base_url=fake.api_url,
                                retry_handlers=[AsyncRateLimitErrorRetryHandler()])
        deliverer = SlackDeliverer(client, link=Link(offline=None, bot=BOT_USER), pace_s=0)
        root = fake.post_as_user("C0GENERAL01", "U1", "a question")

        async def messages() -> list[tuple[str, str, str]]:
            found = []
            for m in fake.messages("C0GENERAL01"):
                meta = m.get("metadata") or {}
                if m.get("user") == BOT_USER and meta.get("event_type") == EVENT_TYPE:
                    kind = "approval" if any(b.get("type") == "actions"
                                             for b in m.get("blocks") or []) else "reply"
                    found.append((meta["event_payload"]["key"], kind, m["text"]))
            return found

        yield ChannelUnderTest(deliverer, {"channel": "C0GENERAL01", "thread_ts": root["ts"]},
                               messages)


@asynccontextmanager
async def discord() -> AsyncIterator[ChannelUnderTest]:
    import asyncio

    from discord.http import HTTPClient

    from channels.discord.channel import point_at
    from channels.discord.deliverer import DiscordDeliverer
    from tests.fakes.discord import BOT_ID, GENERAL_ID, HUMAN_ID, FakeDiscord

    async with FakeDiscord() as fake:
        http = HTTPClient(asyncio.get_running_loop())
        point_at(http, fake.api_url)
        await http.static_login(fake.token)
        try:
            asked = fake.post_as_user(GENERAL_ID, HUMAN_ID, "a question")

            async def messages() -> list[tuple[str, str, str]]:
                posted = [m for m in fake.messages(GENERAL_ID)
                          if str(m["author"]["id"]) == str(BOT_ID)]
                return [(_key_of(m), "approval" if m.get("components") else "reply",
                         m["content"]) for m in posted]

            def _key_of(message: dict[str, Any]) -> str:
                return keys.get(str(message.get("nonce")), "?")

            keys: dict[str, str] = {}
            deliverer = DiscordDeliverer(http, link=Link(offline=None, bot=str(BOT_ID)))
            send = deliverer.send

            async def remembering(delivery: Delivery) -> str:
                from channels.discord.deliverer import nonce

                keys[nonce(delivery.key)] = delivery.key
                return await send(delivery)

            deliverer.send = remembering  # type: ignore[method-assign]
            yield ChannelUnderTest(deliverer, {"channel": str(GENERAL_ID),
                                               "message": str(asked["id"]),
                                               "guild": str(fake.world.guild_of(GENERAL_ID))},
                                   messages)
        finally:
            await http.close()


CHANNELS: dict[str, Callable[[], AbstractAsyncContextManager[ChannelUnderTest]]] = {
    "memory": memory_chat,
    "slack": slack,
    "discord": discord,
}


@pytest.fixture(params=sorted(CHANNELS))
async def channel(request: pytest.FixtureRequest) -> AsyncIterator[ChannelUnderTest]:
    async with CHANNELS[request.param]() as under_test:
        yield under_test


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    async with SQLiteStore(tmp_path / "maiden.db") as opened:
        yield opened


async def recorded(store: SQLiteStore, channel: ChannelUnderTest, *,
                   text: str = "Done: 3 files changed.", key: str = "k1",
                   approval: bool = False) -> Delivery:
    """A delivery as a run's checkpoint writes it to the outbox."""
    run = await store.create_run(Run(id=key.ljust(32, "0"), thread_id=f"t-{key}", text="hi",
                                     origin=Origin(channel="c", target=channel.target)))
    delivery: Delivery
    if approval:
        delivery = ApprovalDelivery(key=key, run_id=run.id, thread_id=run.thread_id,
                                    channel="c", target=channel.target, tool_call_id="call_1",
                                    name="deploy", arguments={"env": "prod"},
                                    arguments_hash="h" * 64, reason="requires_approval")
    else:
        delivery = ReplyDelivery(key=key, run_id=run.id, thread_id=run.thread_id, channel="c",
                                 target=channel.target, text=text)
    await store.commit(Checkpoint(run.thread_id, None, deliveries=[delivery]))
    return delivery


async def remote_id(store: SQLiteStore, key: str) -> str | None:
    return next(d.remote_id for d in await store.deliveries() if d.key == key)


async def test_a_fresh_reply_is_posted_once_carrying_its_key(
    channel: ChannelUnderTest, store: SQLiteStore
) -> None:
    delivery = await recorded(store, channel)
    sent = await deliver(store, channel.deliverer, delivery, fresh=True)
    assert await channel.messages() == [("k1", "reply", "Done: 3 files changed.")]
    assert await remote_id(store, "k1") == sent


async def test_reconcile_finds_what_was_posted_and_nothing_is_posted_again(
    channel: ChannelUnderTest, store: SQLiteStore
) -> None:
    delivery = await recorded(store, channel)
    first = await channel.deliverer.send(delivery)  # then the process died: id not recorded
    assert await channel.deliverer.reconcile(delivery) == first
    assert await deliver(store, channel.deliverer, delivery, fresh=False) == first
    assert len(await channel.messages()) == 1
    assert await remote_id(store, "k1") == first


async def test_reconcile_misses_what_was_never_posted(
    channel: ChannelUnderTest, store: SQLiteStore
) -> None:
    posted = await recorded(store, channel, key="k1")
    missing = await recorded(store, channel, key="k2", text="another reply")
    await channel.deliverer.send(posted)
    assert await channel.deliverer.reconcile(missing) is None
    await deliver(store, channel.deliverer, missing, fresh=False)
    assert [key for key, _, _ in await channel.messages()] == ["k1", "k2"]


async def test_a_long_reply_goes_in_parts_in_order(
    channel: ChannelUnderTest, store: SQLiteStore
) -> None:
    limit = channel.deliverer.max_chars
    if limit is None:
        pytest.skip("this channel has no length limit")
    delivery = await recorded(store, channel, text=TEXT)
    await deliver(store, channel.deliverer, delivery, fresh=True)
    messages = await channel.messages()
    assert len(messages) > 1
    assert [key for key, _, _ in messages] == [f"k1:{i}" for i in range(1, len(messages) + 1)]
    assert all(len(text) <= limit for _, _, text in messages)
    # Nothing lost: the parts are the text, cut at paragraph boundaries.
    assert "\n\n".join(text for _, _, text in messages) == TEXT


async def test_after_a_crash_between_parts_only_the_missing_ones_are_posted(
    channel: ChannelUnderTest, store: SQLiteStore
) -> None:
    if channel.deliverer.max_chars is None:
        pytest.skip("this channel has no length limit")
    delivery = await recorded(store, channel, text=TEXT)
    pieces = parts(delivery, channel.deliverer.max_chars)
    for piece in pieces[:2]:  # two parts went out, then the process died
        await channel.deliverer.send(piece)
    await deliver(store, channel.deliverer, delivery, fresh=False)
    messages = await channel.messages()
    assert [key for key, _, _ in messages] == [p.key for p in pieces]
    stored = await remote_id(store, "k1")
    assert stored is not None and len(stored.split(",")) == len(pieces)


async def test_an_approval_prompt_is_posted_once_and_found_again(
    channel: ChannelUnderTest, store: SQLiteStore
) -> None:
    prompt = await recorded(store, channel, approval=True)
    assert parts(prompt, channel.deliverer.max_chars) == [prompt]  # never cut
    sent = await deliver(store, channel.deliverer, prompt, fresh=True)
    ((key, kind, text),) = await channel.messages()
    assert (key, kind) == ("k1", "approval") and "deploy" in text
    assert await channel.deliverer.reconcile(prompt) == sent
    assert await deliver(store, channel.deliverer, prompt, fresh=False) == sent
    assert len(await channel.messages()) == 1
