"""A PostgreSQL server of the soak's own for its PostgreSQL pass, so that the server itself
can be stopped and started again (the fault ``pg_restart``) without touching the one the
tests share.

It is a throwaway cluster of Debian's ``postgresql-common`` (``pg_createcluster``, as root):
trust authentication on loopback, one database, on a free port; ``pg_ctlcluster`` stops it
(``-m fast``: clients told, a checkpoint; ``-m immediate``: every process gone, the WAL
replayed at the next start, as after a crash of the server) and starts it again. It is
dropped (``pg_dropcluster --stop``: data, configuration and log) when the pass ends, fails
or is interrupted. A soak that is itself killed cannot drop it: the cluster's name holds
the soak's pid, and the next soak drops every such cluster whose soak is gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
from pathlib import Path

import asyncpg  # type: ignore[import-untyped]

from tests.fakes.site import free_port

__all__ = ["OwnServer", "unavailable"]

TOOLS = ("pg_createcluster", "pg_ctlcluster", "pg_dropcluster")
PREFIX = "chaos-"  # a cluster named chaos-<pid> is a soak's
DATABASE = "chaos"
_SERVERS = Path("/usr/lib/postgresql")  # one directory per installed major version
_CLUSTERS = Path("/etc/postgresql")  # <version>/<cluster>/ per cluster


def _version() -> str | None:
    """The newest PostgreSQL server installed, as ``postgresql-common`` names it (``15``)."""
    found = [p.parent.parent.name for p in _SERVERS.glob("*/bin/postgres")]
    return max(found, key=lambda v: [int(x) for x in v.split(".") if x.isdigit()],
               default=None)


def unavailable() -> str | None:
    """Why this machine cannot give the soak a server of its own, or None if it can."""
    if os.geteuid() != 0:
        return "not root (pg_createcluster needs root)"
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if missing:
        return f"{', '.join(missing)} not installed (Debian's postgresql-common)"
    if _version() is None:
        return f"no PostgreSQL server installed under {_SERVERS}"
    return None


async def _run(*args: str) -> str:
    """Run a command to its end, even when cancelled meanwhile (a cluster half made, or
    half stopped, is not left to chance); its output, or ``RuntimeError`` saying why not."""
    proc = await asyncio.create_subprocess_exec(
        *args, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT)
    try:
        out, _ = await proc.communicate()
    except asyncio.CancelledError:
        await proc.wait()  # the soak cancels once: this wait is not cut short
        raise
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} exited {proc.returncode}: "
                           f"{out.decode(errors='replace').strip()[-400:]}")
    return out.decode(errors="replace")


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


async def drop_stale(version: str) -> list[str]:
    """Drop the clusters of soaks that are gone (killed before they could); their names."""
    dropped = []
    for path in sorted((_CLUSTERS / version).glob(f"{PREFIX}*")):
        pid = path.name.removeprefix(PREFIX)
        if pid.isdigit() and _gone(int(pid)):
            with contextlib.suppress(RuntimeError):
                await _run("pg_dropcluster", version, path.name, "--stop")
                dropped.append(path.name)
    return dropped


class OwnServer:
    """``async with OwnServer() as server: server.dsn``; ``await server.stop("fast")``,
    ``await server.start()``. Entering it raises ``RuntimeError`` if the cluster cannot be
    made or started (nothing of it is left then)."""

    def __init__(self, data: Path | None = None) -> None:
        version = _version()
        assert version is not None, unavailable()
        self.version = version
        self.name = f"{PREFIX}{os.getpid()}"
        self.port = 0
        self.dsn = ""
        self.stale: list[str] = []  # clusters of soaks that were killed, dropped now
        self.data = data
        """Where its data directory goes (a small disk the soak fills: ``disk_full``), or
        Debian's default place."""
        self._lock = asyncio.Lock()  # one stop or start at a time

    async def __aenter__(self) -> OwnServer:
        self.stale = await drop_stale(self.version)
        self.port = free_port()
        try:
            where = ["--datadir", str(self.data)] if self.data is not None else []
            # A WAL kept small, as a small disk needs (the server's defaults keep 80 MB).
            await _run("pg_createcluster", self.version, self.name, "--port", str(self.port),
                       "--start-conf", "manual", *where, "-o", "max_wal_size=64MB",
                       "-o", "min_wal_size=32MB", "--", "--auth-local=trust",
                       "--auth-host=trust")
            await self.start()
            conn = await asyncpg.connect(host="127.0.0.1", port=self.port, user="postgres",
                                         database="postgres", timeout=10)
            try:
                await conn.execute(f"CREATE DATABASE {DATABASE}")
            finally:
                await conn.close()
        except BaseException:
            await self._drop()
            raise
        self.dsn = f"postgresql://postgres@127.0.0.1:{self.port}/{DATABASE}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._drop()

    async def _drop(self) -> None:
        with contextlib.suppress(RuntimeError):
            await _run("pg_dropcluster", self.version, self.name, "--stop")

    async def stop(self, mode: str) -> None:
        """Stop the server: ``fast`` (clients disconnected, a checkpoint) or ``immediate``
        (as a crash: the next start replays the WAL)."""
        async with self._lock:
            await _run("pg_ctlcluster", self.version, self.name, "stop", "-m", mode)

    async def start(self) -> None:
        """Start it and return once it takes connections."""
        async with self._lock:
            await _run("pg_ctlcluster", self.version, self.name, "start")
