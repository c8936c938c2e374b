"""What runs on the SQLite connection's thread: the plain sqlite3 functions each store
operation is made of (one round trip each); the row formats it shares with PostgreSQL are
``rows``'."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ...errors import StaleWrite
from ...model.requests import Note, NoteCall
from ...model.runs import TERMINAL, Delivery, Run, RunState, arriving_after
from ..base import NOTE_CALLS_KEPT
from ..rows import pending_changed, pending_now, positioned_rows, run_json, spend_keys, spend_of
from .schema import ACTIVE_SQL

__all__ = ["CheckpointRows", "commit_rows", "create_run_row", "delete_note_row", "fetchall",
           "put_note_row", "record_note_calls", "run_row", "scalar", "update_pending_row"]


@dataclass(frozen=True, slots=True)
class CheckpointRows:
    """A checkpoint turned into SQL parameters, ready for the connection's thread."""

    thread_id: str
    position: int | None
    entries: list[tuple[Any, ...]]
    run: tuple[Any, ...] | None
    transitions: list[tuple[Any, ...]]
    deliveries: list[tuple[Any, ...]]


def commit_rows(db: sqlite3.Connection, cp: CheckpointRows) -> None:
    if cp.position is not None:
        # Entry rows are append-only and numbered from 0, so the thread's length is its last
        # row's seq + 1: one seek at the end of the thread's rows, nothing written.
        last = db.execute("SELECT seq, tokens FROM entries WHERE thread_id = ? "
                          "ORDER BY seq DESC LIMIT 1", (cp.thread_id,)).fetchone()
        known = last is not None or db.execute(
            "SELECT 1 FROM threads WHERE id = ?", (cp.thread_id,)).fetchone() is not None
        rows = positioned_rows(cp.thread_id, cp.position, cp.entries, last, known)
        try:
            db.executemany("INSERT INTO entries VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
        except sqlite3.IntegrityError as exc:
            raise StaleWrite(f"a result for that tool call is already recorded: {exc}") from exc
    steps = list(cp.transitions)
    if cp.run is not None:
        state, version, data, run_id, before, active, tokens, cost = cp.run
        mine = [step[1] for step in steps if step[0] == run_id]
        steps = [step for step in steps if step[0] != run_id]
        # One statement: the run's new row, its transitions appended, and ``active`` only
        # where it changes (naming it rewrites the run's entry in runs_active, a page).
        cursor = db.execute(
            "UPDATE runs SET state = ?, version = ?, data = ?, "
            f"transitions = {_appended(len(mine))}, spend_tokens = ?, spend_cost = ?"
            f"{'' if active is None else ', active = ?'} WHERE id = ? AND version = ?",
            (state, version, data, *mine, tokens, cost,
             *(() if active is None else (active,)), run_id, before))
        if cursor.rowcount != 1:
            raise StaleWrite(f"run {run_id} is not at version {before}")
    if steps:
        db.executemany("UPDATE runs SET transitions = json_insert(transitions, '$[#]', json(?)) "
                       "WHERE id = ?", [(step[1], step[0]) for step in steps])
    if cp.deliveries:
        db.executemany("INSERT OR IGNORE INTO deliveries VALUES (?, ?, ?, ?, ?)", cp.deliveries)


def _appended(steps: int) -> str:
    """The runs' ``transitions`` with ``steps`` more appended (a JSON parameter each)."""
    return "transitions" if not steps else \
        "json_insert(transitions" + ", '$[#]', json(?)" * steps + ")"


def run_row(run: Run) -> tuple[Any, ...]:
    """A new run's row, as ``create_run_row`` inserts it."""
    return (run.id, run.thread_id, run.state, not run.terminal, run.version,
            run.created_at, run.idempotency_key, run_json(run), *spend_keys(run),
            *spend_of(run))


_NOT_ENDED = tuple(state for state in RunState if state not in TERMINAL)
_ACTIVE_IN_THREAD = ("SELECT data FROM runs INDEXED BY runs_active WHERE thread_id = ? AND "
                     f"state IN ({', '.join('?' * len(_NOT_ENDED))}) AND {ACTIVE_SQL} "
                     "ORDER BY created_at DESC, rowid DESC")
"""The thread's runs that have not ended, newest first (by their small partial index), as
``list_runs`` asks for them."""


def create_run_row(db: sqlite3.Connection, run: Run, row: tuple[Any, ...]
                   ) -> tuple[str | None, Run, list[str]]:
    """Insert the run (and its thread, if new), stamped no earlier than its thread's latest
    (``arriving_after``); return the data of a run that holds its key, or None, the run as
    inserted, and the data of the thread's runs that have not ended, oldest first (read in
    the same transaction: its locks are taken already)."""
    if run.idempotency_key is not None:
        existing: str | None = scalar(
            db, "SELECT data FROM runs WHERE idempotency_key = ?", (run.idempotency_key,))
        if existing is not None:
            return existing, run, []
    newest = scalar(db, "SELECT max(created_at) FROM runs WHERE thread_id = ?",
                    (run.thread_id,))
    stamped = arriving_after(run, newest)
    if stamped is not run:
        row = run_row(stamped)
    if newest is None:  # its first run (a thread's row goes only with all its runs)
        db.execute("INSERT OR IGNORE INTO threads VALUES (?, ?)",
                   (run.thread_id, run.created_at))
    db.execute("INSERT INTO runs (id, thread_id, state, active, version, created_at, "
               "idempotency_key, data, spend_agent, spend_user, spend_place, spend_tokens, "
               "spend_cost) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", row)
    active = [data for (data,) in db.execute(_ACTIVE_IN_THREAD, (run.thread_id, *_NOT_ENDED))]
    active.reverse()
    return None, stamped, active


def update_pending_row(db: sqlite3.Connection, key: str,
                       change: Callable[[Delivery], dict[str, Any]]) -> Delivery:
    """Change a delivery not sent yet (``change`` says how); a sent one is left alone. The
    delivery as it stands after."""
    data = scalar(db, "SELECT data FROM deliveries WHERE key = ?", (key,))
    delivery = pending_changed(key, data, change)
    if delivery is not None:
        db.execute("UPDATE deliveries SET remote_id = ?, data = ? WHERE key = ?",
                   (delivery.remote_id, delivery.model_dump_json(), key))
    return pending_now(key, data, delivery)


def put_note_row(db: sqlite3.Connection, note: Note, call: str | None) -> bool:
    if call is not None:
        if _note_call(db, note.scope, call) is not None:
            return False
        record_note_calls(db, [NoteCall(scope=note.scope, call=call, key=note.key)])
    db.execute("INSERT OR REPLACE INTO notes VALUES (?, ?, ?)",
               (note.scope, note.key, note.model_dump_json()))
    return True


def delete_note_row(db: sqlite3.Connection, scope: str, key: str, call: str | None) -> bool:
    done = None if call is None else _note_call(db, scope, call)
    if done is not None:
        return done.existed
    existed = db.execute("DELETE FROM notes WHERE scope = ? AND key = ?",
                         (scope, key)).rowcount == 1
    if call is not None:
        record_note_calls(db, [NoteCall(scope=scope, call=call, key=key, forget=True,
                                        existed=existed)])
    return existed


def record_note_calls(db: sqlite3.Connection, calls: list[NoteCall]) -> None:
    """Insert the calls not yet recorded, then drop each scope's oldest beyond the newest
    ``NOTE_CALLS_KEPT`` (rowids grow, so they order a scope's rows in its index)."""
    db.executemany("INSERT OR IGNORE INTO note_calls VALUES (?, ?, ?)",
                   [(c.scope, c.call, c.model_dump_json()) for c in calls])
    for scope in {c.scope for c in calls}:
        db.execute("DELETE FROM note_calls WHERE scope = ? AND rowid <= (SELECT rowid FROM "
                   "note_calls WHERE scope = ? ORDER BY rowid DESC LIMIT 1 OFFSET ?)",
                   (scope, scope, NOTE_CALLS_KEPT))


def _note_call(db: sqlite3.Connection, scope: str, call: str) -> NoteCall | None:
    row = db.execute("SELECT data FROM note_calls WHERE scope = ? AND call = ?",
                     (scope, call)).fetchone()
    return None if row is None else NoteCall.model_validate_json(row[0])


def fetchall(db: sqlite3.Connection, sql: str, params: Sequence[Any]) -> list[Any]:
    return db.execute(sql, params).fetchall()


def scalar(db: sqlite3.Connection, sql: str, params: Sequence[Any] = ()) -> Any:
    row = db.execute(sql, params).fetchone()
    return None if row is None else row[0]


