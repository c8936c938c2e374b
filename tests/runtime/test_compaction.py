"""``[agent] compaction = "summary"``: what the window leaves out is summarised by the model
and stored in the thread; what exactly is sent; tool calls never split; a stop mid-compaction."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from itertools import pairwise
from pathlib import Path
from typing import Any

from runtime import (
    AgentConfig,
    AssistantTurn,
    ModelRequest,
    ModelResponse,
    Notice,
    RunState,
    Runtime,
    SQLiteStore,
    ToolRegistry,
    ToolResult,
    Usage,
    UserMessage,
    tool,
)
from runtime.engine.prompting import COMPACTION_PROMPT
from runtime.model.entries import ToolCall

WORDS = "the quick brown fox jumps over the lazy dog " * 8  # ~360 characters, ~90 tokens


@tool
def lookup(q: str) -> str:
    """Look something up."""
    return f"found {q}"


class Model:
    """A model with a small context that answers, calls ``lookup`` when asked to, and
    summarises when asked to; it records what it is sent."""

    model = "small"

    def __init__(self, window: int = 800) -> None:
        self.context_window = window
        self.requests: list[ModelRequest] = []
        self.summaries = 0
        self.hold: asyncio.Event | None = None
        self.summarising = asyncio.Event()

    async def complete(self, request: ModelRequest, on_text: Any = None) -> ModelResponse:
        self.requests.append(request)
        usage = Usage(input_tokens=10, output_tokens=5)
        if request.system == COMPACTION_PROMPT:
            self.summarising.set()
            if self.hold is not None:
                await self.hold.wait()
            self.summaries += 1
            text = request.entries[0].text  # type: ignore[union-attr]
            return ModelResponse(text=f"SUMMARY {self.summaries} of {text.count('user:')} "
                                 "messages", usage=usage)
        last = request.entries[-1]
        if isinstance(last, UserMessage) and "look up" in last.text:
            call = ToolCall(id=f"c{len(self.requests)}", name="lookup", arguments={"q": "it"})
            return ModelResponse(text="", tool_calls=(call,), usage=usage)
        return ModelResponse(text="ok", usage=usage)

    def turns(self) -> list[ModelRequest]:
        return [r for r in self.requests if r.system != COMPACTION_PROMPT]


@asynccontextmanager
async def agent(db: Path, model: Model, **settings: Any) -> AsyncIterator[Runtime]:
    async with SQLiteStore(db, synchronous="off") as store, Runtime(
            store, model, ToolRegistry([lookup]),
            agent=AgentConfig(compaction="summary", **settings)) as rt:
        yield rt


def summaries(entries: list[Any]) -> list[Notice]:
    return [e for e in entries if isinstance(e, Notice) and e.code == "summary"]


async def test_what_falls_out_is_summarised_and_sent_first(tmp_path: Path) -> None:
    model = Model()
    async with agent(tmp_path / "m.db", model) as rt:
        for i in range(12):
            text = f"message {i}: please look up {WORDS}" if i % 4 == 2 else \
                f"message {i}: {WORDS}"
            run = await rt.send("t", text)
            assert run.state == RunState.COMPLETED, run.error
        entries = await rt.records.entries("t")
    made = summaries(entries)
    assert made and model.summaries == len(made)
    assert all(a.covers is not None and b.covers is not None and a.covers < b.covers
               for a, b in pairwise(made))
    # Each summary request carries the summary before it, and only what it newly covers.
    asked = [r for r in model.requests if r.system == COMPACTION_PROMPT]
    for request in asked[1:]:
        assert request.entries[0].text.startswith("Summary so far: SUMMARY")  # type: ignore[union-attr]
    last = model.turns()[-1].entries
    first = last[0]
    assert isinstance(first, Notice) and first.code == "summary"
    assert first.text.startswith(f"Summary of the earlier conversation: SUMMARY {len(made)}")
    assert not any(isinstance(e, Notice) and e.code == "context_trimmed" for e in last)
    assert "message 11" in last[-1].text  # type: ignore[union-attr]
    for request in model.turns():  # a tool result is never sent without its call
        calls = {c.id for e in request.entries if isinstance(e, AssistantTurn)
                 for c in e.tool_calls}
        for result in (e for e in request.entries if isinstance(e, ToolResult)):
            assert result.tool_call_id in calls
    # The store keeps everything: the summaries are extra entries, not replacements.
    assert sum(isinstance(e, UserMessage) for e in entries) == 12


async def test_drop_is_the_default(tmp_path: Path) -> None:
    model = Model()
    async with SQLiteStore(tmp_path / "m.db", synchronous="off") as store, \
            Runtime(store, model, ToolRegistry([lookup])) as rt:
        for i in range(8):
            await rt.send("t", f"message {i}: {WORDS}")
        entries = await rt.records.entries("t")
    assert model.summaries == 0 and summaries(entries) == []
    first = model.turns()[-1].entries[0]
    assert isinstance(first, Notice) and first.code == "context_trimmed"


async def test_a_failed_summary_leaves_the_history_dropped(tmp_path: Path) -> None:
    class Failing(Model):
        async def complete(self, request: ModelRequest, on_text: Any = None) -> ModelResponse:
            if request.system == COMPACTION_PROMPT:
                from runtime import ProviderError
                raise ProviderError("summaries are down")
            return await super().complete(request, on_text)

    model = Failing()
    async with agent(tmp_path / "m.db", model) as rt:
        for i in range(8):
            run = await rt.send("t", f"message {i}: {WORDS}")
            assert run.state == RunState.COMPLETED
    first = model.turns()[-1].entries[0]
    assert isinstance(first, Notice) and first.code == "context_trimmed"


async def test_a_stop_in_the_middle_of_compaction(tmp_path: Path) -> None:
    """Stopped while the model summarises: nothing of the summary is stored; the next
    start recovers the run, summarises once, and answers."""
    model = Model()
    async with agent(tmp_path / "m.db", model) as rt:
        for i in range(6):
            await rt.send("t", f"message {i}: {WORDS}")
        already = model.summaries
        model.hold = asyncio.Event()
        model.summarising.clear()
        run = await rt.submit("t", f"message 6: {WORDS * 5}")  # the cut must move
        await asyncio.wait_for(model.summarising.wait(), 10)
        await rt.close(grace_s=0)
        stored = summaries(await rt.records.entries("t"))
    assert len(stored) == already
    again = Model()
    async with agent(tmp_path / "m.db", again) as rt:
        done = await rt.wait(run.id)
        entries = await rt.records.entries("t")
    assert done.state == RunState.COMPLETED and done.reply == "ok"
    assert again.summaries == 1 and len(summaries(entries)) == already + 1


async def test_a_summary_keeps_a_line_for_each_file_it_stands_for(tmp_path: Path) -> None:
    model = Model()  # its summaries never mention files
    async with agent(tmp_path / "m.db", model) as rt:
        shared = await rt.kept.files.put("q3.csv", "text/csv", b"month,sales\n1,10\n")
        await rt.send("t", f"message 0: {WORDS}", files=[shared])
        for i in range(1, 12):
            assert (await rt.send("t", f"message {i}: {WORDS}")).state == RunState.COMPLETED
        made = summaries(await rt.records.entries("t"))
    line = f"[file q3.csv (text/csv, 17 bytes) sha256:{shared.digest[:12]}]"
    assert len(made) >= 2
    for summary in made:  # the first that stands for it, and each after (from the one before)
        assert summary.text.endswith(f"Files shared earlier:\n{line}"), summary.text
    asked = [r for r in model.requests if r.system == COMPACTION_PROMPT]
    assert line in asked[0].entries[0].text  # type: ignore[union-attr]
