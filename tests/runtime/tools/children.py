"""Watching the processes a test's command starts, which set no event: for the tests of
``run_process`` and of the ``shell`` built-in."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path

__all__ = ["dead", "gone", "pid_in", "until", "written_pid"]


async def until(check: Callable[[], bool], within_s: float = 10) -> None:
    """Wait for an outside process to do something: it sets no event, so look again
    every few milliseconds, within a bound."""
    async with asyncio.timeout(within_s):
        while not check():  # noqa: ASYNC110
            await asyncio.sleep(0.01)


def written_pid(path: Path) -> int | None:
    """The pid a command under test wrote to ``path``, once it has."""
    text = path.read_text() if path.exists() else ""
    return int(text) if text.endswith("\n") else None


async def pid_in(path: Path) -> int:
    await until(lambda: written_pid(path) is not None)
    pid = written_pid(path)
    assert pid is not None
    return pid


def dead(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # An orphan that died is a zombie until pid 1 reaps it, and in some containers pid 1
    # never does: dead all the same.
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


async def gone(pid: int) -> bool:
    """Whether ``pid`` dies within a bound (a SIGKILLed orphan may need a moment)."""
    try:
        await until(lambda: dead(pid), within_s=5)
    except TimeoutError:
        return False
    return True
