"""A database written by an older schema (versions 1 to 6) opens under the current one with
nothing lost."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import pytest

from runtime.model.entries import AssistantTurn, Usage, UserMessage
from runtime.model.memories import (
    Cover,
    Memory,
    MemoryScope,
    Provenance,
    ThreadScope,
    WorkspaceScope,
    scope_key,
)
from runtime.model.runs import Origin, Run, RunState, Transition, new_run_id
from runtime.stores.base import Checkpoint, SpendAsk, Spending, SpendScope
from runtime.stores.sqlite import SQLiteStore
from runtime.stores.sqlite.schema import SCHEMA_VERSION, SPEND_INDEXES

S = RunState

# The schema maiden wrote before version 2, as it was (tables and indexes that changed).
VERSION_1 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE threads (id TEXT PRIMARY KEY, length INTEGER NOT NULL, created_at REAL NOT NULL,
                      updated_at REAL NOT NULL);
CREATE TABLE entries (thread_id TEXT NOT NULL, seq INTEGER NOT NULL, run_id TEXT NOT NULL,
                      kind TEXT NOT NULL, tool_call_id TEXT, data TEXT NOT NULL,
                      PRIMARY KEY (thread_id, seq)) WITHOUT ROWID;
CREATE UNIQUE INDEX entries_tool_result ON entries (run_id, tool_call_id)
    WHERE tool_call_id IS NOT NULL;
CREATE TABLE runs (id TEXT PRIMARY KEY, thread_id TEXT NOT NULL, state TEXT NOT NULL,
                   version INTEGER NOT NULL, created_at REAL NOT NULL,
                   idempotency_key TEXT UNIQUE, data TEXT NOT NULL);
CREATE INDEX runs_thread ON runs (thread_id, created_at);
CREATE INDEX runs_thread_state ON runs (thread_id, state);
CREATE INDEX runs_state ON runs (state, created_at);
CREATE TABLE transitions (run_id TEXT NOT NULL, at REAL NOT NULL, data TEXT NOT NULL);
CREATE INDEX transitions_run ON transitions (run_id);
INSERT INTO meta VALUES ('schema_version', '1');
"""


def _run(run_id: str, state: RunState, at: float, key: str | None = None) -> Run:
    return Run(id=run_id, thread_id="t", text=f"message {run_id}", state=state, created_at=at,
               updated_at=at, version=2 if state is not S.QUEUED else 0, idempotency_key=key)


def _version_1(path: Path) -> list[Run]:
    done = _run("a-done", S.COMPLETED, 1.0, key="slack:1")
    queued = _run("b-queued", S.QUEUED, 2.0)
    db = sqlite3.connect(path)
    db.executescript(VERSION_1)
    db.execute("INSERT INTO threads VALUES ('t', 2, 1.0, 1.5)")
    said: list[UserMessage | AssistantTurn] = [UserMessage(run_id=done.id, text="hi", at=1.0),
                                               AssistantTurn(run_id=done.id, text="hello", at=1.1)]
    for seq, entry in enumerate(said):
        db.execute("INSERT INTO entries VALUES ('t', ?, ?, ?, NULL, ?)",
                   (seq, entry.run_id, entry.kind, entry.model_dump_json()))
    for run in (done, queued):
        db.execute("INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?)",
                   (run.id, run.thread_id, run.state, run.version, run.created_at,
                    run.idempotency_key, run.model_dump_json()))
    for source, target, at in ((S.QUEUED, S.RUNNING, 1.0), (S.RUNNING, S.COMPLETED, 1.2)):
        step = Transition(run_id=done.id, source=source, target=target, reason=target, at=at)
        db.execute("INSERT INTO transitions VALUES (?, ?, ?)",
                   (done.id, at, step.model_dump_json()))
    db.commit()
    db.close()
    return [done, queued]


