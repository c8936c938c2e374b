"""Workload 4: many threads at once, with a model that takes its time.

Each thread is a user who sends a message, waits for the reply, sends the next.
The ideal is every thread in parallel, paying only the model's latency: two
calls per message, so ``messages x 2 x latency`` per thread.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from runtime import Runtime
from runtime.stores.sqlite import Synchronous

from .thread import remove_db
from .workload import bench_runtime, expect_completed, user_text

__all__ = ["ConcurrencyResult", "run_concurrency"]


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
