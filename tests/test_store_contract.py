"""One contract, every store backend (DESIGN §3): the same tests run on each."""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import os
import random
import re
import sys
import textwrap
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest

from runtime.context import entry_tokens
from runtime.control import ControlRequest, Instance
from runtime.entries import (
    AssistantTurn,
    Entry,
    Notice,
    ToolCall,
    ToolResult,
    Usage,
    UserMessage,
)
from runtime.errors import CorruptStore, InvalidThreadId, NotFound, StaleWrite, StoreError
from runtime.requests import Note, NoteCall, ScheduleRecord, SlotMark
from runtime.runs import (
    DELIVERY,
    ApprovalDelivery,
    Origin,
    ReplyDelivery,
    Run,
    RunState,
    Transition,
    new_run_id,
    transition,
)
from runtime.stores.base import NOTE_CALLS_KEPT, Checkpoint, Store
from runtime.stores.files import FilesStore, thread_file_name
from runtime.stores.postgres import PostgresStore
from runtime.stores.sqlite import SQLiteStore
from runtime.tail import tail_of
from tests.postgres import PG_DSN, fresh_schema

S = RunState
BACKENDS = ["sqlite", "files", "postgres"]
HOSTILE_IDS = ["a/b", "a_b", "a%2Fb", "../x", "..", ".", "", "x" * 10_000,
               "日本語", "A", "a", "a b", "a\u2028b", "/etc/passwd", "C:\\x"]
CONTROL_IDS = ["\x00", "a\x00b", "a\nb", "tab\t", "\x1b[31mred", "del\x7f", "c1\x85"]
"""Ids with a control character: refused by every entry point (one rule, ``check_thread_id``)."""

PROJECT = str(Path(__file__).resolve().parents[1])

AnyStore = SQLiteStore | FilesStore | PostgresStore


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def new_store(backend: str, tmp_path: Path) -> AsyncIterator[Callable[[], AnyStore]]:
    """Another store object on the same storage (a second process, or a restart); for
    PostgreSQL, a schema of the test's own, dropped after it."""
    if backend == "postgres":
        async with fresh_schema() as schema:
            yield lambda: PostgresStore(PG_DSN, schema=schema, pool_size=4)
        return

    def make() -> AnyStore:
        if backend == "sqlite":
            return SQLiteStore(tmp_path / "maiden.db")
        return FilesStore(tmp_path / "files")
    yield make


@pytest.fixture
async def store(new_store: Callable[[], AnyStore]) -> AsyncIterator[AnyStore]:
    async with new_store() as opened:
        yield opened


def make_run(thread_id: str = "t", *, at: float = 1000.0, key: str | None = None,
             run_id: str | None = None, text: str = "hi") -> Run:
    return Run(id=run_id or uuid4().hex, thread_id=thread_id, text=text, created_at=at,
               updated_at=at, idempotency_key=key,
               origin=Origin(channel="slack", target={"channel": "C1"}, user="U1"))


def advance(
    run: Run, target: RunState, reason: str = "step", **changes: Any
) -> tuple[Run, Transition]:
    """The run moved to ``target`` with its version bumped, and the transition."""
    at = run.updated_at + 1
    return transition(run, target, reason, now=at, version=run.version + 1, **changes)


def all_kinds(run_id: str) -> list[Any]:
    return [
        UserMessage(run_id=run_id, text="héllo 日本語 🎉 \x00 \"quoted\"", user="U1", at=1.5),
        AssistantTurn(run_id=run_id, text="let me look", model="m", at=2.0,
                      usage=Usage(input_tokens=3, output_tokens=4, cache_read_tokens=1),
                      tool_calls=(ToolCall(id="c1", name="search",
                                           arguments={"q": "ü", "n": [1, 2.5, None, True]}),
                                  ToolCall(id="c2", name="bad", arguments="not json {"))),
        ToolResult(run_id=run_id, tool_call_id="c1", name="search", content={"hits": ["x"]},
                   at=3.0),
        ToolResult(run_id=run_id, tool_call_id="c2", name="bad", is_error=True, at=3.5,
                   content={"error": {"type": "invalid_arguments", "message": "nope"}}),
        Notice(run_id=run_id, code="final_turn", text="last turn: answer now", at=4.0),
    ]


async def started(store: AnyStore, thread_id: str = "t", **kwargs: Any) -> Run:
    """A created run, moved to running with its user message appended (position 0 -> 1)."""
    run = await store.create_run(make_run(thread_id, **kwargs))
    moved, step = advance(run, S.RUNNING, "started")
    await store.commit(Checkpoint(thread_id, 0, [UserMessage(run_id=run.id, text=run.text)],
                                  run=moved, transitions=[step]))
    return moved


@pytest.mark.parametrize("cls", [SQLiteStore, FilesStore, PostgresStore])
def test_backends_implement_the_protocol(cls: type) -> None:
    for name, method in vars(Store).items():
        if inspect.iscoroutinefunction(method):
            assert inspect.signature(getattr(cls, name)) == inspect.signature(method), name


# -- runs


async def test_create_and_get_run_round_trip(store: AnyStore) -> None:
    run = make_run("thread-1", key="k1", text="héllo 日本語")
    assert await store.create_run(run) == run
    assert await store.get_run(run.id) == run
    assert await store.load_entries("thread-1") == []


@pytest.mark.parametrize("run_id", ["nope", "", "../x", "a/b", "x" * 500])
async def test_unknown_run_is_not_found(store: AnyStore, run_id: str) -> None:
    with pytest.raises(NotFound):
        await store.get_run(run_id)
    assert await store.transitions(run_id) == []


async def test_run_ids_are_opaque_strings(store: AnyStore) -> None:
    ids = ["../../etc/passwd", "a/b", "A", "a", "r" * 300, "日本"]
    for run_id in ids:
        await store.create_run(make_run("t", run_id=run_id, text=run_id))
    for run_id in ids:
        assert (await store.get_run(run_id)).text == run_id


async def test_idempotency_key_returns_the_original_run(store: AnyStore) -> None:
    first = await started(store, key="slack:evt-1")
    again = await store.create_run(make_run("t", key="slack:evt-1", at=2000.0))
    assert again == first  # the stored run, as it is now
    with pytest.raises(NotFound):
        await store.get_run(make_run().id)
    assert [r.id for r in await store.list_runs()] == [first.id]
    other = await store.create_run(make_run("t", key="slack:evt-2"))
    assert other.id != first.id
    assert await store.run_for_key("slack:evt-1") == first
    assert await store.run_for_key("slack:evt-2") == other
    assert await store.run_for_key("slack:evt-3") is None


@pytest.mark.timeout(20)
async def test_concurrent_creates_with_one_key_make_one_run(
    store: AnyStore, new_store: Callable[[], AnyStore]
) -> None:
    async with new_store() as other, asyncio.timeout(10):
        made = await asyncio.gather(*(s.create_run(make_run(f"t{i}", key="same"))
                                      for i in range(8) for s in (store, other)))
    assert len({run.id for run in made}) == 1
    assert len(await store.list_runs()) == 1


