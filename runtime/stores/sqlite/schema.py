"""The SQLite store's schema, and its migration from the versions before."""

from __future__ import annotations

import secrets
import sqlite3
from pathlib import Path

from ...errors import StoreError
from ...model.runs import TERMINAL
from ..base import SpendScope
from .memory_words import fill_words

__all__ = ["ACTIVE_SQL", "SCHEMA_VERSION", "SPEND_INDEXES", "migrate"]

SCHEMA_VERSION = 7

ACTIVE_SQL = "active = 1"
"""The runs that have not ended: the term (text for text) of ``runs_active``'s WHERE, which
a query repeats so that SQLite may use that index."""

# Every page a checkpoint dirties is written to the WAL and synced (a commit's cost grows
# with its pages), so the schema is cut for few pages per write. A run's state changes touch
# its row alone: no index holds the state, runs_active's column ``active`` changes only when
# a run ends or is resumed, and the run's transitions are a column of its row (a JSON array
# of [source, target, reason, at]). A thread's row is written once: its length is its last
# entry's seq + 1, its last activity its newest run's created_at. Runs without an
# idempotency key have no entry in its index. Run ids are ordered by time, so new rows go at
# the end of every index on them. Each entry row holds the thread's estimated tokens up to
# and including it (``tokens``), so where a context window starts is found without reading
# entries; summary notices are kind 'summary', in an index of their own. The deliveries not
# sent yet are indexed (``deliveries_pending``, as on PostgreSQL): a run's end looks for its
# thread's unsent ones, which must go first, and the outbox's sweep for all of them, each a
# read of the few pending rows instead of every delivery ever made; its price is one page
# more in a checkpoint that writes a delivery and in marking it sent (measured: the same
# time per commit, within noise, on a 50,000-delivery table, against 40 ms per look without
# it). Created by SCHEMA at every open: no version of its own (an older maiden ignores it).
SCHEMA = f"""
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS identity (
    one INTEGER PRIMARY KEY CHECK (one = 1),
    id TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS threads (
    id TEXT PRIMARY KEY,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS entries (
    thread_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    run_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    tool_call_id TEXT,
    data TEXT NOT NULL,
    tokens INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (thread_id, seq)
) WITHOUT ROWID;
CREATE UNIQUE INDEX IF NOT EXISTS entries_tool_result
    ON entries (run_id, tool_call_id) WHERE tool_call_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS entries_summaries ON entries (thread_id, seq)
    WHERE kind = 'summary';
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    thread_id TEXT NOT NULL,
    state TEXT NOT NULL,
    active INTEGER NOT NULL,
    version INTEGER NOT NULL,
    created_at REAL NOT NULL,
    idempotency_key TEXT,
    data TEXT NOT NULL,
    transitions TEXT NOT NULL DEFAULT '[]',
    spend_agent TEXT NOT NULL DEFAULT '',
    spend_user TEXT,
    spend_place TEXT NOT NULL DEFAULT '',
    spend_tokens INTEGER NOT NULL DEFAULT 0,
    spend_cost REAL NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS runs_thread ON runs (thread_id, created_at);
CREATE INDEX IF NOT EXISTS runs_active ON runs (thread_id, created_at) WHERE {ACTIVE_SQL};
CREATE UNIQUE INDEX IF NOT EXISTS runs_key ON runs (idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE TABLE IF NOT EXISTS deliveries (
    key TEXT PRIMARY KEY,
    run_id TEXT NOT NULL,
    remote_id TEXT,
    created_at REAL NOT NULL,
    data TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS deliveries_run ON deliveries (run_id);
CREATE INDEX IF NOT EXISTS deliveries_pending ON deliveries (created_at)
    WHERE remote_id IS NULL;
CREATE TABLE IF NOT EXISTS requests (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    handled INTEGER NOT NULL DEFAULT 0,
    data TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS requests_pending ON requests (handled, id);
CREATE TABLE IF NOT EXISTS instances (id TEXT PRIMARY KEY, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS leases (
    name TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    expires_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS schedules (name TEXT PRIMARY KEY, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS notes (
    scope TEXT NOT NULL,
    key TEXT NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (scope, key)
);
CREATE TABLE IF NOT EXISTS note_calls (
    scope TEXT NOT NULL,
    call TEXT NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (scope, call)
);
CREATE INDEX IF NOT EXISTS note_calls_order ON note_calls (scope);
CREATE TABLE IF NOT EXISTS feedback (
    run_id TEXT NOT NULL,
    user TEXT NOT NULL,
    value TEXT NOT NULL,
    at REAL NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (run_id, user)
);
CREATE INDEX IF NOT EXISTS feedback_time ON feedback (at);
CREATE TABLE IF NOT EXISTS blobs (
    digest TEXT PRIMARY KEY,
    size INTEGER NOT NULL,
    media_type TEXT NOT NULL,
    created_at REAL NOT NULL,
    data BLOB NOT NULL
);
"""