async def test_a_version_1_database_is_migrated_in_place(tmp_path: Path) -> None:
    path = tmp_path / "maiden.db"
    done, queued = _version_1(path)
    async with SQLiteStore(path) as store:
        assert [r.id for r in await store.list_runs()] == [done.id, queued.id]
        assert await store.list_runs(thread_id="t", states=[S.QUEUED, S.RUNNING]) == [queued]
        assert await store.list_runs(states=[S.COMPLETED]) == [done]
        assert [(t.source, t.target) for t in await store.transitions(done.id)] == [
            (S.QUEUED, S.RUNNING), (S.RUNNING, S.COMPLETED)]
        [info] = await store.list_threads()
        # Its last activity: its newest message's arrival.
        assert (info.length, info.runs, info.updated_at) == (2, 2, queued.created_at)
        assert [e.kind for e in await store.load_entries("t")] == ["user", "assistant"]
        # The key is still taken: the same inbound message creates nothing.
        again = _run("c-again", S.QUEUED, 3.0, key="slack:1")
        assert await store.create_run(again) == done
        # And the thread goes on: the queued run starts at position 2.
        started = queued.model_copy(update={"state": S.RUNNING, "version": 1})
        await store.commit(Checkpoint("t", 2, [UserMessage(run_id=queued.id, text="x")],
                                      run=started))
        assert await store.list_runs(thread_id="t", states=[S.QUEUED, S.RUNNING]) == [started]
    db = sqlite3.connect(path)
    version = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    assert version == (str(SCHEMA_VERSION),)
    tokens = [row[0] for row in db.execute("SELECT tokens FROM entries ORDER BY seq")]
    assert 0 < tokens[0] < tokens[1] < tokens[2]  # running sums, estimated for the old rows
    names = {row[0] for row in db.execute("SELECT name FROM sqlite_schema")}
    assert not names & {"runs_v1", "threads_v1", "transitions_v1", "transitions", "runs_state",
                        "runs_thread_state", "transitions_run"}
    db.close()
    async with SQLiteStore(path) as store:  # a second open finds its version: nothing to do
        assert len(await store.list_runs()) == 2
        assert await store.spent([SpendAsk(0.0, "place", ("cli",))]) == Spending([(0, 0.0)])


async def test_a_version_2_database_gains_the_spend_columns_filled_from_its_runs(
        tmp_path: Path) -> None:
    path = tmp_path / "maiden.db"
    day = 1_764_806_400.0
    slack = Origin(channel="slack", target={"channel": "C1"}, user="U1")
    runs = [Run(id=new_run_id(day + n), thread_id=f"t{n}", text="x", created_at=day + n,
                updated_at=day + n, origin=slack, usage=Usage(input_tokens=n, output_tokens=1),
                cost_usd=n / 100) for n in (1, 2)]
    async with SQLiteStore(path) as store:
        for run in runs:
            await store.create_run(run)
    # Version 2 as it was: the runs without the spend columns (added at the end since).
    db = sqlite3.connect(path)
    for column in ("spend_agent", "spend_user", "spend_place", "spend_tokens", "spend_cost"):
        db.execute(f"ALTER TABLE runs DROP COLUMN {column}")
    db.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
    db.commit()
    db.close()
    async with SQLiteStore(path) as store:
        assert await store.list_runs() == runs
        asks: list[tuple[float, SpendScope, str, int, float]] = [
            (day, "user", "U1", 2 + 3, 0.03), (day + 2, "place", "slack", 3, 0.02),
            (day, "agent", "", 5, 0.03)]
        for since, scope, key, tokens, cost in asks:
            found = await store.spent([SpendAsk(since, scope, (key,))])
            ((spent_tokens, spent_cost),) = found.sums
            assert spent_tokens == tokens and spent_cost == pytest.approx(cost)


def _indexes(path: Path) -> set[str]:
    db = sqlite3.connect(path)
    try:
        return {row[0] for row in db.execute(
            "SELECT name FROM sqlite_schema WHERE type = 'index' AND name LIKE 'runs_spend%'")}
    finally:
        db.close()


