"""The store contract, the control plane (DESIGN §3): requests, heartbeats and listening, on
every backend."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from runtime.errors import NotFound
from runtime.serving.control import ControlRequest, Instance
from tests.runtime.stores.contract import AnyStore

# -- the control plane


async def test_requests_are_numbered_and_handled_once(store: AnyStore) -> None:
    first = await store.add_request(ControlRequest(kind="cancel", run_id="r1", created_at=1.0))
    second = await store.add_request(ControlRequest(
        kind="decide", run_id="r2", payload={"tool_call_id": "c", "approve": True},
        created_at=2.0))
    assert 0 < first.id < second.id
    assert await store.requests() == [first, second]
    assert await store.get_request(second.id) == second
    handled = first.model_copy(update={"handled_at": 3.0, "handled_by": "me", "ok": True,
                                       "result": "done"})
    assert await store.finish_request(handled) is True
    # Another process got there first: the second answer is refused and changes nothing.
    assert await store.finish_request(handled.model_copy(update={"handled_by": "other"})) \
        is False
    assert await store.get_request(first.id) == handled
    assert await store.requests() == [second]
    with pytest.raises(NotFound):
        await store.get_request(999_999)


async def test_heartbeats(store: AnyStore, new_store: Callable[[], AnyStore]) -> None:
    one = Instance(id="a1", pid=1, host="h", started_at=1.0, beat_at=1.0)
    two = Instance(id="b2", pid=2, host="h", started_at=1.0, beat_at=2.0)
    await store.beat(one)
    await store.beat(two)
    await store.beat(one.model_copy(update={"beat_at": 5.0}))
    async with new_store() as other:  # another process sees them
        assert await other.instances() == [one.model_copy(update={"beat_at": 5.0}), two]
    await store.beat(one, gone=True)
    assert await store.instances() == [two]


async def test_listening_for_requests(store: AnyStore, backend: str,
                                      new_store: Callable[[], AnyStore]) -> None:
    woken = asyncio.Event()
    stop = await store.listen_requests(woken.set)
    try:
        async with new_store() as other:
            await other.add_request(ControlRequest(kind="cancel", run_id="r1"))
        if backend == "postgres":  # told at once; the others' readers poll
            async with asyncio.timeout(10):
                await woken.wait()
        else:
            assert not woken.is_set()
    finally:
        await stop()
    await stop()  # stopping twice is fine
