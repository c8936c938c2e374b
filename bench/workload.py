"""The fixed workload every benchmark shares: its texts, its model, its tool, its runtime."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal

from runtime import (
    AssistantTurn,
    Entry,
    ModelRequest,
    ModelResponse,
    Run,
    RunState,
    Runtime,
    RuntimeConfig,
    SQLiteStore,
    ToolRegistry,
    ToolResult,
    Tracing,
    Usage,
    UserMessage,
    tool,
)
from runtime.engine.tracing import NO_TRACING
from runtime.model.entries import ToolCall
from runtime.providers.base import TextSink
from runtime.stores.sqlite import Synchronous

__all__ = [
    "ANSWER",
    "RESULT",
    "ClockedModel",
    "LookupModel",
    "bench_runtime",
    "expect_completed",
    "floor_rows",
    "message_entries",
    "user_text",
    "workload_runtime",
]

RESULT = {"result": "x" * 200}
ANSWER = "Here is what the lookup found: " + "z" * 60
USAGE = Usage(input_tokens=10, output_tokens=5)


def user_text(i: int) -> str:
    return f"question {i} " + "y" * 100


@tool
async def lookup(query: str) -> dict[str, str]:
    """Look a question up."""
    return RESULT


class LookupModel:
    """The workload's model: a ``lookup`` call for each new user message, then an answer.

    Stateless: the turn is read from the request's last entry (``ScriptedProvider``
    indexes its script by the thread's assistant turns, which never ends here).
    """

    model = "bench"

    def __init__(self, latency_s: float = 0.0, context_window: int | None = None) -> None:
        self.latency_s = latency_s
        self.context_window = context_window
        """Tokens the model holds: with it, a thread is sent (and loaded) cut to a window."""

    async def complete(
        self, request: ModelRequest, on_text: TextSink | None = None
    ) -> ModelResponse:
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        last = request.entries[-1] if request.entries else None
        if isinstance(last, UserMessage):
            call = ToolCall(id=f"call_{len(request.entries)}", name="lookup",
                            arguments={"query": last.text[:16]})
            return ModelResponse(tool_calls=(call,), usage=USAGE, model=self.model,
                                 stop_reason="tool_use")
        if on_text is not None:
            await on_text(ANSWER)
        return ModelResponse(text=ANSWER, usage=USAGE, model=self.model, stop_reason="end_turn")


class ClockedModel(LookupModel):
    """The workload's model with a context window, noting when its first request
    arrives (and how many entries it holds)."""

    def __init__(self, context_window: int) -> None:
        super().__init__(context_window=context_window)
        self.first: tuple[float, int] | None = None

    async def complete(self, request: ModelRequest, on_text: TextSink | None = None
                       ) -> ModelResponse:
        if self.first is None:
            self.first = (time.perf_counter(), len(request.entries))
        return await super().complete(request, on_text)


@asynccontextmanager
async def bench_runtime(
    path: Path,
    *,
    synchronous: Synchronous,
    latency_s: float = 0.0,
    concurrency: Literal["global", "thread"] = "global",
    context_window: int | None = None,
) -> AsyncIterator[Runtime]:
    """A started runtime on a SQLite store at ``path`` with the workload's model and tool."""
    async with SQLiteStore(path, synchronous=synchronous) as store, \
            workload_runtime(store, latency_s=latency_s, concurrency=concurrency,
                             context_window=context_window) as rt:
        yield rt


@asynccontextmanager
async def workload_runtime(
    store: SQLiteStore,
    *,
    latency_s: float = 0.0,
    concurrency: Literal["global", "thread"] = "global",
    context_window: int | None = None,
    tracing: Tracing = NO_TRACING,
) -> AsyncIterator[Runtime]:
    """A started runtime on ``store`` with the workload's model and tool."""
    rt = Runtime(store, LookupModel(latency_s, context_window), ToolRegistry([lookup]),
                 settings=RuntimeConfig(concurrency=concurrency), tracing=tracing)
    async with rt:
        yield rt


def expect_completed(run: Run) -> None:
    """A benchmark that measured failed runs would be measuring the wrong thing."""
    if run.state is not RunState.COMPLETED:
        raise RuntimeError(f"run {run.id} ended {run.state}: {run.reason} {run.error or ''}")


def message_entries(run_id: str, i: int) -> list[Entry]:
    """The four entries one message of the workload leaves in a thread."""
    now = time.time()
    call = ToolCall(id=f"call_{i}", name="lookup", arguments={"query": user_text(i)[:16]})
    return [
        UserMessage(run_id=run_id, text=user_text(i), at=now),
        AssistantTurn(run_id=run_id, tool_calls=(call,), usage=USAGE, model="bench", at=now),
        ToolResult(run_id=run_id, tool_call_id=call.id, name="lookup", content=RESULT, at=now),
        AssistantTurn(run_id=run_id, text=ANSWER, usage=USAGE, model="bench", at=now),
    ]


def floor_rows(run_id: str, i: int) -> list[dict[str, Any]]:
    """The same four entries as plain dicts, for the floor (json.dumps, no pydantic)."""
    now = time.time()
    call_id = f"call_{i}"
    usage = {"input_tokens": USAGE.input_tokens, "output_tokens": USAGE.output_tokens}
    return [
        {"kind": "user", "run_id": run_id, "text": user_text(i), "at": now},
        {"kind": "assistant", "run_id": run_id, "text": "", "at": now, "usage": usage,
         "model": "bench", "tool_calls": [{"id": call_id, "name": "lookup",
                                           "arguments": {"query": user_text(i)[:16]}}]},
        {"kind": "tool_result", "run_id": run_id, "tool_call_id": call_id, "name": "lookup",
         "content": RESULT, "at": now},
        {"kind": "assistant", "run_id": run_id, "text": ANSWER, "at": now, "usage": usage,
         "model": "bench"},
    ]
