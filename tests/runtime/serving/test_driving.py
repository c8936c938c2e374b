"""Driving one run in a worker (runtime/serving/driving.py): its announced files fetched
before it waits for the global lock, and a cancel that comes as the worker takes the run up,
or as its task has just ended, ending it all the same."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from runtime import (
    EchoProvider,
    FileSource,
    RunState,
    Runtime,
    SQLiteStore,
    ToolRegistry,
    UserMessage,
    tool,
)
from tests.runtime.engine.test_files import SLACK, Shelf, source
from tests.runtime.test_controls import deploy
from tests.scripted import call

S = RunState


class SlowShelf(Shelf):
    """A shelf whose downloads wait until the test lets them go."""

    def __init__(self, files: dict[str, bytes]) -> None:
        super().__init__(files)
        self.asked = asyncio.Event()
        self.go = asyncio.Event()

    async def fetch(self, source: FileSource, max_bytes: int) -> bytes:
        self.asked.set()
        await self.go.wait()
        return await super().fetch(source, max_bytes)


async def test_a_slow_download_does_not_hold_the_other_threads_up(tmp_path: Path) -> None:
    """Global concurrency: a run's files are fetched before it waits for the lock, so a
    slow download is made while another thread's run holds the lock, and holds nothing up
    itself; the run then takes what was fetched (one download each)."""
    holding, release = asyncio.Event(), asyncio.Event()

    @tool
    async def hold() -> str:
        """Keep the runtime's lock."""
        holding.set()
        await release.wait()
        return "released"

    shelf = SlowShelf({"u/1": b"a,b\n1,2\n"})
    async with SQLiteStore(tmp_path / "m.db") as store, \
            Runtime(store, EchoProvider(), ToolRegistry([hold]),
                    fetchers={"chat": shelf}) as rt:
        assert rt.operator.settings.concurrency == "global"
        first = await rt.submit("a", "/tool hold")
        await asyncio.wait_for(holding.wait(), 10)
        second = await rt.submit("b", "read it", origin=SLACK,
                                 fetch=[source("u/1", "b.csv", "text/csv")])
        await asyncio.wait_for(shelf.asked.wait(), 10)  # while the lock is held
        assert not release.is_set()
        shelf.go.set()
        release.set()
        assert (await rt.wait(first.id)).state is RunState.COMPLETED
        done = await rt.wait(second.id)
        assert done.state is RunState.COMPLETED
        assert shelf.fetched == ["u/1"]
        user = (await rt.records.entries("b"))[0]
        assert isinstance(user, UserMessage) and [f.name for f in user.files] == ["b.csv"]


@pytest.mark.parametrize("store", ["sqlite", "files"])
async def test_a_cancel_right_after_send_returns_a_paused_run_ends_it(
        make_runtime: Any, store: str) -> None:
    """``send`` returns once the run pauses, before its worker has seen its task end: a
    cancel then found the run still registered as driven here, "cut off" a task that had
    ended, and answered with the run still awaiting approval (the cancel lost)."""
    async with make_runtime([call("deploy", service="x")], [deploy], store=store) as (rt, _):
        paused = await rt.send("t", "ship")
        assert paused.state is S.AWAITING_APPROVAL
        cancelled = await rt.cancel(paused.id, by="ops")  # at once
        assert cancelled.state is S.CANCELLED and cancelled.reason == "cancelled by ops"
        assert (await rt.records.get_run(paused.id)).state is S.CANCELLED


async def test_a_cancel_as_the_worker_takes_the_run_up_ends_it(make_runtime: Any) -> None:
    """A cancel that comes once the worker has the run but before its driver begins (its
    task not yet stepped, or reading the thread) ends it cancelled all the same: the task's
    cancellation never reached the driver, so the worker ends it (the cancel was lost:
    the run stayed queued, the cancel answered with it queued). On the files store, whose
    accepted message is on disk before ``submit`` kicks its worker: SQLite's worker starts
    while the message is flushed, and may be done before ``submit`` returns."""
    script = [{"text": "first"}, {"text": "second"}]
    async with make_runtime(script, [], store="files") as (rt, _):
        run = await rt.submit("t", "stop this")
        for _ in range(200_000):  # until the worker has it, not a step later (it may wait
            if rt.operator.holds(run.id):  # for a thread to take the thread's lease: no event says
                break  # it has the run before the run's task begins)
            await asyncio.sleep(0)
        assert rt.operator.holds(run.id)
        cancelled = await rt.cancel(run.id, by="ops")  # (at once: not from a new task)
        assert cancelled.state is S.CANCELLED and cancelled.reason == "cancelled by ops"
        assert (await rt.records.get_run(run.id)).state is S.CANCELLED
        assert (await asyncio.wait_for(rt.send("t", "and this"), 10)).reply == "first"
