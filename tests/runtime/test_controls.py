"""Approvals, budgets and cancellation: the run pauses, stops and spends only as allowed."""

from __future__ import annotations

import asyncio
import gc
import os
import sys
import weakref
from pathlib import Path
from typing import Any

import pytest

from runtime import (
    AssistantTurn,
    EchoProvider,
    ModelRequest,
    ModelResponse,
    Notice,
    RunError,
    RunState,
    Runtime,
    RuntimeConfig,
    ScriptedProvider,
    SQLiteStore,
    TextDelta,
    ToolCallStarted,
    ToolContext,
    ToolRegistry,
    ToolResult,
    tool,
)
from runtime.model.config import AgentConfig
from runtime.model.entries import LATE_RESULT, RUN_FAILED
from runtime.model.runs import ReplyDelivery
from runtime.providers import anthropic, openai
from runtime.tools.process import run_process
from tests.fakes.anthropic import _check_messages as anthropic_rules
from tests.fakes.openai import _check_messages as openai_rules
from tests.scripted import call

S = RunState



def kinds(entries: list[Any]) -> list[str]:
    return [e.kind for e in entries]


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


@tool(effect="non_idempotent", requires_approval=True)
def deploy(service: str) -> str:
    """Deploy a service."""
    return f"deployed {service}"


@tool
def look(q: str) -> str:
    """Look."""
    return q


# -- approvals ---------------------------------------------------------------------------------


async def test_a_decision_on_another_call_is_refused(make_runtime: Any) -> None:
    script = [call("deploy", service="api"), {"text": "done"}]
    async with make_runtime(script, [deploy]) as (rt, _):
        run = await rt.send("t", "ship it")
        pending = run.pending_approval
        assert pending is not None
        with pytest.raises(RunError, match="waiting for call") as stale:
            await rt.decide(run.id, "some-other-call", approve=True)
        assert stale.value.reason == "stale_approval"
        with pytest.raises(RunError, match="arguments of deploy changed"):
            await rt.decide(run.id, pending.tool_call_id, approve=True,
                            arguments_hash="0" * 64)
        await rt.decide(run.id, pending.tool_call_id, approve=True,
                        arguments_hash=pending.arguments_hash)
        done = await rt.wait(run.id)
        assert done.state is S.COMPLETED
        with pytest.raises(RunError) as late:
            await rt.decide(run.id, pending.tool_call_id, approve=True)
        assert late.value.reason == "not_awaiting_approval"


async def test_approval_timeout_then_a_late_approval_resumes(make_runtime: Any) -> None:
    clock = Clock()
    script = [call("deploy", service="api"), {"text": "meanwhile answer"}, {"text": "deployed it"}]
    async with make_runtime(script, [deploy], approval_timeout_s=60, clock=clock) as (rt, p):
        run = await rt.send("t", "ship it")
        assert run.state is S.AWAITING_APPROVAL
        expire = rt._upkeep.expire_approvals  # what the serving loop does at each poll
        assert await expire() == []  # not yet
        clock.now += 61
        await expire()  # (or the serving loop's own poll did, first: failed once under load)
        expired = await rt.records.get_run(run.id)
        assert expired.state is S.TIMED_OUT and expired.reason == "approval_timeout"
        assert "no decision on deploy within 60 s" in (expired.error or "")
        # The thread is usable meanwhile, and the model sees a valid history.
        other = await rt.send("t", "meanwhile")
        assert other.reply == "meanwhile answer"
        seen = p.calls[1].entries
        assert kinds(list(seen)) == ["user", "assistant", "tool_result", "user"]
        assert seen[2].content["error"]["type"] == "cancelled"
        pending = expired.pending_approval
        assert pending is not None
        await rt.decide(run.id, pending.tool_call_id, approve=True, by="ops")
        done = await rt.wait(run.id)
        transitions = [t.reason for t in await rt.records.transitions(run.id)]
    assert done.state is S.COMPLETED and done.reply == "deployed it"
    assert "approval_timeout" in transitions and "approved by ops: deploy" in transitions


