"""The memory flush (``engine/flush.py``): with ``compaction = "summary"`` and the memory
built-in, the model is asked once, before each summary, what of the entries falling out is
worth keeping; each statement becomes a thread memory with the flush's provenance, written
before the summary, keyed by the compaction point so a re-run writes nothing twice."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from runtime import (
    AgentConfig,
    ModelRequest,
    ModelResponse,
    Notice,
    Origin,
    RunState,
    Runtime,
    SQLiteStore,
    ToolRegistry,
    ToolsConfig,
    Usage,
    make_tools,
)
from runtime.builtins.memory import FLUSHED
from runtime.engine.flush import FLUSH_PROMPT, statements
from runtime.engine.prompting import COMPACTION_PROMPT
from runtime.model.memories import MAX_MEMORY_CHARS, ThreadScope, memory_id
from runtime.tools.keeping import Keeping

WORDS = "the quick brown fox jumps over the lazy dog " * 8  # ~360 characters, ~90 tokens
ORIGIN = Origin(channel="slack", user="U1", place=("C1",), rights=("talk",))


class Model:
    """A model with a small context that answers "ok", summarises when asked, and answers
    the flush's request with ``answer(n)`` (the n-th flush); it records every request."""

    model = "small"
    context_window = 800

    def __init__(self, answer: Any = None) -> None:
        self.requests: list[ModelRequest] = []
        self.answer = answer or (lambda n: json.dumps([f"fact {n}a", f"fact {n}b"]))

    async def complete(self, request: ModelRequest, on_text: Any = None) -> ModelResponse:
        self.requests.append(request)
        usage = Usage(input_tokens=10, output_tokens=5)
        if request.system == FLUSH_PROMPT:
            return ModelResponse(text=self.answer(len(self.asked(FLUSH_PROMPT))), usage=usage)
        if request.system == COMPACTION_PROMPT:
            return ModelResponse(text=f"SUMMARY {len(self.asked(COMPACTION_PROMPT))}",
                                 usage=usage)
        return ModelResponse(text="ok", usage=usage)

    def asked(self, system: str) -> list[ModelRequest]:
        return [r for r in self.requests if r.system == system]


def tools(tmp_path: Path, **memory: Any) -> ToolRegistry:
    return make_tools(ToolsConfig.model_validate({"builtins": ["memory"], "memory": memory}),
                      tmp_path)


@asynccontextmanager
async def agent(tmp_path: Path, model: Model, **memory: Any) -> AsyncIterator[
        tuple[Runtime, SQLiteStore]]:
    async with SQLiteStore(tmp_path / "m.db", synchronous="off") as store, Runtime(
            store, model, tools(tmp_path, **memory),
            agent=AgentConfig(compaction="summary")) as rt:
        yield rt, store


async def talk(rt: Runtime, n: int) -> None:
    for i in range(n):
        run = await rt.send("t", f"message {i}: {WORDS}", origin=ORIGIN)
        assert run.state == RunState.COMPLETED, run.error


def summaries(entries: list[Any]) -> list[Notice]:
    return [e for e in entries if isinstance(e, Notice) and e.code == "summary"]


async def test_each_summary_is_preceded_by_one_flush_whose_statements_are_kept(
        tmp_path: Path) -> None:
    model = Model()
    async with agent(tmp_path, model) as (rt, store):
        await talk(rt, 8)
        made = summaries(await rt.records.entries("t"))
        kept = await store.memories_of_thread("t")
    flushes = model.asked(FLUSH_PROMPT)
    assert made and len(flushes) == len(made)
    # Each flush is asked just before its summary, of the same entries, with no tools.
    for i, request in enumerate(model.requests):
        if request.system == FLUSH_PROMPT:
            summary = model.requests[i + 1]
            assert summary.system == COMPACTION_PROMPT and request.tools == ()
            asked = request.entries[0].text  # type: ignore[union-attr]
            assert asked in summary.entries[0].text  # type: ignore[union-attr]
            assert "message 0" in asked or "Summary so far" in summary.entries[0].text  # type: ignore[union-attr]
    assert [m.text for m in kept] == [f"fact {n}{x}" for n in range(1, len(made) + 1)
                                      for x in "ab"]
    first = kept[0]
    assert first.scope == ThreadScope(thread_id="t")
    source = first.provenance
    assert (source.thread_id, source.via, source.user, source.channel, source.place) == (
        "t", FLUSHED, None, "slack", "C1")
    assert source.run_id is not None and source.at > 0
    # Keyed by the thread and the compaction point: the first summary's flush covers from 0.
    assert first.id == memory_id(f"flush:t:0:{made[0].covers}:0")


async def test_the_flush_re_run_for_the_same_point_writes_nothing_twice(
        tmp_path: Path) -> None:
    """As after a crash between the flush and its summary: the same point flushed again."""
    model = Model(lambda n: '["the staging database is db-7", "deploys are on Tuesdays"]')
    async with agent(tmp_path, model) as (rt, store):
        await talk(rt, 8)
        before = await store.memories_of_thread("t")
        (summary, *_) = summaries(await rt.records.entries("t"))
        assert [m.text for m in before[:2]] == ["the staging database is db-7",
                                                "deploys are on Tuesdays"]
        keeper = tools(tmp_path).get("remember").keeper  # type: ignore[union-attr]
        assert keeper is not None
        again = Keeping(run_id="r", thread_id="t", agent="default", origin=ORIGIN, at=1.0,
                        statements=("the staging database is db-7", "deploys are on Tuesdays"),
                        key=f"flush:t:0:{summary.covers}",
                        services={"memories": rt.kept.memories})
        assert await keeper(again) == 0
        assert await store.memories_of_thread("t") == before


@pytest.mark.parametrize("answer", ["", "Nothing here is worth keeping.", "[]", "{\"a\": 1}",
                                    "[1, 2]", "```json\n[\n```"])
async def test_a_malformed_or_empty_answer_keeps_nothing(tmp_path: Path, answer: str) -> None:
    model = Model(lambda n: answer)
    async with agent(tmp_path, model) as (rt, store):
        await talk(rt, 8)
        assert summaries(await rt.records.entries("t"))
        assert await store.memories_of_thread("t") == []
    assert model.asked(FLUSH_PROMPT)


async def test_flush_off_asks_nothing(tmp_path: Path) -> None:
    model = Model()
    async with agent(tmp_path, model, flush=False) as (rt, store):
        await talk(rt, 8)
        assert summaries(await rt.records.entries("t"))
        assert await store.memories_of_thread("t") == []
    assert model.asked(FLUSH_PROMPT) == []


@pytest.mark.parametrize(("answer", "kept"), [
    ('["a", "b"]', ["a", "b"]),
    ('Here you go:\n```json\n["a",\n "b  c"]\n```', ["a", "b c"]),
    ('Sure: ["a", 3, "a", " "] done', ["a"]),
    ("- a\n* b\n1. c\n2) d\nplain words\n", ["a", "b", "c", "d"]),
    ("no list at all", []),
    ("[not json", []),
    ("", []),
    (json.dumps(["x" * (MAX_MEMORY_CHARS + 1), "y"]), ["y"]),
    (json.dumps([str(i) for i in range(30)]), [str(i) for i in range(20)]),
])
def test_statements_are_read_from_a_json_list_or_a_bulleted_one(
        answer: str, kept: list[str]) -> None:
    assert statements(answer) == kept
