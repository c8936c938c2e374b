"""Workloads 1 and 2: one long thread through maiden, and the bare-SQLite floors beside it.

They run interleaved message by message (each going first in turn), so a neighbour's load
on a shared machine hits every side of every ratio alike.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator
from contextlib import AsyncExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from runtime import Runtime, SQLiteStore, Tracing
from runtime.engine.tracing import NO_TRACING
from runtime.stores.sqlite import Synchronous
from runtime.stores.sqlite.commit import FlushWay, WriteCounts

from .floor import THREAD, AioFloor, Floor
from .workload import expect_completed, user_text, workload_runtime

__all__ = ["BLOCKS", "FLUSH_WAYS", "THREAD", "ThreadResult", "db_size", "median_range",
           "remove_db", "run_flush_ways", "run_rounds", "run_thread", "run_traced"]

BLOCKS = 6


@dataclass
class ThreadResult:
    n: int
    maiden_ms: list[float] = field(default_factory=list)
    """Mean ms per user message, per block of n/6 messages."""
    floor_ms: list[float] = field(default_factory=list)
    """The same for the rule's floor (``Floor``)."""
    maiden_total_s: float = 0.0
    floor_total_s: float = 0.0
    aio_total_s: float = 0.0
    """The earlier floor's (``AioFloor``), when it ran (0 when not)."""
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
    floor_transactions: float = 0.0
    """The floor's commits per message, as it counted them as it made them..."""
    floor_synced: float = 0.0
    """...and its flushes of the log."""
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

    @property
    def aio_ratio(self) -> float:
        """maiden's ms per message over the earlier (aiosqlite) floor's."""
        return self.maiden_total_s / self.aio_total_s if self.aio_total_s else 0.0


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


def _floor_message(floor: Floor, i: int) -> float:
    start = time.perf_counter()
    floor.message(i)  # on this thread: the event loop waits, as a plain sqlite3 client would
    return time.perf_counter() - start


async def _aio_message(floor: AioFloor, i: int) -> float:
    start = time.perf_counter()
    await floor.message(i)
    return time.perf_counter() - start


async def run_thread(workdir: Path, n: int, synchronous: Synchronous, *,
                     flush: FlushWay = "auto", tracing: Tracing = NO_TRACING,
                     earlier_floor: bool = False) -> ThreadResult:
    """Workloads 1 and 2 at ``n`` messages, in fresh databases under ``workdir``; with
    ``earlier_floor``, the aiosqlite floor too, interleaved."""
    maiden_path, floor_path = workdir / f"maiden-{n}.db", workdir / f"floor-{n}.db"
    aio_path = workdir / f"floor-aiosqlite-{n}.db"
    for path in (maiden_path, floor_path, aio_path):
        remove_db(path)
    result = ThreadResult(n=n)
    bounds = [round(b * n / BLOCKS) for b in range(BLOCKS + 1)]
    sides = 3 if earlier_floor else 2
    async with SQLiteStore(maiden_path, synchronous=synchronous, flush=flush) as store, \
            workload_runtime(store, tracing=tracing) as rt, AsyncExitStack() as stack:
        aio = await stack.enter_async_context(AioFloor(aio_path, synchronous)) \
            if earlier_floor else None
        with Floor(floor_path, synchronous) as floor:
            before, floor_before = store.write_counts(), (0, 0)
            gc.collect()  # the rounds before (closed runtimes are cycles): not this round's
            with _timed_collections(result.collections):
                for b in range(BLOCKS):
                    block = range(bounds[b], bounds[b + 1])
                    m = f = a = 0.0
                    for i in block:  # message by message, each side going first in turn
                        for side in ((i + k) % sides for k in range(sides)):
                            if side == 0:
                                m += await _maiden_message(rt, i)
                            elif side == 1:
                                f += _floor_message(floor, i)
                            elif aio is not None:
                                a += await _aio_message(aio, i)
                        if i == 0:
                            before = store.write_counts()
                            floor_before = (floor.transactions, floor.synced)
                    result.maiden_ms.append(m * 1000 / max(1, len(block)))
                    result.floor_ms.append(f * 1000 / max(1, len(block)))
                    result.maiden_total_s += m
                    result.floor_total_s += f
                    result.aio_total_s += a
            after = store.write_counts()
            warm = max(1, n - 1)
            result.floor_transactions = (floor.transactions - floor_before[0]) / warm
            result.floor_synced = (floor.synced - floor_before[1]) / warm
        result.counts = after.since(before)
        result.transactions = result.counts.transactions / warm
        result.synced = result.counts.synced / warm
        result.switches = result.counts.switches / warm
    result.maiden_db, result.floor_db = db_size(maiden_path), db_size(floor_path)

    async with SQLiteStore(maiden_path, synchronous=synchronous) as store:
        start = time.perf_counter()
        entries = await store.load_entries(THREAD)
        result.maiden_load_ms = (time.perf_counter() - start) * 1000
    start = time.perf_counter()
    rows = floor.load()
    result.floor_load_ms = (time.perf_counter() - start) * 1000
    if len(entries) != 4 * n or len(rows) != 4 * n:
        raise RuntimeError(f"expected {4 * n} entries, maiden has {len(entries)}, "
                           f"the floor {len(rows)}")
    return result


async def run_rounds(workdir: Path, n: int, synchronous: Synchronous, rounds: int, *,
                     earlier_floor: bool = False) -> list[ThreadResult]:
    """``run_thread`` ``rounds`` times (each round interleaves maiden and the floors)."""
    return [await run_thread(workdir, n, synchronous, earlier_floor=earlier_floor)
            for _ in range(rounds)]


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

    from runtime.engine.tracing import OtelTracing

    class Dropped(SpanExporter):
        def export(self, spans: object) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Dropped()))
    return OtelTracing(provider)