class DecidedMeanwhile(SQLiteStore):
    """An SQLite store whose next read of a thread's entries first lets ``decide`` run: a
    decision another process makes between this one's read of a run and its write."""

    decide: Any = None

    async def load_entries(self, thread_id: str, **page: Any) -> Any:
        if self.decide is not None:
            decide, self.decide = self.decide, None
            await decide()
        return await super().load_entries(thread_id, **page)


async def test_an_approval_decided_elsewhere_as_it_times_out_here_stays_decided(
        tmp_path: Path) -> None:
    """A replica starting with its clock ahead times out a run's approval as another replica
    approves it (the chaos soak's surprise: ``maiden run`` exited with "run … is not at
    version 3"): the decision stands, and the start goes on."""
    clock = Clock()
    db = tmp_path / "m.db"
    agent = AgentConfig(approval_timeout_s=60)
    async with SQLiteStore(db) as store_b, DecidedMeanwhile(db) as store_a:
        b = Runtime(store_b, ScriptedProvider([call("deploy", service="api"),
                                               {"text": "deployed"}]),
                    ToolRegistry([deploy]), agent=agent, clock=clock)
        ahead = Clock()
        ahead.now = clock.now + 61
        a = Runtime(store_a, ScriptedProvider([]), ToolRegistry([deploy]), agent=agent,
                    clock=ahead)
        async with b:
            run = await b.send("t", "ship it")
            pending = run.pending_approval
            assert run.state is S.AWAITING_APPROVAL and pending is not None
            await a.start(recover=False, serve=False)
            try:
                store_a.decide = lambda: b.decide(run.id, pending.tool_call_id,
                                                  approve=True, by="ops")
                assert await a._upkeep.expire_approvals() == []
            finally:
                await a.close()
            done = await b.wait(run.id)
            sent = [d.text for d in await b.records.deliveries(run_id=run.id)
                    if isinstance(d, ReplyDelivery)]
    assert done.state is S.COMPLETED and done.reply == "deployed"
    assert not any("Nobody approved" in text for text in sent)


class Reads:
    """The offline model (echo), answering from what it is sent; keeps every request."""

    model = "echo"

    def __init__(self) -> None:
        self.echo, self.calls = EchoProvider(), list[ModelRequest]()

    async def complete(self, request: ModelRequest, on_text: Any = None) -> ModelResponse:
        self.calls.append(request)
        return await self.echo.complete(request, on_text)


async def test_a_run_under_way_goes_on_before_a_late_decided_older_run(tmp_path: Path) -> None:
    """The chaos soak's finding 9: a run whose approval timed out, decided late while the
    thread's next run was under way in a process that then stopped. The older run, queued
    again, was driven first at the next start, in the middle of the other's rounds; that
    one then answered the older run's message. The run under way goes on first."""
    clock = Clock()
    db = tmp_path / "m.db"
    let_go = asyncio.Event()
    started = asyncio.Event()

    @tool
    async def wait(n: int) -> str:
        """Wait until let go."""
        started.set()
        await let_go.wait()
        return f"waited {n}"

    agent = AgentConfig(approval_timeout_s=60)
    registry = [deploy, wait]
    async with SQLiteStore(db) as store:
        first = Runtime(store, Reads(), ToolRegistry(registry), agent=agent, clock=clock,
                        settings=RuntimeConfig(shutdown_grace_s=0.1))
        async with first:
            old = await first.send("t", '/tool deploy {"service": "api"}')
            assert old.state is S.AWAITING_APPROVAL and old.pending_approval is not None
            clock.now += 61
            (expired,) = await first._upkeep.expire_approvals()
            assert expired.state is S.TIMED_OUT
            under_way = await first.submit("t", '/tool wait {"n": 2}')
            await asyncio.wait_for(started.wait(), 10)
            await first.decide(old.id, old.pending_approval.tool_call_id, approve=True,
                               by="ops")
        # Stopped with the run under way at its checkpoint, and the old one queued again.
        assert (await store.get_run(under_way.id)).state in (S.RUNNING, S.AWAITING_TOOL)
        let_go.set()
        second = Runtime(store, Reads(), ToolRegistry(registry), agent=agent, clock=clock)
        async with second:
            await second.start(recover=True, serve=False)
            done = await second.wait(under_way.id)
            late = await second.wait(old.id)
            entries = await second.records.entries("t")
    assert done.state is S.COMPLETED and done.reply == 'wait returned "waited 2"'
    assert late.state is S.COMPLETED and (late.reply or "").startswith("deploy returned")
    answers = [e.run_id for e in entries if isinstance(e, AssistantTurn) and e.text]
    assert answers == [under_way.id, old.id]  # its rounds were not interleaved with the other's


