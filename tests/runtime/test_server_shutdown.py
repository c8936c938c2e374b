"""PostgreSQL shutting down under a replica (``pg_ctl stop -m fast``: the chaos soak's
``pg_restart``, finding 24 in chaos/README.md): the server sends each connection its last
error, ``terminating connection due to administrator command``, then closes it. An idle
pooled connection that has read that error but is not seen closed yet is out of step:
asyncpg answers a query made on it with ``InternalClientError`` ("cannot switch to state
11; another operation (2) is in progress"), which is no ``PostgresError`` nor
``InterfaceError``. Taken for a bug, it failed runs (``internal_error``), stopped the lease
keeper, and out of a worker's last lease release it left the thread marked busy for good:
the replica, alive, never took the run up again, and its lease, unreleased, kept the other
replicas from it.

The server's last words are sent by a TCP interposer between the store and the server (a
fake at the wire), which then holds the idle connections open until told to close them, as
the server's close arrives: the window where a connection is out of step, made as long as
the test needs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
from collections.abc import AsyncIterator
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

import pytest

from runtime import EchoProvider, Runtime, RuntimeConfig, ToolRegistry, tool
from runtime.errors import StoreError
from runtime.model.runs import RunState
from runtime.stores.postgres import PostgresStore
from tests.postgres import PG_DSN, fresh_schema, require_postgres

WAIT_S = 20.0


def _last_words() -> bytes:
    """The ErrorResponse a backend sends as the server shuts down (SQLSTATE 57P01)."""
    fields = b"".join(tag + text.encode() + b"\0" for tag, text in (
        (b"S", "FATAL"), (b"V", "FATAL"), (b"C", "57P01"),
        (b"M", "terminating connection due to administrator command")))
    body = fields + b"\0"
    return b"E" + struct.pack("!i", len(body) + 4) + body


@dataclass(eq=False)
class _Pair:
    """One connection through the interposer: the client's end and the server's."""

    client: asyncio.StreamWriter
    server: asyncio.StreamWriter
    busy: bool = False
    """A query forwarded that the server has not answered yet (ReadyForQuery)."""
    said: bool = False
    """Its last words were said: nothing more goes either way."""

    def close(self) -> None:
        self.client.transport.abort()
        self.server.transport.abort()


class Shutdown:
    """Forwards connections to the server. ``last_words()`` is the server shutting down: a
    connection with a query under way is closed at once, after its error (its client sees
    both together); an idle one gets the error and stays open, its close not seen yet, until
    ``close()`` (or until its client sends a query made before it read the error: then it
    is closed, as the server's close would reach it). New connections are forwarded."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.port = 0
        self._pairs: list[_Pair] = []
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> Shutdown:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for pair in self._pairs:
            pair.close()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=2)

    def last_words(self) -> int:
        """The server's last error to every connection open now; how many were idle."""
        idle = 0
        for pair in self._pairs:
            if pair.said:
                continue
            pair.said = True
            pair.server.transport.abort()
            pair.client.write(_last_words())
            if pair.busy:
                pair.client.transport.abort()
            else:
                idle += 1
        return idle

    def close(self) -> None:
        """The server's close reaches the connections it said its last words to."""
        for pair in [p for p in self._pairs if p.said]:
            pair.close()
            self._pairs.remove(pair)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up = await asyncio.open_connection(*self.target)
        pair = _Pair(writer, up)
        self._pairs.append(pair)
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            await asyncio.gather(self._to_server(reader, pair), self._to_client(up_reader, pair))
        finally:
            self._tasks.discard(task)

    async def _to_server(self, reader: asyncio.StreamReader, pair: _Pair) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while data := await reader.read(65536):
                if pair.said:  # a query sent before its client read the error
                    pair.close()
                    return
                pair.busy = True
                pair.server.write(data)
        if not pair.said:  # the client closed it
            pair.close()

    async def _to_client(self, reader: asyncio.StreamReader, pair: _Pair) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while data := await reader.read(65536):
                if pair.said:
                    return
                if data[-6:-1] == b"Z\x00\x00\x00\x05":  # ends with ReadyForQuery
                    pair.busy = False
                pair.client.write(data)
        if not pair.said:  # the server closed it on its own
            pair.close()