# The knowledge folders' passages (``knowledge.py``), and their full-text index: an FTS5
# table over the passages' rows (external content), kept in step by triggers, so that a
# file's passages and its index change in the write that replaces them. Created at every
# open, as SCHEMA's tables are (statements apart: a trigger's body holds semicolons).
KNOWLEDGE = (
    """CREATE TABLE IF NOT EXISTS knowledge_files (
        source TEXT NOT NULL, path TEXT NOT NULL, data TEXT NOT NULL,
        PRIMARY KEY (source, path)) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS knowledge_passages (
        id INTEGER PRIMARY KEY, source TEXT NOT NULL, path TEXT NOT NULL, n INTEGER NOT NULL,
        section TEXT, page INTEGER, text TEXT NOT NULL)""",
    """CREATE INDEX IF NOT EXISTS knowledge_passages_file
        ON knowledge_passages (source, path)""",
    """CREATE VIRTUAL TABLE IF NOT EXISTS knowledge_fts USING fts5(
        text, section, content = 'knowledge_passages', content_rowid = 'id',
        tokenize = 'porter unicode61')""",
    """CREATE TRIGGER IF NOT EXISTS knowledge_passages_in AFTER INSERT ON knowledge_passages
        BEGIN INSERT INTO knowledge_fts (rowid, text, section)
            VALUES (new.id, new.text, new.section); END""",
    """CREATE TRIGGER IF NOT EXISTS knowledge_passages_out AFTER DELETE ON knowledge_passages
        BEGIN INSERT INTO knowledge_fts (knowledge_fts, rowid, text, section)
            VALUES ('delete', old.id, old.text, old.section); END""",
)

# Version 1 -> 2: runs lose the state indexes and the key's UNIQUE constraint (an index of
# every run, keyed or not) for the two partial indexes, and take in their transitions;
# threads lose their length and updated_at; entries gain their token sums (estimated from
# the stored JSON) and summaries their kind. SCHEMA creates what is new.
MIGRATE_1_TO_2 = """
ALTER TABLE threads RENAME TO threads_v1;
DROP INDEX IF EXISTS runs_thread_state;
DROP INDEX IF EXISTS runs_state;
DROP INDEX IF EXISTS runs_thread;
ALTER TABLE runs RENAME TO runs_v1;
ALTER TABLE transitions RENAME TO transitions_v1;
DROP INDEX IF EXISTS transitions_run;
"""
_ENDED = ", ".join(sorted(repr(state.value) for state in TERMINAL))
COPY_1_TO_2 = f"""
INSERT INTO threads SELECT id, created_at FROM threads_v1;
INSERT INTO runs (id, thread_id, state, active, version, created_at, idempotency_key, data,
                  transitions)
    SELECT id, thread_id, state, state NOT IN ({_ENDED}),
           version, created_at, idempotency_key, data,
           coalesce((SELECT json_group_array(json_array(
                         json_extract(t.data, '$.source'), json_extract(t.data, '$.target'),
                         json_extract(t.data, '$.reason'), t.at))
                     FROM (SELECT * FROM transitions_v1 WHERE run_id = runs_v1.id
                           ORDER BY rowid) t), '[]')
    FROM runs_v1 ORDER BY rowid;
ALTER TABLE entries ADD COLUMN tokens INTEGER NOT NULL DEFAULT 0;
UPDATE entries SET tokens = sums.tokens
    FROM (SELECT thread_id, seq, sum(length(data) / 4 + 4)
                 OVER (PARTITION BY thread_id ORDER BY seq) AS tokens FROM entries) sums
    WHERE entries.thread_id = sums.thread_id AND entries.seq = sums.seq;
UPDATE entries SET kind = 'summary'
    WHERE kind = 'notice' AND json_extract(data, '$.code') = 'summary';
DROP TABLE threads_v1;
DROP TABLE runs_v1;
DROP TABLE transitions_v1;
"""

