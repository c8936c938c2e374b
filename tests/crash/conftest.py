"""The drills' PostgreSQL schemas: a test parametrized with ``store = "postgres"`` skips
(one line) without a server, and every schema its drivers used is dropped at its end."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterator
from typing import Any

import pytest

from tests.crash.outcome import SCHEMAS
from tests.postgres import drop_schemas, require_postgres


def _now(step: Coroutine[Any, Any, None]) -> None:
    """Run ``step`` on a loop of its own, leaving the thread's current loop (an async
    test's) alone, as ``asyncio.run`` would not."""
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(step)
    finally:
        loop.close()


@pytest.fixture(autouse=True)
def dropped_schemas(request: pytest.FixtureRequest) -> Iterator[None]:
    """Skip a postgres case without a server; drop its schemas (``SCHEMAS``) after it."""
    callspec = getattr(request.node, "callspec", None)
    if callspec is not None and callspec.params.get("store") == "postgres":
        _now(require_postgres())
    yield
    if SCHEMAS:
        used = sorted(SCHEMAS)
        SCHEMAS.clear()
        _now(drop_schemas(used))