@pytest.mark.parametrize("approve", [True, False])
async def test_a_late_decision_answers_its_own_message(make_runtime: Any, approve: bool) -> None:
    """Chaos finding 1 (``late-decision-context``): a run whose approval timed out while
    later messages of its thread were answered, decided then, goes on answering its own
    message, not the thread's last one: its late result is beside its call (the APIs want
    it there) and a notice where it came says whose answer goes on."""
    clock = Clock()
    ask = '/tool deploy {"service": "api"}'
    async with make_runtime([], [deploy], approval_timeout_s=60, clock=clock,
                            provider=lambda _: Reads()) as (rt, model):
        run = await rt.send("t", ask)
        assert run.state is S.AWAITING_APPROVAL and run.pending_approval is not None
        clock.now += 61
        (expired,) = await rt._upkeep.expire_approvals()
        assert expired.state is S.TIMED_OUT
        other = await rt.send("t", "meanwhile")
        assert other.reply == "echo: meanwhile"
        await rt.decide(run.id, run.pending_approval.tool_call_id, approve=approve, by="ops")
        done = await rt.wait(run.id)
        after = await rt.send("t", "and now?")
        entries = await rt.records.entries("t")
    # Its own call's result is what it answers, not "meanwhile" a second time.
    assert done.state is S.COMPLETED and done.reply != other.reply
    assert (done.reply or "").startswith('deploy returned ' + (
        '"deployed api"' if approve else '{"error": {"type": "denied"'))
    assert after.reply == "echo: and now?"
    # What the model was asked when the run went on: the result beside its call, and last
    # a notice naming the run's own message; valid on both wires, ending with the user.
    resumed = next(r for r in model.calls if r.run_id == run.id and any(
        isinstance(e, ToolResult) and e.run_id == run.id for e in r.entries))
    last = resumed.entries[-1]
    assert isinstance(last, Notice) and last.code == LATE_RESULT and ask in last.text
    for wire, check in ((openai, openai_rules),
                        (anthropic, lambda m: anthropic_rules(m, True))):
        messages = wire.to_messages(resumed.entries)
        assert check(messages) is None
        content = messages[-1]["content"]
        said = content if isinstance(content, str) else " ".join(b["text"] for b in content)
        assert messages[-1]["role"] == "user" and ask in said
    # The thread as stored stays well-formed: each result after its call, one per call,
    # every call answered; the late result is where it came, after "meanwhile".
    calls = {c.id for e in entries if isinstance(e, AssistantTurn) for c in e.tool_calls}
    results = [e.tool_call_id for e in entries if isinstance(e, ToolResult)]
    assert sorted(results) == sorted(calls) and len(set(results)) == len(results)
    assert kinds(entries) == ["user", "assistant", "user", "assistant", "tool_result",
                              "assistant", "user", "assistant"]
    for request in model.calls:  # every request the model got is one the APIs accept
        assert openai_rules(openai.to_messages(request.entries)) is None
        assert anthropic_rules(anthropic.to_messages(request.entries), True) is None


async def test_runs_decided_after_one_another_each_answer_their_own(make_runtime: Any) -> None:
    """Chaos finding 1 again (seed 3): a run timed out, the next message's run waits for
    its own approval; the first is decided and answers, then the second is: it goes on
    after the first's answer, and answers its own message, not the first one's."""
    clock = Clock()
    async with make_runtime([], [deploy], approval_timeout_s=60, clock=clock,
                            provider=lambda _: Reads()) as (rt, model):
        first = await rt.send("t", '/tool deploy {"service": "api"}')
        clock.now += 61
        (expired,) = await rt._upkeep.expire_approvals()
        assert expired.id == first.id
        second = await rt.send("t", '/tool deploy {"service": "web"}')
        assert second.state is S.AWAITING_APPROVAL and second.pending_approval is not None
        assert first.pending_approval is not None
        await rt.decide(first.id, first.pending_approval.tool_call_id, approve=True)
        assert (await rt.wait(first.id)).reply == 'deploy returned "deployed api"'
        await rt.decide(second.id, second.pending_approval.tool_call_id, approve=True)
        assert (await rt.wait(second.id)).reply == 'deploy returned "deployed web"'
    last = model.calls[-1].entries[-1]
    assert isinstance(last, Notice) and last.code == LATE_RESULT and '"web"' in last.text


