"""A message taken in (runtime/serving/admission.py): refused before anything is stored
when it cannot be a run, stored as a queued run before the caller hears back, once per
idempotency key, and refused once the runtime is shutting down."""

from __future__ import annotations

from typing import Any

import pytest

from runtime import InvalidThreadId, Origin, RunError, RunState

TRACE = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def kinds(entries: list[Any]) -> list[str]:
    return [e.kind for e in entries]


@pytest.mark.parametrize(("thread_id", "text", "error", "says"), [
    ("", "hi", InvalidThreadId, "cannot be empty"),
    ("t", "  \n", RunError, "the message is empty"),
    ("t", "x" * 101, RunError, "the message has 101 characters; at most 100 are accepted"),
])
async def test_a_message_that_cannot_be_a_run_is_refused_and_nothing_stored(
        make_runtime: Any, thread_id: str, text: str, error: type[Exception],
        says: str) -> None:
    async with make_runtime(max_message_chars=100) as (rt, provider):
        with pytest.raises(error, match=says):
            await rt.submit(thread_id, text)
        assert await rt.records.runs() == []
    assert provider.calls == []


async def test_a_long_message_from_a_chat_is_taken_and_its_run_says_why_it_failed(
        make_runtime: Any) -> None:
    room = Origin(channel="chat", target={"room": "r1"}, user="u1")
    async with make_runtime(max_message_chars=100) as (rt, provider):
        run = await rt.submit("t", "x" * 101, origin=room)
        assert run.state is RunState.QUEUED
        ended = await rt.wait(run.id)
    assert (ended.state, ended.reason) == (RunState.FAILED, "message_too_long")
    assert provider.calls == []


async def test_a_submitted_message_is_stored_before_the_caller_hears_back(
        make_runtime: Any) -> None:
    async with make_runtime([{"text": "hello"}]) as (rt, _):
        run = await rt.submit("t", "hi", trace=TRACE)
        assert (run.state, run.thread_id, run.text, run.trace) == (
            RunState.QUEUED, "t", "hi", TRACE)
        stored = await rt.records.get_run(run.id)
        assert stored.text == "hi" and stored.trace == TRACE
        assert (await rt.wait(run.id)).reply == "hello"


async def test_a_trace_that_is_not_a_traceparent_is_ignored(make_runtime: Any) -> None:
    async with make_runtime([{"text": "hello"}]) as (rt, _):
        run = await rt.submit("t", "hi", trace="00-" + "0" * 32 + "-b7ad6b7169203331-01")
        assert run.trace == ""
        await rt.wait(run.id)


async def test_idempotent_submission_returns_the_same_run(make_runtime: Any) -> None:
    async with make_runtime([{"text": "once"}]) as (rt, provider):
        first = await rt.submit("t", "hi", idempotency_key="req-1")
        again = await rt.submit("t", "hi", idempotency_key="req-1")
        assert again.id == first.id
        await rt.wait(first.id)
        entries = await rt.records.entries("t")
    assert kinds(entries) == ["user", "assistant"]
    provider.assert_complete()


async def test_send_hands_back_the_run_as_it_ended(make_runtime: Any) -> None:
    async with make_runtime([{"text": "hello"}]) as (rt, _):
        run = await rt.send("t", "hi")
    assert (run.state, run.reply) == (RunState.COMPLETED, "hello")


async def test_nothing_is_taken_once_the_runtime_is_shutting_down(make_runtime: Any) -> None:
    async with make_runtime([{"text": "hello"}]) as (rt, _):
        await rt.send("t", "before")
        await rt.close()
        with pytest.raises(RunError, match="shutting down") as refused:
            await rt.submit("t", "after")
        assert refused.value.reason == "shutting_down"
        with pytest.raises(RunError, match="shutting down") as refused:
            await rt.send("t", "after")
        assert refused.value.reason == "shutting_down"
