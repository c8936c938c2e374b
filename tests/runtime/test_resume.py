"""What `resume` does in each case (docs/guides/approvals-and-rights.md, Cancellation): a
run cancelled while it waited for a person's approval asks again; one that timed out
waiting asks again too; one cancelled while a tool ran goes on from its checkpoint, the
model seeing the cut-off call's ``cancelled`` result."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from runtime import (
    EchoProvider,
    ModelRequest,
    ModelResponse,
    Notice,
    Origin,
    ProviderError,
    RunState,
    Runtime,
    SQLiteStore,
    ToolCallStarted,
    ToolResult,
    tool,
)
from runtime.model.entries import RESUMED_LATE
from runtime.providers import anthropic, openai
from tests.fakes.anthropic import _check_messages as anthropic_rules
from tests.fakes.chat import MemoryChat
from tests.fakes.openai import _check_messages as openai_rules
from tests.scripted import call

S = RunState
ROOM = Origin(channel="chat", target={"room": "r1"}, user="u1")
deployed: list[str] = []


@tool(effect="non_idempotent", requires_approval=True)
def deploy(service: str) -> str:
    """Deploy a service."""
    deployed.append(service)
    return f"deployed {service}"


@tool(timeout_s=60)
async def slow() -> str:
    """Take a long time."""
    await asyncio.sleep(60)
    return "never"



class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


async def test_a_run_cancelled_while_it_waited_for_approval_asks_again(
        make_runtime: Any) -> None:
    deployed.clear()
    # The scripted model plays the turn at the thread's count of assistant turns: the call
    # asked again is one (its own), so the model's answer after it is the third.
    script = [call("deploy", service="api"), {"text": "(never played)"}, {"text": "deployed it"}]
    async with asyncio.timeout(30), make_runtime(script, [deploy]) as (rt, provider):
        run = await rt.send("t", "ship it")
        assert run.state is S.AWAITING_APPROVAL and run.pending_approval is not None
        first = run.pending_approval.tool_call_id
        await rt.idle()  # the worker is done with the thread
        assert (await rt.cancel(run.id, by="ops")).state is S.CANCELLED
        await rt.resume(run.id)
        again = await rt.wait(run.id)
        assert again.state is S.AWAITING_APPROVAL and again.pending_approval is not None
        asked = again.pending_approval
        assert (asked.name, asked.arguments) == ("deploy", {"service": "api"})
        assert asked.tool_call_id != first  # a new call: the first has its `cancelled` result
        assert deployed == [] and len(provider.calls) == 1  # the model was not asked again
        await rt.decide(run.id, asked.tool_call_id, approve=True, by="ops")
        done = await rt.wait(run.id)
        entries = await rt.records.entries("t")
    assert (done.state, done.reply) == (S.COMPLETED, "deployed it")
    assert deployed == ["api"] and len(provider.calls) == 2  # once; the model asked once more
    results = [e for e in entries if isinstance(e, ToolResult)]
    assert [(r.tool_call_id, r.is_error) for r in results] == [(first, True),
                                                               (asked.tool_call_id, False)]


async def test_a_run_that_timed_out_waiting_asks_again_once_resumed(make_runtime: Any) -> None:
    deployed.clear()
    clock = Clock()
    script = [call("deploy", service="api"), {"text": "deployed it"}]
    async with asyncio.timeout(30), make_runtime(script, [deploy], approval_timeout_s=60,
                                                 clock=clock) as (rt, _):
        run = await rt.send("t", "ship it")
        assert run.pending_approval is not None
        waited_for = run.pending_approval.tool_call_id
        clock.now += 61
        (expired,) = await rt._upkeep.expire_approvals()  # what the serving loop does
        assert expired.state is S.TIMED_OUT
        await rt.resume(run.id)
        again = await rt.wait(run.id)
    assert again.state is S.AWAITING_APPROVAL and again.pending_approval is not None
    assert again.pending_approval.tool_call_id == waited_for  # the same call, never answered
    assert deployed == []


async def test_a_run_cancelled_while_a_tool_ran_goes_on_from_its_checkpoint(
        make_runtime: Any) -> None:
    script = [call("slow"), {"text": "it was cut off"}]
    async with asyncio.timeout(30), make_runtime(script, [slow]) as (rt, provider):
        async with rt.subscribe() as events:  # before the run can start: no event missed
            run = await rt.submit("t", "wait for it")
            while not isinstance(await events.next(), ToolCallStarted):
                pass
        assert (await rt.cancel(run.id, by="ops")).state is S.CANCELLED
        await rt.resume(run.id)
        done = await rt.wait(run.id)
    assert (done.state, done.reply) == (S.COMPLETED, "it was cut off")
    sent = provider.calls[-1].entries
    assert sent[-1].content["error"]["type"] == "cancelled"  # what the model was shown


class Flaky:
    """The offline model (echo), failing every request while ``down``; keeps every request."""

    model = "echo"

    def __init__(self) -> None:
        self.echo, self.calls, self.down = EchoProvider(), list[ModelRequest](), False
        self.held: asyncio.Event | None = None
        """Set: every request waits for it (a run taken up stays running)."""

    async def complete(self, request: ModelRequest, on_text: Any = None) -> ModelResponse:
        self.calls.append(request)
        if self.held is not None:
            await self.held.wait()
        if self.down:
            raise ProviderError("the model service failed", status=503)
        return await self.echo.complete(request, on_text)


async def test_a_failed_run_resumed_after_its_thread_went_on_answers_its_own_message(
        make_runtime: Any) -> None:
    """The chaos soak (seed 7, a person resuming failed runs through the HTTP API): a run
    that failed, resumed after later messages of its thread were answered, answered the
    thread's latest message: the history it was asked with ended with that answer. Taken
    up again, it leaves a notice in the thread quoting its own message."""
    model = Flaky()
    async with asyncio.timeout(30), make_runtime([], provider=lambda _: model) as (rt, _):
        model.down = True
        failed = await rt.send("t", "first question")
        alone = await rt.send("u", "alone")
        assert failed.state is alone.state is S.FAILED
        model.down = False
        later = await rt.send("t", "second question")
        assert later.reply == "echo: second question"
        await rt.resume(failed.id)
        done = await rt.wait(failed.id)
        after = await rt.send("t", "third question")
        # Resumed with nothing after it in its thread: asked as before, no notice.
        await rt.resume(alone.id)
        assert (await rt.wait(alone.id)).reply == "echo: alone"
        entries = await rt.records.entries("t")
        assert kinds(await rt.records.entries("u")) == ["user", "notice", "assistant"]
    assert (done.state, done.reply) == (S.COMPLETED, "echo: first question")
    assert after.reply == "echo: third question"
    asked = next(r for r in model.calls if r.run_id == failed.id
                 and isinstance(r.entries[-1], Notice) and r.entries[-1].code == RESUMED_LATE)
    assert '"first question"' in asked.entries[-1].text  # type: ignore[union-attr]
    for wire, check in ((openai, openai_rules),
                        (anthropic, lambda m: anthropic_rules(m, True))):
        assert check(wire.to_messages(asked.entries)) is None
    assert kinds(entries) == ["user", "notice", "user", "assistant", "notice", "assistant",
                              "user", "assistant"]


def kinds(entries: list[Any]) -> list[str]:
    return [e.kind for e in entries]


async def test_a_failed_run_resumed_then_cancelled_before_it_starts_says_so_too(
        tmp_path: Path) -> None:
    """The chaos soak (seed 6161, PostgreSQL: a Slack thread with 3 cancelled runs and 2
    "Stopped" lines): a run failed (its notice posted), was resumed, and was stopped while
    still queued, with nothing added to its thread since. Its closing line was keyed by the
    thread's position alone, the same as its failure notice's, so the outbox took it for
    that one, sent: it was never posted."""
    chat = MemoryChat()
    model = Flaky()
    model.down = True
    async with asyncio.timeout(30), SQLiteStore(tmp_path / "m.db") as store, \
            Runtime(store, model, deliverers={"chat": chat}) as rt:
        failed = await rt.send("t", "hello", origin=ROOM)
        assert failed.state is S.FAILED
        await rt.idle()  # its notice posted, as a person sees it before they resume it (a
        # notice still unsent once the run has ended again since is not posted: finding 39)
        assert [m.text for m in chat.posted] == [
            "Sorry, I could not finish this (the model service failed)."]
        model.held = asyncio.Event()  # taken up before the stop (a loaded machine), it waits
        assert (await rt.resume(failed.id)).state is S.QUEUED
        assert (await rt.cancel(failed.id, by="ana")).state is S.CANCELLED
        await rt.operator.flush_deliveries("chat")
        records = await rt.records.deliveries(run_id=failed.id)
    assert [m.text for m in chat.posted] == [
        "Sorry, I could not finish this (the model service failed).",
        "Stopped (cancelled by ana)."]
    assert len({d.key for d in records}) == 2 and all(d.posted for d in records)
