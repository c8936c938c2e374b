"""`maiden migrate`: a store copied into another through the store contract, counts checked."""

from __future__ import annotations

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
    tool,
)
from tests.http_helpers import echo_runtime


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


async def test_sqlite_into_files_copies_everything(tmp_path: Path) -> None:
    await _fill(tmp_path / "old.db")
    async with SQLiteStore(tmp_path / "old.db") as source, \
            FilesStore(tmp_path / "new") as target:
        before = await count_store(source)
        seen: list[str] = []
        copied = await copy_store(source, target, progress=seen.append)
        assert copied == before and seen == ["  1 files", "  3/3 threads"]
        assert (before.threads, before.runs, before.deliveries, before.notes,
                before.note_calls, before.schedules, before.votes, before.blobs) == (
                    3, 4, 1, 2, 2, 1, 1, 1)
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
