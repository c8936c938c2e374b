"""A runtime whose store goes out of reach as it starts recovering is started again once the
store is back (``bot.opening.start_runtime``), for ``[store] open_wait_s`` at most. The
PostgreSQL server is cut off by the soak's own TCP proxy (chaos/proxy.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest

from bot.opening import start_runtime, starting_again
from chaos.proxy import Proxy
from runtime import EchoProvider, Run, Runtime, StoreError, StoreGone
from runtime.model.runs import new_run_id
from runtime.stores.postgres import PostgresStore
from tests.logs import Heard
from tests.postgres import cuttable, fresh_schema


@asynccontextmanager
async def cut_store() -> AsyncIterator[tuple[Proxy, PostgresStore]]:
    """A store opened through the proxy, then cut off, with a run queued in it."""
    async with fresh_schema() as schema, cuttable() as (proxy, dsn), \
            PostgresStore(dsn, schema=schema, pool_size=2) as store:
        await store.create_run(Run(id=new_run_id(0.0), thread_id="t", text="left"))
        proxy.cut()
        yield proxy, store


async def test_recovery_waits_for_the_store_to_come_back() -> None:
    with Heard("maiden", "recovery stopped on a store error") as heard:
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


async def test_a_store_out_of_reach_past_the_wait_stops_the_start() -> None:
    async with cut_store() as (_, store):
        rt = Runtime(store, EchoProvider())
        try:
            with pytest.raises(StoreError):
                await asyncio.wait_for(start_runtime(rt, wait_s=0.5), 10)
        finally:
            await rt.close()


async def test_maiden_runs_start_begins_again_after_a_store_error_before_ready() -> None:
    """A store error that ends `maiden run`'s lifespan before "Ready" begins it again (a
    step of its start not made patiently: a channel's lease, the banner's facts); one after
    "Ready", a store that is gone, or one once asked to stop, ends it."""
    tries: list[str] = []

    def lifespan(*fails: BaseException | None) -> Callable[[asyncio.Event],
                                                             Awaitable[None]]:
        script = list(fails)

        async def start(ready: asyncio.Event) -> None:
            failure = script.pop(0)
            tries.append(type(failure).__name__ if failure else "ok")
            if isinstance(failure, StoreGone):
                raise failure
            if failure is not None and str(failure) == "after ready":
                ready.set()
            if failure is not None:
                raise failure
            ready.set()
        return start

    stop = asyncio.Event()
    with Heard("maiden", "start stopped on a store error") as heard:
        await starting_again(lifespan(StoreError("cut"), StoreError("cut"), None), stop,
                             wait_s=30)
    assert tries == ["StoreError", "StoreError", "ok"] and heard.said.is_set()
    for fails in (StoreError("after ready"), StoreGone("gone")):
        with pytest.raises(StoreError):
            await starting_again(lifespan(fails, None), stop, wait_s=30)
    stop.set()
    with pytest.raises(StoreError):
        await starting_again(lifespan(StoreError("cut"), None), stop, wait_s=30)
    assert tries[3:] == ["StoreError", "StoreGone", "StoreError"]
