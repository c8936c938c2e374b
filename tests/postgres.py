"""A PostgreSQL server for the tests: where it is, whether it answers, a schema per test.

``MAIDEN_TEST_PG_DSN`` names the server (a local trust-auth one by default). Tests that
need it call ``require_postgres()``, which skips them, with one line, when it does not
answer; CI has one. ``cuttable`` puts a proxy the test can cut between a store and it.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit
from uuid import uuid4

import asyncpg  # type: ignore[import-untyped]
import pytest

from chaos.proxy import Proxy
from runtime.stores.dsn import redact_dsn

__all__ = ["PG_DSN", "SKIP_REASON", "cuttable", "drop_schemas", "fresh_schema", "in_schema",
           "postgres_reachable", "require_postgres"]

PG_DSN = os.environ.get("MAIDEN_TEST_PG_DSN", "postgresql://root@127.0.0.1:5432/test")

SKIP_REASON = (f"no PostgreSQL at {redact_dsn(PG_DSN)}: start one or set MAIDEN_TEST_PG_DSN "
               "(CI has one)")

_reachable: bool | None = None


async def postgres_reachable() -> bool:
    """Whether the server at ``PG_DSN`` accepts a connection within 2 s (asked once)."""
    global _reachable
    if _reachable is None:
        try:
            conn = await asyncpg.connect(PG_DSN, timeout=2)
        except Exception:
            _reachable = False
        else:
            await conn.close()
            _reachable = True
    return _reachable


async def require_postgres() -> None:
    """Skip the test (one line, the same for every test) without a server."""
    if not await postgres_reachable():
        pytest.skip(SKIP_REASON)


@asynccontextmanager
async def fresh_schema() -> AsyncIterator[str]:
    """A schema name nobody uses (``maiden_test_<hex>``; a store creates it on open),
    dropped with everything in it at the end. Skips the test without a server."""
    await require_postgres()
    schema = f"maiden_test_{uuid4().hex[:16]}"
    try:
        yield schema
    finally:
        await drop_schemas([schema])


async def in_schema(schema: str, sql: str, *args: Any) -> Any:
    """One statement on a connection of the test's own, in ``schema``: its rows."""
    conn = await asyncpg.connect(PG_DSN, server_settings={"search_path": schema})
    try:
        return await conn.fetch(sql, *args)
    finally:
        await conn.close()


async def drop_schemas(schemas: Sequence[str]) -> None:
    """Drop each of ``schemas`` with everything in it (none there: nothing; nothing either
    without a server, or without ``schemas``)."""
    if not schemas or not await postgres_reachable():
        return
    conn = await asyncpg.connect(PG_DSN, timeout=10)
    try:
        for schema in schemas:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await conn.close()


@asynccontextmanager
async def cuttable() -> AsyncIterator[tuple[Proxy, str]]:
    """A TCP proxy to the server (the chaos soak's own: ``cut()`` aborts every connection
    through it and refuses new ones until ``restore()``), and ``PG_DSN`` by way of it."""
    await require_postgres()
    parts = urlsplit(PG_DSN)
    async with Proxy(parts.hostname or "127.0.0.1", parts.port or 5432) as proxy:
        user = f"{parts.username}@" if parts.username else ""
        yield proxy, urlunsplit(parts._replace(netloc=f"{user}127.0.0.1:{proxy.port}"))

