"""A runtime whose store goes out of reach as it starts recovering is started again once the
store is back (``bot.opening.start_runtime``), for ``[store] open_wait_s`` at most. The
PostgreSQL server is cut off by the soak's own TCP proxy (chaos/proxy.py)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from urllib.parse import urlsplit, urlunsplit

import pytest

from bot.opening import start_runtime
from chaos.proxy import Proxy
from runtime import EchoProvider, Run, Runtime, StoreError
from runtime.runs import new_run_id
from runtime.stores.postgres import PostgresStore
from tests.postgres import PG_DSN, fresh_schema


class Heard(logging.Handler):
    """Sets ``said`` when a record holding ``text`` is logged."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text, self.said = text, asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if self.text in record.getMessage():
            self.said.set()


@asynccontextmanager
async def cut_store() -> AsyncIterator[tuple[Proxy, PostgresStore]]:
    """A store opened through the proxy, then cut off, with a run queued in it."""
    async with fresh_schema() as schema, Proxy("127.0.0.1", urlsplit(PG_DSN).port or 5432) \
            as proxy:
        parts = urlsplit(PG_DSN)
        user = f"{parts.username}@" if parts.username else ""
        dsn = urlunsplit(parts._replace(netloc=f"{user}127.0.0.1:{proxy.port}"))
        async with PostgresStore(dsn, schema=schema, pool_size=2) as store:
            await store.create_run(Run(id=new_run_id(0.0), thread_id="t", text="left"))
            proxy.cut()
            yield proxy, store


async def test_recovery_waits_for_the_store_to_come_back() -> None:
    heard = Heard("recovery stopped on a store error")
    logging.getLogger("maiden").addHandler(heard)
    try:
        async with cut_store() as (proxy, store):
            rt = Runtime(store, EchoProvider())
            starting = asyncio.create_task(start_runtime(rt, wait_s=30))
            try:
                await asyncio.wait_for(heard.said.wait(), 10)
                assert not starting.done()
                proxy.restore()
                recovered = await asyncio.wait_for(starting, 30)
            finally:
                await rt.close()
        assert [(r.text, r.reply) for r in recovered] == [("left", "echo: left")]
    finally:
        logging.getLogger("maiden").removeHandler(heard)


async def test_a_store_out_of_reach_past_the_wait_stops_the_start() -> None:
    async with cut_store() as (_, store):
        rt = Runtime(store, EchoProvider())
        try:
            with pytest.raises(StoreError):
                await asyncio.wait_for(start_runtime(rt, wait_s=0.5), 10)
        finally:
            await rt.close()
