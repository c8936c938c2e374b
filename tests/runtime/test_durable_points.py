"""Which checkpoints of a message fsync: the durable points, by what the tool can change.

A statement trace of the store's writing connection shows, for every transaction, the
``synchronous`` level it commits with: ``FULL`` syncs the log (a durable point), ``NORMAL``
does not, and the next ``FULL`` commit's sync covers it. (The store flushes on the loop's
thread here, ``flush="loop"``, so that SQLite's own level says it; by default a durable
commit is ``NORMAL`` and the log is flushed after it by the store, which ``tests/runtime/stores``
shows.)"""

from __future__ import annotations

import asyncio
import contextlib
import re
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from runtime import (
    Effect,
    ModelRequest,
    ModelResponse,
    RunState,
    Runtime,
    RuntimeConfig,
    ScriptedProvider,
    SQLiteStore,
    ToolRegistry,
    tool,
)
from runtime.providers.base import TextSink
from runtime.stores.sqlite import walsync
from tests.fakes.disk import HeldDisk


def _commits(statements: list[str]) -> list[tuple[str, str]]:
    """(level, what) for each committed transaction: what = the tables it wrote."""
    level, out, wrote = "FULL", [], []
    for s in statements:
        if s.startswith("PRAGMA synchronous="):
            level = s.split("=", 1)[1]
        elif match := re.match(r"(?:INSERT .*?INTO|UPDATE) (\w+)", s):
            wrote.append(match[1])
        elif s == "COMMIT":
            out.append((level, " ".join(sorted(set(wrote)))))
            wrote = []
    return out


async def _message(tmp_path: Path, effect: Effect) -> list[tuple[str, str]]:
    @tool(effect=effect)
    def lookup(q: str) -> dict[str, str]:
        """Look something up."""
        return {"answer": q.upper()}

    provider = ScriptedProvider([
        {"tool_calls": [{"name": "lookup", "arguments": {"q": "x"}}]}, {"text": "done"}])
    statements: list[str] = []
    async with SQLiteStore(tmp_path / "d.db", synchronous="full", flush="loop") as store, \
            Runtime(store, provider, ToolRegistry([lookup])) as rt:
        await store.db.call(sqlite3.Connection.set_trace_callback, statements.append)
        run = await rt.send("t", "hello")
        await rt.idle()
        await store.db.call(sqlite3.Connection.set_trace_callback, None)
    assert run.state is RunState.COMPLETED
    # The message's checkpoints; not the thread's lease and the heartbeat (never synced:
    # a process that lost them to a power cut died with them).
    commits = _commits([s for s in statements if not s.startswith("PRAGMA wal_checkpoint")])
    control = [c for c in commits if c[1] in ("", "leases", "instances")]
    assert {level for level, _ in control} <= {"NORMAL"}, control
    return [c for c in commits if c not in control]


async def test_a_read_only_call_syncs_only_the_message_and_the_answer(tmp_path: Path) -> None:
    commits = await _message(tmp_path, "read_only")
    # Every round committed, two of them synced: the queued message (before it is
    # acknowledged); its start, the model's turn and the call's result, each committed
    # before the loop goes on, not synced; the answer with its outbox record (before it is
    # delivered), synced.
    assert [level for level, _ in commits] == ["FULL", "NORMAL", "NORMAL", "NORMAL", "FULL"]
    assert [what for _, what in commits] == ["runs threads", "entries runs", "entries runs",
                                             "entries runs", "entries runs"]


@pytest.mark.parametrize("effect", ["idempotent_write", "non_idempotent"])
async def test_a_call_with_an_effect_syncs_its_intent_and_its_result(
    tmp_path: Path, effect: Effect
) -> None:
    commits = await _message(tmp_path, effect)
    # The start is committed, not synced; the call is recorded (and, non-idempotent,
    # claimed) on disk before it runs, and its result on disk once it is done.
    expected = ["FULL", "NORMAL", "FULL", "FULL", "FULL"]
    if effect == "non_idempotent":
        expected.insert(3, "FULL")  # the claim before the effect
    assert [level for level, _ in commits] == expected


async def test_by_default_the_durable_points_are_committed_then_flushed_by_the_store(
        tmp_path: Path) -> None:
    """The same five commits and two durable points, each flushed by the store (its own
    count): committed on the event loop's thread and then flushed there or on the flushing
    thread, or, with other work ready on the loop, committed and flushed on the writer's
    thread."""
    @tool(effect="read_only")
    def lookup(q: str) -> dict[str, str]:
        """Look something up."""
        return {"answer": q.upper()}

    turn: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "lookup", "arguments": {"q": "x"}}]}, {"text": "done"}]
    async with SQLiteStore(tmp_path / "d.db", synchronous="full") as store, \
            Runtime(store, ScriptedProvider(turn * 2), ToolRegistry([lookup])) as rt:
        await rt.send("t", "warm")  # (the start-up's writes and the thread's lease)
        await rt.idle()
        before = store.write_counts()
        run = await rt.send("t", "hello")
        await rt.idle()
        done = store.write_counts().since(before)
    assert run.state is RunState.COMPLETED
    assert (done.transactions, done.synced) == (5, 2)


