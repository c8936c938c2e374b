"""Log records and traces: a record logged while a traced run is driven carries the
``trace_id`` of its span (``bot/logging.py``), one logged outside carries none."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from bot.logging import JsonFormatter, Redactor, RunContext
from runtime import Runtime, ScriptedProvider, SQLiteStore, ToolRegistry, tool
from runtime.engine.tracing import OtelTracing


async def test_a_record_logged_in_a_traced_run_carries_its_trace_id(tmp_path: Path) -> None:
    records: list[logging.LogRecord] = []
    context = RunContext()

    @tool
    def note() -> str:
        """Log something (filtered as the log handler would, where it is logged)."""
        record = logging.LogRecord("maiden.test", logging.INFO, __file__, 1, "inside the tool",
                                   None, None)
        context.filter(record)
        records.append(record)
        return "noted"

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    script: list[dict[str, Any]] = [{"tool_calls": [{"name": "note", "arguments": {}}]},
                                    {"text": "done"}]
    async with SQLiteStore(tmp_path / "m.db") as store, \
            Runtime(store, ScriptedProvider(script), ToolRegistry([note]),
                    tracing=OtelTracing(provider)) as rt:
        run = await rt.send("t", "go")
    provider.shutdown()
    outside = logging.LogRecord("maiden.test", logging.INFO, __file__, 1, "outside", None, None)
    fmt = JsonFormatter(Redactor([]))
    context.filter(outside)
    (inside,) = records
    assert inside.trace_id == run.trace.split("-")[1]  # type: ignore[attr-defined]
    assert json.loads(fmt.format(inside))["trace_id"] == run.trace.split("-")[1]
    assert "trace_id" not in json.loads(fmt.format(outside))
    assert len(exporter.get_finished_spans()) == 5  # with the answer's checkpoint
