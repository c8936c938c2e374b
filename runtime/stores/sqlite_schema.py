"""The SQLite store's schema, and its migration from the versions before."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ..errors import StoreError
from ..runs import TERMINAL

__all__ = ["ACTIVE_SQL", "SCHEMA_VERSION", "migrate"]

SCHEMA_VERSION = 2

ACTIVE_SQL = "active = 1"
"""The runs that have not ended: the term (text for text) of ``runs_active``'s WHERE, which
a query repeats so that SQLite may use that index."""

# Every page a checkpoint dirties is written to the WAL and synced (a commit's cost grows
# with its pages), so the schema is cut for few pages per write. A run's state changes touch
# its row alone: no index holds the state, and runs_active's column ``active`` changes only
# when a run ends or is resumed. A thread's row changes when a message arrives, not at every
# checkpoint (its length is its last entry's seq + 1). Transitions live in one b-tree keyed by
# run; runs without an idempotency key have no entry in its index. Run ids are ordered by
# time, so new rows go at the end of every index on them.
SCHEMA = f"""
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS threads (
    id TEXT PRIMARY KEY,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS entries (
    thread_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    run_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    tool_call_id TEXT,
    data TEXT NOT NULL,
    PRIMARY KEY (thread_id, seq)
) WITHOUT ROWID;
CREATE UNIQUE INDEX IF NOT EXISTS entries_tool_result
    ON entries (run_id, tool_call_id) WHERE tool_call_id IS NOT NULL;
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    thread_id TEXT NOT NULL,
    state TEXT NOT NULL,
    active INTEGER NOT NULL,
    version INTEGER NOT NULL,
    created_at REAL NOT NULL,
    idempotency_key TEXT,
    data TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS runs_thread ON runs (thread_id, created_at);
CREATE INDEX IF NOT EXISTS runs_active ON runs (thread_id, created_at) WHERE {ACTIVE_SQL};
CREATE UNIQUE INDEX IF NOT EXISTS runs_key ON runs (idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE TABLE IF NOT EXISTS transitions (
    run_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    at REAL NOT NULL,
    source TEXT NOT NULL,
    target TEXT NOT NULL,
    reason TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS deliveries (
    key TEXT PRIMARY KEY,
    run_id TEXT NOT NULL,
    remote_id TEXT,
    created_at REAL NOT NULL,
    data TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS deliveries_run ON deliveries (run_id);
CREATE TABLE IF NOT EXISTS requests (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    handled INTEGER NOT NULL DEFAULT 0,
    data TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS requests_pending ON requests (handled, id);
CREATE TABLE IF NOT EXISTS instances (id TEXT PRIMARY KEY, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS schedules (name TEXT PRIMARY KEY, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS notes (
    scope TEXT NOT NULL,
    key TEXT NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (scope, key)
);
"""

# Version 1 -> 2: runs lose the state indexes and the key's UNIQUE constraint (an index of
# every run, keyed or not) for the two partial indexes; threads lose their length;
# transitions become one b-tree with their fields as columns. SCHEMA creates what is new.
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
INSERT INTO threads SELECT id, created_at, updated_at FROM threads_v1;
INSERT INTO runs
    SELECT id, thread_id, state, state NOT IN ({_ENDED}),
           version, created_at, idempotency_key, data
    FROM runs_v1 ORDER BY rowid;
INSERT INTO transitions
    SELECT run_id, row_number() OVER (PARTITION BY run_id ORDER BY rowid), at,
           json_extract(data, '$.source'), json_extract(data, '$.target'),
           json_extract(data, '$.reason')
    FROM transitions_v1;
DROP TABLE threads_v1;
DROP TABLE runs_v1;
DROP TABLE transitions_v1;
"""


def migrate(db: sqlite3.Connection, path: Path) -> None:
    """Bring the database to ``SCHEMA_VERSION`` (inside the caller's transaction)."""
    exists = db.execute("SELECT 1 FROM sqlite_schema WHERE name = 'meta'").fetchone()
    version = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() \
        if exists else None
    found = SCHEMA_VERSION if version is None else version[0]
    if found not in (1, SCHEMA_VERSION, "1", str(SCHEMA_VERSION)):
        raise StoreError(f"{path} has schema version {found}; this maiden reads versions 1 "
                         f"and {SCHEMA_VERSION} (a newer maiden may have written it)")
    found = int(found)
    if found == 1:
        _script(db, MIGRATE_1_TO_2)
    _script(db, SCHEMA)
    if found == 1:
        _script(db, COPY_1_TO_2)
    db.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)",
               (str(SCHEMA_VERSION),))


def _script(db: sqlite3.Connection, script: str) -> None:
    # Not executescript: that commits the transaction first.
    for statement in filter(str.strip, script.split(";")):
        db.execute(statement)
