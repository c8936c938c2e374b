"""A person's stop written before it is acknowledged (runtime/engine/stops.py), over a real
SQLite store: once per request, read back by whoever takes the run up."""

from __future__ import annotations

from pathlib import Path

from runtime import SQLiteStore
from runtime.engine.stops import clear_stop, record_stop, stop_requested


async def test_a_stop_is_read_back_with_who_asked(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "maiden.db") as store:
        assert await stop_requested(store, "r1") is None
        assert await record_stop(store, "r1", by="ann", key="req-1", at=1.0) is True
        assert await stop_requested(store, "r1") == "ann"
        assert await stop_requested(store, "r2") is None  # a stop is of one run


async def test_a_retried_request_finds_its_stop_written(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "maiden.db") as store:
        assert await record_stop(store, "r1", by="ann", key="req-1", at=1.0) is True
        assert await record_stop(store, "r1", by="ann", key="req-1", at=2.0) is False
        assert await stop_requested(store, "r1") == "ann"


async def test_an_unnamed_stop_is_a_stop(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "maiden.db") as store:
        assert await record_stop(store, "r1", by="", key="req-1", at=1.0) is True
        assert await stop_requested(store, "r1") == ""


async def test_a_stop_outlives_the_process_that_wrote_it(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "maiden.db") as store:
        await record_stop(store, "r1", by="bob", key="req-1", at=1.0)
    async with SQLiteStore(tmp_path / "maiden.db") as reopened:
        assert await stop_requested(reopened, "r1") == "bob"


async def test_a_cleared_stop_is_gone_and_clearing_none_is_nothing(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "maiden.db") as store:
        await clear_stop(store, "r1")
        await record_stop(store, "r1", by="ann", key="req-1", at=1.0)
        await clear_stop(store, "r1")
        assert await stop_requested(store, "r1") is None
        assert await record_stop(store, "r1", by="ann", key="req-1", at=2.0) is False
