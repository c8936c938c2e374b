"""Workload 3: resume. A cold load of a long thread; startup recovery of many queued runs."""

from __future__ import annotations

import json
import statistics
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import aiosqlite

from runtime import Checkpoint, Run, Runtime, RuntimeConfig, SQLiteStore, ToolRegistry
from runtime.stores.sqlite import Synchronous

from .thread import remove_db
from .workload import LookupModel, expect_completed, lookup, message_entries, user_text

__all__ = ["ResumeResult", "run_resume"]

THREAD = "bench:long"
LOADS = 5


@dataclass
class ResumeResult:
    entries: int
    load_ms: float
    """Median of ``LOADS`` cold loads, each through a freshly opened store."""
    load_first_ms: float
    floor_load_ms: float
    """The same rows with one SELECT and ``json.loads`` per row (median)."""
    runs: int
    recover_s: float
    """``Runtime.start()`` until it returns: every queued run driven to its end."""


async def build_thread(store: SQLiteStore, thread_id: str, entries: int) -> None:
    """A thread of ``entries`` entries shaped like workload 1's, written in big batches."""
    await store.create_run(Run(id=uuid.uuid4().hex, thread_id=thread_id, text="setup"))
    position, i = 0, 0
    while position < entries:
        batch = [e for k in range(i, i + 100) for e in message_entries(f"run{k:029d}", k)]
        batch = batch[:entries - position]
        await store.commit(Checkpoint(thread_id=thread_id, position=position, entries=batch))
        position += len(batch)
        i += 100


async def _cold_load(path: Path, synchronous: Synchronous) -> float:
    async with SQLiteStore(path, synchronous=synchronous) as store:
        start = time.perf_counter()
        await store.load_entries(THREAD)
        return (time.perf_counter() - start) * 1000


async def _floor_load(path: Path) -> float:
    async with aiosqlite.connect(path) as db:
        start = time.perf_counter()
        rows = await db.execute_fetchall(
            "SELECT data FROM entries WHERE thread_id = ? ORDER BY seq", (THREAD,))
        [json.loads(row[0]) for row in rows]
        return (time.perf_counter() - start) * 1000


async def _recover(path: Path, runs: int, synchronous: Synchronous) -> float:
    async with SQLiteStore(path, synchronous=synchronous) as store:
        queued = [await store.create_run(Run(id=uuid.uuid4().hex, thread_id=f"bench:r{i}",
                                             text=user_text(i)))
                  for i in range(runs)]
    async with SQLiteStore(path, synchronous=synchronous) as store:
        rt = Runtime(store, LookupModel(), ToolRegistry([lookup]), settings=RuntimeConfig())
        start = time.perf_counter()
        await rt.start()
        elapsed = time.perf_counter() - start
        await rt.close()
        for run in queued:
            expect_completed(await store.get_run(run.id))
    return elapsed


async def run_resume(
    workdir: Path, entries: int, runs: int, synchronous: Synchronous
) -> ResumeResult:
    """Workload 3 with a thread of ``entries`` entries and ``runs`` runs to recover."""
    long_path, recover_path = workdir / "resume-load.db", workdir / "resume-recover.db"
    remove_db(long_path)
    remove_db(recover_path)
    async with SQLiteStore(long_path, synchronous=synchronous) as store:
        await build_thread(store, THREAD, entries)
    loads = [await _cold_load(long_path, synchronous) for _ in range(LOADS)]
    floor = [await _floor_load(long_path) for _ in range(LOADS)]
    return ResumeResult(
        entries=entries, load_ms=statistics.median(loads), load_first_ms=loads[0],
        floor_load_ms=statistics.median(floor), runs=runs,
        recover_s=await _recover(recover_path, runs, synchronous))
