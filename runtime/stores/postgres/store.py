"""The PostgreSQL store: the SQLite store's rows in a server database, for replicas.

Tables live in one schema (``schema``), created or migrated on ``open`` under an advisory
lock (``postgres.schema``). A checkpoint is one transaction: it locks its thread's row (so
two writers on one thread take turns, in any process), checks the position against the
thread's last entry and the run's version, appends the entry rows with their running token
sums, updates the run, appends transitions and inserts deliveries. A checkpoint that is not
durable commits with ``synchronous_commit = off``: committed and visible at once, ordered
before every later commit, and lost only if the server itself crashes before its WAL
writer flushes it (within a few hundred milliseconds).

Reads are plain queries on a connection pool (asyncpg). Entry rows are append-only, so a
read made of several queries (``load_tail``) sees a consistent thread: later statements may
only see more rows at its end. Text values go through a codec that lets them hold U+0000
(``postgres.sql``). The control plane, leases, schedule records and notes are
``PostgresControl`` (``postgres.control``).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from itertools import pairwise
from typing import Any, TypeVar

import asyncpg  # type: ignore[import-untyped]

from ...entries import Entry, Notice
from ...errors import NotFound, StoreError
from ...runs import DELIVERY, Delivery, Run, RunState, Transition, arriving_after
from ...tail import Tail
from ..base import Checkpoint, Opens, StoreStats, ThreadInfo, check_thread_id
from ..dsn import redact_dsn
from ..sqlite.reads import parse_entries
from ..sqlite.sql import ThreadCache, parse_run, run_json
from .control import PostgresControl
from .schema import check_schema_name, migrate
from .sql import (
    ERRORS,
    LIST_THREADS,
    CheckpointRows,
    configure,
    keep,
    list_runs_sql,
    transitions_of,
    update_pending,
    write_checkpoint,
)

__all__ = ["PostgresStore"]

log = logging.getLogger("maiden.store")

T = TypeVar("T")

class PostgresStore(PostgresControl, Opens):
    """PostgreSQL-backed ``Store``; use as ``async with PostgresStore(dsn) as store``.

    ``dsn`` is a ``postgresql://user:password@host:port/database`` URL; ``schema`` the
    schema the tables live in (a plain identifier: created if missing); ``pool_size`` the
    most connections this process opens.
    """

    commit_survives_cancel = False
    """A ``commit`` whose caller is cancelled is rolled back (or may have landed, if the
    cancellation came during its COMMIT): callers shield it."""

    def __init__(self, dsn: str, *, schema: str = "maiden", pool_size: int = 10,
                 connect_timeout_s: float = 10.0, cached_entries: int = 200_000) -> None:
        self.dsn = dsn
        self.schema = check_schema_name(schema)
        self.pool_size = pool_size
        self.connect_timeout_s = connect_timeout_s
        self.applied: list[int] = []
        """The schema versions this store's ``open`` applied (none if the schema was
        current, or another process migrated it first)."""
        self._pool: Any = None
        self._threads = ThreadCache(cached_entries)

    async def open(self) -> None:
        if self._pool is not None:
            return
        try:
            pool = await asyncpg.create_pool(
                self.dsn, min_size=1, max_size=self.pool_size, init=configure, reset=keep,
                timeout=self.connect_timeout_s,
                server_settings={"search_path": self.schema, "application_name": "maiden"})
        except (*ERRORS, ValueError) as exc:
            reason = str(exc) or type(exc).__name__
            password = _password(self.dsn)
            if password:
                reason = reason.replace(password, "***")
            raise StoreError(f"cannot open postgres {redact_dsn(self.dsn)}: {reason}") from exc
        try:
            async with pool.acquire() as conn:
                self.applied = await migrate(conn, self.schema)
        except BaseException as exc:
            await pool.close()
            if isinstance(exc, ERRORS):
                raise StoreError(f"cannot migrate postgres schema {self.schema}: {exc}") from exc
            raise
        if self.applied:
            log.info("postgres schema %s migrated to version %s", self.schema,
                     self.applied[-1])
        self._pool = pool

    async def close(self) -> None:
        pool, self._pool = self._pool, None
        self._threads.clear()
        if pool is not None:
            await pool.close()

    async def versions(self) -> tuple[str, int]:
        """The server's version (``PostgreSQL 15.20``) and the schema's."""
        async with self._connection() as conn:
            server = await conn.fetchval("SHOW server_version")
            version = await conn.fetchval("SELECT value FROM meta WHERE key = 'schema_version'")
        return f"PostgreSQL {str(server).split()[0]}", int(version)

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[Any]:
        """A pooled connection; asyncpg's errors come out as ``StoreError``."""
        pool = self._pool
        if pool is None:
            raise StoreError("the store is not open")
        try:
            async with pool.acquire() as conn:
                yield conn
        except asyncpg.ProgramLimitExceededError as exc:
            raise StoreError(f"postgres schema {self.schema}: a value is too large for "
                             f"PostgreSQL (keys are limited to about 2,700 bytes once "
                             f"compressed): {exc}") from exc
        except ERRORS as exc:
            raise StoreError(f"postgres schema {self.schema}: {exc}") from exc

    @asynccontextmanager
    async def _transaction(self, *, durable: bool = True) -> AsyncIterator[Any]:
        async with self._connection() as conn, conn.transaction():
            if not durable:
                await conn.execute("SET LOCAL synchronous_commit = off")
            yield conn

    async def _fetch(self, sql: str, *args: Any) -> list[Any]:
        async with self._connection() as conn:
            rows: list[Any] = await conn.fetch(sql, *args)
            return rows

    async def _parsed(self, parse: Callable[[str], T], sql: str, *args: Any) -> list[T]:
        """The first column of each row (JSON text), parsed."""
        return [parse(row[0]) for row in await self._fetch(sql, *args)]

    async def _value(self, sql: str, *args: Any) -> Any:
        async with self._connection() as conn:
            return await conn.fetchval(sql, *args)

    # -- the Store protocol

    def gone(self) -> str | None:
        return None  # a server, not a file: what it holds cannot be deleted from under us

    async def create_run(self, run: Run) -> Run:
        check_thread_id(run.thread_id)
        async with self._transaction() as conn:
            # Stamped no earlier than the thread's latest arrival: a replica whose clock is
            # behind does not put its run before runs that came in earlier.
            run = arriving_after(run, await conn.fetchval(
                "SELECT max(created_at) FROM runs WHERE thread_id = $1", run.thread_id))
            # ON CONFLICT waits for a transaction inserting the same key: then the run it
            # committed is read (each statement sees what is committed when it starts).
            created = await conn.fetchval(
                "INSERT INTO runs (id, thread_id, state, active, version, created_at, "
                "idempotency_key, data) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) "
                "ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING "
                "RETURNING true",
                run.id, run.thread_id, run.state, not run.terminal, run.version,
                run.created_at, run.idempotency_key, run_json(run))
            if created:
                await conn.execute("INSERT INTO threads VALUES ($1, $2) ON CONFLICT DO NOTHING",
                                   run.thread_id, run.created_at)
                return run
            existing = await conn.fetchval("SELECT data FROM runs WHERE idempotency_key = $1",
                                           run.idempotency_key)
        if existing is None:  # cannot happen: the key's holder committed before us
            raise StoreError(f"idempotency key {run.idempotency_key!r} is taken, by no run")
        return parse_run(existing)

    async def commit(self, checkpoint: Checkpoint) -> None:
        cp = checkpoint
        if cp.entries and cp.position is None:
            raise StoreError("a checkpoint with entries needs a position")
        rows = CheckpointRows.of(cp)
        async with self._transaction(durable=cp.durable) as conn:
            await write_checkpoint(conn, rows)

    async def load_entries(self, thread_id: str, *, offset: int = 0,
                           limit: int | None = None) -> list[Entry]:
        check_thread_id(thread_id)
        offset = max(offset, 0)
        if offset or limit is not None:  # a page, for a reader of the history: not cached
            rows = await self._fetch("SELECT data FROM entries WHERE thread_id = $1 AND "
                                     "seq >= $2 ORDER BY seq LIMIT $3", thread_id, offset, limit)
            return parse_entries(thread_id, offset, rows) if rows else []
        # Entry rows are append-only, in every replica: what is held stays true, and only
        # the rows since are read.
        base, known = self._threads.pop(thread_id)
        if base:
            known = []
        rows = await self._fetch("SELECT data FROM entries WHERE thread_id = $1 AND seq >= $2 "
                                 "ORDER BY seq", thread_id, len(known))
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
        return [ThreadInfo(id=r[0], length=r[1], created_at=r[2], updated_at=r[3], runs=r[4],
                           last_state=RunState(r[5]) if r[5] else None) for r in rows]

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

    async def deliveries(
        self, *, run_id: str | None = None, pending: bool | None = None
    ) -> list[Delivery]:
        where, params = [], []
        if run_id is not None:
            params.append(run_id)
            where.append("run_id = $1")
        if pending is not None:
            where.append("remote_id IS NULL" if pending else "remote_id IS NOT NULL")
        sql = "SELECT data FROM deliveries"
        if where:
            sql += " WHERE " + " AND ".join(where)
        return await self._parsed(DELIVERY.validate_json, sql + " ORDER BY created_at, n",
                                  *params)

    async def mark_delivered(self, key: str, remote_id: str, at: float) -> None:
        async with self._transaction() as conn:
            await update_pending(conn, key,
                                 lambda _: {"remote_id": remote_id, "delivered_at": at})

    async def delivery_failed(self, key: str, error: str) -> None:
        async with self._transaction() as conn:
            await update_pending(conn, key,
                                 lambda d: {"attempts_failed": d.attempts_failed + 1,
                                            "last_error": error})


def _password(dsn: str) -> str:
    """The password in a ``scheme://user:password@host`` URL, or ''."""
    head, at, _ = dsn.partition("@")
    if not at or "://" not in head:
        return ""
    return head.split("://", 1)[1].partition(":")[2]
