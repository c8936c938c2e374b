"""Which run the current code works for, for log records (and anything else that asks).

Set by the runtime around each thread's worker and each run's task; copied into
tasks they start and into worker threads of sync tools (``asyncio.to_thread``).
"""

from __future__ import annotations

from contextvars import ContextVar

__all__ = ["RUN_CONTEXT"]

RUN_CONTEXT: ContextVar[tuple[str, str | None] | None] = ContextVar("maiden_run", default=None)
"""``(thread_id, run_id or None)`` while a thread's work or a run is being driven."""
