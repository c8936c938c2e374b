"""``RunCursor``: every checkpoint is written before ``commit`` returns, one transaction
each, flushed to disk as ``durability`` says. Against a real SQLite store, whose own
counter says how many transactions and flushes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from runtime import AssistantTurn, Run, RunState, SQLiteStore, StaleWrite, UserMessage
from runtime.engine.cursor import RunCursor
from runtime.model.durability import Write
from runtime.model.events import EventBus
from runtime.stores.base import Checkpoint

S = RunState


class WatchedStore(SQLiteStore):
    """The real store, keeping each checkpoint it was handed."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.landed: list[Checkpoint] = []

    async def commit(self, checkpoint: Checkpoint) -> None:
        await super().commit(checkpoint)
        self.landed.append(checkpoint)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[WatchedStore]:
    async with WatchedStore(tmp_path / "d.db") as opened:
        yield opened


async def _cursor(store: WatchedStore) -> RunCursor:
    run = await store.create_run(Run(id="0" * 12 + "a" * 20, thread_id="t", text="hi"))
    return RunCursor(store, EventBus(), run, [])


async def _texts(store: SQLiteStore) -> list[str | None]:
    return [getattr(e, "text", None) for e in await store.load_entries("t")]


def _said(run_id: str, text: str) -> UserMessage:
    return UserMessage(run_id=run_id, text=text, at=1.0)


async def test_every_checkpoint_is_in_the_store_when_commit_returns(
        store: WatchedStore) -> None:
    cur = await _cursor(store)
    run_id = cur.run.id
    before = store.write_counts()
    await cur.commit([_said(run_id, "hi")], write=Write.START, to=S.RUNNING,
                     reason="started")
    assert (await store.get_run(run_id)).state is S.RUNNING
    assert await _texts(store) == ["hi"]
    await cur.commit([AssistantTurn(run_id=run_id, text="thinking", at=2.0)],
                     write=Write.NOTICE)
    assert await _texts(store) == ["hi", "thinking"]
    await cur.commit([AssistantTurn(run_id=run_id, text="done", at=3.0)], write=Write.ANSWER,
                     to=S.COMPLETED, reason="answered")
    counts = store.write_counts().since(before)
    assert counts.transactions == 3
    landed = await store.get_run(run_id)
    assert landed.state is S.COMPLETED and landed.version == cur.run.version == 3
    assert cur.written()
    assert await _texts(store) == ["hi", "thinking", "done"]
    assert [t.reason for t in await store.transitions(run_id)] == ["started", "answered"]


@pytest.mark.parametrize(("write", "effect", "durable"), [
    (Write.START, False, False),
    (Write.INTENT, False, False),
    (Write.INTENT, True, True),
    (Write.RESULT, False, False),
    (Write.RESULT, True, True),
    (Write.CLAIM, False, True),
    (Write.ANSWER, False, True),
])
async def test_a_checkpoint_is_flushed_as_durability_says(
        store: WatchedStore, write: Write, effect: bool, durable: bool) -> None:
    cur = await _cursor(store)
    await cur.commit([_said(cur.run.id, "hi")], write=write, effect=effect)
    (landed,) = store.landed
    assert landed.durable is durable


async def test_a_write_that_cannot_land_fails_commit_and_the_cursor_says_so(
        store: WatchedStore) -> None:
    cur = await _cursor(store)
    other = RunCursor(store, EventBus(), cur.run, [])
    await other.commit(write=Write.RESUME, to=S.RUNNING, reason="another writer")
    with pytest.raises(StaleWrite):
        await cur.commit([_said(cur.run.id, "hi")], write=Write.START, to=S.RUNNING,
                         reason="started")
    assert not cur.written()
    assert cur.entries == [] and cur.run.state is S.QUEUED  # nothing moved on
