"""Workload 10: ``/healthz`` while hundreds of half-sent requests hold sockets (slowloris).

Issue 24 saw 300 connections that sent ``GET /healthz HTTP/1.1\\r\\nHost: x\\r\\n`` and
nothing more stay open for good, until the process ran out of file descriptors and
``/healthz`` itself timed out. Here the real server (uvicorn with maiden's header
deadline and connection cap, default settings) runs on loopback; a holder opens up to
``idle`` such sockets and re-opens each one the server closes (as a real attacker
would), while a client measures ``/healthz`` one request after the other. Baseline:
the same requests with no idle socket, measured in the same run just before.

Bounded: at most ``idle`` sockets (500 in the full run), and the whole workload stops
itself after ``deadline_s`` even if a request hangs.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from bot.limits import raise_open_files
from channels.http import HttpConfig
from channels.http.app import create_app
from channels.http.server import HttpServer
from runtime import EchoProvider, Runtime, SQLiteStore, ToolRegistry

from .table import Row

__all__ = ["SlowlorisResult", "run_slowloris", "slowloris_rows"]

HALF = b"GET /healthz HTTP/1.1\r\nHost: x\r\n"
HEALTHZ_P99_RATIO = 3.0
"""Target: p99 with the sockets held within 3x of p99 without."""


@dataclass
class SlowlorisResult:
    idle: int
    held: int = 0
    """Idle sockets open when the loaded measurement ended."""
    deadline_s: float = 0.0
    """``[http] header_timeout_s``: the server's deadline on a request's headers."""
    closed: int = 0
    """Idle sockets the server closed (each is opened again at once)."""
    closed_in_time: int = 0
    """Of the first ``idle`` sockets, those closed within the deadline plus 5 s."""
    baseline_ms: list[float] = field(default_factory=list)
    loaded_ms: list[float] = field(default_factory=list)
    failures: int = 0
    """Loaded requests that were not 200 (503 over the cap, or an error)."""

    @staticmethod
    def percentile(values: list[float], p: float) -> float:
        ordered = sorted(values)
        return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


async def run_slowloris(workdir: Path, *, idle: int, requests: int,
                        deadline_s: float = 120.0) -> SlowlorisResult:
    raise_open_files(2 * idle + 256)  # both ends of every socket are in this process
    config = HttpConfig(port=0)
    result = SlowlorisResult(idle=idle, deadline_s=config.header_timeout_s)
    db = workdir / "slowloris.db"
    async with SQLiteStore(db) as store, Runtime(store, EchoProvider(), ToolRegistry()) as rt:
        app = create_app(rt, config)
        server = HttpServer(app, "127.0.0.1", 0, grace_s=1,
                            header_timeout_s=config.header_timeout_s,
                            max_connections=config.max_connections)
        await server.start()
        try:
            async with asyncio.timeout(deadline_s + result.deadline_s):
                await _measure(server.port, result, requests)
        finally:
            app.state.maiden.release()
            await server.stop()
    return result


async def _measure(port: int, result: SlowlorisResult, requests: int) -> None:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}",
                                 timeout=httpx.Timeout(30.0)) as client:
        await _healthz(client, min(requests, 50), [])  # warm-up: first requests are slow
        await _healthz(client, requests, result.baseline_ms)
        stop = asyncio.Event()
        open_now: set[int] = set()
        holders = [asyncio.create_task(_hold(port, i, stop, open_now, result))
                   for i in range(result.idle)]
        try:
            async with asyncio.timeout(30):  # every socket connected and its half sent
                while len(open_now) < result.idle:  # noqa: ASYNC110
                    await asyncio.sleep(0.01)
            held_at = time.monotonic()
            result.failures = await _healthz(client, requests, result.loaded_ms)
            result.held = len(open_now)
            # Then the deadline at work: the first sockets closed by the server, in time.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout_at(asyncio.get_running_loop().time()
                                              + result.deadline_s + 5
                                              - (time.monotonic() - held_at)):
                    while result.closed < result.idle:  # noqa: ASYNC110
                        await asyncio.sleep(0.05)
            result.closed_in_time = min(result.closed, result.idle)
        finally:
            stop.set()
            await asyncio.gather(*holders, return_exceptions=True)


async def _healthz(client: httpx.AsyncClient, requests: int, times: list[float]) -> int:
    failures = 0
    for _ in range(requests):
        start = time.perf_counter()
        try:
            status = (await client.get("/healthz")).status_code
        except httpx.HTTPError:
            status = 0
        times.append((time.perf_counter() - start) * 1000)
        failures += status != 200
    return failures


async def _hold(port: int, i: int, stop: asyncio.Event, open_now: set[int],
                result: SlowlorisResult) -> None:
    """Keep one half-sent request open until ``stop``; re-open it when the server closes it."""
    while not stop.is_set():
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            writer.write(HALF)
            await writer.drain()
            open_now.add(i)
            closed = asyncio.ensure_future(reader.read())
            stopped = asyncio.ensure_future(stop.wait())
            await asyncio.wait([closed, stopped], return_when=asyncio.FIRST_COMPLETED)
            for waiter in (closed, stopped):
                waiter.cancel()
            result.closed += not stop.is_set()
            open_now.discard(i)
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()


def slowloris_rows(r: SlowlorisResult) -> list[Row]:
    name = f"10 slowloris, {r.idle} idle sockets"
    rows = []
    for p in (50, 99):
        m, b = r.percentile(r.loaded_ms, p), r.percentile(r.baseline_ms, p)
        target = f"<= {HEALTHZ_P99_RATIO:g}x baseline" if p == 99 else ""
        rows.append(Row(name, f"/healthz ms, p{p}", f"{m:.2f}", f"{b:.2f}",
                        f"{m / b:.2f}x" if b else "", target,
                        ("ok" if m <= HEALTHZ_P99_RATIO * b else "MISS") if p == 99 else "",
                        why="see bench/README.md, workload 10"))
    rows.append(Row(name, "/healthz answers not 200", str(r.failures), target="0",
                    verdict="ok" if r.failures == 0 else "MISS",
                    why="over [http] max_connections, or an error"))
    rows.append(Row(name, "idle sockets open at the end of the requests", str(r.held),
                    target=str(r.idle), verdict="ok" if r.held == r.idle else "MISS",
                    why="some were closed while /healthz was measured: a slow run"))
    rows.append(Row(name, f"of them, closed by the server within {r.deadline_s + 5:g} s",
                    str(r.closed_in_time), target=f"{r.idle} (deadline {r.deadline_s:g} s)",
                    verdict="ok" if r.closed_in_time == r.idle else "MISS",
                    why="half-sent requests outlive [http] header_timeout_s"))
    return rows
