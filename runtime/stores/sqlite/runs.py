"""The SQLite store's runs and threads: one row per entry.

A checkpoint is one ``BEGIN IMMEDIATE`` transaction that appends the new entry
rows and updates the run; its cost does not depend on the thread's length. The
stale-write check is a conditional ``UPDATE`` on the thread's length and the
run's version, so two writers (two processes included) can never interleave.
Entry rows are append-only (no code path updates one; only erasing the whole thread
deletes them), so the entries of recently loaded threads are kept, validated, and a later
load reads only the rows since, and the one before them to see that the thread was not
erased meanwhile (``reads``); ``commit`` is the group commit, ``sql`` the rows.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Collection, Sequence

from ...errors import NotFound, StoreError
from ...model.entries import Entry
from ...model.runs import TERMINAL, Run, RunState, Transition
from ..base import (
    Accepted,
    Checkpoint,
    RunStore,
    SpendAsk,
    Spending,
    SpendScope,
    StoreStats,
    ThreadInfo,
    check_thread_id,
)
from ..rows import (
    activity,
    entry_row,
    parse_run,
    run_json,
    spend_of,
    spend_sql,
    spend_sums,
    thread_infos,
    transitions_of,
)
from ..tail import Tail
from .reads import SQLiteReads
from .schema import ACTIVE_SQL, SPEND_INDEXES
from .sql import (
    CheckpointRows,
    commit_rows,
    create_run_row,
    fetchall,
    run_row,
)

__all__ = ["SQLiteRuns"]

log = logging.getLogger("maiden.store")


class SQLiteRuns(SQLiteReads, RunStore):
    """The SQLite store's ``RunStore``: threads, runs, checkpoints, transitions, stats."""

    def gone(self) -> str | None:
        return self._identity.gone() if self._writer is not None else None

    async def create_run(self, run: Run) -> Run:
        accepted = await self._accept_run(run)
        if accepted.on_disk is not None:
            await accepted.on_disk
        return accepted.run

    async def accept_run(self, run: Run) -> Accepted:
        return await self._accept_run(run)

    async def _accept_run(self, run: Run) -> Accepted:
        check_thread_id(run.thread_id)
        # One stat per accepted message (never into a deleted or overwritten file); the
        # identity is read again only when the file was written since (a checkpoint).
        self._identity.check()
        # The thread's unfinished runs are read in the same transaction (its locks taken).
        (existing, stored, active), on_disk = await self._write_side().write_committed(
            create_run_row, run, run_row(run))
        if existing is not None:
            return Accepted(parse_run(existing), None, on_disk)
        return Accepted(stored, [parse_run(data) for data in active], on_disk)

    async def commit(self, checkpoint: Checkpoint) -> None:
        cp = checkpoint
        if cp.entries and cp.position is None:
            raise StoreError("a checkpoint with entries needs a position")
        self._identity.check_lost()  # no I/O here: create_run and the heartbeat look
        # Serialised here, before the trip: the connection's thread only runs SQL.
        rows = CheckpointRows(
            thread_id=cp.thread_id,
            position=cp.position,
            entries=[entry_row(cp.thread_id, (cp.position or 0) + i, entry)
                     for i, entry in enumerate(cp.entries)],
            run=None if cp.run is None else (cp.run.state, cp.run.version, run_json(cp.run),
                                             cp.run.id, cp.run.version - 1,
                                             activity(cp), *spend_of(cp.run)),
            transitions=[(t.run_id, f"[{_text(t.source)},{_text(t.target)},{_text(t.reason)},"
                                    f"{t.at!r}]") for t in cp.transitions],
            deliveries=[(d.key, d.run_id, d.remote_id, d.created_at, d.model_dump_json())
                        for d in cp.deliveries],
        )
        if cp.durable:
            await self._grouped(commit_rows, rows)
        else:
            await self._write_side().write_lazily(commit_rows, rows)
        if cp.position is not None:
            self._threads.extend(cp.thread_id, cp.position, cp.entries)

    async def load_entries(self, thread_id: str, *, offset: int = 0,
                           limit: int | None = None) -> list[Entry]:
        check_thread_id(thread_id)
        held_from = self._threads.start(thread_id)
        if offset and limit is None and held_from is not None and held_from <= offset:
            # The rest of a thread held here (a run's driver has its start): what is held,
            # and the few rows since.
            return await self._read_small(self._since, thread_id, held_from, offset)
        if offset or limit is not None:  # a page, for a reader of the history: not cached
            return await self._read(self._page, thread_id, offset, limit)
        return await self._read_thread(self._load_from, thread_id, 0)

    async def load_tail(self, thread_id: str, tokens: int, *, start: int | None = None
                        ) -> Tail:
        check_thread_id(thread_id)
        return await self._read_thread(self._load_tail, thread_id, tokens, start)

    async def thread_length(self, thread_id: str) -> int:
        check_thread_id(thread_id)
        last = await self._read_small(fetchall, "SELECT max(seq) FROM entries WHERE thread_id = ?",
                                      (thread_id,))
        return 0 if last[0][0] is None else last[0][0] + 1

    async def get_run(self, run_id: str) -> Run:
        rows = await self._read_small(fetchall, "SELECT data FROM runs WHERE id = ?", (run_id,))
        if not rows:
            raise NotFound(f"no run {run_id!r}")
        return parse_run(rows[0][0])

    async def run_for_key(self, idempotency_key: str) -> Run | None:
        rows = await self._read_small(fetchall, "SELECT data FROM runs WHERE idempotency_key = ?",
                                      (idempotency_key,))
        return parse_run(rows[0][0]) if rows else None

    async def list_runs(
        self,
        *,
        thread_id: str | None = None,
        states: Sequence[RunState] | None = None,
        limit: int | None = None,
    ) -> list[Run]:
        where, params = [], []
        if thread_id is not None:
            check_thread_id(thread_id)
            where.append("thread_id = ?")
            params.append(thread_id)
        if states is not None:
            where.append(f"state IN ({','.join('?' * len(states))})")
            params.extend(states)
        sql = "SELECT data FROM runs"
        only_active = bool(states) and TERMINAL.isdisjoint(states or ())
        if only_active:
            # Only the runs that have not ended: their (small) partial index, whose WHERE
            # the query must repeat for SQLite to see that it applies.
            sql += " INDEXED BY runs_active"
            where.append(ACTIVE_SQL)
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY created_at DESC, rowid DESC"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        if thread_id is not None and only_active:
            rows = await self._read_small(fetchall, sql, params)  # a thread's few active runs
        else:
            rows = await self._fetchall(sql, params)
        return [parse_run(row[0]) for row in reversed(rows)]

    async def list_threads(self, *, offset: int = 0, limit: int | None = None
                           ) -> list[ThreadInfo]:
        rows = await self._fetchall(
            # A thread's last activity is its newest run's arrival (runs_thread's last entry).
            "SELECT t.id, (SELECT coalesce(max(e.seq) + 1, 0) FROM entries e "
            "              WHERE e.thread_id = t.id), t.created_at, "
            "  coalesce((SELECT max(r.created_at) FROM runs r WHERE r.thread_id = t.id), "
            "           t.created_at) AS updated_at, "
            "  (SELECT count(*) FROM runs r WHERE r.thread_id = t.id), "
            "  (SELECT r.state FROM runs r WHERE r.thread_id = t.id "
            "   ORDER BY r.created_at DESC, r.rowid DESC LIMIT 1) "
            "FROM threads t ORDER BY updated_at DESC, t.id LIMIT ? OFFSET ?",
            (-1 if limit is None else int(limit), int(offset)))
        return thread_infos(rows)

    async def stats(self) -> StoreStats:
        def count(db: sqlite3.Connection) -> StoreStats:
            runs = {RunState(state): n for state, n in
                    db.execute("SELECT state, count(*) FROM runs GROUP BY state")}
            threads = db.execute("SELECT count(*) FROM threads").fetchone()[0]
            pending, total = db.execute(
                "SELECT count(*) FILTER (WHERE remote_id IS NULL), count(*) FROM deliveries"
            ).fetchone()
            return StoreStats(runs=runs, threads=threads, deliveries_pending=pending,
                              deliveries_sent=total - pending)

        return await self._read(count)

    async def spent(self, asks: Sequence[SpendAsk]) -> Spending:
        if not asks:
            return Spending([])
        sql, params = spend_sql(asks, lambda n: "?")
        return Spending(spend_sums(await self._fetchall(sql, params), len(asks)))

    async def index_spend(self, scopes: Collection[SpendScope]) -> None:
        if scopes:
            for scope in await self._write(_index_spend, sorted(set(scopes))):
                log.info("runs indexed by the spend of each %s (a spend cap of that scope "
                         "is configured)", scope)

    async def transitions(self, run_id: str) -> list[Transition]:
        rows = await self._fetchall("SELECT transitions FROM runs WHERE id = ?", (run_id,))
        return transitions_of(run_id, rows[0][0] if rows else None)


_text = json.encoder.encode_basestring
"""A string as a JSON string (what ``json.dumps`` does to one, without its machinery)."""


def _index_spend(db: sqlite3.Connection, scopes: Sequence[SpendScope]) -> list[SpendScope]:
    """Make the scopes' spend indexes that are missing; the scopes whose index was made (a
    walk of every run: once)."""
    made = []
    for scope in scopes:
        name, on = SPEND_INDEXES[scope]
        if db.execute("SELECT 1 FROM sqlite_schema WHERE type = 'index' AND name = ?",
                      (name,)).fetchone() is None:
            db.execute(f"CREATE INDEX {name} {on}")
            made.append(scope)
    return made