async def test_a_run_id_is_created_once(store: AnyStore) -> None:
    run = await store.create_run(make_run("t"))
    with pytest.raises(StoreError):
        await store.create_run(make_run("other", run_id=run.id))
    assert await store.get_run(run.id) == run


# -- entries and checkpoints


async def test_commit_appends_entries_in_order(store: AnyStore) -> None:
    run = await store.create_run(make_run("t"))
    first, second = all_kinds(run.id)[:2], all_kinds(run.id)[2:]
    moved, step = advance(run, S.RUNNING)
    await store.commit(Checkpoint("t", 0, first, run=moved, transitions=[step]))
    await store.commit(Checkpoint("t", 2, second))
    loaded = await store.load_entries("t")
    assert loaded == first + second
    assert [type(e) for e in loaded] == [UserMessage, AssistantTurn, ToolResult, ToolResult,
                                         Notice]
    assert await store.get_run(run.id) == moved
    assert await store.load_entries("never written") == []


def _long_thread(run_id: str, messages: int, *, summary_every: int = 0, first: int = 0
                 ) -> list[Entry]:
    """``messages`` exchanges (user, a tool call, its result, an answer), with a summary
    notice after every ``summary_every`` of them."""
    entries: list[Entry] = []
    for i in range(first, first + messages):
        call = ToolCall(id=f"c{i}", name="lookup", arguments={"q": "x" * (i % 7 * 30)})
        entries += [UserMessage(run_id=run_id, text=f"question {i} " + "y" * (i % 5 * 40)),
                    AssistantTurn(run_id=run_id, tool_calls=(call,)),
                    ToolResult(run_id=run_id, tool_call_id=call.id, name="lookup",
                               content={"r": "z" * (i % 3 * 100)}),
                    AssistantTurn(run_id=run_id, text=f"answer {i}")]
        if summary_every and (i + 1) % summary_every == 0:
            entries.append(Notice(run_id=run_id, code="summary", text=f"up to {i}",
                                  covers=len(entries)))
    return entries


async def _written(store: AnyStore, entries: list[Entry], batch: int = 37) -> str:
    run = await store.create_run(make_run("long"))
    for at in range(0, len(entries), batch):
        await store.commit(Checkpoint("long", at, entries[at:at + batch]))
    return run.id


@pytest.mark.parametrize("tokens", [0, 1, 50, 400, 3_000, 10**9])
@pytest.mark.parametrize("start", [None, 0, 5, 10**6])
async def test_a_tail_is_the_end_of_the_thread_from_a_user_message(
    store: AnyStore, tokens: int, start: int | None
) -> None:
    entries = _long_thread("r", 60, summary_every=13)
    await _written(store, entries)
    expected = tail_of(entries, tokens, start)  # the definition
    tail = await store.load_tail("long", tokens, start=start)
    assert (tail.base, tail.loaded) == (expected.base, expected.loaded)
    assert (tail.summaries_before, tail.summary_before) == (expected.summaries_before,
                                                            expected.summary_before)
    assert len(tail) == len(entries) == await store.thread_length("long")
    assert tail[-1] == entries[-1] and tail[tail.base:] == entries[tail.base:]
    if tail.base:
        assert isinstance(entries[tail.base], UserMessage) or tail.base == start
        with pytest.raises(IndexError):
            tail[tail.base - 1]


async def test_a_tail_holds_at_least_the_tokens_asked_for(store: AnyStore) -> None:
    entries = _long_thread("r", 80)
    await _written(store, entries)
    for tokens in (100, 700, 2_000):
        tail = await store.load_tail("long", tokens)
        assert tail.base > 0 and sum(entry_tokens(e) for e in tail.loaded) >= tokens
        # ... and not much more: the next user message on would not have held enough.
        later = next(i for i in range(tail.base + 1, len(entries))
                     if isinstance(entries[i], UserMessage))
        assert sum(entry_tokens(e) for e in entries[later + 1:]) < tokens
    # The thread goes on: a new load reads what was added, from the same start if asked.
    tail = await store.load_tail("long", 700)
    more = _long_thread("r", 3, first=80)
    await store.commit(Checkpoint("long", len(entries), more))
    again = await store.load_tail("long", 700, start=tail.base)
    assert again.base == tail.base and again.loaded == tail.loaded + more


async def test_history_pages_and_length(store: AnyStore) -> None:
    entries = _long_thread("r", 30)
    await _written(store, entries)
    assert await store.load_entries("long", offset=10, limit=7) == entries[10:17]
    assert await store.load_entries("long", offset=115) == entries[115:]
    assert await store.load_entries("long", offset=500, limit=3) == []
    assert await store.load_entries("long", limit=2) == entries[:2]
    assert await store.load_entries("long") == entries
    assert await store.thread_length("long") == 120
    assert await store.thread_length("never written") == 0
    empty = await store.load_tail("never written", 100)
    assert (empty.base, empty.loaded, len(empty)) == (0, [], 0)


async def test_a_checkpoint_can_move_a_run_without_entries(store: AnyStore) -> None:
    run = await store.create_run(make_run("t"))
    failed, step = advance(run, S.FAILED, "provider_error", error="boom")
    await store.commit(Checkpoint("t", None, run=failed, transitions=[step]))
    assert await store.get_run(run.id) == failed
    assert await store.load_entries("t") == []
    assert await store.transitions(run.id) == [step]


async def test_entries_need_a_position(store: AnyStore) -> None:
    run = await store.create_run(make_run("t"))
    with pytest.raises(StoreError):
        await store.commit(Checkpoint("t", None, [Notice(run_id=run.id, code="x", text="y")]))
    assert await store.load_entries("t") == []


async def test_stale_position_writes_nothing(store: AnyStore) -> None:
    run = await started(store)
    entries = await store.load_entries("t")
    moved, step = advance(run, S.COMPLETED, "done", reply="bye")
    delivery = ReplyDelivery(key="d1", run_id=run.id, thread_id="t", channel="slack", text="bye")
    for position in (0, 2, 7):
        with pytest.raises(StaleWrite):
            await store.commit(Checkpoint(
                "t", position, [AssistantTurn(run_id=run.id, text="bye")], run=moved,
                transitions=[step], deliveries=[delivery]))
    assert await store.load_entries("t") == entries
    assert await store.get_run(run.id) == run
    assert len(await store.transitions(run.id)) == 1
    assert await store.deliveries() == []
    (info,) = await store.list_threads()
    assert info.length == 1


async def test_unknown_thread_is_a_stale_position(store: AnyStore) -> None:
    with pytest.raises(StaleWrite):
        await store.commit(Checkpoint("ghost", 0, [Notice(run_id="r", code="x", text="y")]))
    assert await store.load_entries("ghost") == []
    assert await store.list_threads() == []