async def test_a_version_3_database_loses_its_spend_indexes_until_a_cap_asks_for_one(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "maiden.db"
    day = 1_764_806_400.0
    slack = Origin(channel="slack", target={"channel": "C1"}, user="U1")
    run = Run(id=new_run_id(day), thread_id="t", text="x", created_at=day, updated_at=day,
              origin=slack, usage=Usage(input_tokens=4, output_tokens=1), cost_usd=0.5)
    async with SQLiteStore(path) as store:
        await store.create_run(run)
    # Version 3 as it was: an index of the runs by whose they are, for each spend scope.
    db = sqlite3.connect(path)
    for name, on in SPEND_INDEXES.values():
        db.execute(f"CREATE INDEX {name} {on}")
    db.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
    db.commit()
    db.close()
    async with SQLiteStore(path) as store:
        assert _indexes(path) == set()
        # Without its index a cap's check reads the period's runs: the same sums.
        ask = SpendAsk(day, "user", ("U1",))
        assert (await store.spent([ask])).sums == [(5, 0.5)]
        with caplog.at_level(logging.INFO, logger="maiden.store"):
            await store.index_spend(["user", "place"])
            await store.index_spend(["user"])  # made already: nothing to do
        assert _indexes(path) == {"runs_spend_user", "runs_spend_place"}
        said = [r.getMessage() for r in caplog.records if "indexed" in r.getMessage()]
        assert [line.split(" (")[0] for line in said] == [
            "runs indexed by the spend of each place", "runs indexed by the spend of each user"]
        assert (await store.spent([ask, SpendAsk(day, "place", ("slack",))])).sums == [
            (5, 0.5), (5, 0.5)]
    async with SQLiteStore(path) as store:  # what a cap asked for stays
        assert _indexes(path) == {"runs_spend_user", "runs_spend_place"}
        assert await store.list_runs() == [run]


async def test_version_4_gains_an_identity_kept_from_then_on(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    run = Run(id=new_run_id(1.0), thread_id="t", text="hi", created_at=1.0, updated_at=1.0)
    async with SQLiteStore(path) as store:
        await store.create_run(run)
    # Version 4 as it was: no identity.
    db = sqlite3.connect(path)
    db.execute("DROP TABLE identity")
    db.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")
    db.commit()
    db.close()
    async with SQLiteStore(path) as store:
        assert await store.list_runs() == [run]
    with sqlite3.connect(path) as db:
        made = db.execute("SELECT one, id FROM identity").fetchall()
    assert len(made) == 1 and made[0][0] == 1 and len(made[0][1]) == 32
    async with SQLiteStore(path):
        pass
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT one, id FROM identity").fetchall() == made
        # Each open's mark is taken back at its close.
        assert db.execute("SELECT key FROM meta").fetchall() == [("schema_version",)]


async def test_a_version_5_database_gains_memories(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    run = Run(id=new_run_id(1.0), thread_id="t", text="hi", created_at=1.0, updated_at=1.0)
    async with SQLiteStore(path) as store:
        await store.create_run(run)
    # Version 5 as it was: no memories, no index of their words, no triggers.
    db = sqlite3.connect(path)
    db.execute("DROP VIEW memories_indexed")
    for name in ("memories_fts", "memory_calls", "memory_words", "memories"):
        db.execute(f"DROP TABLE {name}")
    db.execute("UPDATE meta SET value = '5' WHERE key = 'schema_version'")
    db.commit()
    assert not db.execute("SELECT name FROM sqlite_schema WHERE name LIKE 'memor%'").fetchall()
    db.close()
    source = Provenance(thread_id="t", at=1.0)
    kept = Memory(id="m1", text="the build runs nightly", scope=WorkspaceScope(),
                  provenance=source, created_at=1.0, updated_at=1.0)
    async with SQLiteStore(path) as store:
        assert await store.list_runs() == [run]
        assert await store.put_memory(kept, "call-1") is True
        where = Cover(scopes=(scope_key(WorkspaceScope()),), places=(), at=2.0)
        assert await store.search_memories("nightly builds", where, 5) == [kept]
    with sqlite3.connect(path) as db:
        version = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        triggers = {row[0] for row in db.execute(
            "SELECT name FROM sqlite_schema WHERE type = 'trigger'")}
    assert version == (str(SCHEMA_VERSION),) == ("7",)
    assert triggers == {"memories_added", "memories_removed", "memories_changed",
                        "knowledge_passages_in", "knowledge_passages_out"}
    async with SQLiteStore(path) as store:  # opened again: as it was
        assert await store.get_memory("m1") == kept
        assert await store.put_memory(kept, "call-1") is False


# Version 6's index of memories' words, as it was: the text alone (no scope keys).
VERSION_6_INDEX = [
    "DROP TRIGGER memories_added", "DROP TRIGGER memories_removed",
    "DROP TRIGGER memories_changed", "DROP TABLE memories_fts", "DROP TABLE memory_words",
    "DROP VIEW memories_indexed",
    """CREATE VIRTUAL TABLE memories_fts USING fts5(
        text, content = 'memories', content_rowid = 'n',
        tokenize = 'porter unicode61 remove_diacritics 2')""",
    """CREATE TRIGGER memories_added AFTER INSERT ON memories BEGIN
        INSERT INTO memories_fts (rowid, text) VALUES (new.n, new.text);
    END""",
    """CREATE TRIGGER memories_removed AFTER DELETE ON memories BEGIN
        INSERT INTO memories_fts (memories_fts, rowid, text) VALUES ('delete', old.n, old.text);
    END""",
    """CREATE TRIGGER memories_changed AFTER UPDATE OF text ON memories BEGIN
        INSERT INTO memories_fts (memories_fts, rowid, text) VALUES ('delete', old.n, old.text);
        INSERT INTO memories_fts (rowid, text) VALUES (new.n, new.text);
    END""",
    "UPDATE meta SET value = '6' WHERE key = 'schema_version'",
]


def _memory(memory_id: str, text: str, scope: MemoryScope) -> Memory:
    return Memory(id=memory_id, text=text, scope=scope,
                  provenance=Provenance(thread_id="t", at=1.0), created_at=1.0, updated_at=1.0)


async def test_a_version_6_database_has_its_memories_indexed_by_scope(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    async with SQLiteStore(path):
        pass
    db = sqlite3.connect(path)
    for statement in VERSION_6_INDEX:
        db.execute(statement)
    ours = _memory("m1", "the build runs nightly", WorkspaceScope())
    theirs = _memory("m2", "the nightly build of another team", ThreadScope(thread_id="t2"))
    for kept in (ours, theirs):  # as version 6 wrote them: the row, its triggers the index
        db.execute("INSERT INTO memories (id, scope, thread_id, updated_at, text, data) "
                   "VALUES (?, ?, 't', 1.0, ?, ?)",
                   (kept.id, scope_key(kept.scope), kept.text, kept.model_dump_json()))
    db.commit()
    db.close()
    where = Cover(scopes=(scope_key(WorkspaceScope()), scope_key(ThreadScope(thread_id="t"))),
                  places=(), at=2.0)
    async with SQLiteStore(path) as store:
        assert await store.search_memories("nightly builds", where, 5) == [ours]
        assert await store.search_memories("team", where, 5) == []
        theirs_too = where.model_copy(update={"scopes": (scope_key(theirs.scope),)})
        assert await store.search_memories("team", theirs_too, 5) == [theirs]
        assert await store.delete_memory("m1") is True
        assert await store.search_memories("nightly", where, 5) == []
    with sqlite3.connect(path) as db:
        version = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        check = db.execute("INSERT INTO memories_fts (memories_fts) VALUES ('integrity-check')")
        counts = dict(db.execute("SELECT word, memories FROM memory_words"))
    assert version == ("7",) and check.rowcount == 1
    assert counts == {"": 1, "the": 1, "nightly": 1, "build": 1, "of": 1, "another": 1,
                      "team": 1}