# Version 2 -> 3: runs gain what spend caps sum (whose the spend is, and how much), in
# columns of their own, so that a cap's check reads no run's JSON. Runs from before have no
# place ids: their place key is their channel.
MIGRATE_2_TO_3 = """
ALTER TABLE runs ADD COLUMN spend_agent TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN spend_user TEXT;
ALTER TABLE runs ADD COLUMN spend_place TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN spend_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN spend_cost REAL NOT NULL DEFAULT 0
"""
FILL_3 = """
UPDATE runs SET
    spend_agent = coalesce(json_extract(data, '$.agent'), ''),
    spend_user = json_extract(data, '$.origin.user'),
    spend_place = coalesce(json_extract(data, '$.origin.channel'), 'cli'),
    spend_tokens = coalesce(json_extract(data, '$.usage.input_tokens'), 0)
        + coalesce(json_extract(data, '$.usage.output_tokens'), 0)
        + coalesce(json_extract(data, '$.usage.cache_creation_tokens'), 0)
        + coalesce(json_extract(data, '$.usage.cache_read_tokens'), 0),
    spend_cost = coalesce(json_extract(data, '$.cost_usd'), 0)
"""

# Version 3 -> 4: the spend columns are indexed by whose only for the scopes a spend cap is
# configured for (``SPEND_INDEXES``, made by ``SQLiteStore.index_spend``): an index is a page
# written for each new run, and without caps nothing reads it.
MIGRATE_3_TO_4 = """
DROP INDEX IF EXISTS runs_spend_user;
DROP INDEX IF EXISTS runs_spend_agent;
DROP INDEX IF EXISTS runs_spend_place
"""

