"""The PostgreSQL store's core, which every role of it is built on: the connection pool.
The store holds the SQLite store's rows in a server database, for replicas.

Tables live in one schema (``schema``), created or migrated on ``open`` under an advisory
lock (``postgres.schema``). Reads are plain queries on a connection pool (asyncpg). Text
values go through a codec that lets them hold U+0000 (``postgres.sql``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import asyncpg  # type: ignore[import-untyped]

from ...errors import StoreError, StoreFull, StoreUnreachable
from ..base import Opens
from ..dsn import redact_dsn
from ..tail import ThreadCache
from .listen import Listening, channel
from .schema import check_schema_name, migrate
from .sql import ERRORS, configure, keep, unreachable

__all__ = ["PostgresCore"]

log = logging.getLogger("maiden.store")

T = TypeVar("T")


CLOSE_S = 5.0
"""How long closing the store waits for its connections to be given back."""

IDLE_IN_TRANSACTION_S = 60.0
"""How long the server lets a connection of this store sit in a transaction without a
statement before it ends the session, so that a process stalled mid-transaction (its
event loop starved, stopped, its network gone half-open) cannot hold the rows it locked
from every other replica for longer (the store's transactions are a few statements sent
back to back: none waits on anything but the server)."""


class PostgresCore(Opens):
    """The pool, ``open`` (creating or migrating the schema) and ``close``, and the ways to
    run SQL on a pooled connection.

    ``dsn`` is a ``postgresql://user:password@host:port/database`` URL; ``schema`` the
    schema the tables live in (a plain identifier: created if missing); ``pool_size`` the
    most connections this process opens.
    """

    def __init__(self, dsn: str, *, schema: str = "maiden", pool_size: int = 10,
                 connect_timeout_s: float = 10.0, cached_entries: int = 200_000,
                 idle_in_transaction_s: float = IDLE_IN_TRANSACTION_S) -> None:
        self.dsn = dsn
        self.idle_in_transaction_s = idle_in_transaction_s
        self.schema = check_schema_name(schema)
        self.pool_size = pool_size
        self.connect_timeout_s = connect_timeout_s
        self.applied: list[int] = []
        """The schema versions this store's ``open`` applied (none if the schema was
        current, or another process migrated it first)."""
        self._pool: Any = None
        self._threads = ThreadCache(cached_entries)
        self._listening = Listening(dsn, connect_timeout_s)
        self._requests = channel("maiden_requests_", self.schema)
        """The notification channel of requests between processes (``control``)."""
        self._news = channel("maiden_threads_", self.schema)
        """The notification channel of the threads' news (``leases``)."""

    async def open(self) -> None:
        if self._pool is not None:
            return
        try:
            pool = await asyncpg.create_pool(
                self.dsn, min_size=1, max_size=self.pool_size, init=configure, reset=keep,
                timeout=self.connect_timeout_s,
                server_settings={
                    "search_path": self.schema, "application_name": "maiden",
                    "idle_in_transaction_session_timeout":
                        str(int(self.idle_in_transaction_s * 1000))})
        except (*ERRORS, ValueError) as exc:
            reason = str(exc) or type(exc).__name__
            password = _password(self.dsn)
            if password:
                reason = reason.replace(password, "***")
            error = StoreUnreachable if unreachable(exc) else StoreError
            raise error(f"cannot open postgres {redact_dsn(self.dsn)}: {reason}") from exc
        try:
            async with pool.acquire() as conn:
                self.applied = await migrate(conn, self.schema)
        except BaseException as exc:
            await pool.close()
            if isinstance(exc, ERRORS):
                error = StoreUnreachable if unreachable(exc) else \
                    StoreFull if isinstance(exc, asyncpg.DiskFullError) else StoreError
                raise error(f"cannot migrate postgres schema {self.schema}: {exc}") from exc
            raise
        if self.applied:
            log.info("postgres schema %s migrated to version %s", self.schema,
                     self.applied[-1])
        self._pool = pool

    async def close(self) -> None:
        """Close the listening connection and the pool: gracefully for ``CLOSE_S`` at most,
        then at once (``pool.close`` waits for every connection to be given back, and one
        that never is would hold a shutdown forever: asyncpg's docs advise a timeout)."""
        pool, self._pool = self._pool, None
        self._threads.clear()
        await self._listening.close()
        if pool is not None:
            try:
                await asyncio.wait_for(pool.close(), CLOSE_S)  # terminates it on timeout
            except TimeoutError:
                log.warning("postgres schema %s: the pool's connections were not given back "
                            "within %g s; closed at once", self.schema, CLOSE_S)

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
        except asyncpg.DiskFullError as exc:  # the server's disk: it may be freed
            raise StoreFull(f"postgres schema {self.schema}: the server's disk is full: "
                            f"{exc}") from exc
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


def _password(dsn: str) -> str:
    """The password in a ``scheme://user:password@host`` URL, or ''."""
    head, at, _ = dsn.partition("@")
    if not at or "://" not in head:
        return ""
    return head.split("://", 1)[1].partition(":")[2]
