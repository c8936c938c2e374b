"""Instructions a message, for comparing two commits on a shared, noisy machine: the thread
workload (a ``lookup`` call, then the answer) on a SQLite store with ``synchronous=off``, N
messages in one process. Counted by valgrind, which counts instructions, not seconds: the
same for the same code whatever else the machine does. Run it for two N and take the
difference, so that start-up is left out::

    for n in 40 240; do
      PYTHONPATH=$PWD valgrind --tool=callgrind --callgrind-out-file=/dev/null \\
        .venv/bin/python -m bench.instructions $n 2>&1 | grep -o "Collected : [0-9]*"
    done                                # (second - first) / 200 = instructions a message

(issue 54's guard: a change that moves code about keeps this within 5% of before)."""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

from runtime import SQLiteStore

from .workload import expect_completed, user_text, workload_runtime


async def _messages(n: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        async with SQLiteStore(Path(tmp) / "m.db", synchronous="off") as store, \
                workload_runtime(store) as rt:
            for i in range(n):
                expect_completed(await rt.send("bench:t", user_text(i)))


if __name__ == "__main__":
    asyncio.run(_messages(int(sys.argv[1])))
