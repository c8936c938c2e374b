"""``RunCursor``: a checkpoint that is not a durable point is held and written with the
next one, in one transaction; after ``hold_s`` it is written on its own; a run cut off
forgets it. Against a real SQLite store, whose own counter says how many transactions."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from runtime import AssistantTurn, Run, RunState, SQLiteStore, StaleWrite, UserMessage
from runtime.cursor import Holds, RunCursor
from runtime.events import EventBus
from runtime.stores.base import Checkpoint

S = RunState


class WatchedStore(SQLiteStore):
    """The real store, telling a test when a checkpoint has landed."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.landed: asyncio.Queue[Checkpoint] = asyncio.Queue()

    async def commit(self, checkpoint: Checkpoint) -> None:
        await super().commit(checkpoint)
        self.landed.put_nowait(checkpoint)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[WatchedStore]:
    async with WatchedStore(tmp_path / "d.db") as opened:
        yield opened


async def _cursor(store: WatchedStore, hold_s: float) -> RunCursor:
    run = await store.create_run(Run(id="0" * 12 + "a" * 20, thread_id="t", text="hi"))
    return RunCursor(store, EventBus(), run, [], holds=Holds(hold_s) if hold_s > 0 else None)


async def _texts(store: SQLiteStore) -> list[str | None]:
    return [getattr(e, "text", None) for e in await store.load_entries("t")]


def _said(run_id: str, text: str) -> UserMessage:
    return UserMessage(run_id=run_id, text=text, at=1.0)


async def test_held_checkpoints_land_with_the_next_one_in_one_transaction(
        store: WatchedStore) -> None:
    cur = await _cursor(store, hold_s=60)
    run_id = cur.run.id
    before = store.write_counts().transactions
    await cur.commit([_said(run_id, "hi")], to=S.RUNNING, reason="started", durable=False)
    await cur.commit([AssistantTurn(run_id=run_id, text="thinking", at=2.0)], durable=False)
    assert cur.run.state is S.RUNNING and len(cur.entries) == 2  # the cursor moved on
    assert not cur.written()  # its entries are not the thread's yet
    assert (await store.get_run(run_id)).state is S.QUEUED  # the store did not
    assert await store.load_entries("t") == []
    assert store.write_counts().transactions == before

    await cur.commit([AssistantTurn(run_id=run_id, text="done", at=3.0)], to=S.COMPLETED,
                     reason="answered")
    assert store.write_counts().transactions == before + 1
    landed = await store.get_run(run_id)
    assert landed.state is S.COMPLETED and landed.version == cur.run.version == 1
    assert cur.written()
    assert await _texts(store) == ["hi", "thinking", "done"]
    assert [t.reason for t in await store.transitions(run_id)] == ["started", "answered"]


async def test_what_is_held_lands_on_its_own_after_hold_s(store: WatchedStore) -> None:
    cur = await _cursor(store, hold_s=0.05)
    await cur.commit([_said(cur.run.id, "hi")], to=S.RUNNING, reason="started",
                     durable=False)
    landed = await asyncio.wait_for(store.landed.get(), 10)
    assert landed.run is not None and landed.run.state is S.RUNNING
    assert (await store.get_run(cur.run.id)).state is S.RUNNING
    # The next checkpoint is written as usual, on top of it.
    await cur.commit(to=S.COMPLETED, reason="answered")
    assert (await store.get_run(cur.run.id)).version == 2


async def test_flush_writes_what_is_held_and_drop_forgets_it(store: WatchedStore) -> None:
    cur = await _cursor(store, hold_s=60)
    await cur.commit([_said(cur.run.id, "hi")], to=S.RUNNING, reason="started",
                     durable=False)
    await cur.flush()
    assert (await store.get_run(cur.run.id)).state is S.RUNNING
    assert cur.written()
    await cur.commit([AssistantTurn(run_id=cur.run.id, text="lost", at=2.0)], durable=False)
    await cur.drop()
    await cur.flush()  # nothing left to write
    assert await _texts(store) == ["hi"]
    assert [getattr(e, "text", None) for e in cur.entries] == ["hi", "lost"]
    assert not cur.written()  # what it holds is not the thread's


async def test_a_held_write_that_cannot_land_fails_the_next_one(store: WatchedStore) -> None:
    cur = await _cursor(store, hold_s=0.05)
    other = RunCursor(store, EventBus(), cur.run, [])
    await other.commit(to=S.RUNNING, reason="another writer")  # the run moves on elsewhere
    await cur.commit([_said(cur.run.id, "hi")], to=S.RUNNING, reason="started",
                     durable=False)
    with pytest.raises(StaleWrite):
        await asyncio.wait_for(cur.commit(to=S.COMPLETED, reason="answered"), 10)
    assert not cur.written()


async def test_nothing_is_held_with_hold_s_zero(
        store: WatchedStore) -> None:
    cur = await _cursor(store, hold_s=0)
    await cur.commit([_said(cur.run.id, "hi")], to=S.RUNNING, reason="started",
                     durable=False)
    assert (await store.get_run(cur.run.id)).state is S.RUNNING


async def test_cursors_sharing_holds_each_land_hold_s_after_their_own_last_hold(
        store: WatchedStore) -> None:
    holds, loop = Holds(0.2), asyncio.get_running_loop()
    cursors = []
    for thread in ("t", "u"):
        run = await store.create_run(Run(id=f"{thread}" * 32, thread_id=thread, text="hi"))
        cursors.append(RunCursor(store, EventBus(), run, [], holds=holds))
    first, second = cursors
    held_at = {}
    await first.commit([_said(first.run.id, "hi")], to=S.RUNNING, reason="started",
                       durable=False)
    held_at[first.run.id] = loop.time()
    await asyncio.sleep(0.1)  # (the gap between the two holds is what is tested)
    await second.commit([_said(second.run.id, "hi")], to=S.RUNNING, reason="started",
                        durable=False)
    held_at[second.run.id] = loop.time()
    landed_at = {}
    for _ in cursors:
        landed = await asyncio.wait_for(store.landed.get(), 10)
        assert landed.run is not None
        landed_at[landed.run.id] = loop.time()
    # The one timer was due at the first's time: the second was not written then.
    assert all(landed_at[r] >= held_at[r] + 0.2 - 0.002 for r in held_at), (held_at,
                                                                             landed_at)
    assert first.written() and second.written()
