"""A Discord message that comes while the store is out of reach (Discord delivers it once,
with no acknowledgement to withhold) is tried again until the store takes it, in its
thread's order; one not taken within the wait is answered with a line saying so (the chaos
soak's surprise: such a message was dropped). PostgreSQL is cut off by the soak's own TCP
proxy (chaos/proxy.py); the fake Discord is driven by the real discord.py."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from channels.discord import DiscordConfig
from channels.discord.channel import DiscordChannel, DiscordOutbound
from channels.intake import NOT_TAKEN, Intake
from chaos.proxy import Proxy
from runtime import EchoProvider, Runtime, RuntimeConfig
from runtime.stores.postgres import PostgresStore
from tests.fakes.discord import BOT_ID, GENERAL_ID, HUMAN_ID, FakeDiscord
from tests.logs import Heard
from tests.postgres import cuttable, fresh_schema


@asynccontextmanager
async def on_a_store_that_can_be_cut() -> AsyncIterator[
        tuple[FakeDiscord, Proxy, Runtime, DiscordChannel]]:
    async with fresh_schema() as schema, cuttable() as (proxy, dsn), FakeDiscord() as fake, \
            PostgresStore(dsn, schema=schema, pool_size=2) as store:
        discord = DiscordOutbound(
            DiscordConfig(api_url=fake.api_url, file_hosts=[fake.cdn_url],
                          allow_users=[str(HUMAN_ID)]), fake.token, guild_ready_timeout=0.05)
        runtime = Runtime(store, EchoProvider(), settings=RuntimeConfig(poll_interval_s=0.1),
                          deliverers={"discord": discord.deliverer})
        async with runtime:
            channel = DiscordChannel(runtime, discord)
            async with channel:
                yield fake, proxy, runtime, channel
            await runtime.idle()


def replies(fake: FakeDiscord) -> list[str]:
    return [m["content"] for m in fake.messages(GENERAL_ID)
            if str(m["author"]["id"]) == str(BOT_ID)]


async def test_messages_sent_in_a_store_cut_are_answered_once_in_order() -> None:
    with Heard("maiden.channels", "not taken yet") as heard:
        async with on_a_store_that_can_be_cut() as (fake, proxy, runtime, channel):
            proxy.cut()
            for text in ("first", "second", "third"):
                await fake.user_message(GENERAL_ID, HUMAN_ID, f"<@{BOT_ID}> {text}",
                                        mentions=[BOT_ID])
            await asyncio.wait_for(heard.said.wait(), 10)
            proxy.restore()
            await asyncio.wait_for(channel.wait_handled(3), 30)
            await fake.until(lambda: len(replies(fake)) >= 3, what="three replies", timeout=30)
            await runtime.idle()
            assert replies(fake) == ["echo: first", "echo: second", "echo: third"]
            assert [r.text for r in await runtime.records.runs()] == \
                ["first", "second", "third"]


async def test_a_message_the_store_does_not_take_in_time_is_answered_so() -> None:
    async with on_a_store_that_can_be_cut() as (fake, proxy, runtime, channel):
        channel._intake = Intake(runtime, "discord", wait_s=0.5)
        proxy.cut()
        await fake.user_message(GENERAL_ID, HUMAN_ID, f"<@{BOT_ID}> lost?", mentions=[BOT_ID])
        await asyncio.wait_for(channel.wait_handled(1), 30)
        await fake.until(lambda: replies(fake) == [NOT_TAKEN], what="the refusal", timeout=10)
        proxy.restore()
