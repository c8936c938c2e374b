"""The loop, driven by a scripted model with teeth: turns, the final turn, provider errors,
approvals, resumption, events (a turn's tool calls: ``test_calls``; which run is driven
when: ``serving/test_workers``)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from runtime import (
    AssistantTurn,
    Notice,
    Origin,
    ReplyDelivery,
    RunEvent,
    RunState,
    Runtime,
    SQLiteStore,
    ToolResult,
    UserMessage,
    tool,
)
from runtime.engine.loop import FINAL_TURN_NOTICE
from runtime.model.entries import RUN_FAILED, ToolCall
from runtime.providers.openai import OpenAIProvider
from runtime.providers.wire import pair_results
from runtime.stores.base import Checkpoint
from tests.fakes import openai
from tests.fakes.openai import OpenAIServer
from tests.scripted import call, error_type, make_counter


def kinds(entries: list[Any]) -> list[str]:
    return [e.kind for e in entries]


async def test_plain_answer(make_runtime: Any) -> None:
    async with make_runtime([{"text": "hi there"}]) as (rt, provider):
        run = await rt.send("t", "hello")
        entries = await rt.records.entries("t")
        transitions = await rt.records.transitions(run.id)
    assert run.state is RunState.COMPLETED and run.reply == "hi there"
    assert kinds(entries) == ["user", "assistant"]
    assert [(t.source, t.target, t.reason) for t in transitions] == [
        ("queued", "running", "started"), ("running", "completed", "answered")]
    provider.assert_complete()


async def test_tool_call_then_answer(make_runtime: Any) -> None:
    seen, lookup = make_counter()
    script = [call("lookup", q="x"), {"text": "it is X"}]
    async with make_runtime(script, [lookup]) as (rt, provider):
        run = await rt.send("t", "what is x?")
        entries = await rt.records.entries("t")
    assert run.state is RunState.COMPLETED and run.reply == "it is X"
    assert kinds(entries) == ["user", "assistant", "tool_result", "assistant"]
    assert entries[2].content == {"answer": "X"} and not entries[2].is_error
    assert entries[2].tool_call_id == entries[1].tool_calls[0].id
    assert seen == [{"q": "x"}]
    assert run.turns == 2 and run.tool_calls == 1
    # The model saw the tool's schema, built from the type hints.
    spec = provider.calls[0].tools[0]
    assert spec.name == "lookup" and spec.parameters["required"] == ["q"]
    provider.assert_complete()


async def test_final_turn_notice_then_max_turns_exceeded(make_runtime: Any) -> None:
    seen, lookup = make_counter()
    script = [call("lookup", q="a"), call("lookup", q="b"), call("lookup", q="c")]
    async with make_runtime(script, [lookup], max_turns=3) as (rt, provider):
        run = await rt.send("t", "loop forever")
        entries = await rt.records.entries("t")
    assert run.state is RunState.FAILED and run.reason == "max_turns_exceeded"
    assert kinds(entries) == ["user", "assistant", "tool_result", "assistant", "tool_result",
                              "notice", "assistant", "tool_result", "notice"]
    notice = entries[5]
    assert isinstance(notice, Notice) and notice.text == FINAL_TURN_NOTICE
    # The last turn offered no tools, so the call it made anyway was not run.
    assert provider.calls[-1].final_turn and provider.calls[-1].tools == ()
    assert [len(c.tools) for c in provider.calls[:2]] == [1, 1]
    assert error_type(entries[7]) == "unknown_tool"
    assert seen == [{"q": "a"}, {"q": "b"}]
    assert len(provider.calls) == 3


async def test_final_turn_answer_completes(make_runtime: Any) -> None:
    _, lookup = make_counter()
    script = [call("lookup", q="a"), {"text": "done"}]
    async with make_runtime(script, [lookup], max_turns=2) as (rt, provider):
        run = await rt.send("t", "go")
        entries = await rt.records.entries("t")
    assert run.state is RunState.COMPLETED and run.reply == "done"
    assert kinds(entries) == ["user", "assistant", "tool_result", "notice", "assistant"]
    provider.assert_complete()


async def test_provider_error_fails_run_and_thread_stays_usable(make_runtime: Any) -> None:
    script = [{"error": "upstream said 500"}]
    async with make_runtime(script) as (rt, provider):
        failed = await rt.send("t", "first")
        assert failed.state is RunState.FAILED and failed.reason == "provider_error"
        assert failed.error == "upstream said 500"
        provider.turns.append(provider.turns[0].model_copy(update={"error": None,
                                                                   "text": "back"}))
        provider.turns[0] = provider.turns[0].model_copy(update={"error": None, "text": "x"})
        ok = await rt.send("t", "second")
        entries = await rt.records.entries("t")
    assert ok.state is RunState.COMPLETED
    # The failed run's message is closed by a notice: the next message is a turn of its own.
    assert kinds(entries) == ["user", "notice", "user", "assistant"]
    assert isinstance(entries[1], Notice) and entries[1].code == RUN_FAILED
    assert "upstream said 500" not in entries[1].text and "provider_error" in entries[1].text


async def test_script_exhausted_fails_with_reason(make_runtime: Any) -> None:
    async with make_runtime([]) as (rt, _):
        run = await rt.send("t", "anyone?")
    assert run.state is RunState.FAILED and run.reason == "provider_error"
    assert "script has 0 turns" in (run.error or "")


async def test_resume_failed_run_continues_from_checkpoint(make_runtime: Any) -> None:
    seen, lookup = make_counter()
    script = [call("lookup", q="a"), {"error": "overloaded"}]
    async with make_runtime(script, [lookup]) as (rt, provider):
        run = await rt.send("t", "go")
        assert run.state is RunState.FAILED
        provider.turns[1] = provider.turns[1].model_copy(update={"error": None, "text": "A"})
        await rt.resume(run.id)
        run = await rt.wait(run.id)
        entries = await rt.records.entries("t")
    assert run.state is RunState.COMPLETED and run.reply == "A"
    assert kinds(entries) == ["user", "assistant", "tool_result", "notice", "assistant"]
    # Resumed, the run's own closing notice is not sent to the model (it ends the request).
    sent = pair_results(provider.calls[-1].entries)
    assert [e.kind for e in sent] == ["user", "assistant", "tool_result"]
    assert seen == [{"q": "a"}]


async def test_a_run_sees_what_another_writer_added_to_its_thread_since_the_last_run(
        make_runtime: Any, tmp_path: Path) -> None:
    """The driver keeps the thread its last run left; the next run reads only the entries
    since, and so also what another process wrote meanwhile."""
    async with make_runtime([{"text": "first"}, {"text": "second"}],
                            db=tmp_path / "d.db") as (rt, provider):
        await rt.send("t", "one")
        async with SQLiteStore(tmp_path / "d.db") as other:
            await other.commit(Checkpoint("t", 2, [Notice(run_id="r", code="note",
                                                         text="written elsewhere")]))
        await rt.send("t", "two")
        entries = await rt.records.entries("t")
    assert kinds(entries) == ["user", "assistant", "notice", "user", "assistant"]
    assert list(provider.calls[1].entries) == entries[:4]

async def test_events_stream_the_run(make_runtime: Any) -> None:
    _, lookup = make_counter()
    script = [call("lookup", q="a"), {"text": "done"}]
    async with make_runtime(script, [lookup]) as (rt, _), rt.subscribe() as events:
        run = await rt.send("t", "go")
        seen: list[RunEvent] = []
        while not seen or seen[-1].kind != "run.completed":
            seen.append(await asyncio.wait_for(events.next(), 5))
    kinds_seen = [e.kind for e in seen]
    # What happened comes before the state it led to (the order `maiden show` prints:
    # docs/get-started/install.md).
    assert kinds_seen == ["run.started", "run.state", "model.answered", "run.state",
                          "tool.call", "tool.result", "run.state", "text.delta",
                          "model.answered", "run.state", "run.completed"]
    assert all(e.run_id == run.id for e in seen)


async def test_approval_required_pauses_then_approve_runs(make_runtime: Any) -> None:
    sent: list[str] = []

    @tool(effect="non_idempotent", requires_approval=True)
    def send_email(to: str) -> str:
        sent.append(to)
        return "sent"

    script = [call("send_email", to="boss"), {"text": "emailed"}]
    async with make_runtime(script, [send_email]) as (rt, _):
        run = await rt.send("t", "email the boss")
        assert run.state is RunState.AWAITING_APPROVAL and sent == []
        assert run.pending_approval is not None
        assert run.pending_approval.reason == "requires_approval"
        call_id = run.pending_approval.tool_call_id
        await rt.decide(run.id, call_id, approve=True, by="alice")
        run = await rt.wait(run.id)
    assert run.state is RunState.COMPLETED and sent == ["boss"]
    assert run.decisions[0].by == "alice" and run.decisions[0].approve


async def test_approval_denied_gives_denied_result(make_runtime: Any) -> None:
    sent: list[str] = []

    @tool(effect="non_idempotent", requires_approval=True)
    def send_email(to: str) -> str:
        sent.append(to)
        return "sent"

    script = [call("send_email", to="boss"), {"text": "I was not allowed"}]
    async with make_runtime(script, [send_email]) as (rt, _):
        run = await rt.send("t", "email the boss")
        assert run.pending_approval is not None
        await rt.decide(run.id, run.pending_approval.tool_call_id, approve=False, by="bob",
                        reason="not now")
        run = await rt.wait(run.id)
        entries = await rt.records.entries("t")
    assert run.state is RunState.COMPLETED and sent == []
    assert error_type(entries[2]) == "denied"
    assert "bob" in entries[2].content["error"]["message"]


async def test_entries_round_trip_with_assistant_usage(make_runtime: Any) -> None:
    script = [{"text": "hi", "usage": {"input_tokens": 7, "output_tokens": 3,
                                       "cache_read_tokens": 2}}]
    async with make_runtime(script) as (rt, _):
        run = await rt.send("t", "hello")
        entries = await rt.records.entries("t")
    turn = entries[1]
    assert isinstance(turn, AssistantTurn) and turn.usage.cache_read_tokens == 2
    assert run.usage.input_tokens == 7 and run.usage.total_tokens == 12


async def test_a_recorded_result_that_does_not_match_its_call_fails_the_run(
    make_runtime: Any, tmp_path: Path,
) -> None:
    from runtime import Checkpoint, Entry, Run, SQLiteStore

    _, lookup = make_counter()
    async with make_runtime([call("lookup", q="a"), {"text": "?"}], [lookup]) as (rt, _), \
            SQLiteStore(tmp_path / "maiden.db") as store:
        # A thread whose stored result names another tool than the call it answers
        # (a tampered or mixed-up store): recovery must refuse, not guess.
        run = await store.create_run(Run(id="r" * 32, thread_id="t", text="go"))
        steps: list[list[Entry]] = [
            [UserMessage(run_id=run.id, text="go")],
            [AssistantTurn(run_id=run.id, tool_calls=(
                ToolCall(id="c1", name="lookup", arguments={"q": "a"}),
                ToolCall(id="c2", name="lookup", arguments={"q": "b"})))],
            [ToolResult(run_id=run.id, tool_call_id="c1", name="delete_everything",
                        content="ok")],
        ]
        states = [RunState.RUNNING, RunState.AWAITING_TOOL, RunState.AWAITING_TOOL]
        for position, (entries, state) in enumerate(zip(steps, states, strict=True)):
            run = run.model_copy(update={"version": run.version + 1, "state": state,
                                         "owner": "a-dead-process"})
            await store.commit(Checkpoint(thread_id="t", position=position, run=run,
                                          entries=entries))
        ended = await rt.wait(run.id)
    assert ended.state is RunState.FAILED and ended.reason == "replay_mismatch"
    assert "delete_everything" in (ended.error or "")


async def test_repeated_call_ids_from_the_model_are_made_unique(make_runtime: Any) -> None:
    seen, lookup = make_counter()
    twice = {"tool_calls": [{"name": "lookup", "arguments": {"q": "a"}, "id": "same"},
                            {"name": "lookup", "arguments": {"q": "b"}, "id": "same"}]}
    again = {"tool_calls": [{"name": "lookup", "arguments": {"q": "c"}, "id": "same"}]}
    async with make_runtime([twice, again, {"text": "ok"}], [lookup]) as (rt, _):
        run = await rt.send("t", "go")
        entries = await rt.records.entries("t")
    ids = [c.id for e in entries if isinstance(e, AssistantTurn) for c in e.tool_calls]
    assert run.state is RunState.COMPLETED and len(set(ids)) == 3 and ids[0] == "same"
    assert [r.tool_call_id for r in entries if isinstance(r, ToolResult)] == ids
    assert len(seen) == 3


async def test_max_context_tokens_sends_the_newest_part_with_a_notice(
    make_runtime: Any,
) -> None:
    # (The scripted model finds its turn by the history it is sent, so every turn here
    # answers the same: that is fine for looking at what was sent.)
    script = [{"text": "answer " + "z" * 400}] * 6
    async with make_runtime(script, max_context_tokens=300) as (rt, provider):
        for i in range(6):
            await rt.send("t", f"question {i} " + "q" * 400)
        stored = await rt.records.entries("t")
    sent = provider.calls[-1].entries
    assert len(stored) == 12  # the store keeps everything
    assert isinstance(sent[0], Notice) and sent[0].code == "context_trimmed"
    assert isinstance(sent[1], UserMessage) and sent[-1].text.startswith("question 5")
    assert len(sent) < len(stored)


@pytest.mark.parametrize("store", ["sqlite", "files"])
async def test_the_loop_on_every_store(make_runtime: Any, store: str) -> None:
    seen, lookup = make_counter()

    @tool(requires_approval=True)
    def risky() -> str:
        return "done"

    script = [call("lookup", q="a"), {"text": "A"}, call("risky"), {"text": "risky done"}]
    async with make_runtime(script, [lookup, risky], store=store) as (rt, provider):
        first = await rt.send("t/1", "look it up")
        paused = await rt.send("t/1", "now the risky thing")
        assert paused.pending_approval is not None
        await rt.decide(paused.id, paused.pending_approval.tool_call_id, approve=True)
        second = await rt.wait(paused.id)
        entries = await rt.records.entries("t/1")
        transitions = await rt.records.transitions(second.id)
    assert (first.reply, second.reply) == ("A", "risky done")
    assert kinds(entries) == ["user", "assistant", "tool_result", "assistant"] * 2
    assert [t.target for t in transitions][-1] == "completed"
    assert seen == [{"q": "a"}]
    provider.assert_complete()


# -- an empty answer: asked again once, then the run fails; never an empty post -------------

SLACK_TARGET = {"team": "T1", "channel": "C1", "message_ts": "1.0", "thread_ts": "1.0"}


async def test_an_empty_answer_twice_fails_the_run_and_posts_no_empty_message(
    make_runtime: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """It was recorded ``answered`` with reply "" and an empty message in the outbox."""
    async with make_runtime([{"text": ""}]) as (rt, provider):
        run = await rt.send("t", "hello", origin=Origin(channel="slack", target=SLACK_TARGET))
        assert (run.state, run.reason) == (RunState.FAILED, "empty_answer")
        assert run.error == "the model answered with no text and no tool call, twice in a row"
        assert len(provider.calls) == 2  # asked once more, not forever
        assert run.usage.output_tokens == 10  # both calls counted
        (notice,) = await rt.records.deliveries(run_id=run.id)
        assert isinstance(notice, ReplyDelivery) and notice.text == (
            "Sorry, I could not finish this (the model gave an empty answer twice).")
        # Nothing empty in the history: the message, closed by the failure's notice.
        assert kinds(await rt.records.entries("t")) == ["user", "notice"]
        # The thread goes on: the run can be resumed (the model answers this time).
        provider.turns[0] = provider.turns[0].model_copy(update={"text": "later"})
        await rt.resume(run.id)
        resumed = await rt.wait(run.id)
    assert (resumed.state, resumed.reply) == (RunState.COMPLETED, "later")


async def test_an_empty_answer_once_is_asked_again_and_answered(tmp_path: Path) -> None:
    async with OpenAIServer(api_key=None) as server:
        server.queue(openai.completion(""), openai.completion("here it is"))
        provider = OpenAIProvider("gpt-4.1", base_url=server.base_url, stream=False)
        async with SQLiteStore(tmp_path / "m.db") as store, Runtime(store, provider) as rt:
            run = await rt.send("t", "hello")
            entries = await rt.records.entries("t")
        await provider.aclose()
    assert (run.state, run.reply) == (RunState.COMPLETED, "here it is")
    assert len(server.requests) == 2 and server.requests[0].json == server.requests[1].json
    assert kinds(entries) == ["user", "assistant"]
