"""Leases across processes and machines: a thread is driven only by its lease's holder; the
runs of a process that died are taken up once its leases expire (by the store's clock), or
at once when it died on this machine."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from runtime import (
    EchoProvider,
    Run,
    RunEnded,
    RunEvent,
    Runtime,
    RuntimeConfig,
    SQLiteStore,
    ToolCallStarted,
    ToolRegistry,
    UserMessage,
    tool,
)
from runtime.model.requests import Instance
from runtime.model.runs import RunState, new_run_id, transition
from runtime.serving.control import instance_lease, live_instances
from runtime.serving.leases import describe_holder, holder_name, is_gone_here, thread_lease
from runtime.stores.base import Checkpoint
from runtime.stores.postgres import PostgresStore
from tests.postgres import PG_DSN, fresh_schema

S = RunState
ELSEWHERE = "ghost/4242@another-machine"
"""A process of another machine: nothing here can tell whether it lives but its leases."""


def test_holder_names() -> None:
    me = holder_name("abc")
    assert me.startswith("abc/") and not is_gone_here(me)
    assert not is_gone_here(ELSEWHERE)  # another machine's: only its lease can tell
    assert describe_holder(ELSEWHERE) == "process 4242 on another-machine"
    assert describe_holder("not one of ours") == "not one of ours"


@pytest.fixture(params=["sqlite", "postgres"])
async def store(request: pytest.FixtureRequest,
                tmp_path: Path) -> AsyncIterator[SQLiteStore | PostgresStore]:
    """The lease's expiry judged by the machine's clock (SQLite), or the server's."""
    if request.param == "sqlite":
        async with SQLiteStore(tmp_path / "maiden.db") as opened:
            yield opened
        return
    async with fresh_schema() as schema, \
            PostgresStore(PG_DSN, schema=schema, pool_size=3) as server_store:
        yield server_store


async def _running_elsewhere(store: SQLiteStore | PostgresStore, thread_id: str,
                             ttl_s: float) -> Run:
    """A run that a serving process of another machine has started, with its leases."""
    queued = Run(id=new_run_id(time.time()), thread_id=thread_id, text="hello")
    await store.create_run(queued)
    running, step = transition(queued, S.RUNNING, "started", owner="ghost", first_entry=0,
                               started_at=queued.created_at, version=queued.version + 1)
    said = UserMessage(run_id=queued.id, text=queued.text, at=queued.created_at)
    await store.commit(Checkpoint(thread_id=thread_id, position=0, entries=[said],
                                  run=running, transitions=[step]))
    await store.beat(Instance(id="ghost", pid=4242, host="another-machine", started_at=0.0,
                              beat_at=0.0))
    for name in (instance_lease("ghost"), thread_lease(thread_id)):
        assert await store.take_lease(name, ELSEWHERE, ttl_s) is None
    return running


async def test_a_dead_machines_run_is_taken_up_when_its_leases_expire(
        store: SQLiteStore | PostgresStore) -> None:
    run = await _running_elsewhere(store, "t1", ttl_s=1.0)
    settings = RuntimeConfig(poll_interval_s=0.05, lease_ttl_s=0.4)
    async with Runtime(store, EchoProvider(), settings=settings) as rt, \
            rt.subscribe() as events:
        # At start its holder is alive (its leases are fresh): the run is left to it.
        assert "ghost" in [i.id for i in await live_instances(store)]
        assert (await rt.records.get_run(run.id)).state is S.RUNNING
        # It stops renewing them (that machine died): once they expire, a sweep of
        # this serving process recovers the run, by the effect-class rules.
        async with asyncio.timeout(20):
            while not isinstance(event := await events.next(), RunEnded) \
                    or event.run_id != run.id:
                pass
        assert (await rt.records.get_run(run.id)).state is S.COMPLETED
        reasons = [t.reason for t in await rt.records.transitions(run.id)]
        assert "recovered after crash (attempt 1)" in reasons
        assert [e.text for e in await rt.records.entries("t1") if e.kind == "assistant"] == \
            ["echo: hello"]
        assert "ghost" not in [i.id for i in await live_instances(store)]