async def test_pending_approval_records_who_and_where(make_runtime: Any) -> None:
    from runtime import Origin

    async with make_runtime([call("deploy", service="api")], [deploy]) as (rt, _):
        run = await rt.send("t", "ship it", origin=Origin(channel="slack", user="U42",
                                                         target={"channel": "C1"}))
    pending = run.pending_approval
    assert pending is not None
    assert (pending.asked_by, pending.channel, pending.target) == ("U42", "slack",
                                                                   {"channel": "C1"})
    assert pending.arguments == {"service": "api"} and len(pending.arguments_hash) == 64


# -- budgets -----------------------------------------------------------------------------------


def usage(inp: int, out: int) -> dict[str, int]:
    return {"input_tokens": inp, "output_tokens": out}


@pytest.mark.parametrize(
    ("budget", "turns_run", "which"),
    [
        ({"max_input_tokens": 250}, 3, "max_input_tokens"),
        ({"max_output_tokens": 25}, 3, "max_output_tokens"),
        ({"max_total_tokens": 270}, 3, "max_total_tokens"),
        ({"max_cost_usd": 0.00027}, 3, "max_cost_usd"),
    ],
)
async def test_each_budget_stops_the_run_before_the_next_turn(
    make_runtime: Any, budget: dict[str, Any], turns_run: int, which: str
) -> None:
    # Every turn costs 100 input + 10 output tokens = $0.00011 at $1/M in, $1/M out.
    script = [{**call("look", q=str(i)), "usage": usage(100, 10)} for i in range(6)]
    async with make_runtime(script, [look], budget=budget,
                            prices={"input": 1.0, "output": 1.0}) as (rt, provider):
        run = await rt.send("t", "spend")
        entries = await rt.records.entries("t")
    assert run.state is S.FAILED and run.reason == "budget_exceeded"
    assert which in (run.error or "")
    assert len(provider.calls) == turns_run == run.turns
    # Nothing half-written: every call of every turn has its result, the last is a result,
    # then the notice that closes the failed run.
    results = [e for e in entries if isinstance(e, ToolResult)]
    assert len(results) == turns_run and isinstance(entries[-2], ToolResult)
    assert isinstance(entries[-1], Notice) and entries[-1].code == RUN_FAILED
    # At 80% of the budget the last turn was announced and offered no tools.
    assert any(isinstance(e, Notice) and e.code == "final_turn" for e in entries)
    assert provider.calls[-1].tools == ()


async def test_tool_call_budget(make_runtime: Any) -> None:
    turn = {"tool_calls": [{"name": "look", "arguments": {"q": str(i)}} for i in range(3)]}
    script = [turn, {"text": "answered with two"}]
    async with make_runtime(script, [look], budget={"max_tool_calls": 2}) as (rt, provider):
        run = await rt.send("t", "go")
        entries = await rt.records.entries("t")
    results = [e for e in entries if isinstance(e, ToolResult)]
    assert [r.is_error for r in results] == [False, False, True]
    assert results[2].content["error"]["type"] == "too_many_calls"
    # Spending the last allowed call still leaves a (tool-less) turn to answer in.
    assert run.state is S.COMPLETED and provider.calls[-1].tools == ()


async def test_wall_clock_budget(make_runtime: Any) -> None:
    clock = Clock()

    @tool
    def slow_step() -> str:
        clock.now += 40
        return "ok"

    script = [call("slow_step"), call("slow_step"), {"text": "never"}]
    async with make_runtime(script, [slow_step], budget={"max_wall_s": 60},
                            clock=clock) as (rt, _):
        run = await rt.send("t", "go")
    assert run.state is S.FAILED and "max_wall_s" in (run.error or "")