async def test_stale_run_version_writes_nothing(store: AnyStore) -> None:
    run = await started(store)
    delivery = ReplyDelivery(key="d1", run_id=run.id, thread_id="t", channel="slack", text="bye")
    for version in (run.version, run.version + 2, 0):
        stale = run.model_copy(update={"state": S.COMPLETED, "version": version})
        with pytest.raises(StaleWrite):
            await store.commit(Checkpoint(
                "t", 1, [AssistantTurn(run_id=run.id, text="bye")], run=stale,
                deliveries=[delivery]))
    unknown = make_run("t").model_copy(update={"version": 1})
    with pytest.raises(StaleWrite):
        await store.commit(Checkpoint("t", 1, [Notice(run_id=run.id, code="x", text="y")],
                                      run=unknown))
    assert len(await store.load_entries("t")) == 1
    assert await store.get_run(run.id) == run
    assert await store.deliveries() == []


async def test_a_tool_result_is_recorded_once(store: AnyStore) -> None:
    run = await started(store)
    call = ToolCall(id="c1", name="echo", arguments={})
    result = ToolResult(run_id=run.id, tool_call_id="c1", name="echo", content="one")
    await store.commit(Checkpoint("t", 1, [AssistantTurn(run_id=run.id, tool_calls=(call,)),
                                           result]))
    with pytest.raises(StaleWrite):
        await store.commit(Checkpoint("t", 3, [result.model_copy(update={"content": "two"})]))
    twice = [ToolResult(run_id=run.id, tool_call_id="c9", name="echo")] * 2
    with pytest.raises(StaleWrite):
        await store.commit(Checkpoint("t", 3, twice))
    entries = await store.load_entries("t")
    assert len(entries) == 3
    assert entries[-1] == result
    # Another run may use the same call id.
    other = await started(store, thread_id="u")
    await store.commit(Checkpoint("u", 1, [result.model_copy(update={"run_id": other.id})]))


async def test_transitions_are_recorded_in_order(store: AnyStore) -> None:
    run = await store.create_run(make_run("t"))
    steps = []
    for target in (S.RUNNING, S.AWAITING_TOOL, S.RUNNING, S.FAILED, S.QUEUED):
        run, step = advance(run, target, f"to-{target}")
        steps.append(step)
        await store.commit(Checkpoint("t", None, run=run, transitions=[step]))
    assert await store.transitions(run.id) == steps
    assert [t.reason for t in await store.transitions(run.id)] == [
        "to-running", "to-awaiting_tool", "to-running", "to-failed", "to-queued"]
    assert (await store.get_run(run.id)).version == 5


# -- deliveries


async def test_deliveries_pending_and_delivered(store: AnyStore) -> None:
    one = await started(store, thread_id="t")
    two = await started(store, thread_id="u")
    d1 = ReplyDelivery(key="k1", run_id=one.id, thread_id="t", channel="slack",
                       target={"channel": "C1"}, text="réponse", created_at=10.0)
    d2 = ReplyDelivery(key="k2", run_id=two.id, thread_id="u", channel="discord", text="b",
                       created_at=5.0)
    done_one, _ = advance(one, S.COMPLETED, reply="réponse")
    await store.commit(Checkpoint("t", 1, [AssistantTurn(run_id=one.id, text="réponse")],
                                  run=done_one, deliveries=[d1]))
    await store.commit(Checkpoint("u", 1, deliveries=[d2]))
    assert await store.deliveries() == [d2, d1]
    assert await store.deliveries(pending=True) == [d2, d1]
    assert await store.deliveries(run_id=one.id) == [d1]

    # A failed send is counted and its error kept, and the delivery stays pending.
    await store.delivery_failed("k1", "SlackApiError: channel_not_found")
    await store.delivery_failed("k1", "TimeoutError: ")
    assert await store.deliveries(pending=True) == [d2, d1.model_copy(update={
        "attempts_failed": 2, "last_error": "TimeoutError: "})]
    d1 = d1.model_copy(update={"attempts_failed": 2, "last_error": "TimeoutError: "})

    await store.mark_delivered("k1", "msg-1", at=20.0)
    await store.mark_delivered("k1", "msg-other", at=30.0)  # idempotent: the first one stays
    sent = d1.model_copy(update={"remote_id": "msg-1", "delivered_at": 20.0})
    assert await store.deliveries(pending=True) == [d2]
    assert await store.deliveries(pending=False) == [sent]
    assert await store.deliveries(run_id=one.id, pending=False) == [sent]

    # Insert-or-ignore by key: a retried checkpoint cannot reset a sent delivery.
    await store.commit(Checkpoint("t", 2, deliveries=[d1]))
    await store.commit(Checkpoint("u", 1, deliveries=[d1.model_copy(update={"text": "x"})]))
    assert await store.deliveries(run_id=one.id) == [sent]
    with pytest.raises(NotFound):
        await store.mark_delivered("nope", "m", at=1.0)
    with pytest.raises(NotFound):
        await store.delivery_failed("nope", "e")
    await store.delivery_failed("k1", "late")  # sent already: nothing changes
    assert await store.deliveries(run_id=one.id) == [sent]


async def test_approval_prompts_are_deliveries_too(store: AnyStore) -> None:
    run = await started(store, thread_id="t")
    prompt = ApprovalDelivery(key="p1", run_id=run.id, thread_id="t", channel="slack",
                              target={"channel": "C1"}, tool_call_id="c1", name="deploy",
                              arguments={"env": "prod", "n": [1, None]}, arguments_hash="h",
                              reason="requires_approval", asked_by="U1", created_at=3.0)
    paused, _ = advance(run, S.AWAITING_APPROVAL)
    await store.commit(Checkpoint("t", None, run=paused, deliveries=[prompt]))
    assert await store.deliveries(pending=True) == [prompt]
    await store.mark_delivered("p1", "ts-1", at=4.0)
    [sent] = await store.deliveries(run_id=run.id)
    assert isinstance(sent, ApprovalDelivery)
    assert sent == prompt.model_copy(update={"remote_id": "ts-1", "delivered_at": 4.0})


def test_delivery_records_without_a_kind_are_replies() -> None:
    # Records written before deliveries had kinds.
    old = {"key": "k", "run_id": "r", "thread_id": "t", "channel": "slack", "text": "hi"}
    assert isinstance(DELIVERY.validate_python(old), ReplyDelivery)
    assert isinstance(DELIVERY.validate_json(json.dumps(old)), ReplyDelivery)


# -- the control plane


async def test_requests_are_numbered_and_handled_once(store: AnyStore) -> None:
    first = await store.add_request(ControlRequest(kind="cancel", run_id="r1", created_at=1.0))
    second = await store.add_request(ControlRequest(
        kind="decide", run_id="r2", payload={"tool_call_id": "c", "approve": True},
        created_at=2.0))
    assert 0 < first.id < second.id
    assert await store.requests() == [first, second]
    assert await store.get_request(second.id) == second
    handled = first.model_copy(update={"handled_at": 3.0, "handled_by": "me", "ok": True,
                                       "result": "done"})
    assert await store.finish_request(handled) is True
    # Another process got there first: the second answer is refused and changes nothing.
    assert await store.finish_request(handled.model_copy(update={"handled_by": "other"})) \
        is False
    assert await store.get_request(first.id) == handled
    assert await store.requests() == [second]
    with pytest.raises(NotFound):
        await store.get_request(999_999)


