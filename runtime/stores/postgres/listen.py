"""The PostgreSQL store's one ``LISTEN`` connection (outside the pool), shared by whatever
listens: the control plane's requests (``control``) and the threads' news (``leases``).

A connection that is lost (the server restarted, the network cut it) is made again in the
background every ``RETRY_S`` with every channel still listened to. Meanwhile nothing is
heard, and the listeners' readers poll, as they do anyway as the fallback.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg  # type: ignore[import-untyped]

from .sql import ERRORS

__all__ = ["RETRY_S", "Listening", "channel"]

log = logging.getLogger("maiden.store")

RETRY_S = 2.0
"""How often a lost listening connection is made again."""


def channel(prefix: str, schema: str) -> str:
    """A notification channel of ``schema``'s (an identifier of 63 bytes at most, whatever
    the schema's name)."""
    return prefix + hashlib.sha256(schema.encode()).hexdigest()[:20]


class Listening:
    """The channels listened to on one connection, each with its listeners."""

    def __init__(self, dsn: str, connect_timeout_s: float) -> None:
        self._dsn = dsn
        self._timeout_s = connect_timeout_s
        self._conn: Any = None
        self._heard: dict[str, list[Callable[[str], None]]] = {}
        self._lock = asyncio.Lock()
        self._mending: asyncio.Task[None] | None = None
        self._warned = False

    async def listen(self, name: str, heard: Callable[[str], None]
                     ) -> Callable[[], Awaitable[None]] | None:
        """Call ``heard(payload)`` (on the loop) for each notification on channel ``name``;
        what stops that, or None (said once) if the server cannot be reached now."""
        async with self._lock:
            try:
                if self._conn is None:
                    self._conn = await self._connect()
                if name not in self._heard:
                    await self._conn.add_listener(name, self._relay)
            except (*ERRORS, ValueError) as exc:
                if not self._warned:
                    self._warned = True
                    log.warning("cannot listen on postgres (%s); polling instead",
                                type(exc).__name__)
                return None
            self._warned = False
            self._heard.setdefault(name, []).append(heard)
        stopped = False

        async def stop() -> None:
            nonlocal stopped
            if not stopped:
                stopped = True
                await self._unlisten(name, heard)

        return stop

    async def close(self) -> None:
        """Stop listening to anything (the store closes)."""
        self._heard.clear()
        async with self._lock:
            await self._disconnect()

    def _relay(self, _conn: Any, _pid: int, name: str, payload: str) -> None:
        for heard in list(self._heard.get(name, ())):
            heard(payload)

    async def _unlisten(self, name: str, heard: Callable[[str], None]) -> None:
        async with self._lock:
            listeners = self._heard.get(name, [])
            if heard in listeners:
                listeners.remove(heard)
            if listeners:
                return
            self._heard.pop(name, None)
            if not self._heard:
                await self._disconnect()
            elif self._conn is not None:
                with contextlib.suppress(*ERRORS):
                    await self._conn.remove_listener(name, self._relay)

    async def _connect(self) -> Any:
        conn = await asyncpg.connect(self._dsn, timeout=self._timeout_s)
        conn.add_termination_listener(self._lost)
        return conn

    async def _disconnect(self) -> None:
        conn, self._conn = self._conn, None
        mending, self._mending = self._mending, None
        if mending is not None:
            mending.cancel()
        if conn is not None and not conn.is_closed():
            with contextlib.suppress(*ERRORS):
                await conn.close(timeout=5)

    def _lost(self, conn: Any) -> None:
        if conn is not self._conn:
            return  # closed here
        self._conn = None
        if self._heard and self._mending is None:
            log.warning("the postgres connection listening for notifications was lost; "
                        "polling until it is back")
            self._mending = asyncio.get_running_loop().create_task(
                self._mend(), name="maiden-listen")

    async def _mend(self) -> None:
        while True:
            await asyncio.sleep(RETRY_S)
            async with self._lock:
                if not self._heard:
                    self._mending = None
                    return
                conn = None
                try:
                    conn = await self._connect()
                    for name in self._heard:
                        await conn.add_listener(name, self._relay)
                except (*ERRORS, ValueError):
                    if conn is not None:
                        conn.terminate()
                    continue
                self._conn, self._mending = conn, None
            log.info("listening on postgres again")
            return
