"""Workload 4: many threads at once, with a model that takes its time.

Each thread is a user who sends a message, waits for the reply, sends the next.
The ideal is every thread in parallel, paying only the model's latency: two
calls per message, so ``messages x 2 x latency`` per thread.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from runtime import Runtime, SQLiteStore
from runtime.stores.sqlite import Synchronous, walsync
from runtime.stores.sqlite.commit import FlushWay

from .thread import median_range, remove_db
from .workload import bench_runtime, expect_completed, user_text, workload_runtime

__all__ = ["BURST_WAYS", "SLOW_DISK_S", "BurstResult", "ConcurrencyResult", "run_burst",
           "run_concurrency", "users_at_once"]

BURST_WAYS: tuple[FlushWay, ...] = ("auto", "apart", "loop", "writer")
"""Where durable writes wait for the disk, in "50 threads at once" (maiden's first)."""

SLOW_DISK_S = 0.002
"""A slower disk's flush, for "50 threads at once" on it: each flush of the log is made
this much longer (on the flushing thread: ``walsync._datasync`` wrapped; with
``flush="apart"``, where every flush is that one)."""


@dataclass
class ConcurrencyResult:
    mode: Literal["global", "thread"]
    threads: int
    messages: int
    """Per thread."""
    latency_s: float
    elapsed_s: float

    @property
    def per_second(self) -> float:
        return self.threads * self.messages / self.elapsed_s

    @property
    def ideal_s(self) -> float:
        return self.messages * 2 * self.latency_s

    @property
    def fraction(self) -> float:
        return self.ideal_s / self.elapsed_s


async def _user(rt: Runtime, thread_id: str, messages: int) -> None:
    for i in range(messages):
        expect_completed(await rt.send(thread_id, user_text(i)))


async def run_concurrency(
    workdir: Path,
    mode: Literal["global", "thread"],
    *,
    threads: int,
    messages: int,
    latency_s: float,
    synchronous: Synchronous,
) -> ConcurrencyResult:
    """Workload 4 in one concurrency mode, on a fresh database."""
    path = workdir / f"concurrency-{mode}.db"
    remove_db(path)
    async with bench_runtime(path, synchronous=synchronous, latency_s=latency_s,
                             concurrency=mode) as rt:
        start = time.perf_counter()
        await asyncio.gather(*(_user(rt, f"bench:c{t}", messages) for t in range(threads)))
        elapsed = time.perf_counter() - start
    return ConcurrencyResult(mode=mode, threads=threads, messages=messages,
                             latency_s=latency_s, elapsed_s=elapsed)


@dataclass
class BurstResult:
    """50 threads at once against one, both with a zero-latency model in thread mode."""

    threads: int
    messages: int
    """Per thread."""
    one_per_second: float
    many_per_second: float
    messages_per_flush: float
    """Messages committed per disk flush while the threads ran: what group commit shares."""
    flush: FlushWay = "auto"
    """Where durable writes waited for the disk (``SQLiteStore(flush=...)``)."""
    slow_disk_s: float = 0.0
    """What each flush of the log was made longer by (a slower disk), if anything."""
    ratios: list[float] = field(default_factory=list)
    """Many against one, per round."""


async def run_burst(workdir: Path, *, threads: int, messages: int,
                    synchronous: Synchronous, flush: FlushWay = "auto",
                    rounds: int = 1, slow_disk_s: float = 0.0) -> BurstResult:
    """Issue 31's "50 threads at once": messages/s of ``threads`` users at once, each
    waiting for its reply before the next, against one user alone (a fresh store each),
    in ``rounds`` interleaved rounds (each round's order the other way round). With
    ``slow_disk_s`` (``flush="apart"`` only: every flush is then the log's own, which can
    be made slower; SQLite's cannot), each flush takes that much longer: a slower disk
    than this machine's."""
    if slow_disk_s and flush != "apart":
        raise ValueError("a slower disk is simulated for the log's own flushes only "
                         "(flush=\"apart\")")
    with _slower_disk(slow_disk_s):
        return await _bursts(workdir, threads, messages, synchronous, flush, rounds,
                             slow_disk_s)


@contextmanager
def _slower_disk(extra_s: float) -> Iterator[None]:
    if not extra_s:
        yield
        return
    real = walsync._datasync

    def slower(fd: int) -> None:
        real(fd)
        time.sleep(extra_s)

    walsync._datasync = slower
    try:
        yield
    finally:
        walsync._datasync = real


async def _bursts(workdir: Path, threads: int, messages: int, synchronous: Synchronous,
                  flush: FlushWay, rounds: int, slow_disk_s: float) -> BurstResult:
    rates: dict[int, list[float]] = {1: [], threads: []}
    flushes = 0
    for r in range(rounds):
        for count in (1, threads) if r % 2 == 0 else (threads, 1):
            rate, synced = await _burst(workdir, count, messages, synchronous, flush)
            rates[count].append(rate)
            if count == threads:
                flushes = synced
    ratios = [many / one for many, one in zip(rates[threads], rates[1], strict=True)]
    return BurstResult(threads=threads, messages=messages,
                       one_per_second=median_range(rates[1])[0],
                       many_per_second=median_range(rates[threads])[0],
                       messages_per_flush=threads * messages / max(flushes, 1),
                       flush=flush, slow_disk_s=slow_disk_s, ratios=ratios)


async def _burst(workdir: Path, count: int, messages: int, synchronous: Synchronous,
                 flush: FlushWay) -> tuple[float, int]:
    """Messages/s of ``count`` users at once, and the disk flushes they took."""
    path = workdir / f"burst-{count}.db"
    remove_db(path)
    async with SQLiteStore(path, synchronous=synchronous, flush=flush) as store, \
            workload_runtime(store, concurrency="thread") as rt:
        before = store.write_counts()
        rate = count * messages / await users_at_once(rt, "bench:b", count, messages)
        return rate, store.write_counts().synced - before.synced


async def users_at_once(rt: Runtime, prefix: str, count: int, messages: int) -> float:
    """``count`` users at once, each sending ``messages`` and waiting for each reply; the
    seconds they took (after a collection: the rounds before, closed runtimes being cycles,
    are not this round's work)."""
    gc.collect()
    start = time.perf_counter()
    await asyncio.gather(*(_user(rt, f"{prefix}{t}", messages) for t in range(count)))
    return time.perf_counter() - start
