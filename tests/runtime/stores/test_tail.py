"""A run goes on from the tail of its thread (what the context window needs), not the whole
thread: what the model is sent is the same either way, and the rest is never read."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from runtime import AgentConfig, Checkpoint, Run, RunState, Runtime, SQLiteStore, ToolRegistry
from runtime.engine.prompting import Prompts
from runtime.model.entries import AssistantTurn, Entry, Notice, ToolCall, ToolResult, UserMessage
from runtime.providers.base import ModelRequest, ModelResponse
from runtime.stores.tail import Tail, tail_of


def _thread(rng: random.Random, exchanges: int, *, summaries: bool) -> list[Entry]:
    """A thread of mixed shapes: answers, tool rounds (some with two calls), notices and,
    with ``summaries``, summary notices now and then."""
    entries: list[Entry] = []
    for i in range(exchanges):
        run = f"r{i}"
        entries.append(UserMessage(run_id=run, text=f"q{i} " + "w" * rng.randrange(0, 400)))
        for _ in range(rng.randrange(0, 3)):
            calls = tuple(ToolCall(id=f"c{i}-{len(entries)}-{k}", name="lookup",
                                   arguments={"q": "a" * rng.randrange(0, 200)})
                          for k in range(rng.randrange(1, 3)))
            entries.append(AssistantTurn(run_id=run, tool_calls=calls))
            entries += [ToolResult(run_id=run, tool_call_id=c.id, name="lookup",
                                   content="r" * rng.randrange(0, 300)) for c in calls]
        entries.append(AssistantTurn(run_id=run, text="a" * rng.randrange(1, 300)))
        if summaries and rng.random() < 0.15:
            plain = sum(not (isinstance(e, Notice) and e.code == "summary") for e in entries)
            entries.append(Notice(run_id=run, code="summary", text=f"summary {i}",
                                  covers=rng.randrange(plain // 2, plain + 1)))
    return entries


def _run(thread: list[Entry]) -> Run:
    last = next(e for e in reversed(thread) if isinstance(e, UserMessage))
    return Run(id=last.run_id, thread_id="t", text=last.text, state=RunState.RUNNING)


def _sent(request: ModelRequest) -> list[Any]:
    # Notices made for the request carry the time they were made: compare what they say.
    return [(e.code, e.text) if isinstance(e, Notice) else e for e in request.entries]


@pytest.mark.parametrize("seed", range(40))
def test_the_model_is_sent_the_same_from_a_tail_as_from_the_whole_thread(seed: int) -> None:
    rng = random.Random(seed)
    thread = _thread(rng, rng.randrange(1, 120), summaries=seed % 2 == 1)
    limit = rng.choice([300, 1_000, 4_000, 20_000])
    run = _run(thread)
    whole, tail = Prompts("be brief"), Prompts("be brief")
    for drive in range(3):  # each drive loads a tail, from where the held window starts
        cut = tail_of(thread, limit, tail.held_start("t"))
        loaded = Tail(cut.base, list(cut.loaded), summaries_before=cut.summaries_before,
                      summary_before=cut.summary_before)
        for turn in range(3):  # turns with the thread (and the loaded tail) growing
            by_whole = whole.request(run, thread, (), final=False, limit=limit, now=1.0)
            by_tail = tail.request(run, loaded, (), final=False, limit=limit, now=1.0)
            assert _sent(by_tail) == _sent(by_whole), (seed, drive, turn, cut.base)
            more = AssistantTurn(run_id=run.id, text="more " * rng.randrange(1, 50))
            thread = [*thread, more]
            loaded.extend([more])


class _Model:
    model = "small"
    context_window = 2_000

    def __init__(self) -> None:
        self.requests: list[ModelRequest] = []

    async def complete(self, request: ModelRequest, on_text: Any = None) -> ModelResponse:
        self.requests.append(request)
        return ModelResponse(text="fine")


async def test_a_run_reads_only_the_tail_of_a_long_thread(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    thread = _thread(random.Random(7), 2_000, summaries=False)
    async with SQLiteStore(path) as store:
        await store.create_run(Run(id="setup", thread_id="t", text="setup"))
        for at in range(0, len(thread), 500):
            await store.commit(Checkpoint("t", at, thread[at:at + 500]))
    # The start of the thread becomes unreadable: a whole-thread load would fail.
    db = sqlite3.connect(path)
    db.execute("UPDATE entries SET data = '{broken' WHERE thread_id = 't' AND seq < 100")
    db.commit()
    db.close()
    model = _Model()
    async with SQLiteStore(path) as store, \
            Runtime(store, model, ToolRegistry([]), agent=AgentConfig()) as rt:
        run = await rt.send("t", "and now?")
        assert run.state is RunState.COMPLETED and run.reply == "fine"
        again = await rt.send("t", "and then?")
        assert again.reply == "fine"
        # Its message, after the queued setup run's exchange and the first one's.
        assert again.first_entry == len(thread) + 4
    sent = model.requests[-1].entries
    assert isinstance(sent[-1], UserMessage) and sent[-1].text == "and then?"
    assert 10 < len(sent) < len(thread) // 4
