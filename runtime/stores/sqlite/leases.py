"""The SQLite store's leases, judged by this machine's clock: every process on one SQLite
file shares it."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Awaitable, Callable, Sequence

from ...model.requests import Lease, News
from ..base import LeaseStore, unlistened
from .core import SQLiteCore

__all__ = ["SQLiteLeases"]


class SQLiteLeases(SQLiteCore, LeaseStore):
    """The SQLite store's ``LeaseStore``."""

    async def take_lease(self, name: str, holder: str, ttl_s: float, *,
                         steal_from: str | None = None) -> str | None:
        def take(db: sqlite3.Connection) -> str | None:
            now = time.time()
            db.execute("INSERT INTO leases VALUES (?, ?, ?) ON CONFLICT (name) DO UPDATE "
                       "SET holder = excluded.holder, expires_at = excluded.expires_at "
                       "WHERE leases.holder = excluded.holder OR leases.expires_at <= ? "
                       "OR leases.holder = ?", (name, holder, now + ttl_s, now, steal_from))
            found = db.execute("SELECT holder FROM leases WHERE name = ?", (name,)).fetchone()
            return None if found[0] == holder else str(found[0])

        # Not a durable point: a lease lost to a power cut was held by a process that
        # died with it.
        return await self._write_side().write_lazily(take)

    async def renew_leases(self, holder: str, ttl_s: float) -> list[str]:
        def renew(db: sqlite3.Connection) -> list[str]:
            now = time.time()
            db.execute("UPDATE leases SET expires_at = ? WHERE holder = ? AND expires_at > ?",
                       (now + ttl_s, holder, now))
            rows = db.execute("SELECT name FROM leases WHERE holder = ? AND expires_at > ? "
                              "ORDER BY name", (holder, now)).fetchall()
            return [str(row[0]) for row in rows]

        return await self._write_side().write_lazily(renew)

    async def release_leases(self, holder: str, names: Sequence[str] | None = None) -> None:
        def release(db: sqlite3.Connection) -> None:
            if names is None:
                db.execute("DELETE FROM leases WHERE holder = ?", (holder,))
            else:
                db.executemany("DELETE FROM leases WHERE name = ? AND holder = ?",
                               [(name, holder) for name in names])

        await self._write_side().write_lazily(release)

    async def leases(self) -> list[Lease]:
        now = time.time()
        rows = await self._fetchall("SELECT name, holder, expires_at FROM leases "
                                    "WHERE expires_at > ? ORDER BY name", (now,))
        return [Lease(name=r[0], holder=r[1], expires_in=r[2] - now) for r in rows]

    async def listen_threads(self, heard: Callable[[News, str], None]
                             ) -> Callable[[], Awaitable[None]]:
        return unlistened  # readers poll: SQLite cannot tell another process's connection

    async def ask_for_thread(self, thread_id: str) -> None:
        """Nobody can hear it: a lingering lease is given up when its time is up."""
