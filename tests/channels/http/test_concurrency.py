"""Concurrent HTTP requests go through the one runtime lock: `[runtime] concurrency` holds.

A tool records how many of its calls overlap and holds each call until the test
lets it go, so the test decides, by events, when work may finish.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest

from runtime import Tool, tool
from tests.http_helpers import Concurrency, echo_runtime, served, thread_url

# How long a run that must wait is watched for starting anyway: a bound on a negative.
NOT_STARTING_S = 0.3


class Gate:
    """A tool whose calls wait for ``open``, recording entries and the peak overlap."""

    def __init__(self) -> None:
        self.active = 0
        self.peak = 0
        self.entered: asyncio.Queue[str] = asyncio.Queue()
        self.open = asyncio.Event()

        @tool
        async def hold(name: str) -> str:
            """Hold until the gate opens."""
            self.active += 1
            self.peak = max(self.peak, self.active)
            self.entered.put_nowait(name)
            try:
                await self.open.wait()
            finally:
                self.active -= 1
            return name

        self.tool: Tool = hold

    async def next_entry(self, within_s: float = 10.0) -> str:
        return await asyncio.wait_for(self.entered.get(), within_s)

    async def assert_nobody_enters(self) -> None:
        with pytest.raises(TimeoutError):
            await self.next_entry(NOT_STARTING_S)


@asynccontextmanager
async def serving(tmp_path: Path, gate: Gate,
                  concurrency: Concurrency) -> AsyncIterator[httpx.AsyncClient]:
    async with echo_runtime(tmp_path / "m.db", [gate.tool], concurrency=concurrency,
                            shutdown_grace_s=1) as rt, served(rt) as (client, _), \
            asyncio.timeout(20):
        yield client


def send(client: httpx.AsyncClient, thread_id: str, name: str) -> asyncio.Task[httpx.Response]:
    return asyncio.create_task(client.post(
        thread_url(thread_id, "/messages"), json={"text": f'/tool hold {{"name": "{name}"}}'}))


async def test_global_concurrency_runs_one_loop_at_a_time(tmp_path: Path) -> None:
    gate = Gate()
    async with serving(tmp_path, gate, "global") as client:
        requests = [send(client, "t-a", "a"), send(client, "t-b", "b")]
        first = await gate.next_entry()
        await gate.assert_nobody_enters()  # the other thread waits for the lock
        gate.open.set()
        second = await gate.next_entry()
        answers = await asyncio.gather(*requests)
    assert {first, second} == {"a", "b"}
    assert [r.json()["state"] for r in answers] == ["completed", "completed"]
    assert gate.peak == 1


async def test_thread_concurrency_runs_threads_at_once(tmp_path: Path) -> None:
    gate = Gate()
    async with serving(tmp_path, gate, "thread") as client:
        requests = [send(client, "t-a", "a"), send(client, "t-b", "b")]
        # Both calls are inside the tool at once, or this times out.
        assert {await gate.next_entry(), await gate.next_entry()} == {"a", "b"}
        assert gate.peak == 2
        gate.open.set()
        answers = await asyncio.gather(*requests)
    assert [r.json()["reply"] for r in answers] == ['hold returned "a"', 'hold returned "b"']


@pytest.mark.parametrize("concurrency", ["global", "thread"])
async def test_one_thread_runs_its_messages_in_order(
    tmp_path: Path, concurrency: Concurrency
) -> None:
    gate = Gate()
    async with serving(tmp_path, gate, concurrency) as client:
        first = await client.post(thread_url("same", "/messages"),
                                  json={"text": '/tool hold {"name": "1"}', "wait": False})
        assert first.status_code == 202 and first.json()["state"] == "queued"
        later = [send(client, "same", "2"), send(client, "same", "3")]
        assert await gate.next_entry() == "1"
        await gate.assert_nobody_enters()
        gate.open.set()
        assert [await gate.next_entry(), await gate.next_entry()] in (["2", "3"], ["3", "2"])
        answers = await asyncio.gather(*later)
        entries = (await client.get(thread_url("same"))).json()["entries"]["items"]
    assert gate.peak == 1
    assert all(r.json()["state"] == "completed" for r in answers)
    # Each run's entries are contiguous: user, call, result, answer — never interleaved.
    runs = [e["run_id"] for e in entries]
    assert [runs[i] for i in range(0, len(runs), 4)] == list(dict.fromkeys(runs))
    assert all(len(set(runs[i:i + 4])) == 1 for i in range(0, len(runs), 4))
