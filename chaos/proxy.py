"""A TCP proxy the soak owns, between the replicas and PostgreSQL: ``cut()`` aborts every
connection through it and refuses new ones (each is closed as soon as it is accepted)
until ``restore()``. What a replica sees is a database gone for a while: its pool's
connections reset, its new ones dropped."""

from __future__ import annotations

import asyncio
import contextlib

__all__ = ["Proxy"]


class Proxy:
    """``async with Proxy("127.0.0.1", 5432) as proxy: proxy.port``"""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.port = 0
        self.cut_now = False
        self.connections = 0
        self.refused = 0
        self._pairs: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> Proxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        # Aborted, every pipe ends by itself (a handler task cancelled instead is logged
        # as an error by Python 3.11's streams).
        self._abort_all()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=2)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._server.wait_closed(), 2)

    def cut(self) -> int:
        """Abort every connection and refuse new ones; how many were cut."""
        self.cut_now = True
        return self._abort_all()

    def restore(self) -> None:
        self.cut_now = False

    def _abort_all(self) -> int:
        pairs = list(self._pairs)
        for a, b in pairs:
            for writer in (a, b):
                writer.transport.abort()
        self._pairs.clear()
        return len(pairs)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.cut_now:
            self.refused += 1
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            return
        self.connections += 1
        pair = (writer, up_writer)
        self._pairs.add(pair)
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        finally:
            self._tasks.discard(task)
            self._pairs.discard(pair)
            for w in pair:
                w.transport.abort()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        writer.transport.abort()
