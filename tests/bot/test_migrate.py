"""`maiden migrate`: a store copied into another through the store contract, counts checked."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from bot.migrate import copy_store, count_store, missing_source
from runtime import (
    FilesStore,
    MaidenError,
    Origin,
    RunState,
    ScheduleRecord,
    SQLiteStore,
    Store,
    tool,
)
from runtime.model.memories import (
    Memory,
    PersonScope,
    Provenance,
    ThreadScope,
    WorkspaceScope,
    cover,
)
from runtime.stores.postgres import PostgresStore
from tests.http_helpers import echo_runtime
from tests.postgres import PG_DSN, fresh_schema
from tests.runtime.stores.test_memories import here


@tool(effect="non_idempotent", requires_approval=True)
def deploy(service: str) -> str:
    """Deploy a service."""
    return f"deployed {service}"


async def _fill(path: Path) -> None:
    async with echo_runtime(path, [deploy]) as rt:
        await rt.send("t1", '/tool clock {"tz": "UTC"}')
        shared = await rt.kept.files.put("notes.txt", None, b"a file\n")
        await rt.send("t1", "hello again", files=[shared])
        await rt.send("team/ops", '/tool deploy {"service": "api"}')  # waits for a person
        slack = Origin(channel="slack", user="U1", target={"channel": "C1", "thread_ts": "1.2"})
        slack_run = await rt.submit("slack:T:C1:1.2", "hi", origin=slack,
                                    idempotency_key="slack:ev1")
        await rt.idle()
        await rt.kept.feedback.vote(slack_run.id, "up", user="U1", channel="slack", place="C1")
        await rt.kept.notes.remember("thread:t1", "k", "a note")
        await rt.kept.notes.remember("agent", "team", "the team's note", call="call-1")
        await rt.kept.notes.forget("thread:t1", "old", call="call-2")
    async with SQLiteStore(path) as store:
        await store.save_schedules([ScheduleRecord(name="daily", origin="config", since=1.0)])
        for number, kept in enumerate(MEMORIES, 1):
            assert await store.put_memory(kept, f"remember-{number}")
        assert await store.edit_memory("m-person", "alice is on call this week",
                                       "slack:UBOB", 30.0)
        assert await store.delete_memory("m-gone", "forget-3")


SAID = Provenance(user="slack:U1", channel="slack", place="C1", thread_id="t1", run_id="r1",
                  at=10.0)
MEMORIES = [
    Memory(id="m-thread", text="the standup is at 9:15", scope=ThreadScope(thread_id="t1"),
           provenance=SAID, expires_at=4e9, created_at=10.0, updated_at=10.0),
    Memory(id="m-person", text="alice is on call", scope=PersonScope(user="slack:U1"),
           provenance=SAID, created_at=11.0, updated_at=11.0),
    Memory(id="m-gone", text="forgotten since", scope=WorkspaceScope(), provenance=SAID,
           created_at=12.0, updated_at=12.0)]


async def test_sqlite_into_files_copies_everything(tmp_path: Path) -> None:
    await _fill(tmp_path / "old.db")
    async with SQLiteStore(tmp_path / "old.db") as source, \
            FilesStore(tmp_path / "new") as target:
        before = await count_store(source)
        seen: list[str] = []
        copied = await copy_store(source, target, progress=seen.append)
        assert copied == before and seen == ["  1 files", "  3/3 threads", "  2 memories"]
        assert (before.threads, before.runs, before.deliveries, before.notes,
                before.note_calls, before.schedules, before.votes, before.blobs,
                before.memories, before.memory_calls) == (3, 4, 1, 3, 2, 1, 1, 1, 2, 4)
        assert await target.votes() == await source.votes()
        (blob,) = await source.blobs()
        assert await target.blobs() == [blob]
        assert await target.get_blob(blob.digest) == b"a file\n"
        for scope in ("agent", "thread:t1"):
            assert await target.notes(scope) == await source.notes(scope)
            assert await target.note_calls(scope) == await source.note_calls(scope)
        assert before.entries > 6 and before.transitions > 8
        for thread in await source.list_threads():
            assert await target.load_entries(thread.id) == await source.load_entries(thread.id)
            assert await target.list_runs(thread_id=thread.id) == \
                await source.list_runs(thread_id=thread.id)
        # A message's key stays taken: a redelivered event finds its run in the new store.
        held = await target.run_for_key("slack:ev1")
        assert held is not None and held.state is RunState.COMPLETED
        waiting = await target.list_runs(states=[RunState.AWAITING_APPROVAL])
        assert [r.thread_id for r in waiting] == ["team/ops"]
        assert [d.remote_id for d in await target.deliveries()] == \
            [d.remote_id for d in await source.deliveries()]
        with pytest.raises(MaidenError, match="not empty"):
            await copy_store(source, target)


async def test_the_migrated_store_carries_on(tmp_path: Path) -> None:
    await _fill(tmp_path / "old.db")
    async with SQLiteStore(tmp_path / "old.db") as source, \
            SQLiteStore(tmp_path / "new.db") as target:
        await copy_store(source, target)
    async with echo_runtime(tmp_path / "new.db", [deploy]) as rt:
        (run,) = await rt.records.runs(thread_id="team/ops")
        pending = run.pending_approval
        assert pending is not None
        await rt.decide(run.id, pending.tool_call_id, approve=True, by="alice")
        done = await rt.wait(run.id)
        assert done.state is RunState.COMPLETED and done.reply == 'deploy returned "deployed api"'
        more = await rt.send("t1", "and again")
        assert more.reply == "echo: and again"
        # A memory call applied before the copy is applied still: a re-run changes nothing.
        assert await rt.kept.notes.remember("agent", "team", "again", call="call-1") is None
        assert [n.text for n in await rt.records.notes("agent")] == ["the team's note"]
        assert len(await rt.records.entries("t1")) == 8


@asynccontextmanager
async def _target(kind: str, tmp_path: Path) -> AsyncIterator[Store]:
    if kind == "postgres":
        async with fresh_schema() as schema, \
                PostgresStore(PG_DSN, schema=schema, pool_size=2) as store:
            yield store
        return
    async with FilesStore(tmp_path / "new") as store:
        yield store


@pytest.mark.parametrize("kind", ["postgres", "files"])
async def test_memories_keep_their_ids_provenance_and_calls(tmp_path: Path, kind: str) -> None:
    await _fill(tmp_path / "old.db")
    async with SQLiteStore(tmp_path / "old.db") as source, _target(kind, tmp_path) as target:
        await copy_store(source, target)
        for memory_id in ("m-thread", "m-person"):
            copied = await target.get_memory(memory_id)
            assert copied is not None and copied == await source.get_memory(memory_id)
        person = await target.get_memory("m-person")
        assert person is not None and person.edited_by == "slack:UBOB"
        assert await target.get_memory("m-gone") is None
        # Searchable there, where the agent sees them.
        seen = cover(here("t1").model_copy(update={"people": frozenset({"slack:U1"})}))
        assert [m.id for m in await target.search_memories("standup", seen, 5)] == \
            ["m-thread"]
        assert [m.id for m in await target.search_memories("call", seen, 5)] == ["m-person"]
        # A remember or forget re-run after the move changes nothing more.
        assert await target.put_memory(MEMORIES[0], "remember-1") is False
        assert await target.put_memory(MEMORIES[2], "remember-3") is False
        assert await target.delete_memory("m-gone", "forget-3") is True  # its answer then
        assert await target.get_memory("m-gone") is None


@pytest.mark.parametrize(("spec", "missing"), [
    ("sqlite:old.db", None),
    ("files:old", None),
    ("sqlite:nope.db", "there is no database file at {tmp}/nope.db"),
    ("files:nope", "there is no store folder at {tmp}/nope"),
    ("sqlite:{tmp}/abs.db", "there is no database file at {tmp}/abs.db"),
    ("postgres", None),   # a schema is opened to be read
    ("sqlite", None),     # not a store at all: open_spec says so
])
def test_a_source_that_is_not_there_is_named(tmp_path: Path, spec: str,
                                             missing: str | None) -> None:
    (tmp_path / "old.db").touch()
    (tmp_path / "old").mkdir()
    found = missing_source(spec.format(tmp=tmp_path), tmp_path)
    assert found == (missing.format(tmp=tmp_path) if missing else None)
