"""The PostgreSQL store's own tests' fixtures: a schema of the test's own, dropped after it
(the test skipped, with one line, without a server), and a store open on it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from runtime.stores.postgres import PostgresStore
from tests.postgres import PG_DSN, fresh_schema


@pytest.fixture
async def schema() -> AsyncIterator[str]:
    async with fresh_schema() as name:
        yield name


@pytest.fixture
async def store(schema: str) -> AsyncIterator[PostgresStore]:
    async with PostgresStore(PG_DSN, schema=schema, pool_size=2) as opened:
        yield opened
