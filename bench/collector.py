"""Workload 14: the cycle collector's tuning (``bot.app.settle_heap``) against Python's
defaults, on workload 4's many threads at once.

``maiden run`` (and this bench, for every other workload) freezes what start-up made and
collects the youngest objects every ``YOUNG_OBJECTS`` made instead of 700. Here the same
users (``users`` threads at once, each waiting for its reply before the next, a model that
answers at once, ``concurrency = "thread"``) run under each, interleaved round by round
(each round's order the other way round), a fresh store each: messages/s, and the
collector's pauses (``gc.callbacks``: how many, their total and the longest), which every
ack and reply in flight waits for.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from bot.app import settle_heap
from runtime import SQLiteStore
from runtime.stores.sqlite import Synchronous

from .concurrency import users_at_once
from .table import Row
from .thread import median_range, remove_db
from .workload import workload_runtime

__all__ = ["CollectorResult", "collector_rows", "run_collector"]

Way = Literal["python", "maiden"]
PYTHON_THRESHOLDS = (700, 10, 10)
"""CPython's defaults (``gc.get_threshold()`` in a fresh interpreter)."""


@dataclass
class Pauses:
    count: int = 0
    total_s: float = 0.0
    longest_s: float = 0.0


@dataclass
class CollectorResult:
    users: int
    messages: int
    """Per thread."""
    rates: dict[Way, list[float]] = field(default_factory=lambda: {"python": [], "maiden": []})
    pauses: dict[Way, Pauses] = field(default_factory=lambda: {"python": Pauses(),
                                                               "maiden": Pauses()})


@contextmanager
def _timed(pauses: Pauses) -> Iterator[None]:
    began: list[float] = []

    def seen(phase: str, _info: dict[str, Any]) -> None:
        if phase == "start":
            began.append(time.perf_counter())
        elif began:
            took = time.perf_counter() - began.pop()
            pauses.count += 1
            pauses.total_s += took
            pauses.longest_s = max(pauses.longest_s, took)

    gc.callbacks.append(seen)
    try:
        yield
    finally:
        gc.callbacks.remove(seen)


def _use(way: Way) -> None:
    if way == "python":
        gc.unfreeze()
        gc.set_threshold(*PYTHON_THRESHOLDS)
    else:
        settle_heap()


async def run_collector(workdir: Path, *, users: int, messages: int,
                        synchronous: Synchronous, rounds: int) -> CollectorResult:
    result = CollectorResult(users, messages)
    try:
        for r in range(rounds):
            for way in ("python", "maiden") if r % 2 == 0 else ("maiden", "python"):
                _use(way)
                path = workdir / f"collector-{way}.db"
                remove_db(path)
                async with SQLiteStore(path, synchronous=synchronous) as store, \
                        workload_runtime(store, concurrency="thread") as rt:
                    with _timed(result.pauses[way]):
                        elapsed = await users_at_once(rt, "bench:gc", users, messages)
                result.rates[way].append(users * messages / elapsed)
    finally:
        settle_heap()  # as the other workloads had it
    return result


def collector_rows(r: CollectorResult) -> list[Row]:
    name = f"14 collector, {r.users} threads at once x {r.messages} msgs"
    python, maiden = (median_range(r.rates[w])[0] for w in ("python", "maiden"))
    ratios = [m / p for m, p in zip(r.rates["maiden"], r.rates["python"], strict=True)]
    ratio, low, high = median_range(ratios)
    rows = [Row(name, f"messages/s, maiden's tuning (baseline: Python's defaults; median of "
                f"{len(ratios)}, {low:.2f}-{high:.2f}x)", f"{maiden:.1f}", f"{python:.1f}",
                f"{ratio:.2f}x")]
    labels: tuple[tuple[Way, str], ...] = (("maiden", "maiden's tuning"),
                                           ("python", "Python's defaults"))
    for way, label in labels:
        p = r.pauses[way]
        rows.append(Row(name, f"  collections, {label}: count, ms in all, longest ms",
                        f"{p.count} / {p.total_s * 1000:.0f} / {p.longest_s * 1000:.1f}"))
    return rows
