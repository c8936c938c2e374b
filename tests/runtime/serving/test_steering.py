"""Decisions, resumption, cancellation and stops of a run (runtime/serving/steering.py),
carried out in this process: who may decide, what a cancel answers for a run in each
state, a run queued again, and a person's stop carried out in the background."""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path
from typing import Any

import pytest

from runtime import RunError, RunState, tool
from tests.scripted import call

S = RunState



@tool(effect="non_idempotent", requires_approval=True)
def deploy(service: str) -> str:
    """Deploy a service."""
    return f"deployed {service}"


async def test_only_approvers_may_decide(make_runtime: Any) -> None:
    script = [call("deploy", service="api"), {"text": "done"}]
    async with make_runtime(script, [deploy], approvers=["alice"]) as (rt, _):
        run = await rt.send("t", "ship it")
        assert run.pending_approval is not None
        call_id = run.pending_approval.tool_call_id
        with pytest.raises(RunError) as refused:
            await rt.decide(run.id, call_id, approve=True, by="mallory")
        assert refused.value.reason == "not_an_approver"
        # A channel's own list overrides the agent's.
        with pytest.raises(RunError):
            await rt.decide(run.id, call_id, approve=True, by="alice", approvers=["bob"])
        assert (await rt.records.get_run(run.id)).state is S.AWAITING_APPROVAL
        await rt.decide(run.id, call_id, approve=True, by="alice")
        assert (await rt.wait(run.id)).state is S.COMPLETED


async def test_a_cancel_answers_for_the_run_in_each_state(make_runtime: Any) -> None:
    script = [call("deploy", service="api"), {"text": "done"}]
    async with make_runtime(script, [deploy]) as (rt, _):
        paused = await rt.send("t", "ship it")
        behind = await rt.submit("t", "and then?")  # queued behind the paused run
        unnamed = await rt.cancel(behind.id)
        assert (unnamed.state, unnamed.reason) == (S.CANCELLED, "cancelled")
        cancelled = await rt.cancel(paused.id, by="ann")
        assert (cancelled.state, cancelled.reason) == (S.CANCELLED, "cancelled by ann")
        again = await rt.cancel(paused.id, by="bob")  # cancelled already: as it is
        assert (again.state, again.reason) == (S.CANCELLED, "cancelled by ann")
        answered = await rt.send("u", "ship it")  # the script's first turn again
        assert answered.pending_approval is not None
        await rt.decide(answered.id, answered.pending_approval.tool_call_id, approve=False,
                        by="ann")
        ended = await rt.wait(answered.id)
        assert ended.state is S.COMPLETED
        with pytest.raises(RunError, match=f"run {ended.id} already ended") as refused:
            await rt.cancel(ended.id)
        assert refused.value.reason == "already_ended"


async def test_a_stopped_run_is_queued_again_from_its_checkpoint(make_runtime: Any) -> None:
    # The scripted model plays the turn at the thread's count of assistant turns: the call
    # asked again is one (its own), so the model's answer after it is the third.
    script = [call("deploy", service="api"), {"text": "(never played)"}, {"text": "done"}]
    async with make_runtime(script, [deploy]) as (rt, _):
        paused = await rt.send("t", "ship it")
        with pytest.raises(RunError, match="it has not stopped") as refused:
            await rt.resume(paused.id)
        assert refused.value.reason == "not_resumable"
        await rt.cancel(paused.id)
        resumed = await rt.resume(paused.id)
        assert resumed.state is S.QUEUED
        asked = await rt.wait(paused.id)  # asks again for the call it was cancelled in
        assert asked.state is S.AWAITING_APPROVAL and asked.pending_approval is not None
        await rt.decide(asked.id, asked.pending_approval.tool_call_id, approve=True)
        assert (await rt.wait(asked.id)).reply == "done"
        with pytest.raises(RunError, match="completed runs cannot") as completed:
            await rt.resume(asked.id)
        assert completed.value.reason == "not_resumable"


async def test_a_stop_is_written_once_per_request_and_carried_out_in_the_background(
        make_runtime: Any) -> None:
    async with make_runtime([call("deploy", service="api")], [deploy]) as (rt, _):
        paused = await rt.send("t", "ship it")
        assert await rt.stop(paused.id, by="ann", key="req-1") is True
        assert await rt.stop(paused.id, by="ann", key="req-1") is False  # a retry of it
        await rt.close()  # waits for the background stop
        stopped = await rt.records.get_run(paused.id)
    assert (stopped.state, stopped.reason) == (S.CANCELLED, "cancelled by ann")


async def test_a_stop_that_cannot_be_carried_out_is_logged_not_raised(
        make_runtime: Any, caplog: pytest.LogCaptureFixture) -> None:
    async with make_runtime([{"text": "done"}]) as (rt, _):
        ended = await rt.send("t", "hello")
        with caplog.at_level(logging.WARNING, logger="maiden.runtime"):
            assert await rt.stop(ended.id, by="ann", key="req-1") is True
            await rt.close()  # waits for the background stop
        assert (await rt.records.get_run(ended.id)).state is S.COMPLETED
    assert f"stop of run {ended.id} from ann: run {ended.id} already ended" in caplog.text


async def test_a_run_resumed_after_its_stop_goes_on(make_runtime: Any, tmp_path: Path) -> None:
    """A person's stop is carried out, then the run is resumed, by a process that came
    after the stop was written: the stop is the earlier wish and is not taken up again
    (chaos, seed 9191: a failed run stopped, then resumed twice, was cancelled at once each
    time, its thread told "Stopped" once per resume)."""
    db = tmp_path / "stopped.db"
    async with make_runtime([call("deploy", service="api")], [deploy], db=db) as (rt, _):
        paused = await rt.send("t", "ship it")
        assert await rt.stop(paused.id, by="ann", key="req-1") is True
        await rt.close()  # waits for the background stop
        assert (await rt.records.get_run(paused.id)).state is S.CANCELLED
    script = [call("deploy", service="api"), {"text": "(never played)"}, {"text": "done"}]
    async with make_runtime(script, [deploy], db=db) as (rt, _):
        for _ in range(2):  # resumed twice, as a double click does
            with contextlib.suppress(RunError):
                await rt.resume(paused.id)
        asked = await rt.wait(paused.id)
        assert asked.state is S.AWAITING_APPROVAL, asked.reason
        assert asked.pending_approval is not None
        await rt.decide(asked.id, asked.pending_approval.tool_call_id, approve=True)
        assert (await rt.wait(asked.id)).reply == "done"
        steps = [t.reason for t in await rt.records.transitions(paused.id)]
    assert steps.count("cancelled by ann") == 1, steps
