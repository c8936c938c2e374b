"""Workload 3: resume. A message to a long thread through a freshly opened store (the model
holding a context window, so only the thread's tail is read); a cold load of the whole
thread (what paging through its history reads); startup recovery of many queued runs."""

from __future__ import annotations

import json
import statistics
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import aiosqlite

from runtime import Checkpoint, Run, RunState, Runtime, RuntimeConfig, SQLiteStore, ToolRegistry
from runtime.stores.sqlite import Synchronous

from .thread import remove_db
from .workload import (
    ClockedModel,
    LookupModel,
    expect_completed,
    lookup,
    message_entries,
    user_text,
)

__all__ = ["ResumeResult", "run_resume"]

THREAD = "bench:long"
LOADS = 5
WINDOW = 8_000
"""Tokens the model holds in the resume-with-a-window case: a few dozen messages."""


@dataclass
class ResumeResult:
    entries: int
    load_ms: float
    """Median of ``LOADS`` cold loads, each through a freshly opened store."""
    load_first_ms: float
    """The first of them, the first load in this process."""
    floor_load_ms: float
    """The same rows with one SELECT and ``json.loads`` per row (median)."""
    warm_load_ms: float
    """Loading it again through the same store (what each later message pays)."""
    resume_ms: float
    """A message to the long thread through a freshly opened store and runtime, the model
    holding ``WINDOW`` tokens: from its being accepted (durably queued) to the model's first
    request (median): loading what the run needs and building the request."""
    resume_send_ms: float
    """The same from submitting it (with the accepting commit and its fsync)."""
    resume_entries: int
    """How many entries that request held."""
    runs: int
    recover_s: float
    """``Runtime.start()`` until it returns: every queued run driven to its end."""
    recover_thread_s: float
    """The same with ``concurrency = "thread"``."""
    recover_cpu_s: float
    """The same as ``recover_s`` with ``synchronous = "off"``: what is not waiting for disks."""


async def build_thread(store: SQLiteStore, thread_id: str, entries: int) -> None:
    """A thread of ``entries`` entries shaped like workload 1's, written in big batches."""
    await store.create_run(Run(id=uuid.uuid4().hex, thread_id=thread_id, text="setup",
                               state=RunState.COMPLETED, reason="answered"))
    position, i = 0, 0
    while position < entries:
        batch = [e for k in range(i, i + 100) for e in message_entries(f"run{k:029d}", k)]
        batch = batch[:entries - position]
        await store.commit(Checkpoint(thread_id=thread_id, position=position, entries=batch))
        position += len(batch)
        i += 100


async def _load(path: Path, synchronous: Synchronous) -> tuple[float, float]:
    """A cold load through a freshly opened store, then a warm one through the same."""
    async with SQLiteStore(path, synchronous=synchronous) as store:
        times = []
        for _ in range(2):
            start = time.perf_counter()
            await store.load_entries(THREAD)
            times.append((time.perf_counter() - start) * 1000)
        return times[0], times[1]


async def _resume(path: Path, synchronous: Synchronous, i: int) -> tuple[float, float, int]:
    """A message to the long thread, everything cold: ms from submitting it to the model's
    first request, and from its being accepted (durably queued) to that request."""
    async with SQLiteStore(path, synchronous=synchronous) as store:
        model = ClockedModel(WINDOW)
        async with Runtime(store, model, ToolRegistry([lookup])) as rt:
            start = time.perf_counter()
            run = await rt.submit(THREAD, user_text(i))
            accepted = time.perf_counter()
            expect_completed(await rt.wait(run.id))
    assert model.first is not None
    return ((model.first[0] - start) * 1000, (model.first[0] - accepted) * 1000,
            model.first[1])


async def _floor_load(path: Path) -> float:
    async with aiosqlite.connect(path) as db:
        start = time.perf_counter()
        rows = await db.execute_fetchall(
            "SELECT data FROM entries WHERE thread_id = ? ORDER BY seq", (THREAD,))
        [json.loads(row[0]) for row in rows]
        return (time.perf_counter() - start) * 1000


async def _recover(
    path: Path, runs: int, synchronous: Synchronous, concurrency: Literal["global", "thread"]
) -> float:
    remove_db(path)
    async with SQLiteStore(path, synchronous=synchronous) as store:
        queued = [await store.create_run(Run(id=uuid.uuid4().hex, thread_id=f"bench:r{i}",
                                             text=user_text(i)))
                  for i in range(runs)]
    async with SQLiteStore(path, synchronous=synchronous) as store:
        rt = Runtime(store, LookupModel(), ToolRegistry([lookup]),
                     settings=RuntimeConfig(concurrency=concurrency))
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
    async with SQLiteStore(long_path, synchronous=synchronous) as store:
        await build_thread(store, THREAD, entries)
    loads, floor, resumes = [], [], []
    for i in range(LOADS):  # interleaved, so a busy moment hits both alike
        loads.append(await _load(long_path, synchronous))
        floor.append(await _floor_load(long_path))
        resumes.append(await _resume(long_path, synchronous, i))
    return ResumeResult(
        resume_ms=statistics.median(ms for _, ms, _ in resumes),
        resume_send_ms=statistics.median(ms for ms, _, _ in resumes),
        resume_entries=resumes[0][2],
        entries=entries, load_ms=statistics.median(cold for cold, _ in loads),
        load_first_ms=loads[0][0], floor_load_ms=statistics.median(floor),
        warm_load_ms=statistics.median(warm for _, warm in loads), runs=runs,
        recover_s=await _recover(recover_path, runs, synchronous, "global"),
        recover_thread_s=await _recover(recover_path, runs, synchronous, "thread"),
        recover_cpu_s=await _recover(recover_path, runs, "off", "global"))
