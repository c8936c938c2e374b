"""The PostgreSQL store's runs and threads.

A checkpoint is one call of the schema's ``maiden_checkpoint``, its own transaction and one
round trip: it locks its thread's row (so two writers on one thread take turns, in any
process), checks the position against the thread's last entry and the run's version,
appends the entry rows with their running token sums, updates the run, appends transitions
and inserts deliveries (``schema``, version 7). A checkpoint that is not durable commits
with ``synchronous_commit = off``: committed and visible at once, ordered before
every later commit, and lost only if the server itself crashes before its WAL writer
flushes it (within a few hundred milliseconds).

Entry rows are append-only, so a read made of several queries (``load_tail``) sees a
consistent thread: later statements may only see more rows at its end (or none, if the
whole thread is erased meanwhile: what was read is then of a thread that is gone).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from itertools import pairwise

from ...errors import NotFound, StoreError
from ...model.entries import Entry, Notice
from ...model.requests import thread_key
from ...model.runs import DRIVABLE, Run, RunState, Transition, arriving_after
from ..base import (
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
    parse_entries,
    parse_run,
    run_json,
    spend_keys,
    spend_of,
    spend_sql,
    spend_sums,
    thread_infos,
    transitions_of,
)
from ..tail import Tail
from .core import PostgresCore
from .schema import arrivals_lock
from .sql import LIST_THREADS, list_runs_sql, write_checkpoint

__all__ = ["PostgresRuns"]

_INSERT_RUN = (
    "INSERT INTO runs (id, thread_id, state, active, version, created_at, idempotency_key, "
    "data, spend_agent, spend_user, spend_place, spend_tokens, spend_cost) "
    "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) "
    "ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING")

_CREATE_RUN = """
WITH newest AS (SELECT max(created_at) AS at FROM runs WHERE thread_id = $2),
made AS (
    INSERT INTO runs (id, thread_id, state, active, version, created_at, idempotency_key,
                      data, spend_agent, spend_user, spend_place, spend_tokens, spend_cost)
    SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13
    WHERE coalesce((SELECT at FROM newest), $6) <= $6
    ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING true AS made),
thread AS (
    INSERT INTO threads SELECT $2, $6 WHERE EXISTS (SELECT 1 FROM made)
    ON CONFLICT DO NOTHING)
SELECT (SELECT made FROM made), (SELECT at FROM newest)
"""
"""A new run (and its thread) in one statement, unless it would go before its thread's
latest arrival or its idempotency key is taken: then whether it was made (NULL: not) and
the thread's latest arrival."""