async def test_a_thread_held_elsewhere_waits_for_its_holder(
        store: SQLiteStore | PostgresStore) -> None:
    """A message for a thread another process drives is queued behind its run, and run once
    that process lets go of the thread (here: its lease expires)."""
    held = await _running_elsewhere(store, "t2", ttl_s=0.6)
    settings = RuntimeConfig(poll_interval_s=0.05, lease_ttl_s=0.4)
    async with Runtime(store, EchoProvider(), settings=settings) as rt:
        events: list[RunEvent] = []
        async with rt.subscribe() as sub:
            waiting = asyncio.create_task(rt.send("t2", "next"))
            async with asyncio.timeout(20):
                while not any("waiting for process 4242 on another-machine" in
                              getattr(e, "reason", "") for e in events):
                    events.append(await sub.next())
                answered = await waiting
        assert answered.state is S.COMPLETED
        first = await rt.records.get_run(held.id)
        assert first.state is S.COMPLETED  # recovered first: the thread's order holds
        assert first.updated_at <= answered.updated_at
        assert [e.text for e in await rt.records.entries("t2") if e.kind == "assistant"] == \
            ["echo: hello", "echo: next"]


async def test_a_role_lease_among_runtimes(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "maiden.db") as store:
        async with Runtime(store, EchoProvider(), settings=RuntimeConfig(poll_interval_s=0.05)
                           ) as one, Runtime(store, EchoProvider()) as two:
            assert await one.operator.take_lease("discord:gateway:1") is None
            assert await one.operator.take_lease("discord:gateway:1") is None  # kept
            holder = await two.operator.take_lease("discord:gateway:1")
            assert holder is not None and holder.startswith("process ")
            await one.operator.release_lease("discord:gateway:1")
            assert await two.operator.take_lease("discord:gateway:1") is None
        # Closing a runtime gives up what it held.
        assert [lease.name for lease in await store.leases()] == []


@tool(timeout_s=300)
async def forever() -> str:
    """Never finish (unless cancelled)."""
    await asyncio.Event().wait()
    return "never"


async def test_a_cancel_reaches_the_replica_holding_the_run_at_once() -> None:
    """On PostgreSQL a request is announced (NOTIFY): the replica that holds the run hears
    it at once, though it would poll only every 30 s, and stops the tool where it runs."""
    async with fresh_schema() as schema, \
            PostgresStore(PG_DSN, schema=schema, pool_size=3) as one, \
            PostgresStore(PG_DSN, schema=schema, pool_size=3) as two:
        slow = RuntimeConfig(poll_interval_s=30)
        async with Runtime(one, EchoProvider(), ToolRegistry([forever]), settings=slow) as a, \
                Runtime(two, EchoProvider(), ToolRegistry([forever]), settings=slow) as b:
            async with a.subscribe() as events:
                run = await a.submit("t", "/tool forever {}")
                async with asyncio.timeout(20):
                    while not isinstance(await events.next(), ToolCallStarted):
                        pass
            assert a.operator.holds(run.id) and not b.operator.holds(run.id)
            async with asyncio.timeout(10):  # well within one poll interval
                cancelled = await b.cancel(run.id, by="U2")
            assert cancelled.state is S.CANCELLED
            results = [e for e in await b.records.entries("t") if e.kind == "tool_result"]
            assert [r.tool_call_id for r in results] == ["echo_0"]
            assert "cancelled" in str(results[0].model_dump())


class ReleaseWatched(SQLiteStore):
    """The real store, telling a test when leases are given up."""

    released: asyncio.Event

    async def release_leases(self, holder: str, names: Sequence[str] | None = None) -> None:
        await super().release_leases(holder, names)
        self.released.set()


@asynccontextmanager
async def _lingering(tmp_path: Path, settings: RuntimeConfig
                     ) -> AsyncIterator[tuple[ReleaseWatched, Runtime]]:
    """A runtime whose thread ``t`` had a run and whose lease lingers now."""
    ReleaseWatched.released = asyncio.Event()
    async with ReleaseWatched(tmp_path / "maiden.db") as store, \
            Runtime(store, EchoProvider(), ToolRegistry([]), settings=settings) as rt:
        await rt.send("t", "one")
        await rt.idle()
        assert thread_lease("t") in {lease.name for lease in await store.leases()}
        yield store, rt