async def test_heartbeats(store: AnyStore, new_store: Callable[[], AnyStore]) -> None:
    one = Instance(id="a1", pid=1, host="h", started_at=1.0, beat_at=1.0)
    two = Instance(id="b2", pid=2, host="h", started_at=1.0, beat_at=2.0)
    await store.beat(one)
    await store.beat(two)
    await store.beat(one.model_copy(update={"beat_at": 5.0}))
    async with new_store() as other:  # another process sees them
        assert await other.instances() == [one.model_copy(update={"beat_at": 5.0}), two]
    await store.beat(one, gone=True)
    assert await store.instances() == [two]


async def test_a_threads_runs_keep_their_order_of_arrival(
        store: AnyStore, new_store: Callable[[], AnyStore]) -> None:
    """A run taken by a process whose clock is behind is stamped no earlier than the runs
    that came in before it, so the thread's order is the order of arrival."""
    first = Run(id=new_run_id(100.0), thread_id="t", text="one", created_at=100.0,
                updated_at=100.0)
    assert await store.create_run(first) == first
    async with new_store() as behind:  # another replica, its clock 50 s behind
        late = Run(id=new_run_id(50.0), thread_id="t", text="two", created_at=50.0,
                   updated_at=50.0)
        stored = await behind.create_run(late)
        assert stored.created_at == 100.0 and stored.id == late.id
        third = await behind.create_run(Run(id=new_run_id(60.0), thread_id="t", text="3",
                                            created_at=60.0, updated_at=60.0))
    assert [r.text for r in await store.list_runs(thread_id="t")] == ["one", "two", "3"]
    assert [r.text for r in await store.list_runs(thread_id="t", states=[S.QUEUED])] == \
        ["one", "two", "3"]
    assert (await store.get_run(third.id)).created_at == 100.0
    # Other threads are not held to it.
    other = Run(id=new_run_id(10.0), thread_id="u", text="x", created_at=10.0, updated_at=10.0)
    assert (await store.create_run(other)).created_at == 10.0


async def test_leases(store: AnyStore, new_store: Callable[[], AnyStore]) -> None:
    assert await store.take_lease("thread:t1", "a", 30) is None
    assert await store.take_lease("thread:t1", "a", 30) is None  # its own: renewed
    async with new_store() as other:  # another process cannot take it, and sees who has it
        assert await other.take_lease("thread:t1", "b", 30) == "a"
        assert await other.take_lease("thread:t2", "b", 30) is None
        assert [(x.name, x.holder) for x in await other.leases()] == \
            [("thread:t1", "a"), ("thread:t2", "b")]
        # A holder known to be dead loses it at once.
        assert await other.take_lease("thread:t1", "b", 30, steal_from="a") is None
        assert await store.take_lease("thread:t1", "a", 30) == "b"
        assert await other.renew_leases("b", 30) == ["thread:t1", "thread:t2"]
        assert await store.renew_leases("a", 30) == []
        await other.release_leases("b", ["thread:t1"])
        assert await store.take_lease("thread:t1", "a", 30) is None
        await store.release_leases("c", ["thread:t1", "thread:t2"])  # not c's: kept
        assert [x.holder for x in await other.leases()] == ["a", "b"]
        await other.release_leases("b")
        assert [x.name for x in await store.leases()] == ["thread:t1"]
        assert 0 < (await store.leases())[0].expires_in <= 30


async def test_a_lease_expires_by_the_stores_clock(store: AnyStore) -> None:
    assert await store.take_lease("discord:gateway", "a", 0.2) is None
    assert await store.take_lease("discord:gateway", "b", 30) == "a"
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 10
    while await store.take_lease("discord:gateway", "b", 30) is not None:
        assert loop.time() < deadline, "the lease never expired"
        await asyncio.sleep(0.05)
    assert await store.renew_leases("a", 30) == []  # expired, and taken: not renewed
    assert [(x.name, x.holder) for x in await store.leases()] == [("discord:gateway", "b")]


async def test_two_takers_of_one_lease_one_wins(new_store: Callable[[], AnyStore]) -> None:
    async with new_store() as one, new_store() as two:
        for round_ in range(10):
            name = f"thread:race-{round_}"
            got = await asyncio.gather(one.take_lease(name, "a", 30),
                                       two.take_lease(name, "b", 30))
            assert sorted(map(str, got)) in (["None", "a"], ["None", "b"]), got


async def test_listening_for_requests(store: AnyStore, backend: str,
                                      new_store: Callable[[], AnyStore]) -> None:
    woken = asyncio.Event()
    stop = await store.listen_requests(woken.set)
    try:
        async with new_store() as other:
            await other.add_request(ControlRequest(kind="cancel", run_id="r1"))
        if backend == "postgres":  # told at once; the others' readers poll
            async with asyncio.timeout(10):
                await woken.wait()
        else:
            assert not woken.is_set()
    finally:
        await stop()
    await stop()  # stopping twice is fine


async def test_schedule_records(store: AnyStore, new_store: Callable[[], AnyStore]) -> None:
    daily = ScheduleRecord(name="daily", origin="config", since=10.0, created_at=1.0)
    remind = ScheduleRecord(name="remind-0", origin="chat", created_by="slack:C1",
                            spec={"cron": "0 8 * * 1", "prompt": "standup"},
                            request_key="k1", since=20.0, created_at=2.0)
    assert await store.schedule_records() == []
    await store.save_schedules([remind, daily])
    await store.save_schedules([])
    claimed = daily.model_copy(update={"last_slot": 30.0, "last_run_id": "r1"})
    await store.save_schedules([claimed])  # replaced, by name
    async with new_store() as other:  # another process, or a restart, sees them
        assert await other.schedule_records() == [claimed, remind]
    assert await store.delete_schedule("remind-0") is True
    assert await store.delete_schedule("remind-0") is False
    assert await store.schedule_records() == [claimed]


async def test_a_saved_record_keeps_newer_slot_bookkeeping(
        store: AnyStore, new_store: Callable[[], AnyStore]) -> None:
    """A pause saved from a copy read before another process's fire changes the pause,
    not how far the fire got."""
    read = ScheduleRecord(name="daily", origin="config", since=10.0, created_at=1.0)
    await store.save_schedules([read])
    async with new_store() as other:
        await other.advance_schedules([SlotMark(name="daily", since=30.0, last_slot=30.0,
                                                last_run_id="r3")])
    await store.save_schedules([read.model_copy(update={"paused": True})])
    (saved,) = await store.schedule_records()
    assert (saved.paused, saved.since, saved.last_slot, saved.last_run_id) == \
        (True, 30.0, 30.0, "r3")
    # A newer save moves them on as it says.
    later = saved.model_copy(update={"paused": False, "since": 40.0})
    await store.save_schedules([later])
    assert await store.schedule_records() == [later]


