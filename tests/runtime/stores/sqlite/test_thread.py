"""A SQLite connection on a thread of its own (runtime/stores/sqlite/thread.py): calls run
there in order, SQLite's errors come back as store errors naming the file, a cancelled
call holds nobody up, and close waits for the calls handed in."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path

import pytest

from runtime.errors import StoreError
from runtime.stores.sqlite.thread import SQLiteThread


async def test_a_call_runs_on_the_connection_thread_and_errors_name_the_path(
    tmp_path: Path,
) -> None:
    conn = await SQLiteThread.open(tmp_path / "t.db", name="test-sqlite")
    try:
        name = await conn.call(lambda db: threading.current_thread().name)
        assert name == "test-sqlite"
        assert await conn.call(lambda db, x, y: db.execute("SELECT ? + ?", (x, y)).fetchone(),
                               2, 3) == (5,)
        with pytest.raises(StoreError, match="no such table") as raised:
            await conn.call(lambda db: db.execute("SELECT * FROM nowhere"))
        assert str(tmp_path / "t.db") in str(raised.value)
        assert isinstance(raised.value.__cause__, sqlite3.OperationalError)
        with pytest.raises(ValueError):  # anything else comes back as it is
            await conn.call(lambda db: int("x"))
    finally:
        await conn.close()
    with pytest.raises(StoreError, match="closed"):
        await conn.call(lambda db: None)


async def test_calls_run_in_order_and_close_waits_for_them(tmp_path: Path) -> None:
    conn = await SQLiteThread.open(tmp_path / "t.db")
    seen: list[int] = []
    calls = [asyncio.ensure_future(conn.call(lambda db, i: seen.append(i), i))
             for i in range(50)]
    await asyncio.sleep(0)  # all made
    await conn.close()
    assert seen == list(range(50))
    await asyncio.gather(*calls)


async def test_a_cancelled_call_still_lets_the_others_through(tmp_path: Path) -> None:
    conn = await SQLiteThread.open(tmp_path / "t.db")
    try:
        gate = threading.Event()
        held = asyncio.ensure_future(conn.call(lambda db: gate.wait(10)))
        await asyncio.sleep(0)
        held.cancel()
        gate.set()
        assert await conn.call(lambda db: 1) == 1
        assert held.cancelled()
    finally:
        await conn.close()
