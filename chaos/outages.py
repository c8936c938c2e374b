"""Faults that take the store away for a while from under every replica: the PostgreSQL
server stopped and started again (``pg_restart``, chaos/pgserver.py), the SQLite pass's
disk full (``disk_full``, chaos/disk.py). Each begins at its plan's time, is noted in the
fault history under its kind, and ends ``duration_s`` later under ``ends``; the checks
that excuse what a store outage may cost (a schedule slot not required to run, a Discord
message not required to be taken) read ``STORE_OUTAGES``."""

from __future__ import annotations

import asyncio
from typing import Protocol

from .disk import SmallDisk
from .fault_plan import Fault
from .pgserver import OwnServer

__all__ = ["STORE_OUTAGES", "DiskFull", "Outage", "ServerRestart"]

# The history's kinds of each store outage: (its beginning, its end); the soak's settle
# ("settle") ends every one still going.
STORE_OUTAGES = (("pg_cut", "pg_restore"), ("pg_restart", "pg_up"), ("disk_full", "disk_freed"))


class Outage(Protocol):
    """A fault that lasts: begun at the plan's time, ended when its time is up (or at the
    settle, if it still goes on then)."""

    ends: str  # the history's kind for its end

    def what(self, fault: Fault) -> str:
        """What it does, for the history."""

    async def begin(self, fault: Fault) -> None: ...

    async def end(self) -> str | None:
        """Put it right; what was done (None: it was over already)."""


START_TRIES = 60
"""How many times a stopped server is started, a second apart, before the soak gives up."""


class ServerRestart:
    """The soak's own PostgreSQL server stopped (``fast`` or ``immediate``), started again
    ``duration_s`` later."""

    ends = "pg_up"

    def __init__(self, server: OwnServer) -> None:
        self.server = server
        self.down = False

    def what(self, fault: Fault) -> str:
        return f"the server stopped (-m {fault.mode}), started again in {fault.duration_s}s"

    async def begin(self, fault: Fault) -> None:
        self.down = True
        await self.server.stop(fault.mode)

    async def end(self) -> str | None:
        """Start it again, and again while it cannot start (its disk full, say), every
        second for up to ``START_TRIES`` seconds, as a service manager would (systemd's
        ``Restart=on-failure``): left down, it stayed down until the next planned
        restart, minutes at a time (seeds 9393 and 9595)."""
        if not self.down:
            return None
        for attempt in range(START_TRIES):
            try:
                await self.server.start()
            except (OSError, RuntimeError):
                if attempt + 1 == START_TRIES:
                    raise
                await asyncio.sleep(1.0)
                continue
            self.down = False
            return "the server takes connections again" + (
                f" (started at try {attempt + 1})" if attempt else "")
        return None


class DiskFull:
    """The SQLite pass's disk filled to the last byte, freed ``duration_s`` later."""

    ends = "disk_freed"

    def __init__(self, disk: SmallDisk) -> None:
        self.disk = disk

    def what(self, fault: Fault) -> str:
        return f"the store's disk ({self.disk.size_mb} MB) full for {fault.duration_s}s"

    async def begin(self, fault: Fault) -> None:
        self.disk.fill()

    async def end(self) -> str | None:
        if not self.disk.full:
            return None
        self.disk.free()
        return "room on the store's disk again"