async def test_a_slot_mark_only_moves_a_record_forward(
        store: AnyStore, new_store: Callable[[], AnyStore]) -> None:
    daily = ScheduleRecord(name="daily", origin="config", since=10.0, last_slot=10.0,
                           last_run_id="r1", created_at=1.0)
    remind = ScheduleRecord(name="remind-0", origin="chat", created_by="slack:C1",
                            spec={"config": {"cron": "0 8 * * 1"}}, request_key="k1",
                            paused=True, since=20.0, created_at=2.0)
    await store.save_schedules([daily, remind])
    await store.advance_schedules([])
    await store.advance_schedules([
        SlotMark(name="remind-0", since=25.0, last_slot=24.0, last_run_id="r2"),
        SlotMark(name="daily", since=5.0, last_slot=5.0, last_run_id="r0"),  # older
        SlotMark(name="never-made", since=30.0, last_slot=30.0, last_run_id="r9")])
    moved = remind.model_copy(update={"since": 25.0, "last_slot": 24.0, "last_run_id": "r2"})
    assert await store.schedule_records() == [daily, moved]  # paused, spec: as they were
    # A slot decided again later (a second fire of it) keeps the run that claimed it.
    await store.advance_schedules([SlotMark(name="remind-0", since=26.0, last_slot=24.0,
                                            last_run_id="other")])
    moved = moved.model_copy(update={"since": 26.0})
    # In one write, in any order: the newest slot and the latest since win.
    await store.advance_schedules([
        SlotMark(name="daily", since=40.0, last_slot=40.0, last_run_id="r4"),
        SlotMark(name="daily", since=12.0, last_slot=35.0, last_run_id="r3")])
    daily = daily.model_copy(update={"since": 40.0, "last_slot": 40.0, "last_run_id": "r4"})
    async with new_store() as other:
        assert await other.schedule_records() == [daily, moved]
        await other.advance_schedules([SlotMark(name="daily", since=41.0)])  # no slot run
    daily = daily.model_copy(update={"since": 41.0})
    assert await store.schedule_records() == [daily, moved]
    # Deleted by one process; another's fire from its old copy does not bring it back.
    assert await store.delete_schedule("remind-0") is True
    async with new_store() as other:
        await other.advance_schedules([SlotMark(name="remind-0", since=50.0, last_slot=50.0,
                                                last_run_id="r5")])
    assert await store.schedule_records() == [daily]


async def test_slot_marks_from_two_processes_never_move_a_record_back(
        new_store: Callable[[], AnyStore]) -> None:
    async with new_store() as one, new_store() as two:
        await one.save_schedules([ScheduleRecord(name="tick", origin="config", since=0.0)])
        for n in range(1, 21):
            newer = SlotMark(name="tick", since=n, last_slot=n, last_run_id=f"r{n}")
            older = SlotMark(name="tick", since=n - 1, last_slot=n - 1, last_run_id=f"r{n - 1}")
            first, second = (one, two) if n % 2 else (two, one)
            await asyncio.gather(first.advance_schedules([newer]),
                                 second.advance_schedules([older]))
            (record,) = await two.schedule_records()
            assert (record.since, record.last_slot, record.last_run_id) == (n, n, f"r{n}")
        # A delete racing a fire: the record is gone either way.
        gone = await asyncio.gather(
            one.delete_schedule("tick"),
            two.advance_schedules([SlotMark(name="tick", since=99.0, last_slot=99.0)]))
        assert gone[0] is True
        assert await one.schedule_records() == []


async def test_notes_by_scope(store: AnyStore, new_store: Callable[[], AnyStore]) -> None:
    a = Note(scope="thread:t1", key="standup", text="9:15", updated_at=1.0)
    b = Note(scope="thread:t1", key="deploy", text="fridays: never", updated_at=2.0)
    other = Note(scope="agent", key="standup", text="shared", updated_at=3.0)
    assert await store.notes("thread:t1") == []
    for note in (a, b, other):
        await store.put_note(note)
    changed = a.model_copy(update={"text": "9:30", "updated_at": 4.0})
    await store.put_note(changed)  # replaced, by scope and key
    async with new_store() as again:
        assert await again.notes("thread:t1") == [b, changed]
        assert await again.notes("agent") == [other]
    assert await store.delete_note("thread:t1", "deploy") is True
    assert await store.delete_note("thread:t1", "deploy") is False
    assert await store.notes("thread:t1") == [changed]
    hostile = Note(scope="thread:../../x", key="../k", text="t")
    await store.put_note(hostile)
    assert await store.notes("thread:../../x") == [hostile]


async def test_a_note_call_takes_effect_once(
        store: AnyStore, new_store: Callable[[], AnyStore]) -> None:
    first = Note(scope="agent", key="k", text="v1", updated_at=1.0, written_by="call-a")
    other = Note(scope="agent", key="k", text="v2", updated_at=2.0, written_by="call-b")
    assert await store.put_note(first, "call-a") is True
    assert await store.put_note(other, "call-b") is True  # another thread, in between
    assert await store.put_note(first, "call-a") is False  # call a re-run: nothing changes
    assert await store.notes("agent") == [other]
    assert await store.delete_note("agent", "k", "call-c") is True
    assert await store.put_note(first, "call-d") is True
    assert await store.delete_note("agent", "k", "call-c") is True  # its first answer
    assert await store.delete_note("agent", "gone", "call-e") is False
    assert await store.delete_note("agent", "gone", "call-e") is False
    assert await store.notes("agent") == [first]
    async with new_store() as again:  # another process, or a restart, knows them
        assert await again.put_note(other, "call-b") is False
        assert await again.note_calls("agent") == [
            NoteCall(scope="agent", call="call-a", key="k"),
            NoteCall(scope="agent", call="call-b", key="k"),
            NoteCall(scope="agent", call="call-c", key="k", forget=True, existed=True),
            NoteCall(scope="agent", call="call-d", key="k"),
            NoteCall(scope="agent", call="call-e", key="gone", forget=True)]
    # Calls are applied per scope; without one, nothing is recorded.
    assert await store.put_note(first.model_copy(update={"scope": "thread:t"}), "call-a")
    assert await store.put_note(first.model_copy(update={"scope": "thread:u"})) is True
    assert await store.delete_note("thread:u", "k") is True
    assert [c.call for c in await store.note_calls("thread:t")] == ["call-a"]
    assert await store.note_calls("thread:u") == []


