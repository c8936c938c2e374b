"""The store contract, erasing a thread: its entries, runs, outbox records, votes, notes,
requests and the files no other thread names go in one write, and nothing of it is left in
the storage afterwards (every row, every file); idempotent; on every backend."""

from __future__ import annotations

import hashlib
import os
import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from uuid import uuid4

import asyncpg  # type: ignore[import-untyped]
import pytest

from runtime.errors import InvalidThreadId, NotFound, StaleWrite
from runtime.model.attachments.refs import FileRef
from runtime.model.entries import AssistantTurn, Entry, ToolCall, ToolResult, UserMessage
from runtime.model.requests import ControlRequest, Note, Vote
from runtime.model.runs import Delivery, FileDelivery, ReplyDelivery, Run
from runtime.stores.base import Checkpoint
from runtime.stores.erasure import Erased, stop_scope, thread_lease, thread_scope
from runtime.stores.files import FilesStore, thread_file_name
from runtime.stores.files.names import key_file_name
from runtime.stores.postgres import PostgresStore
from tests.postgres import PG_DSN
from tests.runtime.stores.contract import (
    CONTROL_IDS,
    HOSTILE_IDS,
    AnyStore,
    S,
    advance,
    make_run,
    started,
)


def ref(digest: str, name: str = "f.txt") -> FileRef:
    return FileRef(name=name, media_type="text/plain", size=3, digest=digest)


class Thread:
    """A thread holding every kind of record, with a marker in its text."""

    def __init__(self, thread_id: str, marker: str) -> None:
        self.id = thread_id
        self.marker = marker
        self.runs: list[Run] = []
        self.keys: list[str] = []
        self.digests: list[str] = []

    async def fill(self, store: AnyStore, shared: str) -> None:
        """Two ended runs: files in a message, a tool's image and a file delivery (one of
        them ``shared`` with another thread), a reply, votes, notes, a stop, a request."""
        own = (await store.put_blob(f"own {self.marker}".encode(), "text/plain", 1.0)).digest
        sent = (await store.put_blob(f"sent {self.marker}".encode(), "text/plain", 1.0)).digest
        self.digests = [own, sent]
        for n in range(2):
            key = f"http:alice:{self.marker}:{n}"
            run = await store.create_run(make_run(self.id, key=key, at=1000.0 + n))
            position = await store.thread_length(self.id)
            entries: list[Entry] = [
                UserMessage(run_id=run.id, text=f"{self.marker} says {n}",
                            files=(ref(own), ref(shared, "shared.txt"))),
                AssistantTurn(run_id=run.id, text="", tool_calls=(
                    ToolCall(id="c1", name="draw", arguments={"q": self.marker}),)),
                ToolResult(run_id=run.id, tool_call_id="c1", name="draw",
                           content=f"drew {self.marker}", images=(ref(own, "i.png"),)),
                AssistantTurn(run_id=run.id, text=f"done {self.marker}")]
            going, begun = advance(run, S.RUNNING, "started")
            ended, step = advance(going, S.COMPLETED, reply=f"done {self.marker}")
            deliveries: list[Delivery] = [
                ReplyDelivery(key=f"{run.id}:reply", run_id=run.id, thread_id=self.id,
                              channel="slack", target={"channel": "C1"},
                              text=f"done {self.marker}"),
                FileDelivery(key=f"{run.id}:file", run_id=run.id, thread_id=self.id,
                             channel="slack", file=ref(sent, "out.txt"))]
            await store.commit(Checkpoint(self.id, position, entries[:1], run=going,
                                          transitions=[begun]))
            await store.commit(Checkpoint(self.id, position + 1, entries[1:], run=ended,
                                          transitions=[step], deliveries=deliveries))
            await store.mark_delivered(f"{run.id}:reply", "171.1", 2000.0)
            await store.put_vote(Vote(run_id=run.id, user="U1", value="up", at=3000.0 + n,
                                      thread_id=self.id, channel="slack"))
            await store.put_note(Note(scope=stop_scope(run.id), key="stop", text="U1"),
                                 f"stop:{run.id}")
            request = await store.add_request(ControlRequest(kind="cancel", run_id=run.id,
                                                             payload={"by": self.marker}))
            await store.finish_request(request.model_copy(update={"handled_at": 5.0,
                                                                  "ok": True}))
            self.runs.append(ended)
            self.keys.append(key)
        await store.put_note(Note(scope=thread_scope(self.id), key="likes",
                                  text=f"{self.marker} likes tea"), f"call:{self.marker}")
        await store.take_lease(thread_lease(self.id), "gone/1@h", -1.0)  # expired

    def needles(self, backend: str) -> list[str]:
        """What must appear nowhere once the thread is erased: its id, runs, text, keys,
        its own files; and, for the files store, the names its records are filed under."""
        found = [self.id, self.marker, *(r.id for r in self.runs), *self.digests[:1]]
        if backend == "files":
            scopes = [thread_scope(self.id), *(stop_scope(r.id) for r in self.runs)]
            keys = [*self.keys, *scopes, *(f"{r.id}:{k}" for r in self.runs
                                          for k in ("reply", "file"))]
            found += [thread_file_name(self.id), *map(key_file_name, keys)]
        return found


