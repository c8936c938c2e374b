"""Workload 5: peak RSS, each case in a fresh subprocess so no case inherits another's heap.

    python -m bench.memory CASE --dir DIR --n N --synchronous S     (prints one JSON line)

Cases: ``empty`` (start a runtime, one message: the fixed cost), ``thread`` (workload 1,
maiden only, N messages), ``idle`` (a store holding N idle threads, prepared by the
parent: start, list the threads, one message to a new thread and one to an old one),
``long`` (a thread of N entries, prepared by the parent; the model holds a context window;
``LONG_MESSAGES`` messages to it: run for two sizes of N, the peaks should be the same).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, cast

from runtime import Checkpoint, Run, RunState, SQLiteStore
from runtime.stores.sqlite import Synchronous

from .thread import remove_db
from .workload import ANSWER, bench_runtime, expect_completed, message_entries, user_text

__all__ = ["LONG_MESSAGES", "MemoryResult", "measure", "prepare_idle", "prepare_long"]

Case = Literal["empty", "thread", "idle", "long"]
LONG_MESSAGES = 100
LONG_WINDOW = 8_000


@dataclass
class MemoryResult:
    case: Case
    n: int
    peak_mb: float
    """Peak RSS at the end of the case."""
    start_mb: float
    """Peak RSS once everything is imported, before the case runs."""


def measure(case: Case, n: int, workdir: Path, synchronous: Synchronous) -> MemoryResult:
    """Run one case in a subprocess and read its report."""
    command = [sys.executable, "-m", "bench.memory", case, "--n", str(n),
               "--dir", str(workdir), "--synchronous", synchronous]
    done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(f"memory case {case} failed:\n{done.stderr}")
    report = json.loads(done.stdout.strip().splitlines()[-1])
    return MemoryResult(case=case, n=n, peak_mb=report["peak_mb"], start_mb=report["start_mb"])


async def prepare_idle(path: Path, threads: int) -> None:
    """A store holding ``threads`` threads, each with one answered message (4 entries)."""
    remove_db(path)
    async with SQLiteStore(path, synchronous="off") as store:  # setup: durability moot
        for i in range(threads):
            run = Run(id=uuid.uuid4().hex, thread_id=f"bench:idle{i}", text=user_text(i),
                      state=RunState.COMPLETED, reason="answered", reply=ANSWER, turns=2,
                      tool_calls=1)
            await store.create_run(run)
            await store.commit(Checkpoint(thread_id=run.thread_id, position=0,
                                          entries=message_entries(run.id, i)))


def _peak_mb() -> float:
    """This process's peak RSS.

    On Linux ``ru_maxrss`` survives ``exec``: a child reports its parent's peak if that
    was higher (the bench's own, after workload 1), so the kernel's per-process
    ``VmHWM`` is read instead where there is one.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def long_path(workdir: Path, entries: int) -> Path:
    return workdir / f"memory-long-{entries}.db"


async def prepare_long(workdir: Path, entries: int) -> None:
    """A store holding one thread of ``entries`` entries (workload 1's shape)."""
    from .resume import build_thread

    remove_db(long_path(workdir, entries))
    async with SQLiteStore(long_path(workdir, entries), synchronous="off") as store:
        await build_thread(store, "bench:long", entries)


async def _case(case: Case, n: int, workdir: Path, synchronous: Synchronous) -> None:
    path = workdir / ("memory-idle.db" if case == "idle" else f"memory-{case}.db")
    if case == "long":
        path = long_path(workdir, n)
    elif case != "idle":
        remove_db(path)
    window = LONG_WINDOW if case == "long" else None
    async with bench_runtime(path, synchronous=synchronous, context_window=window) as rt:
        if case == "long":
            for i in range(LONG_MESSAGES):
                expect_completed(await rt.send("bench:long", user_text(i)))
        elif case == "thread":
            for i in range(n):
                expect_completed(await rt.send("bench:memory", user_text(i)))
        else:
            if case == "idle":
                await rt.records.threads()
                expect_completed(await rt.send("bench:idle0", user_text(1)))
            expect_completed(await rt.send("bench:new", user_text(0)))


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.memory")
    parser.add_argument("case", choices=["empty", "thread", "idle", "long"])
    parser.add_argument("--n", type=int, default=0)
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument("--synchronous", default="full")
    args = parser.parse_args()
    start = _peak_mb()
    asyncio.run(_case(cast(Case, args.case), args.n, args.dir,
                      cast(Synchronous, args.synchronous)))
    print(json.dumps({"peak_mb": round(_peak_mb(), 1), "start_mb": round(start, 1)}))


if __name__ == "__main__":
    main()
