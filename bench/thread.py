"""Workloads 1 and 2: one long thread through maiden, and the bare-SQLite floor beside it.

The two run interleaved message by message (alternating which goes first), so
a neighbour's load on a shared machine hits both sides of every ratio alike.
"""

from __future__ import annotations

import gc
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import aiosqlite

from runtime import NO_TRACING, Runtime, SQLiteStore, Tracing
from runtime.stores.sqlite import Synchronous
from runtime.stores.sqlite.commit import FlushWay, WriteCounts

from .workload import expect_completed, floor_rows, user_text, workload_runtime

__all__ = ["BLOCKS", "FLUSH_WAYS", "Floor", "ThreadResult", "db_size", "median_range", "remove_db",
           "run_flush_ways", "run_rounds", "run_thread", "run_traced"]

BLOCKS = 6
THREAD = "bench:standard"


@dataclass
class ThreadResult:
    n: int
    maiden_ms: list[float] = field(default_factory=list)
    """Mean ms per user message, per block of n/6 messages."""
    floor_ms: list[float] = field(default_factory=list)
    maiden_total_s: float = 0.0
    floor_total_s: float = 0.0
    maiden_db: int = 0
    floor_db: int = 0
    maiden_load_ms: float = 0.0
    """A cold load of the whole thread (a freshly opened store) at the end."""
    floor_load_ms: float = 0.0
    transactions: float = 0.0
    """Per message, from the store's own count: transactions committed..."""
    synced: float = 0.0
    """...of them with a disk flush..."""
    switches: float = 0.0
    """...and ``PRAGMA synchronous`` changes."""
    floor_transactions: float = 2.0
    """The floor commits twice a message, each with a flush."""
    counts: WriteCounts = field(default_factory=WriteCounts)
    """The store's counts over the messages after the first (whose thread lease is new)."""
    collections: list[float] = field(default_factory=list)
    """How long each collection of garbage took, in seconds, over the messages (maiden's
    and the floor's): a pause of the loop wherever it is set off, a commit's Python
    among them."""

    @property
    def ratio(self) -> float:
        """maiden's ms per message over the floor's."""
        return self.maiden_total_s / self.floor_total_s


class Floor:
    """What SQLite itself costs: the same entries as JSON rows, two commits per message."""

    def __init__(self, path: Path, synchronous: Synchronous) -> None:
        self.path = path
        self.synchronous = synchronous
        self.seq = 0
        self._db: aiosqlite.Connection | None = None

    async def __aenter__(self) -> Floor:
        db = await aiosqlite.connect(self.path)
        await db.execute("PRAGMA journal_mode=WAL")
        await db.execute(f"PRAGMA synchronous={self.synchronous.upper()}")
        await db.execute(
            "CREATE TABLE IF NOT EXISTS entries (thread_id TEXT NOT NULL, seq INTEGER NOT NULL, "
            "data TEXT NOT NULL, PRIMARY KEY (thread_id, seq)) WITHOUT ROWID")
        await db.commit()
        self._db = db
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._db is not None:
            await self._db.close()

    async def message(self, i: int) -> None:
        """Append one message's entries: user + tool call + result, then the answer."""
        assert self._db is not None
        rows = [(THREAD, self.seq + k, json.dumps(row))
                for k, row in enumerate(floor_rows(f"run{i:029d}", i))]
        self.seq += len(rows)
        await self._db.executemany("INSERT INTO entries VALUES (?, ?, ?)", rows[:3])
        await self._db.commit()
        await self._db.execute("INSERT INTO entries VALUES (?, ?, ?)", rows[3])
        await self._db.commit()

    async def load(self) -> list[object]:
        """The floor's cold load: a new connection, one SELECT, json.loads per row."""
        async with aiosqlite.connect(self.path) as db:
            rows = await db.execute_fetchall(
                "SELECT data FROM entries WHERE thread_id = ? ORDER BY seq", (THREAD,))
            return [json.loads(row[0]) for row in rows]


def db_size(path: Path) -> int:
    """Bytes on disk: the database and any WAL/shared-memory file left beside it."""
    return sum(p.stat().st_size for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm"))
               if p.exists())


def remove_db(path: Path) -> None:
    """Start from nothing: a leftover database would make a different workload."""
    for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        p.unlink(missing_ok=True)


@contextmanager
def _timed_collections(into: list[float]) -> Iterator[None]:
    """Each collection of garbage made meanwhile, timed, appended to ``into``."""
    began = 0.0

    def timed(phase: str, info: dict[str, int]) -> None:
        nonlocal began
        if phase == "start":
            began = time.perf_counter()
        else:
            into.append(time.perf_counter() - began)

    gc.callbacks.append(timed)
    try:
        yield
    finally:
        gc.callbacks.remove(timed)


async def _maiden_message(rt: Runtime, i: int) -> float:
    start = time.perf_counter()
    expect_completed(await rt.send(THREAD, user_text(i)))
    await rt.idle()  # the worker's last reads belong to this message, not to the floor's
    return time.perf_counter() - start