async def traces(store: AnyStore, backend: str, root: Path, needles: list[str]) -> list[str]:
    """Every row (SQLite, PostgreSQL) or file name and content (files) holding a needle."""
    found: list[str] = []
    if backend == "sqlite":
        with closing(sqlite3.connect(f"{(root / 'maiden.db').as_uri()}?mode=ro",
                                     uri=True)) as db:
            tables = [r[0] for r in db.execute(
                "SELECT name FROM sqlite_schema WHERE type = 'table'")]
            for table in tables:
                for row in db.execute(f"SELECT * FROM {table}"):
                    found += [f"{table}: {row!r}" for n in needles if n in repr(row)]
    elif backend == "files":
        for path in sorted((root / "files").rglob("*")):
            text = path.read_text("utf-8", "replace") if path.is_file() else ""
            found += [f"{path}" for n in needles if n in path.name or n in text]
    else:
        assert isinstance(store, PostgresStore)
        conn = await asyncpg.connect(PG_DSN, timeout=10)
        try:
            tables = await conn.fetch("SELECT table_name FROM information_schema.tables "
                                      "WHERE table_schema = $1", store.schema)
            for (table,) in tables:
                for row in await conn.fetch(f'SELECT * FROM "{store.schema}"."{table}"'):
                    found += [f"{table}: {row!r}" for n in needles if n in repr(tuple(row))]
        finally:
            await conn.close()
    return found


async def test_erasing_a_thread_leaves_nothing_of_it(
        store: AnyStore, backend: str, tmp_path: Path,
        new_store: Callable[[], AnyStore]) -> None:
    shared = (await store.put_blob(b"shared", "text/plain", 1.0)).digest
    gone = Thread(f"erase-me-{uuid4().hex}", f"marker{uuid4().hex}")
    kept = Thread(f"keep-me-{uuid4().hex}", f"marker{uuid4().hex}")
    await gone.fill(store, shared)
    await kept.fill(store, shared)
    await store.load_entries(gone.id)  # held by the store's reader, if it keeps any

    erased = await store.delete_thread(gone.id)

    assert erased == Erased(gone.id, entries=8, runs=2, deliveries=4, votes=2, notes=3,
                            blobs=2)
    assert erased.existed
    assert await traces(store, backend, tmp_path, gone.needles(backend)) == []
    async with new_store() as again:  # a restart, or another process, sees the same
        for reader in (store, again):
            assert await reader.load_entries(gone.id) == []
            assert await reader.thread_length(gone.id) == 0
            assert (await reader.load_tail(gone.id, 100)).loaded == []
            assert await reader.list_runs(thread_id=gone.id) == []
            assert gone.id not in [t.id for t in await reader.list_threads()]
            for run in gone.runs:
                with pytest.raises(NotFound):
                    await reader.get_run(run.id)
                assert await reader.deliveries(run_id=run.id) == []
                assert await reader.votes(run_id=run.id) == []
                assert await reader.transitions(run.id) == []
                assert await reader.notes(stop_scope(run.id)) == []
            assert [await reader.run_for_key(key) for key in gone.keys] == [None, None]
            assert await reader.notes(thread_scope(gone.id)) == []
            assert await reader.note_calls(thread_scope(gone.id)) == []
            assert thread_lease(gone.id) not in [lease.name for lease in await reader.leases()]
            assert [await reader.blob_info(d) for d in gone.digests] == [None, None]
            # The other thread, and the file both named, are as they were.
            assert len(await reader.load_entries(kept.id)) == 8
            assert [r.id for r in await reader.list_runs(thread_id=kept.id)] == \
                [r.id for r in kept.runs]
            assert len(await reader.votes()) == 2
            assert await reader.notes(thread_scope(kept.id)) != []
            assert await reader.get_blob(shared) == b"shared"
            assert all([await reader.blob_info(d) for d in kept.digests])
            assert await reader.deliveries(run_id=kept.runs[0].id) != []
    if backend == "sqlite":
        await store.close()  # the log is checkpointed into the file, and removed
        data = (tmp_path / "maiden.db").read_bytes()
        # Erased rows are overwritten on disk (secure_delete), not left in free space.
        assert gone.marker.encode() not in data and kept.marker.encode() in data