async def test_two_runs_of_one_note_call_apply_it_once(
        new_store: Callable[[], AnyStore]) -> None:
    async with new_store() as one, new_store() as two:
        for round_ in range(10):
            note = Note(scope="agent", key=f"k{round_}", text="v")
            put = await asyncio.gather(one.put_note(note, f"put-{round_}"),
                                       two.put_note(note, f"put-{round_}"))
            assert sorted(put) == [False, True], put
            gone = await asyncio.gather(one.delete_note("agent", note.key, f"del-{round_}"),
                                        two.delete_note("agent", note.key, f"del-{round_}"))
            assert list(gone) == [True, True], gone  # one removed it; the other, its answer
        assert len(await one.note_calls("agent")) == 20


async def test_the_newest_note_calls_are_kept(store: AnyStore) -> None:
    calls = [NoteCall(scope="agent", call=f"c{i}", key="k") for i in range(NOTE_CALLS_KEPT)]
    await store.save_note_calls(calls)
    await store.save_note_calls([calls[0].model_copy(update={"key": "changed"})])
    assert await store.note_calls("agent") == calls  # one recorded already is left as it is
    assert await store.note_calls("thread:t") == []
    assert await store.put_note(Note(scope="agent", key="k", text="v"), "c0") is False
    assert await store.put_note(Note(scope="agent", key="k", text="v"), "new") is True
    kept = await store.note_calls("agent")
    assert len(kept) == NOTE_CALLS_KEPT and [c.call for c in kept[:2]] == ["c1", "c2"]
    assert kept[-1].call == "new"
    # The oldest went: a re-run of it now (far past any crash's window) applies again.
    assert await store.put_note(Note(scope="agent", key="k", text="v"), "c0") is True


def test_a_note_written_before_its_writer_was_kept_still_reads() -> None:
    old = Note.model_validate_json('{"scope": "agent", "key": "k", "text": "t", '
                                   '"updated_at": 1.0}')
    assert old.written_by is None


@pytest.mark.parametrize("name", ["../x", "a/b", ".", "", "x" * 5_000])
async def test_schedule_names_are_only_keys(store: AnyStore, name: str) -> None:
    await store.save_schedules([ScheduleRecord(name=name, origin="chat", since=1.0)])
    await store.advance_schedules([SlotMark(name=name, since=2.0)])
    assert [(r.name, r.since) for r in await store.schedule_records()] == [(name, 2.0)]
    assert await store.delete_schedule(name) is True


# -- listing


async def test_list_runs_order_and_filters(store: AnyStore) -> None:
    b = await store.create_run(make_run("t", at=2000.0))
    a = await store.create_run(make_run("u", at=1000.0))
    c1 = await store.create_run(make_run("t", at=3000.0))
    c2 = await store.create_run(make_run("u", at=3000.0))  # same time: insertion order
    c3 = await store.create_run(make_run("t", at=3000.0))
    running, _ = advance(b, S.RUNNING)
    await store.commit(Checkpoint("t", None, run=running))

    def ids(runs: list[Run]) -> list[str]:
        return [run.id for run in runs]

    assert ids(await store.list_runs()) == ids([a, b, c1, c2, c3])
    assert ids(await store.list_runs(limit=2)) == ids([c2, c3])
    assert ids(await store.list_runs(limit=100)) == ids([a, b, c1, c2, c3])
    assert await store.list_runs(limit=0) == []
    assert ids(await store.list_runs(thread_id="t")) == ids([b, c1, c3])
    assert ids(await store.list_runs(thread_id="u", limit=1)) == ids([c2])
    assert ids(await store.list_runs(states=[S.QUEUED])) == ids([a, c1, c2, c3])
    assert await store.list_runs(states=[S.RUNNING]) == [running]
    assert ids(await store.list_runs(states=[S.RUNNING, S.QUEUED], thread_id="t", limit=2)) \
        == ids([c1, c3])
    assert await store.list_runs(states=[]) == []
    assert await store.list_runs(thread_id="nobody") == []


async def test_list_threads_most_recent_first(store: AnyStore) -> None:
    assert await store.list_threads() == []
    old = await store.create_run(make_run("old", at=100.0))
    await store.create_run(make_run("new", at=200.0))
    later = await store.create_run(make_run("old", at=250.0))
    # A thread's updated_at is when its latest message arrived; checkpoints leave it alone.
    moved, _ = advance(old, S.RUNNING)
    moved = moved.model_copy(update={"updated_at": 300.0})
    await store.commit(Checkpoint("old", 0, [UserMessage(run_id=old.id, text="x")], run=moved))
    first, second = await store.list_threads()
    assert (first.id, first.length, first.runs, first.created_at, first.updated_at) == (
        "old", 1, 2, 100.0, 250.0)
    assert first.last_state == later.state == S.QUEUED
    assert (second.id, second.length, second.runs, second.updated_at) == ("new", 0, 1, 200.0)
    await store.create_run(make_run("new", at=150.0))  # stamped late: no going back
    assert [(t.id, t.updated_at) for t in await store.list_threads()] == [
        ("old", 250.0), ("new", 200.0)]


async def test_thread_pages_and_stats(store: AnyStore) -> None:
    for i in range(5):
        await store.create_run(make_run(f"t{i}", at=100.0 + i))
    ids = [t.id for t in await store.list_threads()]
    assert ids == ["t4", "t3", "t2", "t1", "t0"]
    assert [t.id for t in await store.list_threads(offset=1, limit=2)] == ["t3", "t2"]
    assert [t.id for t in await store.list_threads(offset=4)] == ["t0"]
    assert await store.list_threads(offset=9, limit=3) == []
    run = await started(store, "t0")
    done, step = advance(run, S.COMPLETED, reply="ok")
    await store.commit(Checkpoint("t0", 1, run=done, transitions=[step], deliveries=[
        ReplyDelivery(key="a", run_id=run.id, thread_id="t0", channel="slack", text="ok"),
        ReplyDelivery(key="b", run_id=run.id, thread_id="t0", channel="slack", text="ok")]))
    await store.mark_delivered("a", "m1", at=1.0)
    stats = await store.stats()
    assert stats.threads == 5 and stats.runs == {S.QUEUED: 5, S.COMPLETED: 1}
    assert (stats.deliveries_pending, stats.deliveries_sent) == (1, 1)


async def test_reopen_sees_everything(
    store: AnyStore, new_store: Callable[[], AnyStore]
) -> None:
    run = await started(store, key="k")
    done, step = advance(run, S.COMPLETED, reply="ok")
    delivery = ReplyDelivery(key="d", run_id=run.id, thread_id="t", channel="slack", text="ok")
    await store.commit(Checkpoint("t", 1, all_kinds(run.id), run=done, transitions=[step],
                                  deliveries=[delivery]))
    await store.mark_delivered("d", "m1", at=5.0)
    before = (await store.load_entries("t"), await store.list_runs(),
              await store.list_threads(), await store.transitions(run.id),
              await store.deliveries())
    await store.close()
    async with new_store() as reopened:
        after = (await reopened.load_entries("t"), await reopened.list_runs(),
                 await reopened.list_threads(), await reopened.transitions(run.id),
                 await reopened.deliveries())
        assert after == before
        assert await reopened.create_run(make_run("t", key="k")) == done
    with pytest.raises(StoreError):
        await store.get_run(run.id)  # closed


