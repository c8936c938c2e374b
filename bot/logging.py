"""Logging for `maiden`: readable lines, or one JSON object per line (``--log-format json``).

Every record logged while a run is driven carries its ``thread_id`` and ``run_id``:
passed with ``extra=``, or found from the asyncio task the runtime drives the run in
(``maiden-run:<id>``, ``maiden-thread:<id>``); and, when it is traced (``[otel]``), the
``trace_id`` of its span. Known secret values never reach a log.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from collections import OrderedDict
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, Literal, TextIO

from runtime import (
    RUN_CONTEXT,
    ApprovalRequested,
    RunEnded,
    RunStarted,
    Runtime,
    ToolCallFinished,
    ToolCallStarted,
    current_trace_id,
)

__all__ = ["JsonFormatter", "LogFormat", "Redactor", "RunContext", "TextFormatter", "configure",
           "log_runs"]

LogFormat = Literal["text", "json"]

_RUN_FIELDS = ("thread_id", "run_id")
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message", "asctime", "color_message", "taskName", *_RUN_FIELDS}
_REMEMBERED = 10_000

log = logging.getLogger("maiden.runs")


class RunContext(logging.Filter):
    """Puts ``thread_id`` and ``run_id`` on records logged from a run's task."""

    def __init__(self) -> None:
        super().__init__()
        self._threads: OrderedDict[str, str] = OrderedDict()

    def remember(self, run_id: str, thread_id: str) -> None:
        """Which thread a run belongs to (its task is named after the run only)."""
        self._threads[run_id] = thread_id
        self._threads.move_to_end(run_id)
        while len(self._threads) > _REMEMBERED:
            self._threads.popitem(last=False)

    def filter(self, record: logging.LogRecord) -> bool:
        run_id = getattr(record, "run_id", None)
        thread_id = getattr(record, "thread_id", None)
        current = RUN_CONTEXT.get()
        if run_id is None and thread_id is None and current is not None:
            thread_id, run_id = current
        if run_id is None and thread_id is None:
            name = _task_name()
            if name.startswith("maiden-run:"):
                run_id = name.removeprefix("maiden-run:")
            elif name.startswith("maiden-thread:"):
                thread_id = name.removeprefix("maiden-thread:")
        if thread_id is None and run_id is not None:
            thread_id = self._threads.get(run_id)
        record.run_id = run_id
        record.thread_id = thread_id
        trace_id = current_trace_id()
        if trace_id:
            record.trace_id = trace_id
        return True


def _task_name() -> str:
    try:
        task = asyncio.current_task()
    except RuntimeError:  # not on the event loop's thread (a sync tool, say)
        return ""
    return task.get_name() if task is not None else ""


class Redactor:
    """Replaces known secret values in log text with ``[redacted]``."""

    def __init__(self, secrets: Iterable[str]) -> None:
        # Short values would redact ordinary words; a real token is long.
        self.secrets = sorted({s for s in secrets if len(s) >= 6}, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, "[redacted]")
        return text


class TextFormatter(logging.Formatter):
    """``2026-11-29 12:55:49,012 INFO maiden.runs [thread='t1' run=8cc01e5f]: ...``"""

    def __init__(self, redact: Redactor) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s%(context)s: %(message)s")
        self.redact = redact

    def format(self, record: logging.LogRecord) -> str:
        parts = []
        thread_id, run_id = getattr(record, "thread_id", None), getattr(record, "run_id", None)
        if thread_id is not None:
            parts.append(f"thread={thread_id!r}")
        if run_id is not None:
            parts.append(f"run={run_id}")
        record.context = f" [{' '.join(parts)}]" if parts else ""
        return self.redact(super().format(record))


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, message, thread_id, run_id, extras."""

    def __init__(self, redact: Redactor) -> None:
        super().__init__()
        self.redact = redact

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": self.redact(record.getMessage()),
        }
        for key in _RUN_FIELDS:
            if getattr(record, key, None) is not None:
                out[key] = getattr(record, key)
        for key, value in vars(record).items():
            if key not in _STANDARD and key != "context" and not key.startswith("_"):
                out[key] = value if isinstance(value, int | float | bool | None) \
                    else self.redact(str(value))
        if record.exc_info:
            out["exc"] = self.redact(self.formatException(record.exc_info))
        return json.dumps(out, ensure_ascii=False, default=str)


def configure(
    fmt: LogFormat = "text", level: int = logging.INFO, *, secrets: Iterable[str] = (),
    stream: TextIO | None = None, verbose: bool = False,
) -> RunContext:
    """Send every log record to ``stream`` (stderr) in ``fmt``; return the run filter.
    ``verbose`` (``-v``): uvicorn's start-up and shutdown lines too."""
    redact = Redactor(secrets)
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter(redact) if fmt == "json" else TextFormatter(redact))
    context = RunContext()
    handler.addFilter(context)
    logging.basicConfig(level=level, handlers=[handler], force=True)
    # APScheduler tells of every job it adds and runs; maiden.schedules says what matters
    # (which slot became which run, which were missed).
    logging.getLogger("apscheduler").setLevel(max(level, logging.WARNING))
    # uvicorn tells of its start-up while `maiden run` prints its banner, whose "http" line
    # says where it listens: only with -v (its warnings and errors always).
    logging.getLogger("uvicorn.error").setLevel(level if verbose
                                                else max(level, logging.WARNING))
    return context


async def log_runs(runtime: Runtime, context: RunContext | None = None) -> None:
    """Log what every run does, one record per step, until cancelled."""
    async with runtime.subscribe() as events:
        while True:
            event = await events.next()
            ids = {"thread_id": event.thread_id, "run_id": event.run_id}
            if context is not None:
                context.remember(event.run_id, event.thread_id)
            if isinstance(event, RunStarted):
                log.info("run recovered after a crash" if event.recovered else "run started",
                         extra=ids)
            elif isinstance(event, ToolCallStarted):
                log.info("tool %s called (call %s)", event.call.name, event.call.id, extra=ids)
            elif isinstance(event, ToolCallFinished):
                log.info("tool %s %s (call %s)", event.name,
                         "failed" if event.is_error else "returned", event.tool_call_id,
                         extra=ids)
            elif isinstance(event, ApprovalRequested):
                log.info("run waits for approval of %s (call %s, %s)", event.name,
                         event.tool_call_id, event.reason, extra=ids)
            elif isinstance(event, RunEnded):
                level = logging.WARNING if event.kind == "run.failed" else logging.INFO
                log.log(level, "run %s: %s%s", event.state, event.reason,
                        f": {event.error}" if event.error else "",
                        extra={**ids, "tokens": event.usage.total_tokens})
