"""Workload 8: workload 1 on PostgreSQL beside SQLite, message by message, alternating who
goes first (as workload 1 does against its floor). The PostgreSQL server is the one
``MAIDEN_BENCH_PG_DSN`` names (default: the local test server); each run uses a schema of
its own and drops it after."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from uuid import uuid4

from runtime import Runtime, RuntimeConfig, SQLiteStore, ToolRegistry
from runtime.stores.dsn import redact_dsn
from runtime.stores.sqlite import Synchronous

from .thread import THREAD, remove_db
from .workload import LookupModel, expect_completed, lookup, user_text

__all__ = ["PG_DSN", "PostgresResult", "run_postgres"]

PG_DSN = os.environ.get("MAIDEN_BENCH_PG_DSN", "postgresql://root@127.0.0.1:5432/test")


@dataclass
class PostgresResult:
    n: int
    where: str
    sqlite_ms: list[float] = field(default_factory=list)
    postgres_ms: list[float] = field(default_factory=list)
    skipped: str | None = None
    """Why nothing was measured (no server)."""


async def _message(rt: Runtime, i: int) -> float:
    start = time.perf_counter()
    expect_completed(await rt.send(THREAD, user_text(i)))
    await rt.idle()
    return (time.perf_counter() - start) * 1000


async def run_postgres(workdir: Path, n: int, synchronous: Synchronous) -> PostgresResult:
    """``n`` messages of workload 1 on each store (SQLite with ``synchronous``; PostgreSQL
    with its defaults: ``synchronous_commit = on``)."""
    import asyncpg  # type: ignore[import-untyped]

    from runtime.stores.postgres import PostgresStore

    result = PostgresResult(n=n, where=redact_dsn(PG_DSN))
    try:
        await (await asyncpg.connect(PG_DSN, timeout=2)).close()
    except Exception as exc:
        result.skipped = f"no PostgreSQL at {result.where} ({type(exc).__name__})"
        return result
    schema = f"maiden_bench_{uuid4().hex[:12]}"
    path = workdir / "postgres-beside.db"
    remove_db(path)
    settings = RuntimeConfig(concurrency="global")
    try:
        async with SQLiteStore(path, synchronous=synchronous) as lite, \
                PostgresStore(PG_DSN, schema=schema) as pg, \
                Runtime(lite, LookupModel(), ToolRegistry([lookup]), settings=settings) as a, \
                Runtime(pg, LookupModel(), ToolRegistry([lookup]), settings=settings) as b:
            for i in range(n):
                if i % 2:
                    result.postgres_ms.append(await _message(b, i))
                    result.sqlite_ms.append(await _message(a, i))
                else:
                    result.sqlite_ms.append(await _message(a, i))
                    result.postgres_ms.append(await _message(b, i))
    finally:
        conn = await asyncpg.connect(PG_DSN, timeout=10)
        try:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        finally:
            await conn.close()
    return result
