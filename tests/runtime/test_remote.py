"""Decisions and cancels reach a run wherever it lives: another runtime on the same store."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal

import pytest

from runtime import (
    AgentConfig,
    FilesStore,
    Origin,
    Run,
    RunError,
    RunState,
    Runtime,
    RuntimeConfig,
    ScriptedProvider,
    SQLiteStore,
    ToolCallStarted,
    ToolRegistry,
    tool,
)
from runtime.serving.control import ControlRequest, ask, live_instances
from tests.fakes.tools import until_cut_off
from tests.scripted import call

S = RunState
FAST = RuntimeConfig(poll_interval_s=0.05)



def request(kind: Literal["decide", "cancel", "resume"], run_id: str,
            **payload: Any) -> ControlRequest:
    """What `maiden cancel` or `maiden approve` asks of the serving process."""
    return ControlRequest(kind=kind, run_id=run_id, payload=payload, created_at=time.time())


def two_stores(kind: str, tmp_path: Path) -> tuple[Any, Any]:
    """Two store objects on the same storage, as two processes would have."""
    if kind == "files":
        return FilesStore(tmp_path / "files"), FilesStore(tmp_path / "files")
    return SQLiteStore(tmp_path / "m.db"), SQLiteStore(tmp_path / "m.db")


@pytest.mark.parametrize("kind", ["sqlite", "files"])
async def test_cancel_from_another_runtime_stops_the_tool_where_it_runs(
    tmp_path: Path, kind: str
) -> None:
    forever, stopped = until_cut_off()
    script = [call("forever"), {"text": "after"}]
    first, second = two_stores(kind, tmp_path)
    async with first as store_a, second as store_b:
        server = Runtime(store_a, ScriptedProvider(script), ToolRegistry([forever]),
                         settings=FAST)
        cli = Runtime(store_b, ScriptedProvider(script), settings=FAST)
        async with server:
            await cli.start(recover=False, serve=False)
            async with server.subscribe() as events:
                run = await server.submit("t", "go")
                while not isinstance(await asyncio.wait_for(events.next(), 5), ToolCallStarted):
                    pass
            assert [i.id for i in await live_instances(store_b)] == [server.operator.instance_id]
            answer = await ask(store_b, request("cancel", run.id, by="ops"))
            assert answer.ok and answer.handled_by == server.operator.instance_id
            assert stopped.is_set()
            ended = await server.records.get_run(run.id)
            assert ended.state is S.CANCELLED and ended.reason == "cancelled by ops"
        await cli.close()
        assert await live_instances(store_b) == []  # the server's heartbeat left with it


async def test_approval_from_another_runtime_runs_in_the_server(tmp_path: Path) -> None:
    ran: list[str] = []

    @tool(requires_approval=True)
    def restart(service: str) -> str:
        ran.append(service)
        return "ok"

    db = tmp_path / "m.db"
    script = [call("restart", service="db"), {"text": "restarted"}]
    async with SQLiteStore(db) as store_a, SQLiteStore(db) as store_b:
        server = Runtime(store_a, ScriptedProvider(script), ToolRegistry([restart]),
                         agent=AgentConfig(approvers=["alice"]), settings=FAST)
        cli = Runtime(store_b, ScriptedProvider([]), settings=FAST)
        async with server:
            paused = await server.send("t", "restart the db")
            assert paused.pending_approval is not None
            call_id = paused.pending_approval.tool_call_id
            refused = await ask(store_b, request("decide", paused.id, tool_call_id=call_id,
                                                 approve=True, by="mallory"))
            assert refused.ok is False and "may not decide" in (refused.result or "")
            answer = await ask(store_b, request("decide", paused.id, tool_call_id=call_id,
                                                approve=True, by="alice"))
            assert answer.ok
            done = await server.wait(paused.id)
        await cli.close()
    assert done.state is S.COMPLETED and ran == ["db"]


async def test_a_request_nobody_serves_times_out_clearly(tmp_path: Path) -> None:
    from runtime import RunError
    from runtime.serving.control import ControlRequest, ask

    async with SQLiteStore(tmp_path / "m.db") as store:
        with pytest.raises(RunError, match="no serving process answered"):
            await ask(store, ControlRequest(kind="cancel", run_id="x"), timeout_s=0.2,
                      poll_s=0.05)


async def test_a_run_held_by_a_live_process_is_not_recovered_by_another(tmp_path: Path) -> None:
    release = asyncio.Event()
    calls: list[str] = []

    @tool(effect="non_idempotent")
    async def slow(tag: str) -> str:
        calls.append(tag)
        await release.wait()
        return tag

    db = tmp_path / "m.db"
    # One script for both (as one agent.toml would be): the turn played follows the thread.
    script = [call("slow", tag="a"), {"text": "a done"}, {"text": "b done"}]
    async with SQLiteStore(db) as store_a, SQLiteStore(db) as store_b:
        a = Runtime(store_a, ScriptedProvider(script), ToolRegistry([slow]), settings=FAST)
        b = Runtime(store_b, ScriptedProvider(script), ToolRegistry([slow]), settings=FAST)
        async with a, b:
            async with a.subscribe() as events:
                held = await a.submit("t", "first")
                while not isinstance(await asyncio.wait_for(events.next(), 5), ToolCallStarted):
                    pass
            async with b.subscribe() as b_events:
                mine = await b.submit("t", "second")
                waiting = asyncio.create_task(b.wait(mine.id))
                event = await asyncio.wait_for(b_events.next(), 5)
            assert "waiting for process" in getattr(event, "reason", "")
            assert not waiting.done()
            release.set()
            assert (await a.wait(held.id)).reply == "a done"
            done = await asyncio.wait_for(waiting, 10)
            first = await a.records.get_run(held.id)
    assert done.reply == "b done"
    assert calls == ["a"]  # B never re-ran A's call
    assert first.recovery_attempts == 0


class FlakyChannel:
    """A test deliverer: posts into a list; the first send can fail before or after posting."""

    max_chars: int | None = None

    def __init__(self, fail: str | None) -> None:
        self.fail = fail
        self.posted: list[tuple[str, str]] = []

    async def send(self, delivery: Any) -> str:
        if self.fail == "before":
            self.fail = None
            raise ConnectionError("channel down")
        self.posted.append((delivery.key, delivery.text))
        if self.fail == "after":
            self.fail = None
            raise TimeoutError("posted, but the answer never came back")
        return f"msg-{len(self.posted)}"

    async def reconcile(self, delivery: Any) -> str | None:
        for i, (key, _) in enumerate(self.posted, 1):
            if key == delivery.key:
                return f"msg-{i}"
        return None


@pytest.mark.parametrize("fail", ["before", "after"])
async def test_a_reply_that_failed_to_send_is_retried_once(tmp_path: Path, fail: str) -> None:
    channel = FlakyChannel(fail)
    async with SQLiteStore(tmp_path / "m.db") as store:
        rt = Runtime(store, ScriptedProvider([{"text": "hello"}]), settings=FAST,
                     deliverers={"chat": channel})
        async with rt:
            run = await rt.send("t", "hi", origin=Origin(channel="chat", target={"room": "r"}))
            assert run.reply == "hello"
            (pending,) = await store.deliveries(pending=True)
            await rt.operator.flush_deliveries()
            assert await store.deliveries(pending=True) == []
            await rt.operator.flush_deliveries()  # nothing left to do
    assert channel.posted == [(pending.key, "hello")]


@asynccontextmanager
async def _a_run_driven_elsewhere(
    tmp_path: Path, *, serving: bool
) -> AsyncIterator[tuple[Runtime, SQLiteStore, Run, asyncio.Event]]:
    """Two runtimes on one store: the owner drives a run whose tool waits until it is
    cut off (the event says it was); the other, serving the store or not, is handed out
    (the caller, with its store), with the run."""
    forever, stopped = until_cut_off()
    script = [call("forever"), {"text": "after"}]
    db = tmp_path / "m.db"
    async with SQLiteStore(db) as store_a, SQLiteStore(db) as store_b:
        owner = Runtime(store_a, ScriptedProvider(script), ToolRegistry([forever]),
                        settings=FAST)
        caller = Runtime(store_b, ScriptedProvider(script), settings=FAST)
        try:
            async with owner:
                await caller.start(recover=False, serve=serving)
                async with owner.subscribe() as events:
                    run = await owner.submit("t", "go")
                    while not isinstance(await asyncio.wait_for(events.next(), 5),
                                         ToolCallStarted):
                        pass
                yield caller, store_b, run, stopped
        finally:
            await caller.close()


@pytest.mark.parametrize("serving", [False, True])
async def test_cancel_from_any_caller_is_routed_to_the_owner(
    tmp_path: Path, serving: bool
) -> None:
    """``Runtime.cancel`` itself finds the live process driving the run and asks it, whether
    the caller serves the store too (a second `maiden run`, a Slack button) or not (the CLI)."""
    async with _a_run_driven_elsewhere(tmp_path, serving=serving) as (caller, _, run,
                                                                      stopped):
        ended = await caller.cancel(run.id, by="ops")
        assert stopped.is_set()  # the tool stopped where it ran
        assert ended.state is S.CANCELLED and ended.reason == "cancelled by ops"
        assert not caller.operator.holds(run.id)


async def test_a_cancel_answering_a_request_is_never_forwarded(tmp_path: Path) -> None:
    """The control loop answers a cancel request with ``cancel(forward=False)``: a run
    that another live process drives is left to it (its own request; the loop's view of
    who is alive may be a round old), rather than asked of it again while this request
    waits for that one (up to its timeout, if that process is on its way out)."""
    async with _a_run_driven_elsewhere(tmp_path, serving=True) as (caller, store, run,
                                                                   stopped):
        with pytest.raises(RunError) as refused:
            await asyncio.wait_for(caller.cancel(run.id, by="ops", forward=False), 5)
        assert refused.value.reason == "driven_elsewhere"
        assert not stopped.is_set()
        assert not (await store.get_run(run.id)).terminal  # (its start is held there)
        assert await store.requests() == []  # nothing was asked of the owner
        ended = await caller.cancel(run.id, by="ops")  # forwarded, as usual
        assert ended.state is S.CANCELLED and stopped.is_set()


async def test_waiters_on_runs_another_runtime_drives_learn_their_ends_from_the_store(
        tmp_path: Path) -> None:
    """A run another process drives sends this one no events: whoever waits on it here
    (``wait``, ``follow``) looks at the store now and then, all of them on one timer, and
    sees it end there."""
    go = asyncio.Event()

    @tool
    async def hold() -> str:
        await go.wait()
        return "held"

    script = [call("hold"), {"text": "done"}]
    first, second = two_stores("sqlite", tmp_path)
    async with first as store_a, second as store_b:
        server = Runtime(store_a, ScriptedProvider(script), ToolRegistry([hold]),
                         settings=RuntimeConfig(poll_interval_s=0.05, concurrency="thread"))
        cli = Runtime(store_b, ScriptedProvider(script), settings=FAST)
        async with server:
            await cli.start(recover=False, serve=False)
            async with server.subscribe() as events:
                runs = [await server.submit(f"t{i}", "go") for i in range(2)]
                started = 0
                while started < 2:
                    started += isinstance(await asyncio.wait_for(events.next(), 5),
                                          ToolCallStarted)
            waits = [asyncio.create_task(cli.wait(run.id)) for run in runs]
            followed = asyncio.create_task(_kinds(cli, runs[0].id))
            go.set()
            async with asyncio.timeout(10):
                ended = await asyncio.gather(*waits)
                kinds = await followed
            assert [run.state for run in ended] == [S.COMPLETED, S.COMPLETED]
            assert [run.reply for run in ended] == ["done", "done"]
            assert kinds[-1] == "run.completed"
            assert not cli.operator.holds(runs[0].id)
        await cli.close()


async def _kinds(rt: Runtime, run_id: str) -> list[str]:
    return [event.kind async for event in rt.follow(run_id)]