def _through(port: int) -> str:
    parts = urlsplit(PG_DSN)
    user = f"{parts.username}@" if parts.username else ""
    return urlunsplit(parts._replace(netloc=f"{user}127.0.0.1:{port}"))


@pytest.fixture
async def shutdown() -> AsyncIterator[Shutdown]:
    await require_postgres()
    parts = urlsplit(PG_DSN)
    async with Shutdown(parts.hostname or "127.0.0.1", parts.port or 5432) as fake:
        yield fake


async def test_a_query_on_a_connection_the_server_said_goodbye_to_is_a_store_error(
        shutdown: Shutdown) -> None:
    async with fresh_schema() as schema, \
            PostgresStore(_through(shutdown.port), schema=schema, pool_size=1) as store:
        assert await store.leases() == []
        assert shutdown.last_words() == 1  # idle in the pool
        await asyncio.sleep(0.05)  # read by the connection, idle in the pool
        with pytest.raises(StoreError):
            await store.leases()  # before: asyncpg's InternalClientError, raw
        shutdown.close()
        async with asyncio.timeout(WAIT_S):
            while True:  # the pool makes a new connection once the old one is seen closed
                with contextlib.suppress(StoreError):
                    assert await store.leases() == []
                    break
                await asyncio.sleep(0.05)


class _Heard(logging.Handler):
    """Sets ``event`` when a record's message starts with ``prefix``."""

    def __init__(self, prefix: str, event: asyncio.Event) -> None:
        super().__init__()
        self.prefix = prefix
        self.event = event

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith(self.prefix):
            self.event.set()


async def test_a_run_cut_by_the_servers_shutdown_is_taken_up_once_it_is_back(
        shutdown: Shutdown) -> None:
    """Finding 24: the run's worker meets the shut-down server's out-of-step connection in
    its checkpoint and again in its last lease release; it stops on a store error, and once
    the server is back the replica's look for orphans takes the run up. (Before: the raw
    asyncpg error was taken for a bug, and the run failed ``internal_error``; out of the
    worker's last release, it left the thread busy for good.)"""
    started, go, stopped = asyncio.Event(), asyncio.Event(), asyncio.Event()

    @tool(timeout_s=60)
    async def hold() -> str:
        """Hold until the test lets it go."""
        started.set()
        await go.wait()
        return "held"

    # Few queries of the runtime's own meanwhile (polling, renewals), and a few pooled
    # connections, each told the last words: the run's checkpoint meets one out of step
    # even when a renewal has met another first (with one connection, a renewal that met it
    # first left the checkpoint a fresh one: seen once in a CI run).
    settings = RuntimeConfig(concurrency="thread", lease_ttl_s=3.0, poll_interval_s=2.0)
    heard = _Heard("the worker for thread 't' stopped", stopped)
    logging.getLogger("maiden.runtime").addHandler(heard)
    try:
        async with fresh_schema() as schema, \
                PostgresStore(PG_DSN, schema=schema, pool_size=1) as seen, \
                PostgresStore(_through(shutdown.port), schema=schema, pool_size=4) as store, \
                Runtime(store, EchoProvider(), ToolRegistry([hold]), settings=settings) as rt:
            run = await rt.submit("t", "/tool hold")
            try:
                async with asyncio.timeout(WAIT_S):
                    await started.wait()
                    shutdown.last_words()
                    go.set()  # its result's checkpoint meets a connection out of step
                    await stopped.wait()
            finally:
                shutdown.close()  # the server is back: the pool connects again
            async with asyncio.timeout(WAIT_S):
                while (await seen.get_run(run.id)).state is not RunState.COMPLETED:  # noqa: ASYNC110 (the store, as another process sees it)
                    await asyncio.sleep(0.1)
            assert [e.kind for e in await seen.load_entries("t")][-1] == "assistant"
    finally:
        logging.getLogger("maiden.runtime").removeHandler(heard)