async def _floor_message(floor: Floor, i: int) -> float:
    start = time.perf_counter()
    await floor.message(i)
    return time.perf_counter() - start


async def run_thread(workdir: Path, n: int, synchronous: Synchronous, *,
                     flush: FlushWay = "auto",
                     tracing: Tracing = NO_TRACING) -> ThreadResult:
    """Workloads 1 and 2 at ``n`` messages, in fresh databases under ``workdir``."""
    maiden_path, floor_path = workdir / f"maiden-{n}.db", workdir / f"floor-{n}.db"
    remove_db(maiden_path)
    remove_db(floor_path)
    result = ThreadResult(n=n)
    bounds = [round(b * n / BLOCKS) for b in range(BLOCKS + 1)]
    async with SQLiteStore(maiden_path, synchronous=synchronous, flush=flush) as store, \
            workload_runtime(store, tracing=tracing) as rt, \
            Floor(floor_path, synchronous) as floor:
        before = store.write_counts()
        gc.collect()  # the rounds before (closed runtimes are cycles): not this round's work
        with _timed_collections(result.collections):
            for b in range(BLOCKS):
                block = range(bounds[b], bounds[b + 1])
                m = f = 0.0
                for i in block:  # message by message, alternating who goes first
                    if i % 2:
                        f += await _floor_message(floor, i)
                        m += await _maiden_message(rt, i)
                    else:
                        m += await _maiden_message(rt, i)
                        f += await _floor_message(floor, i)
                    if i == 0:
                        before = store.write_counts()
                result.maiden_ms.append(m * 1000 / max(1, len(block)))
                result.floor_ms.append(f * 1000 / max(1, len(block)))
                result.maiden_total_s += m
                result.floor_total_s += f
        after = store.write_counts()
        result.counts = after.since(before)
        warm = max(1, n - 1)
        result.transactions = result.counts.transactions / warm
        result.synced = result.counts.synced / warm
        result.switches = result.counts.switches / warm
    result.maiden_db, result.floor_db = db_size(maiden_path), db_size(floor_path)

    async with SQLiteStore(maiden_path, synchronous=synchronous) as store:
        start = time.perf_counter()
        entries = await store.load_entries(THREAD)
        result.maiden_load_ms = (time.perf_counter() - start) * 1000
    start = time.perf_counter()
    rows = await floor.load()
    result.floor_load_ms = (time.perf_counter() - start) * 1000
    if len(entries) != 4 * n or len(rows) != 4 * n:
        raise RuntimeError(f"expected {4 * n} entries, maiden has {len(entries)}, "
                           f"the floor {len(rows)}")
    return result


async def run_rounds(workdir: Path, n: int, synchronous: Synchronous, rounds: int
                     ) -> list[ThreadResult]:
    """``run_thread`` ``rounds`` times (each round interleaves maiden and the floor)."""
    return [await run_thread(workdir, n, synchronous) for _ in range(rounds)]


FLUSH_WAYS: tuple[FlushWay, ...] = ("auto", "apart", "loop", "writer")
"""Where durable writes wait for the disk (``SQLiteStore(flush=...)``): the log flushed on
the event loop's thread when it has nothing else ready and the disk is quick, else on a
thread of its own (maiden's); always on that thread; the commit's flush on the event loop's
thread; or the whole write on the writer's thread."""


async def run_flush_ways(workdir: Path, n: int, synchronous: Synchronous, rounds: int
                         ) -> dict[FlushWay, list[ThreadResult]]:
    """The thread each way, interleaved (auto, apart, loop, writer, auto, ...)."""
    results: dict[FlushWay, list[ThreadResult]] = {way: [] for way in FLUSH_WAYS}
    for _ in range(rounds):
        for way in FLUSH_WAYS:
            results[way].append(await run_thread(workdir, n, synchronous, flush=way))
    return results


def median_range(values: list[float]) -> tuple[float, float, float]:
    """(median, lowest, highest)."""
    ordered = sorted(values)
    middle = len(ordered) // 2
    median = ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2
    return median, ordered[0], ordered[-1]


async def run_traced(workdir: Path, n: int, synchronous: Synchronous, rounds: int
                     ) -> dict[str, list[ThreadResult]]:
    """The thread untraced and traced (``[otel]``'s spans, batched to an exporter that drops
    them: what making them costs), interleaved."""
    results: dict[str, list[ThreadResult]] = {"off": [], "on": []}
    for _ in range(rounds):
        results["off"].append(await run_thread(workdir, n, synchronous))
        tracing = _dropping_tracing()
        try:
            results["on"].append(await run_thread(workdir, n, synchronous, tracing=tracing))
        finally:
            tracing.close()
    return results


def _dropping_tracing() -> Tracing:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        SpanExporter,
        SpanExportResult,
    )

    from runtime import OtelTracing

    class Dropped(SpanExporter):
        def export(self, spans: object) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Dropped()))
    return OtelTracing(provider)