# Memories (version 6): a row each, filed under its scope's key (``model.memories``) and,
# when it was learned in a private place, that place's key (``confined``), with the thread
# it came from, so that a recall reads by index only what could cover its conversation and
# a thread's erasure finds what it sourced. ``n`` aliases the rowid, which the full-text
# index (FTS5, external content: it holds the words, the row the text) names: a rowid that
# is not an INTEGER PRIMARY KEY may change in a VACUUM. Triggers keep the index in step in
# the very transaction that writes the row. Created at every open (a list, not a script:
# a trigger's body holds semicolons); the version says an older maiden, which would erase a
# thread and leave its memories, may not open it. Since version 7 the index holds each
# memory's scope key too, in a column of its own (``scope``), as one token: the key in hex
# (``hex(scope)``, which the tokenizer keeps whole, where it would split the key's JSON into
# words), read through the view ``memories_indexed`` that is the index's content. A search
# matches its conversation's keys there (``SQLiteMemories.search_memories``): the index
# narrows, the row's own columns still decide. ``memory_words`` counts the memories holding
# each word (``memory_words.py``), kept by the writes themselves (a trigger cannot split a
# text into words).
MEMORIES = [
    """CREATE TABLE IF NOT EXISTS memories (
        n INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        scope TEXT NOT NULL,
        confined TEXT,
        thread_id TEXT NOT NULL,
        expires_at REAL,
        updated_at REAL NOT NULL,
        text TEXT NOT NULL,
        data TEXT NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS memories_scope ON memories (scope, updated_at)",
    "CREATE INDEX IF NOT EXISTS memories_thread ON memories (thread_id)",
    "CREATE VIEW IF NOT EXISTS memories_indexed AS SELECT n, text, hex(scope) AS scope "
    "FROM memories",
    """CREATE VIRTUAL TABLE IF NOT EXISTS memories_fts USING fts5(
        text, scope, content = 'memories_indexed', content_rowid = 'n',
        tokenize = 'porter unicode61 remove_diacritics 2')""",
    """CREATE TRIGGER IF NOT EXISTS memories_added AFTER INSERT ON memories BEGIN
        INSERT INTO memories_fts (rowid, text, scope) VALUES (new.n, new.text, hex(new.scope));
    END""",
    """CREATE TRIGGER IF NOT EXISTS memories_removed AFTER DELETE ON memories BEGIN
        INSERT INTO memories_fts (memories_fts, rowid, text, scope)
            VALUES ('delete', old.n, old.text, hex(old.scope));
    END""",
    """CREATE TRIGGER IF NOT EXISTS memories_changed AFTER UPDATE OF text, scope ON memories
    BEGIN
        INSERT INTO memories_fts (memories_fts, rowid, text, scope)
            VALUES ('delete', old.n, old.text, hex(old.scope));
        INSERT INTO memories_fts (rowid, text, scope) VALUES (new.n, new.text, hex(new.scope));
    END""",
    """CREATE TABLE IF NOT EXISTS memory_calls (
        n INTEGER PRIMARY KEY,
        call TEXT NOT NULL UNIQUE,
        memory_id TEXT NOT NULL,
        data TEXT NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS memory_calls_memory ON memory_calls (memory_id)",
    """CREATE TABLE IF NOT EXISTS memory_words (
        word TEXT PRIMARY KEY,
        memories INTEGER NOT NULL
    ) WITHOUT ROWID""",
]

# Version 4 -> 5: the database gains its identity, a random id in a one-row table written
# once (SCHEMA creates the table, ``migrate`` the row): a file copied over the open one
# (``FileIdentity``) holds another id, or the same one without this process's mark or
# with an older value of it (``mark``).

# Version 5 -> 6: memories (``MEMORIES``, created at every open); nothing else changes.

# Version 6 -> 7: the full-text index of memories gains their scope keys (``MEMORIES``), so
# that a search's MATCH holds only the memories filed under a key of its conversation, and
# the words' counts (``memory_words``) are kept. The index and its triggers are dropped
# here, made again by ``MEMORIES``, and filled from the memories' rows; so are the counts.
MIGRATE_6_TO_7 = """
DROP TRIGGER IF EXISTS memories_added;
DROP TRIGGER IF EXISTS memories_removed;
DROP TRIGGER IF EXISTS memories_changed;
DROP TABLE IF EXISTS memories_fts
"""

SPEND_INDEXES: dict[SpendScope, tuple[str, str]] = {
    "user": ("runs_spend_user", "ON runs (spend_user, id) WHERE spend_user IS NOT NULL"),
    "agent": ("runs_spend_agent", "ON runs (spend_agent, id)"),
    "place": ("runs_spend_place", "ON runs (spend_place, id)"),
}
"""Each spend scope's index, its name and what it indexes (whose, then run id: a period's
runs are a range of it)."""


def migrate(db: sqlite3.Connection, path: Path) -> str:
    """Bring the database to ``SCHEMA_VERSION`` (inside the caller's transaction); its
    identity."""
    exists = db.execute("SELECT 1 FROM sqlite_schema WHERE name = 'meta'").fetchone()
    version = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() \
        if exists else None
    found = str(SCHEMA_VERSION) if version is None else version[0]
    if found not in ("1", "2", "3", "4", "5", "6", str(SCHEMA_VERSION)):
        raise StoreError(f"{path} has schema version {found}; this maiden reads versions 1 "
                         f"to {SCHEMA_VERSION} (a newer maiden may have written it)")
    if found == "1":
        _script(db, MIGRATE_1_TO_2)
    if found == "2":
        _script(db, MIGRATE_2_TO_3)
    if found == "3":
        _script(db, MIGRATE_3_TO_4)
    if found == "6":
        _script(db, MIGRATE_6_TO_7)
    _script(db, SCHEMA)
    for statement in (*MEMORIES, *KNOWLEDGE):
        db.execute(statement)
    if found == "1":
        _script(db, COPY_1_TO_2)
    if found in ("1", "2"):
        _script(db, FILL_3)
    if found == "6":
        db.execute("INSERT INTO memories_fts (memories_fts) VALUES ('rebuild')")
        fill_words(db)
    db.execute("INSERT OR IGNORE INTO identity VALUES (1, ?)", (secrets.token_hex(16),))
    db.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)",
               (str(SCHEMA_VERSION),))
    return str(db.execute("SELECT id FROM identity").fetchone()[0])


def _script(db: sqlite3.Connection, script: str) -> None:
    # Not executescript: that commits the transaction first.
    for statement in filter(str.strip, script.split(";")):
        db.execute(statement)
