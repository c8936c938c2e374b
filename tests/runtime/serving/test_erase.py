"""Erasing a thread through the runtime (``Runtime.delete_thread``): a run in progress is
cancelled first, wherever it runs; nothing of the thread is left, and a thread begun anew
under the same id holds only what came after, in this process and in another."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from runtime import (
    Erased,
    NotFound,
    Run,
    RunState,
    Runtime,
    RuntimeConfig,
    ScriptedProvider,
    SQLiteStore,
    ToolCallStarted,
    ToolRegistry,
    UserMessage,
    tool,
)
from runtime.stores.erasure import thread_lease
from tests.fakes.tools import until_cut_off
from tests.scripted import call

S = RunState
FAST = RuntimeConfig(poll_interval_s=0.05, lease_linger_s=0)
"""Another process's message on a thread is driven there, not handed to the lingerer."""
WAIT_S = 5.0



@tool
def look(q: str) -> str:
    """Look something up."""
    return f"found {q}"


async def submit_until_tool_runs(rt: Runtime, thread_id: str, text: str) -> Run:
    """Submit a message and wait until its run's tool is running (listening from before the
    submit, so a tool that starts at once is not missed)."""
    async with rt.subscribe() as events:
        run = await rt.submit(thread_id, text)
        while True:
            event = await asyncio.wait_for(events.next(), WAIT_S)
            if isinstance(event, ToolCallStarted) and event.run_id == run.id:
                return run


async def nothing_of(rt: Runtime, thread_id: str, run_ids: list[str]) -> None:
    assert await rt.records.entries(thread_id) == []
    assert await rt.records.runs(thread_id=thread_id) == []
    assert thread_id not in [t.id for t in await rt.records.threads()]
    for run_id in run_ids:
        with pytest.raises(NotFound):
            await rt.records.get_run(run_id)
        assert await rt.records.deliveries(run_id=run_id) == []


async def test_a_run_in_progress_is_cancelled_then_the_thread_erased(
        make_runtime: Any, tmp_path: Path) -> None:
    forever, stopped = until_cut_off()
    db = tmp_path / "m.db"
    async with make_runtime([{"text": "done"}, call("forever")], [forever], db=db) as (rt, _):
        done = await rt.send("t", "first")  # an ended run, and a run in progress behind it
        run = await submit_until_tool_runs(rt, "t", "go")
        erased = await asyncio.wait_for(rt.delete_thread("t", by="ops"), WAIT_S)
        assert stopped.is_set()  # its tool was cut off where it ran
        assert erased.existed and erased.runs == 2
        await nothing_of(rt, "t", [done.id, run.id])
        async with SQLiteStore(db) as store:  # the lease the worker kept is given up
            assert thread_lease("t") not in [lease.name for lease in await store.leases()]


async def test_deleting_is_idempotent_and_says_so(make_runtime: Any) -> None:
    async with make_runtime([{"text": "hi"}]) as (rt, _):
        assert await rt.delete_thread("never") == Erased("never")
        await rt.send("t", "hello")
        assert (await rt.delete_thread("t")).existed
        assert not (await rt.delete_thread("t")).existed


async def test_a_thread_begun_anew_is_new_to_the_model(make_runtime: Any) -> None:
    """Nothing this process held of the thread (its driver's entries, its window, the
    store's cache) reaches the model once the thread is erased."""
    async with make_runtime([{"text": "one"}, {"text": "stale"}]) as (rt, model):
        await rt.send("t", "remember the password is hunter2")
        await rt.delete_thread("t")
        again = await rt.send("t", "what is the password?")
        assert again.reply == "one"
        assert [e.text for e in model.calls[-1].entries if isinstance(e, UserMessage)] == \
            ["what is the password?"]


async def test_an_erasure_by_another_process_reaches_this_one(tmp_path: Path) -> None:
    """A server that drove the thread, after another process (`maiden threads delete`)
    erased it and it was begun anew there, as long as before: its model sees only the new
    thread (what it held of the old one is not taken for the new one's start)."""
    db = tmp_path / "m.db"
    model = ScriptedProvider([{"text": "one"}, {"text": "two"}])
    async with SQLiteStore(db) as store_a, SQLiteStore(db) as store_b:
        async with Runtime(store_a, model, settings=FAST) as server:
            await server.send("t", "a secret")
            await server.idle()  # its worker let the thread go: the next message is cli's
            cli = Runtime(store_b, ScriptedProvider([{"text": "fresh"}]), settings=FAST)
            await cli.start(recover=False, serve=False)
            try:
                assert (await cli.delete_thread("t")).existed
                assert (await cli.send("t", "a new start")).reply == "fresh"
            finally:
                await cli.close()
            again = await server.send("t", "anything?")
        assert again.reply == "two"
        assert [e.text for e in model.calls[-1].entries if isinstance(e, UserMessage)] == \
            ["a new start", "anything?"]


async def test_a_run_another_process_drives_is_cancelled_there(tmp_path: Path) -> None:
    forever, stopped = until_cut_off()
    db = tmp_path / "m.db"
    async with SQLiteStore(db) as store_a, SQLiteStore(db) as store_b:
        server = Runtime(store_a, ScriptedProvider([call("forever")]),
                         ToolRegistry([forever]), settings=FAST)
        cli = Runtime(store_b, ScriptedProvider([]), settings=FAST)
        async with server:
            await cli.start(recover=False, serve=False)
            try:
                run = await submit_until_tool_runs(server, "t", "go")
                erased = await asyncio.wait_for(cli.delete_thread("t", by="ops"), WAIT_S)
            finally:
                await cli.close()
            assert stopped.is_set() and erased.runs == 1
            await nothing_of(server, "t", [run.id])
