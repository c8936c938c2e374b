"""The PostgreSQL store's one listening connection (runtime/stores/postgres/listen.py): each
channel's listeners hear its notifications until they stop, the connection goes with the
last of them, one that cannot be made is said once, and one that is lost is made again."""

from __future__ import annotations

import asyncio
import itertools
import logging

import asyncpg  # type: ignore[import-untyped]
import pytest

from runtime.model.requests import ControlRequest, thread_key
from runtime.stores.postgres import PostgresStore
from runtime.stores.postgres.listen import Listening, channel
from tests.postgres import PG_DSN, in_schema, require_postgres


async def _notify(name: str, payload: str) -> None:
    conn = await asyncpg.connect(PG_DSN)
    try:
        await conn.execute("SELECT pg_notify($1, $2)", name, payload)
    finally:
        await conn.close()


def test_a_channel_is_an_identifier_of_its_schema_whatever_the_schemas_name() -> None:
    long = "x" * 63
    assert len(channel("maiden_requests_", long).encode()) <= 63
    assert channel("maiden_requests_", "a") == channel("maiden_requests_", "a")
    assert channel("maiden_requests_", "a") != channel("maiden_requests_", "b")
    assert channel("maiden_requests_", "a") != channel("maiden_threads_", "a")


async def test_each_listener_hears_its_channel_until_it_stops() -> None:
    await require_postgres()
    listening = Listening(PG_DSN, 10)
    one, other = channel("maiden_test_", "one"), channel("maiden_test_", "other")
    heard: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
    try:
        stop_a = await listening.listen(one, lambda p: heard.put_nowait(("a", p)))
        stop_b = await listening.listen(one, lambda p: heard.put_nowait(("b", p)))
        stop_c = await listening.listen(other, lambda p: heard.put_nowait(("c", p)))
        assert stop_a is not None and stop_b is not None and stop_c is not None
        async with asyncio.timeout(10):
            await _notify(one, "1")
            assert sorted([await heard.get(), await heard.get()]) == [("a", "1"), ("b", "1")]
            await stop_a()
            await stop_a()  # (once is enough)
            await _notify(one, "2")
            await _notify(other, "3")
            assert [await heard.get(), await heard.get()] == [("b", "2"), ("c", "3")]
            assert heard.empty()
            await stop_b()
            await stop_c()
        assert listening._conn is None  # the last listener gone, the connection too
    finally:
        await listening.close()


async def test_a_server_that_cannot_be_reached_is_said_once_and_polled_instead(
        caplog: pytest.LogCaptureFixture) -> None:
    listening = Listening("postgresql://maiden@127.0.0.1:1/maiden", 2)
    with caplog.at_level(logging.WARNING, logger="maiden.store"):
        for name in ("a", "b"):
            assert await listening.listen(name, lambda p: None) is None
    assert [r.getMessage() for r in caplog.records] == [
        "cannot listen on postgres (ConnectionRefusedError); polling instead"]
    await listening.close()


async def test_a_lost_listening_connection_is_made_again(store: PostgresStore,
                                                          schema: str) -> None:
    """Cut (the server ends its backend, as a restart or a proxy would), the connection the
    store listens on is made again with every channel, and what is told after is heard."""
    heard: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
    woken = asyncio.Event()
    stop_threads = await store.listen_threads(lambda news, key: heard.put_nowait((news, key)))
    stop_requests = await store.listen_requests(woken.set)
    try:
        listening = store._listening._conn
        await in_schema(schema, "SELECT pg_terminate_backend($1)", listening.get_server_pid())
        async with asyncio.timeout(20):
            for _ in itertools.count():  # made again after RETRY_S
                if store._listening._conn not in (None, listening):
                    break
                await asyncio.sleep(0.05)
            await store.ask_for_thread("t")
            assert await heard.get() == ("asked", thread_key("t"))
            await store.add_request(ControlRequest(kind="cancel", run_id="r1"))
            await woken.wait()
    finally:
        await stop_threads()
        await stop_requests()
    assert store._listening._conn is None  # the last listener gone, the connection too
