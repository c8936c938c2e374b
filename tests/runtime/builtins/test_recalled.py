"""Memories recalled without asking (the ``memory`` built-in's prelude): the ones that bear
on a new message are put before the run's first model turn, with their source, committed
with the message: asked once per run, so neither a later turn nor a restart asks again."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from runtime import (
    EchoProvider,
    FilesStore,
    ModelRequest,
    ModelResponse,
    Notice,
    Origin,
    Runtime,
    RuntimeConfig,
    SQLiteStore,
    Store,
    ToolRegistry,
    ToolsConfig,
    UserMessage,
    make_tools,
)
from runtime.model.recollection import RECALLED
from runtime.stores.postgres import PostgresStore
from tests.postgres import PG_DSN, fresh_schema

ANA_C1 = Origin(channel="slack", user="U1", place=("C1",), rights=("talk",))
BOB_C1 = Origin(channel="slack", user="U2", place=("C1",), rights=("talk",))
BOB_C2 = Origin(channel="slack", user="U2", place=("C2",), rights=("talk",))


class Seen(EchoProvider):
    """The echo model, keeping every request it is sent."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[ModelRequest] = []

    async def complete(self, request: ModelRequest, on_text: Any = None) -> ModelResponse:
        self.requests.append(request)
        return await super().complete(request, on_text)


class Stuck(Seen):
    """Sent a request for ``thread``, keeps it, says so and never answers (until cut
    off); the echo model for the other threads."""

    def __init__(self, thread: str) -> None:
        super().__init__()
        self.thread = thread
        self.asked = asyncio.Event()

    async def complete(self, request: ModelRequest, on_text: Any = None) -> ModelResponse:
        if request.thread_id == self.thread:
            self.requests.append(request)
            self.asked.set()
            await asyncio.Event().wait()
        return await EchoProvider.complete(self, request, on_text)


def tools(tmp_path: Path, **memory: Any) -> ToolRegistry:
    return make_tools(ToolsConfig.model_validate({"builtins": ["memory"], "memory": memory}),
                      tmp_path)


def recalled(entries: Any) -> list[Notice]:
    return [e for e in entries if isinstance(e, Notice) and e.code == RECALLED]


async def seed(rt: Runtime) -> None:
    args = {"text": "The staging database is db-7", "scope": "place"}
    run = await rt.send("s:C1:1", f"/tool remember {json.dumps(args)}", origin=ANA_C1)
    assert run.state == "completed"


@asynccontextmanager
async def opened(kind: str, tmp_path: Path) -> AsyncIterator[Store]:
    """A store of ``kind``, new (PostgreSQL: a schema of its own; skipped without one)."""
    if kind == "sqlite":
        async with SQLiteStore(tmp_path / "m.db") as store:
            yield store
    elif kind == "files":
        async with FilesStore(tmp_path / "files") as store:
            yield store
    else:
        async with fresh_schema() as schema, PostgresStore(PG_DSN, schema=schema) as store:
            yield store


@pytest.mark.parametrize("kind", ["sqlite", "files", "postgres"])
async def test_the_memories_that_bear_on_a_message_reach_its_first_turn_once(
        tmp_path: Path, kind: str) -> None:
    model = Seen()
    async with opened(kind, tmp_path) as store, \
            Runtime(store, model, tools(tmp_path)) as rt:
        await seed(rt)
        model.requests.clear()
        run = await rt.send("s:C1:2", '/tool recall {"query": "staging"}', origin=BOB_C1)
        assert run.state == "completed"
        elsewhere = await rt.send("s:C2:1", "which staging database?", origin=BOB_C2)
        again = await rt.send("s:C1:2", "and the staging database again?", origin=BOB_C1)
        entries = await rt.records.entries("s:C1:2")
    first, second, other, third = model.requests
    # Before the message, in the first request, with who said it, where and when.
    (notice,) = recalled(first.entries)
    assert first.entries[-2] is notice and isinstance(first.entries[-1], UserMessage)
    assert "The staging database is db-7 (slack:U1, slack #C1, " in notice.text
    assert "; place)" in notice.text
    # The second turn has it as history, not asked for again; the thread holds it once.
    assert recalled(second.entries) == [notice]
    assert recalled(entries) == [notice]
    # Another place's conversation is not shown it.
    assert recalled(other.entries) == [] and elsewhere.state == "completed"
    # The thread's next message is not shown it twice: the thread shows it already.
    assert recalled(third.entries) == [notice] and again.state == "completed"


async def test_nothing_is_recalled_for_an_agent_without_the_memory_builtin(
        tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    async with SQLiteStore(db) as store, Runtime(store, Seen(), tools(tmp_path)) as rt:
        await seed(rt)
    model = Seen()
    async with SQLiteStore(db) as store, Runtime(store, model) as rt:
        await rt.send("s:C1:2", "which staging database?", origin=BOB_C1)
    assert recalled(model.requests[0].entries) == []


async def test_no_share_no_limit_nothing_recalled(tmp_path: Path) -> None:
    for settings in ({"recall_share": 0}, {"recall_limit": 0}, {"recall_share": 0.0001}):
        model = Seen()
        async with SQLiteStore(tmp_path / f"{len(str(settings))}.db") as store, \
                Runtime(store, model, tools(tmp_path, **settings)) as rt:
            await seed(rt)
            await rt.send("s:C1:2", "which staging database?", origin=BOB_C1)
        assert recalled(model.requests[-1].entries) == [], settings


async def test_a_restart_mid_run_neither_asks_again_nor_repeats_the_memories(
        tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    stuck = Stuck("s:C1:2")
    async with SQLiteStore(db) as store:
        async with Runtime(store, stuck, tools(tmp_path),
                           settings=RuntimeConfig(shutdown_grace_s=0.05)) as first:
            await seed(first)
            run = await first.submit("s:C1:2", "which staging database?", origin=BOB_C1)
            await asyncio.wait_for(stuck.asked.wait(), 10)
        assert (await store.get_run(run.id)).state == "running"  # cut off mid-run
        (before,) = recalled(await store.load_entries("s:C1:2"))
        model = Seen()
        async with Runtime(store, model, tools(tmp_path)) as second:
            await second.start(recover=True, serve=False)
            done = await asyncio.wait_for(second.wait(run.id), 10)
            entries = await second.records.entries("s:C1:2")
    assert done.state == "completed" and done.reply == "echo: which staging database?"
    assert recalled(stuck.requests[0].entries) == [before]
    assert recalled(model.requests[0].entries) == [before]  # the same, once
    assert recalled(entries) == [before]
