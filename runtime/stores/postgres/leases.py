"""The PostgreSQL store's leases, judged by the server's clock, so replicas whose clocks
disagree still agree on who holds one; and the threads' news, told with ``pg_notify`` on a
channel per schema (``ended`` goes with the checkpoint that ends or pauses a run: ``runs``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import get_args

from ...model.requests import Lease, News, thread_key
from ..base import LeaseStore, unlistened
from .core import PostgresCore

__all__ = ["PostgresLeases"]

_NEWS: dict[str, News] = {kind: kind for kind in get_args(News)}


class PostgresLeases(PostgresCore, LeaseStore):
    """The PostgreSQL store's ``LeaseStore``."""

    async def take_lease(self, name: str, holder: str, ttl_s: float, *,
                         steal_from: str | None = None) -> str | None:
        async with self._connection() as conn:
            for _ in range(3):
                # ON CONFLICT locks the row and judges it as it stands now, so two takers
                # take turns and one of them wins.
                taken = await conn.fetchval(
                    "INSERT INTO leases VALUES ($1, $2, clock_timestamp() + "
                    "make_interval(secs => $3)) ON CONFLICT (name) DO UPDATE "
                    "SET holder = excluded.holder, expires_at = excluded.expires_at "
                    "WHERE leases.holder = excluded.holder OR leases.holder = $4 "
                    "OR leases.expires_at <= clock_timestamp() RETURNING true",
                    name, holder, ttl_s, steal_from)
                if taken:
                    return None
                other = await conn.fetchval("SELECT holder FROM leases WHERE name = $1 "
                                            "AND expires_at > clock_timestamp()", name)
                if other is not None:
                    return str(other)
            return "another process"  # released and taken again, twice, meanwhile

    async def renew_leases(self, holder: str, ttl_s: float) -> list[str]:
        rows = await self._fetch(
            "UPDATE leases SET expires_at = clock_timestamp() + make_interval(secs => $2) "
            "WHERE holder = $1 AND expires_at > clock_timestamp() RETURNING name",
            holder, ttl_s)
        return sorted(str(r[0]) for r in rows)

    async def release_leases(self, holder: str, names: Sequence[str] | None = None) -> None:
        async with self._connection() as conn:
            if names is None:
                await conn.execute("DELETE FROM leases WHERE holder = $1", holder)
            else:
                await conn.execute("DELETE FROM leases WHERE holder = $1 AND name = ANY($2)",
                                   holder, list(names))

    async def leases(self) -> list[Lease]:
        rows = await self._fetch(
            "SELECT name, holder, extract(epoch FROM expires_at - clock_timestamp()) "
            "FROM leases WHERE expires_at > clock_timestamp() ORDER BY name")
        return [Lease(name=r[0], holder=r[1], expires_in=float(r[2])) for r in rows]

    async def listen_threads(self, heard: Callable[[News, str], None]
                             ) -> Callable[[], Awaitable[None]]:
        def told(payload: str) -> None:
            news, _, key = payload.partition(":")
            kind = _NEWS.get(news)
            if kind is not None and key:
                heard(kind, key)

        stop = await self._listening.listen(self._news, told)
        return unlistened if stop is None else stop

    async def ask_for_thread(self, thread_id: str) -> None:
        await self._value("SELECT pg_notify($1, $2)", self._news,
                          f"asked:{thread_key(thread_id)}")
