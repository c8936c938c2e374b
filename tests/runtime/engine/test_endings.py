"""The ways a run stops (runtime/engine/endings.py): each end one checkpoint that answers
what is left open — calls given error results, and a person who asked from a channel told
once, through the outbox, in plain words."""

from __future__ import annotations

from typing import Any

from runtime import (
    ApprovalDelivery,
    FileDelivery,
    Notice,
    Origin,
    ReplyDelivery,
    RunState,
    ToolResult,
    tool,
)
from runtime.model.entries import RUN_FAILED
from tests.samples import REPORT
from tests.scripted import call

S = RunState
ROOM = Origin(channel="chat", target={"room": "r1"}, user="u1")



@tool(effect="non_idempotent", requires_approval=True)
def deploy(service: str) -> str:
    """Deploy a service."""
    return f"deployed {service}"


@tool
def export() -> Any:
    """The same file, twice."""
    return [REPORT, {"again": REPORT}]


async def test_an_answer_goes_out_with_its_buttons_then_its_files_each_once(
        make_runtime: Any) -> None:
    async with make_runtime([call("export"), {"text": "here it is"}], [export]) as (rt, _):
        run = await rt.send("t", "export", origin=ROOM)
        deliveries = await rt.records.deliveries(run_id=run.id)
    assert (run.state, run.reply) == (S.COMPLETED, "here it is")
    assert [f.name for f in run.reply_files] == [REPORT.name]  # handed back twice, sent once
    reply, file = deliveries
    assert isinstance(reply, ReplyDelivery) and reply.text == "here it is" and reply.feedback
    assert reply.target == ROOM.target and reply.channel == "chat"
    assert isinstance(file, FileDelivery) and file.file.name == REPORT.name


async def test_a_run_from_a_channel_that_fails_tells_the_person_in_plain_words(
        make_runtime: Any) -> None:
    async with make_runtime([{"error": "boom"}]) as (rt, _):
        run = await rt.send("t", "hi", origin=ROOM)
        (told,) = await rt.records.deliveries(run_id=run.id)
        entries = await rt.records.entries("t")
    assert (run.state, run.reason) == (S.FAILED, "provider_error")
    assert isinstance(told, ReplyDelivery) and not told.feedback
    assert told.text == "Sorry, I could not finish this (the model service failed)."
    # Its message stays in the thread, closed by a notice of what the person was told.
    assert [e.kind for e in entries] == ["user", "notice"]
    assert isinstance(entries[1], Notice) and entries[1].code == RUN_FAILED
    assert told.text in entries[1].text


async def test_a_run_not_from_a_channel_has_nobody_to_tell(make_runtime: Any) -> None:
    async with make_runtime([{"error": "boom"}]) as (rt, _):
        failed = await rt.send("t", "hi")  # from the HTTP API or the CLI: no target
        assert failed.state is S.FAILED
        assert await rt.records.deliveries() == []


async def test_a_pause_asks_in_its_channel_and_a_cancel_closes_the_call_and_says_so(
        make_runtime: Any) -> None:
    async with make_runtime([call("deploy", service="api")], [deploy]) as (rt, _):
        paused = await rt.send("t", "ship it", origin=ROOM)
        (prompt,) = await rt.records.deliveries(run_id=paused.id)
        assert isinstance(prompt, ApprovalDelivery) and prompt.name == "deploy"
        assert paused.pending_approval is not None
        assert prompt.tool_call_id == paused.pending_approval.tool_call_id
        assert (prompt.asked_by, prompt.reason) == ("u1", "requires_approval")
        cancelled = await rt.cancel(paused.id, by="ann")
        stopped = (await rt.records.deliveries(run_id=paused.id))[1]
        entries = await rt.records.entries("t")
    assert cancelled.state is S.CANCELLED and cancelled.pending_approval is None
    assert isinstance(stopped, ReplyDelivery) and stopped.text == "Stopped (cancelled by ann)."
    result = entries[-1]
    assert isinstance(result, ToolResult) and result.tool_call_id == prompt.tool_call_id
    assert result.content == {"error": {"type": "cancelled",
                                        "message": "cancelled: cancelled by ann"}}


async def test_a_run_resumed_and_ended_again_says_so_again(make_runtime: Any) -> None:
    async with make_runtime([{"error": "boom"}]) as (rt, _):
        run = await rt.send("t", "hi", origin=ROOM)
        await rt.resume(run.id)
        again = await rt.wait(run.id)
        told = await rt.records.deliveries(run_id=run.id)
    assert again.state is S.FAILED
    assert [d.text for d in told] == ["Sorry, I could not finish this (the model service "
                                      "failed)."] * 2
    assert len({d.key for d in told}) == 2
