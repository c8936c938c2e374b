"""What a serving runtime does now and then besides driving runs (runtime/serving/upkeep.py),
called here as its control loop calls it, on a runtime started without that loop: the runs
of a process that died taken up, and approvals that waited too long timed out, the thread's
next run driven after them."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from uuid import uuid4

from runtime import (
    AgentConfig,
    EchoProvider,
    Origin,
    Run,
    RunState,
    Runtime,
    ScriptedProvider,
    SQLiteStore,
    ToolRegistry,
    tool,
)
from runtime.stores.base import Checkpoint
from tests.fakes.chat import MemoryChat
from tests.scripted import call

S = RunState


@tool(requires_approval=True)
def deploy(service: str) -> str:
    """Deploy a service."""
    return f"deployed {service}"


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


@asynccontextmanager
async def unserved(rt: Runtime) -> AsyncIterator[Runtime]:
    """``rt`` started (its recovery done) without the control loop that calls the upkeep."""
    await rt.start(serve=False)
    try:
        yield rt
    finally:
        await rt.close()


async def test_an_unfinished_run_no_worker_here_has_is_taken_up(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "m.db") as store, \
            unserved(Runtime(store, EchoProvider())) as rt:
        # As a process that died left it: stored, and no worker anywhere knows of it.
        run = await store.create_run(Run(id=uuid4().hex, thread_id="t", text="hi"))
        await rt.idle()
        assert (await rt.records.get_run(run.id)).state is S.QUEUED
        await rt._upkeep.adopt_orphans()
        async with asyncio.timeout(10):
            done = await rt.wait(run.id)
    assert done.state is S.COMPLETED and done.reply == "echo: hi"


async def test_a_closing_runtime_takes_up_nothing(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "m.db") as store:
        rt = Runtime(store, EchoProvider())
        async with unserved(rt):
            pass
        run = await store.create_run(Run(id=uuid4().hex, thread_id="t", text="hi"))
        await rt._upkeep.adopt_orphans()
        await rt.idle()
        assert (await store.get_run(run.id)).state is S.QUEUED


async def test_an_approval_that_waited_too_long_times_out_and_the_thread_goes_on(
        tmp_path: Path) -> None:
    clock = Clock()
    script = [call("deploy", service="api"), {"text": "the next one"}]
    async with SQLiteStore(tmp_path / "m.db") as store, \
            unserved(Runtime(store, ScriptedProvider(script), ToolRegistry([deploy]),
                             agent=AgentConfig(approval_timeout_s=60), clock=clock)) as rt:
        paused = await rt.send("t", "ship it")
        behind = await rt.submit("t", "and then this")
        await rt.idle()
        assert paused.state is S.AWAITING_APPROVAL
        assert (await rt.records.get_run(behind.id)).state is S.QUEUED  # behind the pause
        assert await rt._upkeep.expire_approvals() == []  # not yet
        clock.now += 61
        (expired,) = await rt._upkeep.expire_approvals()
        assert expired.id == paused.id and expired.state is S.TIMED_OUT
        async with asyncio.timeout(10):
            done = await rt.wait(behind.id)  # its thread's worker was woken for it
    assert done.reply == "the next one"


async def test_without_an_approval_timeout_nothing_times_out(tmp_path: Path) -> None:
    clock = Clock()
    async with SQLiteStore(tmp_path / "m.db") as store, \
            unserved(Runtime(store, ScriptedProvider([call("deploy", service="api")]),
                             ToolRegistry([deploy]), clock=clock)) as rt:
        paused = await rt.send("t", "ship it")
        clock.now += 365 * 86_400
        assert await rt._upkeep.expire_approvals() == []
        assert (await rt.records.get_run(paused.id)).state is S.AWAITING_APPROVAL


class HeldAtTheEnd(SQLiteStore):
    """Holds the commit that ends a run, once it is written, until ``go``: the moment a
    process killed right after that commit dies in (tests/crash, ``after_final_answer``)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.ended = asyncio.Event()
        self.go = asyncio.Event()

    async def commit(self, checkpoint: Checkpoint) -> None:
        await super().commit(checkpoint)
        if any(t.target is S.COMPLETED for t in checkpoint.transitions):
            self.ended.set()
            await self.go.wait()


async def test_a_sweep_leaves_a_run_its_worker_drives_to_that_worker(tmp_path: Path) -> None:
    """The outbox's sweep (every few seconds) while a run's last commit is being written:
    its reply is the worker's to send as the run ends, not the sweep's. Before, the sweep
    sent it then, and a process killed right after that commit had answered already (the
    crash matrix's ``test_crash_again_during_recovery`` failed now and then on a loaded
    machine: its fifth process found nothing left to send)."""
    chat = MemoryChat()
    store = HeldAtTheEnd(tmp_path / "m.db")
    async with store, unserved(Runtime(store, EchoProvider(),
                                       deliverers={"chat": chat})) as rt:
        run = await rt.submit("t", "hi", origin=Origin(channel="chat", target={"to": "t"}))
        async with asyncio.timeout(10):
            await store.ended.wait()
            await rt._upkeep.flush_deliveries()
            assert chat.posted == []  # left to the worker
            store.go.set()
            await rt.wait(run.id)
            await rt.idle()
    assert [m.text for m in chat.posted] == ["echo: hi"]