async def test_a_thread_lease_lingers_after_its_last_run_then_is_given_up(
        tmp_path: Path) -> None:
    """Kept for ``lease_linger_s`` after the thread's last run: its next message finds it
    held (no lease writes: the message is its acceptance, its start and its answer); then
    given up."""
    async with _lingering(tmp_path, RuntimeConfig(lease_linger_s=0.3)) as (store, rt):
        before = store.write_counts().transactions
        await rt.send("t", "two")
        await rt.idle()
        assert store.write_counts().transactions - before == 3
        assert not store.released.is_set()
        await asyncio.wait_for(store.released.wait(), 10)
        assert thread_lease("t") not in {lease.name for lease in await store.leases()}
        # Given up, the next message takes it again.
        assert (await rt.send("t", "three")).reply == "echo: three"


class ReleaseTimed(SQLiteStore):
    """The real store, noting when (the loop's time) each thread's lease is given up."""

    released_at: dict[str, float]
    both: asyncio.Event

    async def release_leases(self, holder: str, names: Sequence[str] | None = None) -> None:
        await super().release_leases(holder, names)
        for name in names or ():
            self.released_at.setdefault(name, asyncio.get_running_loop().time())
        if {thread_lease("a"), thread_lease("b")} <= set(self.released_at):
            self.both.set()


async def test_each_lingering_lease_is_given_up_linger_s_after_its_own_last_run(
        tmp_path: Path) -> None:
    """One timer serves every lingering thread: a thread whose lease lingers again after a
    later run keeps it for the whole linger from that run, though the timer was set for an
    earlier one, and each thread's lease ends at its own time."""
    linger = 0.4
    ReleaseTimed.released_at, ReleaseTimed.both = {}, asyncio.Event()
    async with ReleaseTimed(tmp_path / "maiden.db") as store, \
            Runtime(store, EchoProvider(), ToolRegistry([]),
                    settings=RuntimeConfig(lease_linger_s=linger)) as rt:
        loop = asyncio.get_running_loop()
        await rt.send("a", "one")
        await rt.idle()
        await rt.send("b", "one")  # b's linger is due after a's: the timer is set for a's
        await rt.idle()
        # Not a wait for something to happen: the time between a's two runs is what is
        # tested (the timer, set for a's first linger, fires before a's second ends).
        await asyncio.sleep(linger / 2)
        await rt.send("a", "two")  # a lingers again, from now
        await rt.idle()
        a_parked = loop.time()
        await asyncio.wait_for(store.both.wait(), 10)
    assert store.released_at[thread_lease("a")] >= a_parked + linger - 0.01
    assert store.released_at[thread_lease("b")] <= store.released_at[thread_lease("a")]


async def test_a_lingering_lease_is_given_up_once_another_runtime_serves_the_store(
        tmp_path: Path) -> None:
    """Lingering is for a runtime alone on its store: one that starts beside it finds the
    thread free as soon as the control loop has seen it."""
    settings = RuntimeConfig(lease_linger_s=60, lease_ttl_s=600, poll_interval_s=0.05)
    async with _lingering(tmp_path, settings) as (store, _), \
            SQLiteStore(tmp_path / "maiden.db") as other_store, \
            Runtime(other_store, EchoProvider(), ToolRegistry([]), settings=settings):
        await asyncio.wait_for(store.released.wait(), 10)
        assert thread_lease("t") not in {lease.name for lease in await store.leases()}


async def test_without_lingering_a_thread_lease_is_given_up_with_its_last_run(
        tmp_path: Path) -> None:
    settings = RuntimeConfig(lease_linger_s=0)
    async with SQLiteStore(tmp_path / "maiden.db") as store, \
            Runtime(store, EchoProvider(), ToolRegistry([]), settings=settings) as rt:
        await rt.send("t", "one")
        await rt.idle()
        assert thread_lease("t") not in {lease.name for lease in await store.leases()}