class PostgresRuns(PostgresCore, RunStore):
    """The PostgreSQL store's ``RunStore``: threads, runs, checkpoints, transitions, stats."""

    def gone(self) -> str | None:
        return None  # a server, not a file: what it holds cannot be deleted from under us

    async def create_run(self, run: Run) -> Run:
        check_thread_id(run.thread_id)
        row = (run.id, run.thread_id, run.state, not run.terminal, run.version,
               run.created_at, run.idempotency_key, run_json(run), *spend_keys(run),
               *spend_of(run))
        # A thread's arrivals are written one at a time (a lock held until commit), so
        # they become visible in the order of their stamps: two replicas inserting at once
        # would otherwise each stamp its run against the thread as it was before the other
        # committed, and a worker could drive the later-stamped run before the earlier one
        # was there to see (the chaos soak's finding 7). Then, as a rule in one statement,
        # the run is inserted unless it would go before the thread's latest arrival (then
        # it is stamped after it, below) or its key is taken.
        async with self._transaction() as conn:
            await conn.execute("SELECT pg_advisory_xact_lock($1)",
                               arrivals_lock(self.schema, run.thread_id))
            made, newest = await conn.fetchrow(_CREATE_RUN, *row)
            if made:
                return run
            if newest is not None and newest > run.created_at:
                # Stamped no earlier than the thread's latest arrival: a replica whose
                # clock is behind does not put its run before runs that came in earlier.
                run = arriving_after(run, newest)
                # ON CONFLICT waits for a transaction inserting the same key: then the
                # run it committed is read (each statement sees what is committed when it
                # starts).
                created = await conn.fetchval(
                    _INSERT_RUN + " RETURNING true", run.id, run.thread_id, run.state,
                    not run.terminal, run.version, run.created_at, run.idempotency_key,
                    run_json(run), *spend_keys(run), *spend_of(run))
                if created:
                    await conn.execute("INSERT INTO threads VALUES ($1, $2) "
                                       "ON CONFLICT DO NOTHING", run.thread_id, run.created_at)
                    return run
        return await self._run_for_taken_key(run)

    async def _run_for_taken_key(self, run: Run) -> Run:
        existing = await self._value("SELECT data FROM runs WHERE idempotency_key = $1",
                                     run.idempotency_key)
        if existing is None:  # cannot happen: the key's holder committed before us
            raise StoreError(f"idempotency key {run.idempotency_key!r} is taken, by no run")
        return parse_run(existing)

    async def commit(self, checkpoint: Checkpoint) -> None:
        cp = checkpoint
        if cp.entries and cp.position is None:
            raise StoreError("a checkpoint with entries needs a position")
        # A run that stops being driven (ended, paused) is news for whoever waits on it
        # in another process: told with the checkpoint, so it comes once it is committed.
        told = None if cp.run is None or cp.run.state in DRIVABLE else \
            (self._news, f"ended:{thread_key(cp.thread_id)}")
        async with self._connection() as conn:
            await write_checkpoint(conn, cp, told)
        if cp.position is not None:
            self._threads.extend(cp.thread_id, cp.position, cp.entries)

    async def load_entries(self, thread_id: str, *, offset: int = 0,
                           limit: int | None = None) -> list[Entry]:
        check_thread_id(thread_id)
        offset = max(offset, 0)
        if offset or limit is not None:  # a page, for a reader of the history: not cached
            rows = await self._fetch("SELECT data FROM entries WHERE thread_id = $1 AND "
                                     "seq >= $2 ORDER BY seq LIMIT $3", thread_id, offset, limit)
            return parse_entries(thread_id, offset, rows) if rows else []
        # Entry rows are append-only, in every replica: what is held stays true, and only
        # the rows since are read; and the row before them, whose run must be the held
        # last entry's, unless the thread was erased since (run ids are never reused).
        base, known = self._threads.pop(thread_id)
        if base:
            known = []
        rows = await self._fetch("SELECT data, run_id FROM entries WHERE thread_id = $1 AND "
                                 "seq >= $2 ORDER BY seq", thread_id, max(len(known) - 1, 0))
        if known:
            if rows and rows[0]["run_id"] == known[-1].run_id:
                rows = rows[1:]
            else:  # erased (and maybe begun anew): read it whole
                known = []
                rows = await self._fetch("SELECT data FROM entries WHERE thread_id = $1 "
                                         "ORDER BY seq", thread_id)
        if rows:
            known.extend(parse_entries(thread_id, len(known), rows))
        self._threads.put(thread_id, 0, known)
        return list(known)

    async def load_tail(self, thread_id: str, tokens: int, *, start: int | None = None
                        ) -> Tail:
        check_thread_id(thread_id)
        async with self._connection() as conn:
            # The newest user message with at least ``tokens`` after it: one seek in
            # entries_users (running sums grow with seq, so the greatest sum is the latest).
            found = await conn.fetchrow(
                "SELECT (SELECT u.seq FROM entries u WHERE u.thread_id = $1 AND u.kind = 'user'"
                "        AND u.tokens <= last.tokens - $2 ORDER BY u.tokens DESC, u.seq DESC "
                "        LIMIT 1) "
                "FROM (SELECT tokens FROM entries WHERE thread_id = $1 ORDER BY seq DESC "
                "      LIMIT 1) last", thread_id, tokens)
            base = found[0] if found is not None and found[0] is not None else 0
            if start is not None:
                base = min(base, max(start, 0))
            rows = await conn.fetch("SELECT data, tokens FROM entries WHERE thread_id = $1 "
                                    "AND seq >= $2 ORDER BY seq", thread_id, max(base - 1, 0))
            summary = await conn.fetchrow(
                "SELECT data, count(*) OVER () FROM entries WHERE thread_id = $1 "
                "AND kind = 'summary' AND seq < $2 ORDER BY seq DESC LIMIT 1", thread_id, base)
        before = 0
        if base and rows:  # the row before base gives the running sum the tail starts from
            before, rows = rows[0]["tokens"], rows[1:]
        loaded = parse_entries(thread_id, base, rows) if rows else []
        newest = parse_entries(thread_id, base, [summary])[0] if summary is not None else None
        assert newest is None or isinstance(newest, Notice)
        own = [now - then for then, now in pairwise([before, *(r["tokens"] for r in rows)])]
        return Tail(base, loaded, summaries_before=0 if summary is None else summary[1],
                    summary_before=newest, tokens=own)

    async def thread_length(self, thread_id: str) -> int:
        check_thread_id(thread_id)
        last = await self._value("SELECT max(seq) FROM entries WHERE thread_id = $1", thread_id)
        return 0 if last is None else int(last) + 1

    async def get_run(self, run_id: str) -> Run:
        data = await self._value("SELECT data FROM runs WHERE id = $1", run_id)
        if data is None:
            raise NotFound(f"no run {run_id!r}")
        return parse_run(data)

    async def run_for_key(self, idempotency_key: str) -> Run | None:
        data = await self._value("SELECT data FROM runs WHERE idempotency_key = $1",
                                 idempotency_key)
        return None if data is None else parse_run(data)

    async def list_runs(
        self,
        *,
        thread_id: str | None = None,
        states: Sequence[RunState] | None = None,
        limit: int | None = None,
    ) -> list[Run]:
        if thread_id is not None:
            check_thread_id(thread_id)
        sql, params = list_runs_sql(thread_id, states, limit)
        return (await self._parsed(parse_run, sql, *params))[::-1]

    async def list_threads(self, *, offset: int = 0, limit: int | None = None
                           ) -> list[ThreadInfo]:
        rows = await self._fetch(LIST_THREADS, limit, max(offset, 0))
        return thread_infos(rows)

    async def spent(self, asks: Sequence[SpendAsk]) -> Spending:
        clock = "extract(epoch FROM clock_timestamp())::float8"
        if not asks:
            return Spending([], float((await self._fetch(f"SELECT {clock}"))[0][0]))
        sql, params = spend_sql(asks, lambda n: f"${n}", also=clock)
        rows = await self._fetch(sql, *params)
        return Spending(spend_sums(rows, len(asks)), float(rows[0][3]))

    async def index_spend(self, scopes: Collection[SpendScope]) -> None:
        """Nothing to do: the schema indexes every scope (a ``CREATE INDEX`` here would
        hold up the other replicas' writes to the runs for as long as it takes)."""

    async def stats(self) -> StoreStats:
        async with self._connection() as conn:
            runs = {RunState(state): n for state, n in
                    await conn.fetch("SELECT state, count(*) FROM runs GROUP BY state")}
            threads = await conn.fetchval("SELECT count(*) FROM threads")
            pending, total = await conn.fetchrow(
                "SELECT count(*) FILTER (WHERE remote_id IS NULL), count(*) FROM deliveries")
        return StoreStats(runs=runs, threads=threads, deliveries_pending=pending,
                          deliveries_sent=total - pending)

    async def transitions(self, run_id: str) -> list[Transition]:
        return transitions_of(run_id, await self._value(
            "SELECT transitions FROM runs WHERE id = $1", run_id))
