"""The fsyncs a message as the kernel sees them: workload 1 and its floor under strace.

    python -m bench.syncs --n N --dir DIR --synchronous S   (what ``count_syncs`` traces)

The store counts its own disk flushes (``WriteCounts.synced``: commits made with
``synchronous`` FULL, flushes of the log made apart); this counts the system calls that
make them (``fsync``, ``fdatasync``, ``sync_file_range``, ``syncfs``, of any file, the
WAL checkpoints' among them), so that the two can be held side by side. The traced process
sends N messages through maiden, then N through the floor, untimed (strace makes each call
it stops at slower); an ``fsync`` of a file of its own (``mark-*``) marks where each side's
messages after the first begin and end. Without strace (or where it may not trace) the
row says so.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from runtime.stores.sqlite import Synchronous

from .floor import THREAD, Floor
from .thread import remove_db
from .workload import bench_runtime, expect_completed, user_text

__all__ = ["SIDES", "SyncCounts", "count_syncs"]

SIDES = ("maiden", "floor")
_CALLS = ("fsync", "fdatasync", "sync_file_range", "syncfs")
_CALL = re.compile(r"\b(?:" + "|".join(_CALLS) + r")\(\d+<([^>]*)>")
"""A sync's first line in ``strace -y`` (a call's ``resumed`` line does not repeat its
file)."""


@dataclass
class SyncCounts:
    messages: int
    """Messages per side counted (those after the first: its thread's lease is new)."""
    calls: dict[str, int] = field(default_factory=dict)
    """Sync system calls per side (``SIDES``)..."""
    database: dict[str, int] = field(default_factory=dict)
    """...of them of the database file itself (not its log): WAL checkpoints."""
    skipped: str = ""
    """Why nothing was counted, if it was not."""

    def per_message(self, side: str, of: dict[str, int] | None = None) -> float:
        return (self.calls if of is None else of).get(side, 0) / max(1, self.messages)


def count_syncs(workdir: Path, n: int, synchronous: Synchronous) -> SyncCounts:
    """Trace ``python -m bench.syncs`` and count each side's sync calls."""
    strace = shutil.which("strace")
    if strace is None:
        return SyncCounts(n - 1, skipped="strace is not installed")
    log = workdir / "syncs.strace"
    traced = [sys.executable, "-m", "bench.syncs", "--n", str(n), "--dir", str(workdir),
              "--synchronous", synchronous]
    done = None
    # --seccomp-bpf stops the process at the traced calls only; older kernels lack it.
    for quick in (["--seccomp-bpf"], []):
        done = subprocess.run([strace, "-f", "-qq", *quick, "-y", "-e",
                               f"trace={','.join(_CALLS)}", "-o", str(log), *traced],
                              capture_output=True, text=True, check=False, timeout=900)
        if done.returncode == 0:
            return _parse(log.read_text(encoding="utf-8", errors="replace"), n - 1)
    assert done is not None
    why = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
    return SyncCounts(n - 1, skipped=f"strace could not trace: {why[:120]}")


def _parse(trace: str, messages: int) -> SyncCounts:
    counts = SyncCounts(messages)
    side = None
    for match in _CALL.finditer(trace):
        path = match.group(1)
        name = Path(path).name
        if name.startswith("mark-"):
            which, _, edge = name.removeprefix("mark-").partition("-")
            side = which if edge == "warm" else None
            continue
        if side is not None:
            counts.calls[side] = counts.calls.get(side, 0) + 1
            if name.endswith(".db"):
                counts.database[side] = counts.database.get(side, 0) + 1
    return counts


def _mark(workdir: Path, what: str) -> None:
    """A sync the parser reads as a boundary."""
    fd = os.open(workdir / f"mark-{what}", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


async def _maiden(workdir: Path, n: int, synchronous: Synchronous) -> None:
    path = workdir / "syncs-maiden.db"
    remove_db(path)
    async with bench_runtime(path, synchronous=synchronous) as rt:
        for i in range(n):
            expect_completed(await rt.send(THREAD, user_text(i)))
            await rt.idle()
            if i == 0:
                _mark(workdir, "maiden-warm")
        _mark(workdir, "maiden-end")


def _floor(workdir: Path, n: int, synchronous: Synchronous) -> None:
    path = workdir / "syncs-floor.db"
    remove_db(path)
    with Floor(path, synchronous) as floor:
        for i in range(n):
            floor.message(i)
            if i == 0:
                _mark(workdir, "floor-warm")
        _mark(workdir, "floor-end")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.syncs")
    parser.add_argument("--n", type=int, required=True)
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument("--synchronous", default="full")
    args = parser.parse_args()
    synchronous = cast(Synchronous, args.synchronous)
    asyncio.run(_maiden(args.dir, args.n, synchronous))
    _floor(args.dir, args.n, synchronous)


if __name__ == "__main__":
    main()
