"""What every store contract test uses: the backends, awkward ids, and runs to store."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from uuid import uuid4

from runtime.model.entries import AssistantTurn, Notice, ToolCall, ToolResult, Usage, UserMessage
from runtime.model.runs import Origin, Run, RunState, Transition, transition
from runtime.stores.base import Checkpoint
from runtime.stores.files import FilesStore
from runtime.stores.postgres import PostgresStore
from runtime.stores.sqlite import SQLiteStore

S = RunState
BACKENDS = ["sqlite", "files", "postgres"]
HOSTILE_IDS = ["a/b", "a_b", "a%2Fb", "../x", "..", ".", "", "x" * 10_000,
               "日本語", "A", "a", "a b", "a\u2028b", "/etc/passwd", "C:\\x"]
CONTROL_IDS = ["\x00", "a\x00b", "a\nb", "tab\t", "\x1b[31mred", "del\x7f", "c1\x85"]
"""Ids with a control character: refused by every entry point (one rule, ``check_thread_id``)."""

PROJECT = str(Path(__file__).resolve().parents[2])

AnyStore = SQLiteStore | FilesStore | PostgresStore


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