async def test_erasing_is_idempotent(store: AnyStore) -> None:
    assert await store.delete_thread("never-written") == Erased("never-written")
    assert not (await store.delete_thread("never-written")).existed
    thread = Thread("twice", "marker-twice")
    await thread.fill(store, (await store.put_blob(b"x", "text/plain", 1.0)).digest)
    assert (await store.delete_thread("twice")).existed
    assert await store.delete_thread("twice") == Erased("twice")


async def test_a_thread_with_a_run_going_is_left_as_it_is(store: AnyStore) -> None:
    run = await started(store, "busy")
    with pytest.raises(StaleWrite, match="has not ended"):
        await store.delete_thread("busy")
    assert len(await store.load_entries("busy")) == 1
    assert await store.get_run(run.id) == run
    ended, step = advance(run, S.CANCELLED, "cancelled")
    await store.commit(Checkpoint("busy", None, run=ended, transitions=[step]))
    assert (await store.delete_thread("busy")).runs == 1


async def test_a_hostile_id_erases_its_own_thread_alone(store: AnyStore) -> None:
    for thread_id in HOSTILE_IDS:
        run = await started(store, thread_id)
        ended, step = advance(run, S.COMPLETED)
        await store.commit(Checkpoint(thread_id, None, run=ended, transitions=[step]))
    for thread_id in ("a/b", "..", ""):
        assert (await store.delete_thread(thread_id)).runs == 1
    left = sorted(t.id for t in await store.list_threads())
    assert left == sorted(set(HOSTILE_IDS) - {"a/b", "..", ""})
    assert [len(await store.load_entries(t)) for t in left] == [1] * len(left)
    for thread_id in CONTROL_IDS:
        with pytest.raises(InvalidThreadId):
            await store.delete_thread(thread_id)


async def test_a_thread_begun_anew_holds_only_what_came_after(
        store: AnyStore, new_store: Callable[[], AnyStore]) -> None:
    """A store that held the thread's entries (its reader's cache) reads the new thread
    whole, even when another process erased the old one."""
    for length in (3, 1, 5):  # begun anew shorter, then longer, than what was held
        old = await started(store, "again", text="old")
        await store.commit(Checkpoint("again", 1, [UserMessage(run_id=old.id, text="old 2"),
                                                   UserMessage(run_id=old.id, text="old 3")]))
        ended, step = advance(old, S.COMPLETED)
        await store.commit(Checkpoint("again", None, run=ended, transitions=[step]))
        assert len(await store.load_entries("again")) == 3
        async with new_store() as other:
            assert (await other.delete_thread("again")).entries == 3
            new = await started(other, "again", text="new")
            await other.commit(Checkpoint("again", 1, [
                UserMessage(run_id=new.id, text=f"new {i}") for i in range(2, length + 1)]))
            ended, step = advance(new, S.COMPLETED)
            await other.commit(Checkpoint("again", None, run=ended, transitions=[step]))
        texts = [e.text for e in await store.load_entries("again")
                 if isinstance(e, UserMessage)]
        assert texts == ["new", *(f"new {i}" for i in range(2, length + 1))]
        assert [e.text for e in (await store.load_tail("again", 10**6)).loaded
                if isinstance(e, UserMessage)] == texts
        assert (await store.delete_thread("again")).existed


async def test_an_erasure_cut_short_is_finished_at_the_next_open(tmp_path: Path) -> None:
    """The files store: a crash after the snapshot's rename (the commit point) leaves the
    renamed snapshot; the next open removes what it names, then it."""
    root = tmp_path / "files"
    thread = Thread("cut-short", f"marker{uuid4().hex}")
    async with FilesStore(root) as store:
        shared = (await store.put_blob(b"x", "text/plain", 1.0)).digest
        await thread.fill(store, shared)
        await Thread("kept", f"marker{uuid4().hex}").fill(store, shared)
    stem = thread_file_name(thread.id)
    os.replace(root / "threads" / f"{stem}.json", root / "threads" / f"{stem}.erasing")
    async with FilesStore(root) as store:
        assert await store.list_runs(thread_id=thread.id) == []
        assert await store.blob_info(thread.digests[0]) is None
    names = [str(p) for p in root.rglob("*") if any(
        n in p.name or (p.is_file() and n in p.read_text("utf-8", "replace"))
        for n in thread.needles("files"))]
    assert names == []
    assert hashlib.sha256(b"x").hexdigest() in {p.name for p in (root / "blobs").iterdir()}
    assert not list((root / "threads").glob("*.erasing"))
