"""A thread's messages alternating between two replicas on one PostgreSQL schema (issue 53):
each is run once, in order, one run at a time, and none waits for a lingering lease or a
poll. Early on, one replica has not seen the other yet and keeps the thread's lease after
each run (it lingers): asked for the thread, it drives the other's message at once. Once
each has seen the other, a lease is given up after each run and the thread goes back and
forth. Either way the replica a message came to hears of its run's end through the store's
notifications, not its poll."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Awaitable, Callable

from runtime import (
    EchoProvider,
    Runtime,
    RuntimeConfig,
    Subscription,
    ToolCallStarted,
    ToolRegistry,
    tool,
)
from runtime.model.runs import RunState
from runtime.serving.control import live_instances
from runtime.stores.postgres import PostgresStore
from tests.postgres import PG_DSN, fresh_schema

S = RunState
TURNS = 50
LINGER_S = 10.0
"""Long, and the poll slow (its waiters look at the store every 4 x 2 s): a message that
waited for either would show at once."""
WAITED_S = 3.0
"""What a hand-off may take at most here: tens of ms where it comes at once, but up to a
second or two on a loaded machine (this is a bound that tells a hand-off that waited for
the linger or a poll from one that did not, not a measure of its speed: that is
``python -m bench``'s workload 9)."""


async def _until(holds: Callable[[], Awaitable[bool]]) -> None:
    """Look until ``holds()`` (the caller bounds the wait)."""
    for _ in itertools.count():
        if await holds():
            return
        await asyncio.sleep(0.01)


async def test_two_replicas_take_turns_on_a_thread_without_waiting() -> None:
    settings = RuntimeConfig(concurrency="thread", lease_linger_s=LINGER_S, poll_interval_s=2)
    async with fresh_schema() as schema, \
            PostgresStore(PG_DSN, schema=schema, pool_size=4) as one, \
            PostgresStore(PG_DSN, schema=schema, pool_size=4) as two, \
            Runtime(one, EchoProvider(), ToolRegistry([]), settings=settings) as a:
        # a's control loop has made its first round alone: it lets its leases linger until
        # its next round (2 s) finds b, so the early hand-offs from a are asked for.
        async def a_serves() -> bool:
            return a.operator.instance_id in {i.id for i in await live_instances(one)}

        async def t_let_go() -> bool:
            return "thread:t" not in {lease.name for lease in await one.leases()}

        async with asyncio.timeout(10):
            await _until(a_serves)
        async with Runtime(two, EchoProvider(), ToolRegistry([]), settings=settings) as b:
            replicas = [a, b]
            async with asyncio.timeout(60):
                for i in range(TURNS):
                    if i == TURNS // 2:
                        await _until(t_let_go)  # a's next round finds b: a lets go
                    answered = await replicas[i % 2].send("t", f"m{i}")
                    assert answered.state is S.COMPLETED, answered
            runs = await a.records.runs(thread_id="t")
            steps = {run.id: await a.records.transitions(run.id) for run in runs}
            entries = await b.records.entries("t")
    # Once each, in order.
    assert [run.text for run in runs] == [f"m{i}" for i in range(TURNS)]
    assert all(run.state is S.COMPLETED for run in runs)
    assert [(e.kind, getattr(e, "text", None)) for e in entries] == \
        [pair for i in range(TURNS) for pair in (("user", f"m{i}"), ("assistant", f"echo: m{i}"))]
    # One run at a time: each starts after the one before it ended (the store's times).
    spans = [(next(t.at for t in steps[r.id] if t.target is S.RUNNING),
              next(t.at for t in steps[r.id] if t.target is S.COMPLETED)) for r in runs]
    assert all(start <= end for start, end in spans)
    assert all(prev_end <= start for (_, prev_end), (start, _) in itertools.pairwise(spans))
    # Once they have seen each other, both run the thread's runs, handing it over.
    owners = [run.owner for run in runs]
    assert {a.operator.instance_id, b.operator.instance_id} <= set(owners[TURNS // 2:]), owners
    # No message waited for a lease's linger or a poll: taken up at once after its
    # acceptance, and its acceptance came at once after the run before it ended (its
    # sender had the reply by then, wherever the run was driven; but for the test's own
    # wait half way).
    waits = [(run.text, spans[i][0] - run.created_at,
              run.created_at - spans[i - 1][1] if i not in (0, TURNS // 2) else 0.0)
             for i, run in enumerate(runs)]
    slow = [w for w in waits if max(w[1:]) >= WAITED_S]
    assert not slow, slow


class Asking(PostgresStore):
    """The real store, counting the times this process asks for a thread."""

    asked = 0
    fourth: asyncio.Event

    async def ask_for_thread(self, thread_id: str) -> None:
        self.asked += 1
        if self.asked == 4:
            self.fourth.set()
        await super().ask_for_thread(thread_id)


HELD: dict[str, asyncio.Event] = {}


@tool(timeout_s=60)
async def hold(key: str) -> str:
    """Hold until the test lets ``key`` go."""
    await HELD[key].wait()
    return "held"


async def _started(events: Subscription, thread_id: str) -> None:
    while not isinstance(event := await events.next(), ToolCallStarted) \
            or event.thread_id != thread_id:
        pass


async def test_a_replica_waiting_for_a_thread_asks_once_a_poll() -> None:
    """A message for a thread whose lease another replica holds while its next run waits
    there (for that replica's lock, behind a long tool call) asks for the thread once each
    poll, not over and over (it hears its own ask too); all three are run in order."""
    HELD.update(t=asyncio.Event(), x=asyncio.Event())
    poll_s = 0.2
    settings = RuntimeConfig(concurrency="global", poll_interval_s=poll_s)
    tools = ToolRegistry([hold])
    async with fresh_schema() as schema, \
            PostgresStore(PG_DSN, schema=schema, pool_size=4) as one, \
            Asking(PG_DSN, schema=schema, pool_size=4) as two, \
            Runtime(one, EchoProvider(), tools, settings=settings) as a, \
            Runtime(two, EchoProvider(), tools, settings=settings) as b:
        async with a.subscribe() as events, asyncio.timeout(30):
            await a.submit("t", '/tool hold {"key": "t"}')
            await _started(events, "t")
            await a.submit("x", '/tool hold {"key": "x"}')  # waits for a's lock
            await a.submit("t", "m2")
            HELD["t"].set()  # a's lock goes to x; t's worker waits for it, holding t
            await _started(events, "x")
            two.fourth = asyncio.Event()
            asking = asyncio.create_task(b.send("t", "m3"))
            began = time.monotonic()
            await two.fourth.wait()
            took = time.monotonic() - began
            HELD["x"].set()
            third = await asking
        runs = await a.records.runs(thread_id="t")
        steps = [await a.records.transitions(run.id) for run in runs]
    assert took >= 2 * poll_s, (two.asked, took)  # once a poll (and once more at most)
    assert third.state is S.COMPLETED and third.reply == "echo: m3"
    assert [run.state for run in runs] == [S.COMPLETED] * 3
    spans = [(next(t.at for t in s if t.target is S.RUNNING),
              next(t.at for t in s if t.target is S.COMPLETED)) for s in steps]
    assert all(prev_end <= start for (_, prev_end), (start, _) in itertools.pairwise(spans))
