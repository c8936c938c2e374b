"""A replica that loses the Discord gateway lease (the store out of reach for longer than
``lease_ttl_s``, or its lease taken by a replica that thought it dead) closes its gateway
connection only: it keeps its REST session, so the replies of the runs it drives still go
out, stands by as a replica that never held the lease does, and connects again once it holds
the lease again; the channel does not stop, so neither does `maiden run` (chaos/README.md,
finding 5)."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from channels.discord import DiscordConfig
from channels.discord.channel import DiscordChannel, DiscordOutbound
from runtime import (
    EchoProvider,
    Runtime,
    RuntimeConfig,
    ScriptedProvider,
    SQLiteStore,
    ToolRegistry,
    tool,
)
from runtime.serving.leases import holder_name
from runtime.stores.postgres import PostgresStore
from tests.channels.discord.test_channel import Discord, running
from tests.fakes.discord import BOT_ID, GENERAL_ID, HUMAN_ID, FakeDiscord
from tests.postgres import cuttable, fresh_schema

# Short leases, so that a lease taken away is found lost within a second.
SETTINGS = RuntimeConfig(poll_interval_s=0.05, lease_ttl_s=1.0)
ELSEWHERE = "other/1@elsewhere"  # a replica on another machine, as a lease holder
released = asyncio.Event()
"""Lets the held tool finish; made anew by each test (an event is bound to the loop it is
first awaited on, and each test has its own)."""


@tool
async def lookup(service: str) -> str:
    """Look a service up (waits until the test lets it finish)."""
    await released.wait()
    return f"{service}: green"


async def take_the_lease(d: Discord, db: Path, holder: str) -> None:
    """``holder`` takes the gateway lease from ``d``'s process (as a replica does that
    found it dead), and ``d`` closes its gateway connection."""
    link = d.fake.gateway.live()
    assert link is not None and d.channel.holder is None
    async with SQLiteStore(db) as store:
        mine = holder_name(d.runtime.operator.instance_id)
        assert await store.take_lease(d.channel.lease, holder, 30, steal_from=mine) is None
    await d.fake.until(lambda: link.ws.closed,
                       what="the lease's loser closing its gateway connection", timeout=10)


def open_links(fake: FakeDiscord) -> int:
    return sum(1 for link in fake.gateway.links if not link.ws.closed)


async def test_a_holder_that_loses_the_lease_still_posts_its_runs_replies(
        tmp_path: Path) -> None:
    """The run was taken while this replica held the gateway; its reply comes after the
    lease was lost, and goes out over the REST session the replica kept."""
    global released
    released = asyncio.Event()
    script = ScriptedProvider([
        {"tool_calls": [{"name": "lookup", "arguments": {"service": "api"}}]},
        {"text": "api is green"}])
    db = tmp_path / "maiden.db"
    async with FakeDiscord() as fake, running(fake, db, provider=script, tools=(lookup,),
                                              settings=SETTINGS) as d:
        sent = await fake.user_message(GENERAL_ID, HUMAN_ID, f"<@{BOT_ID}> how is the api?",
                                       mentions=[BOT_ID])
        await asyncio.wait_for(d.channel.wait_handled(1), 10)
        (run,) = await d.runtime.records.runs()
        await take_the_lease(d, db, ELSEWHERE)
        released.set()
        await fake.until(lambda: [m["content"] for m in d.replies()] == ["api is green"],
                         what="the reply", timeout=10)
        (reply,) = d.replies()
        assert reply["message_reference"]["message_id"] == sent["id"]
        assert (await d.runtime.records.get_run(run.id)).state == "completed"
        assert d.channel.status().startswith("standing by: ")
        assert open_links(fake) == 0  # no gateway connection


async def test_it_stands_by_and_takes_the_gateway_again_once_the_lease_is_free(
        tmp_path: Path) -> None:
    """Another replica takes the lease and connects; the one that lost it does not stop
    (``closed`` does not return) but stands by, and when the other stops it takes the
    gateway again and answers the messages that come."""
    db = tmp_path / "maiden.db"
    async with FakeDiscord() as fake, running(fake, db, settings=SETTINGS) as first:
        stopped = asyncio.create_task(first.channel.closed())
        async with running(fake, db, settings=SETTINGS) as second:
            assert second.channel.holder is not None  # standing by
            await take_the_lease(first, db, holder_name(second.runtime.operator.instance_id))
            await fake.identified(2, timeout=10)  # the second one took over
            await asyncio.wait_for(second.channel.client.ready.wait(), 10)
            assert first.channel.status().startswith("standing by: ")
            await fake.user_message(GENERAL_ID, HUMAN_ID, f"<@{BOT_ID}> one",
                                    mentions=[BOT_ID])
            await fake.wait_messages(GENERAL_ID, 2)
            await asyncio.wait_for(second.channel.wait_handled(1), 10)
            assert first.channel.handled == 0 and open_links(fake) == 1
            assert not stopped.done()
        # The second replica stopped: the first holds the gateway again.
        await fake.identified(3, timeout=10)
        await asyncio.wait_for(first.channel.client.ready.wait(), 10)
        assert first.channel.holder is None
        assert first.channel.status().startswith("connected as ")
        await fake.user_message(GENERAL_ID, HUMAN_ID, f"<@{BOT_ID}> two", mentions=[BOT_ID])
        await fake.wait_messages(GENERAL_ID, 4)
        await asyncio.wait_for(first.channel.wait_handled(1), 10)
        await first.runtime.idle()
        assert [m["content"] for m in first.replies()] == ["echo: one", "echo: two"]
        assert open_links(fake) == 1 and not stopped.done()
    async with asyncio.timeout(10):
        await stopped  # closed: now the channel has stopped


async def test_a_replica_taking_over_while_discord_is_down_keeps_trying(tmp_path: Path) -> None:
    """The holder stops while Discord is down; the replica standing by takes the lease, but
    the gateway does not connect: it stands by again and tries later (the chaos soak's
    finding 13: it stopped, and with it `maiden run`), and connects once Discord answers."""
    db = tmp_path / "maiden.db"
    async with FakeDiscord() as fake, contextlib.AsyncExitStack() as holder:
        first = await holder.enter_async_context(running(fake, db, settings=SETTINGS))
        async with running(fake, db, settings=SETTINGS) as second:
            assert second.channel.holder is not None  # standing by
            stopped = asyncio.create_task(second.channel.closed())
            await fake.misbehave("down", 3.0)
            await holder.aclose()  # the holder stops
            await fake.identified(2, timeout=30)  # connected once Discord is back
            await asyncio.wait_for(second.channel.client.ready.wait(), 10)
            assert not stopped.done(), stopped
            await fake.user_message(GENERAL_ID, HUMAN_ID, f"<@{BOT_ID}> back?",
                                    mentions=[BOT_ID])
            await asyncio.wait_for(second.channel.wait_handled(1), 10)
            await second.runtime.idle()
            await fake.until(lambda: [m["content"] for m in second.replies()]
                             == ["echo: back?"], what="the reply", timeout=10)
        assert first.channel.handled == 0


async def test_a_store_out_of_reach_as_discord_comes_back_does_not_stop_the_channel() -> None:
    """Discord is down at start, so the channel logs in again and again in the background;
    when Discord answers, the store is out of reach (its server restarting: the chaos soak's
    ``pg_restart``, seed 8), so the gateway lease cannot be asked for. The channel stands by,
    asking again, and connects once the store answers (it stopped, and with it `maiden
    run`: ``discord: … the database system is starting up; the channel stops``)."""
    async with FakeDiscord() as fake, fresh_schema() as schema, cuttable() as (proxy, dsn), \
            PostgresStore(dsn, schema=schema, pool_size=2) as store, \
            Runtime(store, EchoProvider(), ToolRegistry(()), settings=SETTINGS) as runtime:
        await fake.misbehave("down", 2.0)
        config = DiscordConfig(api_url=fake.api_url, allow_users=[str(HUMAN_ID)])
        # (a runtime built without its deliverer: nothing is posted here)
        outbound = DiscordOutbound(config, fake.token, guild_ready_timeout=0.05)
        async with DiscordChannel(runtime, outbound) as channel:
            assert channel.status().startswith("connecting: ")
            stopped = asyncio.create_task(channel.closed())
            proxy.cut()
            async with asyncio.timeout(20):  # Discord back: logged in, the lease asked for
                while channel.holder is None and not stopped.done():  # noqa: ASYNC110
                    await asyncio.sleep(0.05)
            assert not stopped.done(), stopped
            assert channel.status().startswith("standing by: ")
            proxy.restore()
            await fake.identified(1, timeout=20)
            await asyncio.wait_for(channel.client.ready.wait(), 10)
            assert channel.holder is None and not stopped.done()
        await asyncio.wait_for(stopped, 10)  # closed: now it has stopped


class FailsOnce(SQLiteStore):
    """A store whose next ``take_lease`` raises what no store error is (``armed``)."""

    armed = False
    failed: asyncio.Event | None = None

    async def take_lease(self, name: str, holder: str, ttl_s: float, *,
                         steal_from: str | None = None) -> str | None:
        if FailsOnce.armed:
            FailsOnce.armed = False
            assert FailsOnce.failed is not None
            FailsOnce.failed.set()
            raise RuntimeError("something no one expected")
        return await super().take_lease(name, holder, ttl_s, steal_from=steal_from)


async def test_a_replica_standing_by_does_not_stop_on_an_unexpected_error(
        tmp_path: Path) -> None:
    """chaos finding 26: a replica standing by for the gateway stopped as PostgreSQL
    restarted (`the discord channel stopped unexpectedly`), having logged nothing of why.
    Asking for the lease again is all it does while standing by: an error it does not know
    is logged, with its trace, and it asks again; it takes over when the holder stops."""
    db = tmp_path / "maiden.db"
    async with FakeDiscord() as fake, running(fake, db, settings=SETTINGS) as first:
        async with running(fake, db, settings=SETTINGS, store_class=FailsOnce) as second:
            assert second.channel.holder is not None  # standing by
            stopped = asyncio.create_task(second.channel.closed())
            FailsOnce.failed = asyncio.Event()
            FailsOnce.armed = True
            await asyncio.wait_for(FailsOnce.failed.wait(), 10)
            await take_the_lease(first, db, holder_name(second.runtime.operator.instance_id))
            await fake.identified(2, timeout=10)  # it took over after all
            await asyncio.wait_for(second.channel.client.ready.wait(), 10)
            assert not stopped.done()
        await asyncio.wait_for(stopped, 10)
