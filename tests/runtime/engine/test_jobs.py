"""Jobs: runs whose first steps are fixed (a reminder's words, a check's tool call), played
by the loop without the model, posted through the outbox like any answer."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from runtime import (
    AssistantTurn,
    Job,
    ModelRequest,
    ModelResponse,
    Origin,
    Runtime,
    SQLiteStore,
    ToolRegistry,
    ToolResult,
    Usage,
    UserMessage,
    tool,
)
from runtime.engine.jobs import JOB_MODEL, UNCHANGED, job_step, last_output
from tests.fakes.chat import MemoryChat

pytestmark = pytest.mark.timeout(30)

HERE = Origin(channel="chat", target={"room": "ops"})


class Status:
    """What the checked service says now (the tests change it between runs)."""

    def __init__(self) -> None:
        self.now = "green"
        self.asked = 0


STATUS = Status()


@tool(effect="read_only")
def status(service: str) -> str:
    """The status of a service."""
    STATUS.asked += 1
    if service == "broken":
        raise RuntimeError("status page unreachable")
    return f"{service}: {STATUS.now}"


class Model:
    """A model that always says the same (a scripted one counts the job's turns too)."""

    model = "fixed"

    def __init__(self) -> None:
        self.calls: list[ModelRequest] = []

    async def complete(self, request: ModelRequest, on_text: Any = None) -> ModelResponse:
        self.calls.append(request)
        return ModelResponse(text="The status changed: now red.", usage=Usage(input_tokens=9))


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[Runtime, MemoryChat, Model]]:
    STATUS.now, STATUS.asked = "green", 0
    model = Model()
    async with SQLiteStore(tmp_path / "m.db") as store:
        chat = MemoryChat()
        rt = Runtime(store, model, ToolRegistry([status]), deliverers={"chat": chat})
        async with rt:
            yield rt, chat, model


async def _job(rt: Runtime, job: Job, text: str = "(check)", *, key: str | None = None
               ) -> Any:
    run = await rt.submit("schedule:check", text, origin=HERE, job=job, idempotency_key=key)
    ended = await rt.wait(run.id)
    await rt.idle()  # its worker sends its post as the run ends (a sweep leaves it to it)
    await rt.operator.flush_deliveries("chat")
    return ended


async def test_a_reminder_is_posted_as_it_is_and_asks_no_model(served: Any) -> None:
    rt, chat, model = served
    ended = await _job(rt, Job(say="<@U1> Reminder: check the deploy"))
    assert ended.state == "completed" and ended.reply == "<@U1> Reminder: check the deploy"
    assert [p.text for p in chat.posted] == ["<@U1> Reminder: check the deploy"]
    assert model.calls == [] and ended.usage.input_tokens == 0


async def test_a_checks_output_is_posted_each_time_by_default(served: Any) -> None:
    rt, chat, model = served
    for _ in range(2):
        await _job(rt, Job(tool="status", args={"service": "api"}))
    assert [p.text for p in chat.posted] == ["api: green", "api: green"]
    assert STATUS.asked == 2 and model.calls == []


async def test_on_change_posts_only_what_changed(served: Any) -> None:
    rt, chat, model = served
    job = Job(tool="status", args={"service": "api"}, post="on_change")
    first = await _job(rt, job)
    second = await _job(rt, job)
    STATUS.now = "red"
    third = await _job(rt, job)
    fourth = await _job(rt, job)
    assert [p.text for p in chat.posted] == ["api: green", "api: red"]
    assert second.reply == UNCHANGED and fourth.reply == UNCHANGED
    assert {r.state for r in (first, second, third, fourth)} == {"completed"}
    assert STATUS.asked == 4 and model.calls == []


async def test_then_prompt_asks_the_model_only_when_the_output_changed(served: Any) -> None:
    rt, chat, model = served
    job = Job(tool="status", args={"service": "api"}, post="on_change",
              then_prompt="Say what changed.")
    await _job(rt, job, "Say what changed.")  # the first output is new: asked
    asked_first = len(model.calls)
    await _job(rt, job, "Say what changed.")  # the same: not asked
    assert asked_first == 1 and len(model.calls) == 1
    request = model.calls[0]
    results = [e for e in request.entries if isinstance(e, ToolResult)]
    assert results and "api: green" in str(results[-1].content)
    assert [p.text for p in chat.posted] == ["The status changed: now red."]


async def test_a_check_that_fails_says_so(served: Any) -> None:
    rt, chat, _ = served
    ended = await _job(rt, Job(tool="status", args={"service": "broken"}, post="on_change"))
    assert ended.state == "completed"
    assert chat.posted and "failed" in chat.posted[0].text
    assert "status page unreachable" in chat.posted[0].text


async def test_the_same_key_runs_a_job_once(served: Any) -> None:
    rt, chat, _ = served
    job = Job(tool="status", args={"service": "api"})
    await _job(rt, job, key="schedule:check:2026-12-07T09:00:00+00:00")
    await _job(rt, job, key="schedule:check:2026-12-07T09:00:00+00:00")
    assert STATUS.asked == 1 and len(chat.posted) == 1


def test_a_job_is_one_kind() -> None:
    with pytest.raises(ValidationError, match="either says"):
        Job()
    with pytest.raises(ValidationError, match="either says"):
        Job(say="hi", tool="status")
    with pytest.raises(ValidationError, match="go with tool"):
        Job(say="hi", post="on_change")
    with pytest.raises(ValidationError, match="needs words"):
        Job(say="  ")


def test_the_last_output_is_of_a_run_that_got_to_its_end() -> None:
    job = Job(tool="status", args={"service": "api"}, post="on_change")

    def ran(run: str, output: str, ended: bool) -> list[Any]:
        call = job_step(job, run, [], [])
        assert call is not None and call.call is not None
        entries: list[Any] = [
            UserMessage(run_id=run, text="(check)"),
            AssistantTurn(run_id=run, tool_calls=(call.call,), model=JOB_MODEL),
            ToolResult(run_id=run, tool_call_id=call.call.id, name="status", content=output)]
        if ended:
            entries.append(AssistantTurn(run_id=run, text=output, model=JOB_MODEL))
        return entries

    posted, failed = ran("r1", "api: green", True), ran("r2", "api: red", False)
    assert last_output(job, posted + failed) == "api: green"
    assert last_output(job, []) is None
    # The third run's red is new against the posted green, though a failed run saw red.
    third = ran("r3", "api: red", False)
    step = job_step(job, "r3", third[1:], posted + failed + third[:1])
    assert step is not None and step.text == "api: red" and not step.quiet