# -- thread ids


async def test_hostile_thread_ids_never_share_history(
    store: AnyStore, backend: str, tmp_path: Path
) -> None:
    runs = {}
    for thread_id in HOSTILE_IDS:
        runs[thread_id] = await store.create_run(make_run(thread_id, text=thread_id))
        await store.commit(Checkpoint(thread_id, 0, [UserMessage(run_id=runs[thread_id].id,
                                                                 text=f"<{thread_id}>")]))
    for thread_id in HOSTILE_IDS:
        (entry,) = await store.load_entries(thread_id)
        assert isinstance(entry, UserMessage)
        assert entry.text == f"<{thread_id}>"
        assert (await store.list_runs(thread_id=thread_id)) == [runs[thread_id]]
    infos = await store.list_threads()
    assert sorted(info.id for info in infos) == sorted(HOSTILE_IDS)
    assert all(info.length == 1 for info in infos)
    if backend == "files":
        root = (tmp_path / "files").resolve()
        for path in root.rglob("*"):
            assert path.resolve().is_relative_to(root)
            assert path.parent.resolve() in {root, *(root / d for d in
                                                     ("threads", "runs", "idempotency",
                                                      "deliveries"))}
        names = {thread_file_name(thread_id) for thread_id in HOSTILE_IDS}
        assert len(names) == len(HOSTILE_IDS)
        assert len({name.lower() for name in names}) == len(HOSTILE_IDS)
        on_disk = {p.stem for p in (root / "threads").glob("*.json")}
        assert on_disk == names


async def test_control_characters_make_an_invalid_thread_id(store: AnyStore) -> None:
    for thread_id in CONTROL_IDS:
        with pytest.raises(InvalidThreadId, match="control characters"):
            await store.create_run(make_run(thread_id))
        with pytest.raises(InvalidThreadId, match="control characters"):
            await store.load_entries(thread_id)
        with pytest.raises(InvalidThreadId, match="control characters"):
            await store.load_tail(thread_id, 100)
        with pytest.raises(InvalidThreadId, match="control characters"):
            await store.thread_length(thread_id)
        with pytest.raises(InvalidThreadId, match="control characters"):
            await store.list_runs(thread_id=thread_id)
    assert await store.list_threads() == []


async def test_lone_surrogate_is_an_invalid_thread_id(store: AnyStore) -> None:
    with pytest.raises(InvalidThreadId):
        await store.create_run(make_run("a\ud800b"))
    with pytest.raises(InvalidThreadId):
        await store.load_entries("\udfff")
    assert await store.list_threads() == []


# -- two writers


@pytest.mark.timeout(20)
async def test_two_writers_one_wins(store: AnyStore, new_store: Callable[[], AnyStore]) -> None:
    run = await started(store)
    async with new_store() as other:
        for round_ in range(5):
            position = len(await store.load_entries("t"))
            assert len(await other.load_entries("t")) == position
            writes = [s.commit(Checkpoint("t", position,
                                          [Notice(run_id=run.id, code="w", text=f"{round_}{i}")]))
                      for i, s in enumerate((store, other))]
            async with asyncio.timeout(10):
                outcomes = await asyncio.gather(*writes, return_exceptions=True)
            assert sum(o is None for o in outcomes) == 1, outcomes
            assert sum(isinstance(o, StaleWrite) for o in outcomes) == 1, outcomes
            assert len(await other.load_entries("t")) == position + 1


_WRITER = textwrap.dedent("""
    import asyncio, sys
    from runtime.entries import Notice
    from runtime.errors import StaleWrite
    from runtime.stores.base import Checkpoint
    from runtime.stores.files import FilesStore
    from runtime.stores.postgres import PostgresStore
    from runtime.stores.sqlite import SQLiteStore

    async def main(kind, path, name, count, schema):
        store = (SQLiteStore(path) if kind == "sqlite" else FilesStore(path) if kind == "files"
                 else PostgresStore(path, schema=schema, pool_size=1))
        async with store:
            done = stale = 0
            while done < count:
                position = len(await store.load_entries("t"))
                try:
                    await store.commit(Checkpoint("t", position,
                                       [Notice(run_id="r", code=name, text=str(done))]))
                    done += 1
                except StaleWrite:
                    stale += 1
            print(stale)

    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]))
""")


@pytest.mark.timeout(30)
async def test_writers_in_other_processes_never_interleave(
    store: AnyStore, backend: str, tmp_path: Path
) -> None:
    await started(store)
    path, schema = str(tmp_path / ("maiden.db" if backend == "sqlite" else "files")), ""
    if isinstance(store, PostgresStore):  # the same database and schema
        path, schema = PG_DSN, store.schema
    env = {**os.environ, "PYTHONPATH": PROJECT}
    procs = [await asyncio.create_subprocess_exec(
        sys.executable, "-c", _WRITER, backend, path, f"p{i}", "15", schema,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env)
        for i in range(3)]
    async with asyncio.timeout(25):
        results = [await proc.communicate() for proc in procs]
    assert all(proc.returncode == 0 for proc in procs), results
    entries = await store.load_entries("t")
    assert len(entries) == 1 + 3 * 15
    for i in range(3):  # every writer's entries, each exactly once and in its own order
        texts = [e.text for e in entries if isinstance(e, Notice) and e.code == f"p{i}"]
        assert texts == [str(n) for n in range(15)]


# -- the files backend's own guarantees


@pytest.fixture
async def files(tmp_path: Path) -> AsyncIterator[FilesStore]:
    async with FilesStore(tmp_path / "files") as opened:
        yield opened


async def test_leftover_temp_files_are_ignored(files: FilesStore, tmp_path: Path) -> None:
    run = await started(files)
    threads = tmp_path / "files" / "threads"
    name = thread_file_name("t")
    (threads / f".{name}.json.0123456789abcdef.tmp").write_bytes(b'{"format": 1, "entr')
    (threads / ".garbage.tmp").write_bytes(b"\xff\x00")
    (tmp_path / "files" / "runs" / ".r-x.deadbeef.tmp").write_bytes(b"")
    async with FilesStore(tmp_path / "files") as reopened:
        assert len(await reopened.load_entries("t")) == 1
        assert [info.id for info in await reopened.list_threads()] == ["t"]
        assert await reopened.get_run(run.id) == run
        await reopened.commit(Checkpoint("t", 1, [Notice(run_id=run.id, code="x", text="y")]))
    assert len(await files.load_entries("t")) == 2