async def test_thread_day_cost_budget_spans_runs(make_runtime: Any) -> None:
    script = [{"text": f"a{i}", "usage": usage(1000, 0)} for i in range(5)]
    async with make_runtime(script, budget={"max_cost_usd_per_thread_day": 0.0025},
                            prices={"input": 1.0}) as (rt, _):
        runs = [await rt.send("t", f"m{i}") for i in range(4)]
        other_thread = await rt.send("u", "fresh thread")
    assert [r.state for r in runs] == [S.COMPLETED, S.COMPLETED, S.COMPLETED, S.FAILED]
    assert runs[3].reason == "budget_exceeded" and runs[0].cost_usd == pytest.approx(0.001)
    assert other_thread.state is S.COMPLETED


async def test_usage_and_cost_persist_across_a_resume(make_runtime: Any) -> None:
    script = [{**call("look", q="a"), "usage": usage(100, 10)}, {"error": "overloaded"}]
    async with make_runtime(script, [look], prices={"input": 2.0, "output": 4.0}) as (rt, p):
        run = await rt.send("t", "go")
        assert run.usage.input_tokens == 100 and run.cost_usd == pytest.approx(0.00024)
        p.turns[1] = p.turns[1].model_copy(update={"error": None, "text": "ok"})
        await rt.resume(run.id)
        run = await rt.wait(run.id)
    assert run.state is S.COMPLETED and run.usage.input_tokens == 110


# -- cancellation ------------------------------------------------------------------------------


async def test_cancel_during_an_async_tool_then_a_normal_message(make_runtime: Any) -> None:
    started = asyncio.Event()
    cancelled = asyncio.Event()

    @tool
    async def wait_forever() -> str:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    script = [call("wait_forever"), {"text": "fresh answer"}]
    async with make_runtime(script, [wait_forever]) as (rt, _):
        run = await rt.submit("t", "go")
        await asyncio.wait_for(started.wait(), 5)
        ended = await rt.cancel(run.id, by="alice")
        assert cancelled.is_set()
        assert ended.state is S.CANCELLED and ended.reason == "cancelled by alice"
        entries = await rt.records.entries("t")
        assert entries[-1].content["error"]["type"] == "cancelled"
        after = await rt.send("t", "and now?")
    assert after.state is S.COMPLETED and after.reply == "fresh answer"


async def test_cancel_during_a_model_stream(make_runtime: Any) -> None:
    class StuckStream:
        """A provider that streams one delta, then hangs like a stalled connection."""

        closed = False

        async def complete(self, request: Any, on_text: Any = None) -> Any:
            await on_text("partial")
            try:
                await asyncio.Event().wait()
            finally:
                StuckStream.closed = True

    class Switch:
        """Stuck first, then the script."""

        def __init__(self, then: Any) -> None:
            self.now: Any = StuckStream()
            self.then = then

        async def complete(self, request: Any, on_text: Any = None) -> Any:
            return await self.now.complete(request, on_text)

    async with make_runtime([{"text": "back to normal"}], provider=Switch) as (rt, switch):
        async with rt.subscribe() as events:
            run = await rt.submit("t", "go")
            while not isinstance(await asyncio.wait_for(events.next(), 5), TextDelta):
                pass
            ended = await rt.cancel(run.id)
        entries = await rt.records.entries("t")
        switch.now = switch.then
        after = await asyncio.wait_for(rt.send("t", "next"), 10)
    assert StuckStream.closed and ended.state is S.CANCELLED
    assert kinds(entries) == ["user"]
    assert after.reply == "back to normal"


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
async def test_cancel_kills_a_subprocess_tool(make_runtime: Any, tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    script_py = tmp_path / "stubborn.py"
    # The child ignores SIGTERM, so only the SIGKILL after the grace period ends it.
    script_py.write_text(
        "import os, signal, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        f"open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
        "time.sleep(600)\n")

    @tool(timeout_s=120)
    async def long_job(ctx: ToolContext) -> str:
        result = await run_process(sys.executable, str(script_py), grace_s=0.2)
        return result.stdout

    async with make_runtime([call("long_job"), {"text": "next"}], [long_job]) as (rt, _):
        async with rt.subscribe() as events:
            run = await rt.submit("t", "go")
            while not isinstance(await asyncio.wait_for(events.next(), 5), ToolCallStarted):
                pass
        for _ in range(500):
            if pid_file.exists() and pid_file.read_text():
                break
            await asyncio.sleep(0.01)
        pid = int(pid_file.read_text())
        ended = await rt.cancel(run.id)
        assert ended.state is S.CANCELLED
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)  # reaped: really gone
        assert (await rt.send("t", "again")).reply == "next"


