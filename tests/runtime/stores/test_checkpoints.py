"""The store contract, checkpoints (DESIGN §3): entries appended, tails, stale writes and two
writers, on every backend."""

from __future__ import annotations

import asyncio
import os
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from runtime.errors import StaleWrite, StoreError
from runtime.model.entries import AssistantTurn, Entry, Notice, ToolCall, ToolResult, UserMessage
from runtime.model.runs import ReplyDelivery
from runtime.model.tokens import entry_tokens
from runtime.stores.base import Checkpoint
from runtime.stores.postgres import PostgresStore
from runtime.stores.tail import tail_of
from tests.postgres import PG_DSN
from tests.runtime.stores.contract import (
    PROJECT,
    AnyStore,
    S,
    advance,
    all_kinds,
    make_run,
    started,
)

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


async def test_a_call_id_with_control_characters_is_kept_and_still_recorded_once(
        store: AnyStore) -> None:
    """A model's call id is any string: NUL and U+0001 included (PostgreSQL passes a
    checkpoint's entries as arrays, which its text codec does not reach)."""
    run = await started(store)
    odd = "c\x00d\x01e"
    call = ToolCall(id=odd, name="echo", arguments={})
    result = ToolResult(run_id=run.id, tool_call_id=odd, name="echo", content="one")
    await store.commit(Checkpoint("t", 1, [AssistantTurn(run_id=run.id, tool_calls=(call,)),
                                           result]))
    with pytest.raises(StaleWrite):
        await store.commit(Checkpoint("t", 3, [result.model_copy(update={"content": "two"})]))
    entries = await store.load_entries("t")
    assert entries[-1] == result and len(entries) == 3


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



async def test_a_writer_reads_its_own_commits_and_the_others_in_order(
        store: AnyStore, new_store: Callable[[], AnyStore]) -> None:
    """What a store holds of a thread after its own commit (it keeps what it wrote) is still
    the thread, in order, when another writer appended before that commit."""
    run = await started(store)
    said = [*(await store.load_entries("t")),  # held from here
            *(Notice(run_id=run.id, code="w", text=str(i)) for i in range(5))]
    await store.commit(Checkpoint("t", 1, said[1:2]))
    async with new_store() as other:
        await other.commit(Checkpoint("t", 2, said[2:4]))  # unseen by ``store`` so far
    await store.commit(Checkpoint("t", 4, said[4:5]))
    await store.commit(Checkpoint("t", 5, said[5:]))
    assert await store.load_entries("t") == said
    assert await store.load_entries("t", offset=3) == said[3:]
    assert await store.thread_length("t") == 6

_WRITER = textwrap.dedent("""
    import asyncio, sys
    from runtime.model.entries import Notice
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