@contextlib.asynccontextmanager
async def _quiet(rt: Runtime) -> AsyncIterator[Runtime]:
    """A runtime that writes nothing of its own accord (its heartbeat, the requests of
    other processes): the tests' writes find the store idle, so they are committed on the
    loop's thread and flushed apart, where ``HeldDisk`` holds them."""
    await rt.start(serve=False)
    try:
        yield rt
    finally:
        await rt.close()


async def _past_the_opening(rt: Runtime) -> None:
    """One write first: the store's open checkpoints its log (its identity mark in the
    database file), and the first write after a checkpoint that emptied the log goes to
    the writer's thread whole; the test's writes are the ones after."""
    await rt.kept.notes.remember("warm-up", "k", "v")


class _Asked:
    """The workload's model, noting when it is first asked."""

    def __init__(self, provider: ScriptedProvider) -> None:
        self.provider = provider
        self.model = provider.model
        self.asked = asyncio.Event()

    async def complete(self, request: ModelRequest, on_text: TextSink | None = None
                       ) -> ModelResponse:
        self.asked.set()
        return await self.provider.complete(request, on_text)


async def test_a_message_is_worked_on_while_its_flush_is_under_way_and_acknowledged_after(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The queued run is committed, then its worker starts while the disk flushes it: the
    model is asked meanwhile, but the message is acknowledged (``submit`` returns) only
    once it is on disk, and the call with an effect runs only after its intent's flush,
    which comes after the message's in the log."""
    ran: list[bool] = []
    disk = HeldDisk()

    @tool(effect="idempotent_write")
    def record(q: str) -> dict[str, str]:
        """Record something."""
        ran.append(disk.go.is_set())
        return {"recorded": q}

    model = _Asked(ScriptedProvider([
        {"tool_calls": [{"name": "record", "arguments": {"q": "x"}}]}, {"text": "done"}]))
    async with SQLiteStore(tmp_path / "d.db", synchronous="full", flush="apart") as store, \
            _quiet(Runtime(store, model, ToolRegistry([record]),
                           # (no sweep for queued runs in the test's time: the kick starts it)
                           settings=RuntimeConfig(poll_interval_s=3600))) as rt:
        await _past_the_opening(rt)
        monkeypatch.setattr(walsync, "_datasync", disk)
        intent = asyncio.Event()

        def traced(statement: str) -> None:
            if statement.startswith("INSERT INTO entries"):
                disk.loop.call_soon_threadsafe(intent.set)

        await store.db.call(sqlite3.Connection.set_trace_callback, traced)
        submitted = asyncio.ensure_future(rt.submit("t", "hello"))
        try:
            await asyncio.wait_for(disk.flushing.wait(), 10)
            await asyncio.wait_for(model.asked.wait(), 10)  # the worker started meanwhile
            await asyncio.wait_for(intent.wait(), 10)  # and committed its intent
            assert not submitted.done() and not ran
        finally:
            disk.go.set()
        run = await asyncio.wait_for(submitted, 10)
        await rt.idle()
        assert (await store.get_run(run.id)).state is RunState.COMPLETED
        assert ran == [True]


async def test_a_run_followed_as_accepted_while_its_end_is_flushed_is_shown_whole(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its end is committed (the store reads it ended) and told only after its flush: a
    follower of the message just accepted that starts in between sees the run from its
    start, not only its end."""
    disk = HeldDisk(hold=False)
    gate = asyncio.Event()

    class Gated(_Asked):
        async def complete(self, request: ModelRequest, on_text: TextSink | None = None
                           ) -> ModelResponse:
            await gate.wait()
            return await super().complete(request, on_text)

    async with SQLiteStore(tmp_path / "d.db", synchronous="full", flush="apart") as store, \
            _quiet(Runtime(store, Gated(ScriptedProvider([{"text": "done"}])))) as rt:
        await _past_the_opening(rt)
        monkeypatch.setattr(walsync, "_datasync", disk)
        run = await rt.submit("t", "hello")
        disk.hold = True
        gate.set()
        try:
            await asyncio.wait_for(disk.flushing.wait(), 10)  # the end's, held
            assert (await store.get_run(run.id)).state is RunState.COMPLETED
            events = rt.follow(run.id, accepted=True)
            first = await asyncio.wait_for(anext(events), 10)
        finally:
            disk.go.set()
        kinds = [first.kind, *await asyncio.wait_for(_kinds(events), 10)]
    assert kinds[0] == "run.started" and kinds[-1] == "run.completed", kinds
    assert "model.answered" in kinds


async def _kinds(events: Any) -> list[str]:
    return [event.kind async for event in events]
