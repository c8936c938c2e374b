"""How a caller waits on a run (runtime/serving/waiting.py): ``follow`` shows a run from
its start and ends with its end; ``wait`` hands back the run as it ended; a run written to
the store by a process that drives nothing is taken up here."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from runtime import (
    Run,
    RunEnded,
    RunEvent,
    RunState,
    Runtime,
    RuntimeConfig,
    ScriptedProvider,
    SQLiteStore,
    StoreError,
    TextDelta,
    ToolCallStarted,
    ToolRegistry,
    tool,
)
from tests.scripted import call, events_until

S = RunState




async def test_follow_streams_a_run_from_its_start_and_ends_with_its_end(
    make_runtime: Any,
) -> None:
    gate = asyncio.Event()

    @tool
    async def wait_here() -> str:
        await gate.wait()
        return "ok"

    async with make_runtime([call("wait_here"), {"text": "finished"}], [wait_here]) as (rt, _):
        async with rt.subscribe() as events:
            run = await rt.submit("t", "go")
            await anext(events_until(events, ToolCallStarted))
        # Following after the run started still shows it from its start.
        follower = rt.follow(run.id)
        first = await anext(follower)
        gate.set()
        rest = [event async for event in follower]
        ended = rest[-1]
        assert first.kind == "run.started"
        assert isinstance(ended, RunEnded) and ended.kind == "run.completed"
        assert ended.reply == "finished"
        assert any(isinstance(e, ToolCallStarted) for e in [first, *rest])
        # A run that has ended: only its end.
        assert [e.kind async for e in rt.follow(run.id)] == ["run.completed"]


async def test_a_run_just_accepted_is_followed_from_its_start_even_once_it_ended(
    make_runtime: Any,
) -> None:
    """Its worker starts while the message is flushed, so a run may be answered before
    whoever submitted it begins to follow it (an HTTP stream, the OpenAI wire): followed
    as ``accepted``, it is still shown from its start; followed otherwise, only its end."""
    async with make_runtime([{"text": "one"}, {"text": "two"}]) as (rt, _):
        run = await rt.submit("t", "hi")
        await rt.wait(run.id)
        kinds = [e.kind async for e in rt.follow(run.id, accepted=True)]
        assert kinds[0] == "run.started" and kinds[-1] == "run.completed" and len(kinds) > 2
        assert [e.kind async for e in rt.follow(run.id)] == ["run.completed"]


async def test_a_follower_after_submit_misses_nothing(make_runtime: Any) -> None:
    async with make_runtime([{"text": "streamed words"}]) as (rt, _):
        run = await rt.submit("t", "hi")
        await asyncio.sleep(0)  # the worker may start, even end, before the follower subscribes
        events = [e async for e in rt.follow(run.id, accepted=True)]
    assert [e.kind for e in events] == ["run.started", "run.state", "text.delta",
                                        "model.answered", "run.state", "run.completed"]
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "streamed words"


async def test_a_run_that_ended_is_handed_back_as_stored(make_runtime: Any) -> None:
    async with make_runtime([{"text": "hello"}]) as (rt, provider):
        run = await rt.send("t", "hi")
        assert await rt.wait(run.id) == await rt.records.get_run(run.id) == run
    assert len(provider.calls) == 1  # waiting drove nothing more


async def test_a_run_queued_by_a_process_that_drives_nothing_is_taken_up_by_its_waiter(
        tmp_path: Path) -> None:
    """A runtime that does not serve the store (``maiden chat``, a CLI) and sees no process
    that does: whoever waits here on a queued run has it driven here."""
    async with SQLiteStore(tmp_path / "maiden.db") as store:
        rt = Runtime(store, ScriptedProvider([{"text": "hello"}]))
        await rt.start(recover=False, serve=False)
        try:
            for n, thread in enumerate(("t", "u")):  # queued by a process that left
                await store.create_run(Run(id=f"{n:032x}", thread_id=thread, text="hi"))
            async with asyncio.timeout(10):
                run = await rt.wait(f"{0:032x}")
                kinds = [e.kind async for e in rt.follow(f"{1:032x}")]
            assert (run.state, run.reply) == (S.COMPLETED, "hello")
            assert kinds[0] == "run.started" and kinds[-1] == "run.completed"
        finally:
            await rt.close()


class ReadsFail(SQLiteStore):
    """Its ``get_run`` fails while ``down`` (PostgreSQL cut for a moment); ``failed`` is
    set at the third failure (a follower's first look, then two at its nudges)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.down = False
        self.failures = 0
        self.failed = asyncio.Event()

    async def get_run(self, run_id: str) -> Run:
        if self.down:
            self.failures += 1
            if self.failures == 3:
                self.failed.set()
            raise StoreError("postgres schema s: unexpected connection_lost() call")
        return await super().get_run(run_id)


async def test_a_follower_goes_on_following_while_the_store_cannot_be_read(
        tmp_path: Path) -> None:
    """chaos seed 10202: an event stream (`Accept: text/event-stream`, the OpenAI wire's)
    broke with a traceback when one of its looks at the store met the store cut for a
    moment ("Caught handled exception, but response already started"): the person lost
    the rest of a run that went on. The follower looks again at its next nudge."""
    gate = asyncio.Event()

    @tool
    async def wait_here() -> str:
        await gate.wait()
        return "ok"

    store = ReadsFail(tmp_path / "m.db")
    rt = Runtime(store, ScriptedProvider([call("wait_here"), {"text": "finished"}]),
                 ToolRegistry([wait_here]), settings=RuntimeConfig(poll_interval_s=0.01))
    async with store, rt:
        async with rt.subscribe() as events:
            run = await rt.submit("t", "go")
            await anext(events_until(events, ToolCallStarted))
        store.down = True  # no event comes while the tool waits: the follower looks
        async with asyncio.timeout(10):
            followed = asyncio.create_task(kinds_of(rt.follow(run.id)))
            await store.failed.wait()
            store.down = False
            gate.set()
            kinds = await followed
    assert kinds[0] == "run.started" and kinds[-1] == "run.completed"


async def kinds_of(events: AsyncIterator[RunEvent]) -> list[str]:
    return [event.kind async for event in events]
