"""The store contract's fixtures: every test taking ``store`` or ``new_store`` runs once
per backend (DESIGN §3), PostgreSQL in a schema of its own."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from runtime.stores.files import FilesStore
from runtime.stores.postgres import PostgresStore
from runtime.stores.sqlite import SQLiteStore
from tests.postgres import PG_DSN, fresh_schema
from tests.runtime.stores.contract import BACKENDS, AnyStore


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def new_store(backend: str, tmp_path: Path) -> AsyncIterator[Callable[[], AnyStore]]:
    """Another store object on the same storage (a second process, or a restart); for
    PostgreSQL, a schema of the test's own, dropped after it."""
    if backend == "postgres":
        async with fresh_schema() as schema:
            yield lambda: PostgresStore(PG_DSN, schema=schema, pool_size=4)
        return

    def make() -> AnyStore:
        if backend == "sqlite":
            return SQLiteStore(tmp_path / "maiden.db")
        return FilesStore(tmp_path / "files")
    yield make


@pytest.fixture
async def store(new_store: Callable[[], AnyStore]) -> AsyncIterator[AnyStore]:
    async with new_store() as opened:
        yield opened
