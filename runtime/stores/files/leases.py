"""The files store's leases: ``leases.json`` holds every lease, rewritten whole under a lock,
with this machine's clock."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from pydantic import BaseModel

from ...model.requests import Lease, News
from ..base import LeaseStore, unlistened
from .core import FilesCore, parse_file
from .fs import Disk

T = TypeVar("T")

__all__ = ["FilesLeases", "change_leases"]


class FilesLeases(FilesCore, LeaseStore):
    """The files store's ``LeaseStore``."""

    async def take_lease(self, name: str, holder: str, ttl_s: float, *,
                         steal_from: str | None = None) -> str | None:
        def take(leases: dict[str, _Held], now: float) -> str | None:
            held = leases.get(name)
            if held is None or held.holder in (holder, steal_from) or held.expires_at <= now:
                leases[name] = _Held(holder=holder, expires_at=now + ttl_s)
                return None
            return held.holder

        return await self._disk.io(self._change_leases, take)

    async def renew_leases(self, holder: str, ttl_s: float) -> list[str]:
        def renew(leases: dict[str, _Held], now: float) -> list[str]:
            mine = sorted(n for n, h in leases.items() if h.holder == holder
                          and h.expires_at > now)
            for n in mine:
                leases[n] = _Held(holder=holder, expires_at=now + ttl_s)
            return mine

        return await self._disk.io(self._change_leases, renew)

    async def release_leases(self, holder: str, names: Sequence[str] | None = None) -> None:
        def release(leases: dict[str, _Held], now: float) -> None:
            for n in [n for n, h in leases.items() if h.holder == holder
                      and (names is None or n in names)]:
                del leases[n]

        await self._disk.io(self._change_leases, release)

    async def leases(self) -> list[Lease]:
        found, now = await self._disk.io(self._read_leases)
        return [Lease(name=n, holder=h.holder, expires_in=h.expires_at - now)
                for n, h in sorted(found.items()) if h.expires_at > now]

    async def listen_threads(self, heard: Callable[[News, str], None]
                             ) -> Callable[[], Awaitable[None]]:
        return unlistened  # readers poll: a folder cannot tell another process

    async def ask_for_thread(self, thread_id: str) -> None:
        """Nobody can hear it: a lingering lease is given up when its time is up."""

    # -- synchronous work, run in a worker thread

    def _read_leases(self) -> tuple[dict[str, _Held], float]:
        return _read_leases(self._disk)

    def _change_leases(self, change: Callable[[dict[str, _Held], float], T]) -> T:
        return change_leases(self._disk, change)


def _read_leases(disk: Disk) -> tuple[dict[str, _Held], float]:
    path = disk.root / "leases.json"
    found = parse_file(path, _Leases).leases if path.exists() else {}
    return found, time.time()


def change_leases(disk: Disk, change: Callable[[dict[str, _Held], float], T]) -> T:
    """``change`` the leases under their lock, and write them back without the expired ones
    (``change`` may do nothing: then only those go)."""
    path = disk.root / "leases.json"
    with disk.lock(path.with_suffix(".lock")):
        leases, now = _read_leases(disk)
        result = change(leases, now)
        disk.write(path, _Leases(leases={
            n: h for n, h in leases.items() if h.expires_at > now}).model_dump_json()
            .encode())
    return result


class _Held(BaseModel):
    holder: str
    expires_at: float


class _Leases(BaseModel):
    leases: dict[str, _Held] = {}