async def test_cancel_a_queued_run_and_one_awaiting_approval(make_runtime: Any) -> None:
    script = [call("deploy", service="x"), {"text": "second"}]
    async with make_runtime(script, [deploy]) as (rt, _):
        paused = await rt.send("t", "ship")
        queued = await rt.submit("t", "then this")
        await rt.idle()
        cancelled = await rt.cancel(paused.id)
        assert cancelled.state is S.CANCELLED and cancelled.pending_approval is None
        # The run behind it goes now, with the cancelled call answered in the history.
        assert (await rt.wait(queued.id)).reply == "second"
        entries = await rt.records.entries("t")
    result = next(e for e in entries if isinstance(e, ToolResult))
    assert result.content["error"]["type"] == "cancelled"


async def test_shutdown_is_not_cancellation(make_runtime: Any, tmp_path: Path) -> None:
    gate = asyncio.Event()

    @tool
    async def step(n: int) -> int:
        gate.set()
        return n

    script = [call("step", n=1), call("step", n=2), {"text": "finished"}]
    db = tmp_path / "shared.db"
    async with make_runtime(script, [step], db=db) as (rt, _):
        run = await rt.submit("t", "go")
        await asyncio.wait_for(gate.wait(), 5)
        # Leaving the context closes the runtime: the run stops at a checkpoint.
    async with make_runtime(script, [step], db=db) as (rt2, _):
        stopped_at = await rt2.records.get_run(run.id)
        done = await rt2.wait(run.id)
        transitions = [t.reason for t in await rt2.records.transitions(run.id)]
    assert stopped_at.state in (S.RUNNING, S.AWAITING_TOOL, S.COMPLETED)
    assert done.state is S.COMPLETED and done.recovery_attempts == 0
    assert not any(r.startswith("recovered after crash") for r in transitions)


async def test_a_run_cut_off_at_shutdown_is_not_counted_as_a_crash(
    make_runtime: Any, tmp_path: Path
) -> None:

    started = asyncio.Event()
    hang = [True]

    @tool
    async def outlast(n: int) -> int:
        started.set()
        if hang[0]:
            await asyncio.Event().wait()  # longer than any grace period
        return n

    script = [call("outlast", n=1), {"text": "finished"}]
    db = tmp_path / "cut.db"
    async with make_runtime(script, [outlast], db=db,
                            settings={"shutdown_grace_s": 0.05}) as (rt, _):
        run = await rt.submit("t", "go")
        queued = await rt.submit("t", "behind it")
        await asyncio.wait_for(started.wait(), 5)
        waiting = asyncio.create_task(rt.wait(queued.id))
        await asyncio.sleep(0)
    told = await asyncio.wait_for(waiting, 5)  # the waiter heard about the shutdown
    assert told.state is S.QUEUED
    hang[0] = False
    async with make_runtime([call("outlast", n=2), {"text": "finished"}, {"text": "2nd"}],
                            [outlast], db=db) as (rt2, _):
        done = await rt2.wait(run.id)  # start() carried it on
        reasons = [t.reason for t in await rt2.records.transitions(run.id)]
    assert done.state is S.COMPLETED and done.recovery_attempts == 0
    assert "continued after restart" in reasons


async def test_a_closed_runtime_leaves_no_timer_and_is_freed_at_once(
        tmp_path: Path) -> None:
    """Its waiters' nudges go with it: nothing of it runs on the loop afterwards, and
    nothing there keeps it (and the threads it read) alive."""
    script = [call("step", n=1), {"text": "done"}]

    @tool
    async def step(n: int) -> int:
        return n

    async with SQLiteStore(tmp_path / "m.db") as store:
        rt = Runtime(store, ScriptedProvider(script), ToolRegistry([step]))
        async with rt:
            # The wait nudges on a timer of its own.
            assert (await rt.send("t", "go")).state is S.COMPLETED
        closed = weakref.ref(rt)
        del rt
        gc.collect()
        assert closed() is None