async def test_stale_temp_files_are_cleaned_on_open(tmp_path: Path) -> None:
    async with FilesStore(tmp_path / "files"):
        pass
    old = tmp_path / "files" / "threads" / ".t-x.json.00.tmp"
    fresh = tmp_path / "files" / "threads" / ".t-y.json.00.tmp"
    old.write_bytes(b"partial")
    fresh.write_bytes(b"partial")
    os.utime(old, (0, 0))
    async with FilesStore(tmp_path / "files"):
        pass
    assert not old.exists()
    assert fresh.exists()  # may belong to another process's write in progress


async def test_a_crash_before_the_rename_keeps_the_old_snapshot(
    files: FilesStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = await started(files)
    snapshot = tmp_path / "files" / "threads" / f"{thread_file_name('t')}.json"
    before = snapshot.read_bytes()

    def crash(src: object, dst: object) -> None:
        raise OSError(5, "simulated crash before rename")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(StoreError, match="simulated crash"):
        await files.commit(Checkpoint("t", 1, [Notice(run_id=run.id, code="x", text="lost")]))
    monkeypatch.undo()
    assert snapshot.read_bytes() == before
    # What a kill -9 would leave: a half-written temp file that was never renamed.
    (snapshot.parent / f".{snapshot.name}.feedfacecafebeef.tmp").write_bytes(before[:10])
    async with FilesStore(tmp_path / "files") as reopened:
        assert len(await reopened.load_entries("t")) == 1
        await reopened.commit(Checkpoint("t", 1, [Notice(run_id=run.id, code="x", text="ok")]))
        assert len(await reopened.load_entries("t")) == 2


@pytest.mark.parametrize("content", [b"", b"{", b"[]", b'{"format": 2}', b"\xff\xfe",
                                     b'{"format": 1, "thread_id": "t"}'])
async def test_an_unreadable_snapshot_is_corrupt(
    files: FilesStore, tmp_path: Path, content: bytes
) -> None:
    await started(files)
    snapshot = tmp_path / "files" / "threads" / f"{thread_file_name('t')}.json"
    snapshot.write_bytes(content)
    with pytest.raises(CorruptStore, match=re.escape(snapshot.name)):
        await files.load_entries("t")
    with pytest.raises(CorruptStore, match=re.escape(snapshot.name)):
        await files.list_threads()
    with pytest.raises(CorruptStore):
        await files.commit(Checkpoint("t", 1, []))


async def test_a_snapshot_of_another_thread_is_corrupt(files: FilesStore, tmp_path: Path) -> None:
    await started(files, thread_id="a")
    await started(files, thread_id="b")
    threads = tmp_path / "files" / "threads"
    # What a hash collision (or a hand-copied file) would look like.
    (threads / f"{thread_file_name('b')}.json").write_bytes(
        (threads / f"{thread_file_name('a')}.json").read_bytes())
    with pytest.raises(CorruptStore, match="holds thread 'a'"):
        await files.load_entries("b")
    with pytest.raises(CorruptStore):
        await files.list_threads()


async def test_a_snapshot_records_its_thread_id(files: FilesStore, tmp_path: Path) -> None:
    long_id = "x" * 10_000
    await started(files, thread_id=long_id)
    path = tmp_path / "files" / "threads" / f"{thread_file_name(long_id)}.json"
    data = json.loads(path.read_bytes())
    assert data["format"] == 1
    assert data["thread_id"] == long_id
    assert len(data["entries"]) == 1


@pytest.mark.parametrize("fail_at", [1, 2])
async def test_an_interrupted_add_request_leaves_nothing_to_carry_out(
    files: FilesStore, monkeypatch: pytest.MonkeyPatch, fail_at: int
) -> None:
    # add_request writes two files (the request, the id counter); the process may die
    # between them. The asker never got an id, so no server may act on the request,
    # and the next request must not take over its id.
    replace, calls = os.replace, 0

    def interrupted(src: Any, dst: Any) -> None:
        nonlocal calls
        calls += 1
        if calls == fail_at:
            raise OSError(5, "simulated crash")
        replace(src, dst)

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(StoreError, match="simulated crash"):
        await files.add_request(ControlRequest(kind="cancel", run_id="lost", created_at=1.0))
    monkeypatch.undo()
    assert await files.requests() == []
    kept = await files.add_request(ControlRequest(kind="cancel", run_id="kept", created_at=2.0))
    assert await files.requests() == [kept]
    assert (await files.get_request(kept.id)).run_id == "kept"


async def test_another_format_is_refused(tmp_path: Path) -> None:
    async with FilesStore(tmp_path / "files"):
        pass
    (tmp_path / "files" / "store.json").write_text('{"format": 99}')
    with pytest.raises(StoreError, match="format 99"):
        await FilesStore(tmp_path / "files").open()


# -- thread_file_name, pure


@pytest.mark.parametrize(("thread_id", "name"), [
    ("", "t-"),
    ("a", "t-a"),
    ("A", "t-_41"),
    ("abc-123", "t-abc-123"),
    ("a/b", "t-a_2Fb"),
    ("a_b", "t-a_5Fb"),
    ("a%2Fb", "t-a_252_46b"),
    ("../x", "t-_2E_2E_2Fx"),
    (".", "t-_2E"),
    ("..", "t-_2E_2E"),
    ("a b", "t-a_20b"),
    ("a\u2028b", "t-a_E2_80_A8b"),
    ("C:\\x", "t-_43_3A_5Cx"),
    ("日", "t-_E6_97_A5"),
    ("slack:T1:C2:1700.5", "t-slack_3A_541_3A_432_3A1700_2E5"),
    ("x" * 178, "t-" + "x" * 178),
    ("x" * 179, "h-" + hashlib.sha256(b"x" * 179).hexdigest()),
    ("/" * 60, "h-" + hashlib.sha256(b"/" * 60).hexdigest()),
    ("x" * 10_000, "h-" + hashlib.sha256(b"x" * 10_000).hexdigest()),
])
def test_thread_file_name(thread_id: str, name: str) -> None:
    assert thread_file_name(thread_id) == name


def test_thread_file_name_rejects_lone_surrogates() -> None:
    with pytest.raises(InvalidThreadId):
        thread_file_name("\ud800")


def test_thread_file_name_is_injective_and_plain() -> None:
    rng = random.Random(20240601)
    alphabet = ["a", "b", "A", "B", "_", "-", "%", "2", "F", ".", "/", "\\", " ", "\u2028",
                "é", "日", "🎉", "_2F", "_5F", "t-", "h-"]
    ids = {""}
    for _ in range(5000):
        ids.add("".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12))))
    for _ in range(200):  # long enough to be hashed
        ids.add("".join(rng.choice(alphabet) for _ in range(rng.randint(60, 200))))
    names = {thread_file_name(thread_id) for thread_id in ids}
    assert len(names) == len(ids)
    assert len({name.lower() for name in names}) == len(ids)  # case-insensitive disks too
    plain = re.compile(r"(t-[a-z0-9_A-F-]*|h-[0-9a-f]{64})")
    for name in names:
        assert plain.fullmatch(name), name
        assert len(name) <= 180
        assert name not in {".", ".."}
